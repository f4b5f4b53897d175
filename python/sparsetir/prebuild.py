"""The packaging step that makes ``driver.prebuilt``'s kernels: ``python -m sparsetir.prebuild
OUT`` (``make prebuilt`` writes ``python/sparsetir/prebuilt``, which the wheel ships). It sits
on top of the package, beside ``warmup``: it runs ``sparsetir.nn`` layers.

It trains, for one step, the layers of ``sparsetir.nn`` in the configurations of ``MODELS``
on the bundled Cora graph (forward and backward: every kernel a first epoch compiles; which
kernels ``ops`` needs depends on the layer, the dtype and the feature sizes, not on the
graph), with ``"llvm"`` meaning the portable target (``backend.target.host_target``) and a
disk cache of its own. The files of every kernel ``driver.named`` recorded there are copied to
``OUT/files``, with a manifest of each kernel's files, their sizes and SHA-256
(``driver.prebuilt``). It needs torch, and a machine
that runs the portable target (the step runs the kernels it compiles); without either it
writes no kernels and says why, and the package simply has none.

Example
-------
``python -m sparsetir.prebuild python/sparsetir/prebuilt``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from .backend import cache_folder
from .backend.target import host_target
from .driver import background, cache, prebuilt
from .driver.prebuilt import CPU_FLAGS, FORMAT, MANIFEST, PORTABLE, host_runs


class Model(NamedTuple):
    """A network of ``layer`` (``gcn``, ``sage``, ``gat``, ``rgcn``): feature widths ``in ->
    hidden (x layers - 1) -> classes``, ``heads`` attention heads (GAT; the last layer's
    ``out_heads``)."""

    layer: str
    widths: tuple
    heads: int = 1
    out_heads: int = 1


MODELS = (
    Model("gcn", (1433, 16, 7)),                     # Kipf and Welling's GCN on Cora
    Model("sage", (1433, 128, 128, 7)),              # the GNN benchmark's GraphSAGE
    Model("gat", (1433, 16, 7), heads=4, out_heads=4),   # the GNN benchmark's GAT
    Model("gat", (1433, 8, 7), heads=8, out_heads=1),    # Velickovic et al.'s GAT on Cora
    Model("rgcn", (1433, 16, 7)),                    # RGCN, 6 relations, 3 bases
)
"""What is prebuilt: ``benchmarks/gnn_models.py``'s four models on Cora, and GAT as its
paper (and DGL's and PyG's examples) runs it on Cora."""
RELATIONS = 6


def build(out: Path, models=MODELS) -> dict:
    """Compile the kernels of ``models`` for ``PORTABLE`` into ``out`` (emptied first); return
    the manifest written there (no kernels, and ``"skipped"`` saying why, when this machine
    cannot make them)."""
    manifest = {"format": FORMAT, "target": PORTABLE, "system": platform.system(),
                "machine": platform.machine(), "cpu_flags": list(CPU_FLAGS), "kernels": {}}
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    why = _cannot_build(manifest)
    if why:
        manifest["skipped"] = why
    else:
        with tempfile.TemporaryDirectory() as root:
            manifest["kernels"] = _compile(models, Path(root), out)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def _cannot_build(manifest: dict) -> str:
    if not host_runs(manifest):
        return (f"this machine ({platform.system()} {platform.machine()}) cannot run "
                f"{PORTABLE['mcpu']} code")
    try:
        import torch  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return "torch is not installed (the layers that choose the kernels need it)"
    return ""


def _compile(models, root: Path, out: Path) -> dict:
    """Run ``models`` once with ``root`` as the disk cache and ``"llvm"`` the portable target,
    and copy the kernels into ``out``; return the manifest's records of them. Background
    compiles are off meanwhile: a worker process does not see ``host_target``, so it would
    record kernels for this CPU in ``root``, which would ship as portable ones."""
    settings = {"SPARSETIR_CACHE": str(root), "SPARSETIR_PREBUILT": "0",
                background.ENV: "0"}
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        cache.clear_cache()                      # nothing compiled for this CPU is reused
        with host_target(PORTABLE):
            for model in models:
                _train_step(model)
        return _copy_named(root, out)
    finally:
        cache.clear_cache()                      # in memory; on disk, ``root`` goes anyway
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _train_step(model: Model) -> None:
    """One forward and backward pass of ``model`` on Cora (seeded features)."""
    import torch  # pylint: disable=import-outside-toplevel
    from . import nn, ops  # pylint: disable=import-outside-toplevel
    from .data import load_graph  # pylint: disable=import-outside-toplevel
    A = load_graph("cora")
    graph = ops.SparseMatrix.from_csr(A.indptr, A.indices,
                                      torch.ones(A.nnz, dtype=torch.float32), A.shape)
    generator = torch.Generator().manual_seed(0)
    h = torch.randn(A.shape[0], model.widths[0], generator=generator)
    etypes = torch.randint(0, RELATIONS, (A.nnz,), generator=generator)
    norm = torch.rand(A.nnz, 1, generator=generator)
    pairs = list(zip(model.widths[:-1], model.widths[1:]))
    for k, (i, o) in enumerate(pairs):
        last = k == len(pairs) - 1
        if model.layer == "gcn":
            h = nn.GraphConv(i, o, norm="both")(graph, h)
        elif model.layer == "sage":
            h = nn.SAGEConv(i, o, "mean")(graph, h)
        elif model.layer == "rgcn":
            h = nn.RelGraphConv(i, o, RELATIONS, regularizer="basis", num_bases=3,
                                self_loop=True)(graph, h, etypes, norm)
        else:
            heads = model.out_heads if last else model.heads
            h = nn.GATConv(i * (model.heads if k else 1), o, heads)(graph, h)
            h = h.mean(1) if last else torch.nn.functional.elu(h.flatten(1))
        if not last and model.layer != "gat":
            h = torch.relu(h)
    h.sum().backward()


def _copy_named(root: Path, out: Path) -> dict:
    """Copy the files of the kernel of every name entry under ``root`` into ``out/files``, each
    once under its SHA-256 (the kernels share one index-checks library); return the manifest's
    records of the kernels."""
    kernels = {}
    names = root / cache.NAMES
    (out / prebuilt.FILES).mkdir()
    for name in sorted(names.iterdir() if names.is_dir() else []):
        named = cache_folder.read_entry(name)
        if named is None or "name.json" not in named:
            continue
        record = json.loads(named["name.json"].read_text())
        files = cache_folder.read_entry(root / cache.FOLDER / record["entry"])
        if record["target"] != "llvm" or files is None:
            continue
        kept = {}
        for file, path in files.items():
            kept[file] = cache_folder.record(path.read_bytes())
            shutil.copyfile(path, out / prebuilt.FILES / kept[file]["sha256"])
        kernels[name.name] = {"key": record["key"], "files": kept}
    return kernels


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to write (emptied first)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    manifest = build(args.out)
    size = sum(path.stat().st_size for path in args.out.rglob("*") if path.is_file())
    print(f"sparsetir prebuild: {len(manifest['kernels'])} kernels for {PORTABLE['mcpu']} in "
          f"{args.out}, {size / 1e6:.1f} MB, {time.perf_counter() - start:.0f} s"
          + (f" (none: {manifest['skipped']})" if "skipped" in manifest else ""),
          file=sys.stderr)


if __name__ == "__main__":
    main()
