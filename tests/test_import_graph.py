"""The package's import graph has no cycle, and the package never calls ``eval``.

Every module under ``python/sparsetir`` is parsed with ``ast``; every ``import`` in it counts,
at module level and inside functions (a lazy import hides a cycle, it does not remove it).
Relative imports are resolved against the importing module; ``from pkg import name`` is an
edge to ``pkg.name`` when that is a module of the package, else to ``pkg``.

Example
-------
>>> graph = import_graph()
>>> "sparsetir.ir.axis" in graph["sparsetir.ir"]
True
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "sparsetir"


def _module_names() -> dict:
    """Dotted module name -> source path, for every module of the package."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _imports(module: str, path: Path, modules: dict) -> set:
    """The package modules that ``module`` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in modules else base)
    return {t for t in targets if t in modules and t != module}


def import_graph() -> dict:
    """Module -> the set of package modules it imports."""
    modules = _module_names()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict):
    """One import cycle as a list of modules (first repeated last), or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for succ in sorted(graph[node]):
            if state.get(succ) == "open":
                return stack[stack.index(succ):] + [succ]
            if succ not in state:
                found = visit(succ, stack)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_graph_sees_relative_and_function_level_imports():
    graph = import_graph()
    assert "sparsetir.ir.axis" in graph["sparsetir.ir"]          # from .axis import ...
    assert "sparsetir.errors" in graph["sparsetir.script.parser"]  # from ..errors import ...
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_ir_does_not_import_the_front_end():
    graph = import_graph()
    for module, targets in graph.items():
        if module.startswith("sparsetir.ir"):
            assert not {t for t in targets if t.startswith("sparsetir.script")}, module


def test_no_eval_in_the_package():
    calls = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("eval", "exec"):
                calls.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not calls, f"eval/exec called at {calls}"


ROOMS = ["errors", "ir", "script", "format", "stage1", "lower", "schedule", "transform",
         "backend", "runtime", "driver", "algebra", "data", "ops", "nn"]
"""The package's rooms in the order data flows through them (I -> II -> III -> binary -> call);
``format`` (run-time conversion, encodings, tiled layouts and the index rules; it may use
``script`` to write kernels) is a leaf the runtime shares; ``algebra`` (TACO index notation) sits
on top of the compiler and under nothing."""


def test_rooms_import_only_rooms_before_them():
    backwards = []
    for module, targets in import_graph().items():
        room = module.split(".")[1] if "." in module else None
        if room not in ROOMS:
            continue                       # sparsetir/__init__ gathers the public names
        for target in targets:
            other = target.split(".")[1] if "." in target else None
            if other in ROOMS and ROOMS.index(other) > ROOMS.index(room):
                backwards.append(f"{module} -> {target}")
    assert not backwards, "imports against the flow:\n" + "\n".join(sorted(backwards))
