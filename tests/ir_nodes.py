"""The nodes of one kind in a lowered function: what IR-structure tests count and inspect.

Example
-------
>>> from tvm import tirx
>>> from ir_nodes import nodes                                     # doctest: +SKIP
>>> parallel = [f for f in nodes(mod, tirx.For) if f.kind == tirx.ForKind.PARALLEL]  # doctest: +SKIP
"""

import tvm_ffi


def nodes(mod, kind) -> list:
    """The nodes of type ``kind`` in ``mod["main"]``'s body, outermost first."""
    found = []
    tvm_ffi.structural_walk(mod["main"].body, (kind, found.append), order="pre")
    return found
