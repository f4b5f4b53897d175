"""The packaged folder's description: ``manifest.json`` and one JSON per kernel in ``kernels/``.

A kernel's JSON lists its parameters in call order, each with its Stage I ``name``, a ``role``
(which input of its op it takes, see ``ops.py``), ``kind`` (``buffer`` or ``scalar``) and
``dtype``; a buffer also has its ``length`` (over the scalars' names), ``written`` and
``alignment``, the byte alignment the CUDA code assumes for its start (16 where it copies with
16-byte vectors; fresh torch CUDA tensors are 256-byte aligned).

Example
-------
>>> manifest, specs = load_specs(Path("."))                 # doctest: +SKIP
>>> [p["name"] for p in specs[0]["params"]]
['a', 'b', 'c', 'indptr', 'indices', 'm', 'n', 'nnz']
"""

from __future__ import annotations

import json
from pathlib import Path


def load_specs(root: Path) -> tuple:
    """(the manifest, the JSON of every kernel it lists, in its order)."""
    manifest = json.loads((root / "manifest.json").read_text())
    specs = [json.loads((root / "kernels" / f"{name}.json").read_text())
             for name in manifest["kernels"]]
    return manifest, specs


def arguments(spec: dict, inputs: dict) -> list:
    """The kernel's arguments in its parameter order, taken from ``inputs`` by role; raises
    ValueError for a tensor less aligned than its parameter's ``alignment``."""
    args = [inputs[param["role"]] for param in spec["params"]]
    for param, arg in zip(spec["params"], args):
        if param["kind"] == "buffer" and arg.data_ptr() % param["alignment"]:
            raise ValueError(f"{spec['name']}: {param['name']} must be "
                             f"{param['alignment']}-byte aligned")
    return args
