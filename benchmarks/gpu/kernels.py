"""The kernels packaged for the GPU machine: scheduled, built by ``sparsetir.build``, described.

Two families, each a Stage I function specialised to a feature size and scheduled for CUDA:

* zoo kernels (``tests/kernel_zoo.py``: ``csrmm``, ``sddmm``, ``fused_sddmm``) with ``build``'s
  default CUDA schedule, at feature sizes 32 and 128;
* the ``sparsetir.ops`` CUDA kernels (``ops_spmm``, ``ops_spmm_unweighted``, ``ops_sddmm``:
  ``kernels.CUDA_KERNELS`` with the schedules of ``ops/cuda_schedules.py``), at 32, 64, 128, 256.

Each scheduled module is compiled twice: for CUDA (the library the GPU runs) and, with its
thread loops made serial (``tests/cuda_emulation.py``), for a generic x86-64 CPU: its *CPU twin*,
which the self-test calls without a GPU to check the parameter order, the runner's calling code
and what the schedule computes. Both must have the same Stage III parameters; the JSON lists them
in call order (``runner/bundle.py`` describes the format).

Example
-------
>>> spec = export_kernel("csrmm", 32, "sm_90", Path("out/kernels"))     # doctest: +SKIP
>>> spec["library"], [p["name"] for p in spec["params"]]
('csrmm_f32.so', ['a', 'b', 'c', 'indptr', 'indices', 'm', 'n', 'nnz'])
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, NamedTuple

import tvm

import sparsetir
from sparsetir.ops.kernels import CUDA_KERNELS
from sparsetir.ops.schedules import schedule_for
from sparsetir.runtime import BufferParam
from sparsetir.schedule import default_schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from cuda_emulation import emulate  # noqa: E402
from kernel_zoo import KERNELS as ZOO  # noqa: E402


class Packaged(NamedTuple):
    """A packaged kernel: the op the runner checks it as, the role of each Stage I parameter
    (see ``runner/ops.py``), its feature sizes, and ``schedule(feat)``, its scheduled Stage II
    module at a feature size."""

    op: str
    roles: dict
    feats: tuple
    schedule: Callable[[int], tvm.IRModule]


def _scheduled(func, schedule) -> Callable[[int], tvm.IRModule]:
    """``feat -> schedule(lower_sparse_iter(func at feat), feat)``."""
    return lambda feat: schedule(
        sparsetir.lower_sparse_iter(func.specialize({"feat_size": feat})), feat)


def _zoo(name: str) -> Callable[[int], tvm.IRModule]:
    return _scheduled(ZOO[name], lambda mod, feat: default_schedule(mod, "cuda").mod)


def _ops(name: str) -> Callable[[int], tvm.IRModule]:
    return _scheduled(CUDA_KERNELS[name], lambda mod, feat: schedule_for(name, mod, feat, "cuda"))


_CSR = {"indptr": "indptr", "indices": "indices", "m": "rows", "n": "cols", "nnz": "nnz"}
ZOO_FEATS = (32, 128)
OPS_FEATS = (32, 64, 128, 256)
PACKAGED = {
    "csrmm": Packaged("spmm", {"a": "values", "b": "x", "c": "out", **_CSR}, ZOO_FEATS,
                      _zoo("csrmm")),
    "sddmm": Packaged("sddmm", {"a": "x", "b": "y", "c": "out", **_CSR}, ZOO_FEATS,
                      _zoo("sddmm")),
    "fused_sddmm": Packaged("sddmm", {"a": "x", "b": "y", "c": "out", **_CSR}, ZOO_FEATS,
                            _zoo("fused_sddmm")),
    "ops_spmm": Packaged("spmm", {"a": "values", "x": "x", "y": "out", **_CSR}, OPS_FEATS,
                         _ops("spmm")),
    "ops_spmm_unweighted": Packaged("spmm_unweighted", {"x": "x", "y": "out", **_CSR},
                                    OPS_FEATS, _ops("spmm_unweighted")),
    "ops_sddmm": Packaged("sddmm", {"x": "x", "y": "y", "out": "out", **_CSR}, OPS_FEATS,
                          _ops("sddmm")),
}
CPU_TARGET = {"kind": "llvm"}  # no -mcpu: the twins run on any x86-64


def export_kernel(kernel: str, feat: int, arch: str, out_dir: Path) -> dict:
    """Build ``kernel`` (a key of ``PACKAGED``) at feature size ``feat`` into ``out_dir``;
    return its JSON."""
    packaged = PACKAGED[kernel]
    scheduled = packaged.schedule(feat)
    cuda = sparsetir.build(scheduled, {"kind": "cuda", "arch": arch}, schedule="none")
    twin = emulate(scheduled, target=CPU_TARGET)
    params = describe(cuda.signature, packaged.roles)
    if describe(twin.signature, packaged.roles) != params:
        raise RuntimeError(f"{kernel}: the CUDA and CPU builds take different parameters")
    name = f"{kernel}_f{feat}"
    spec = {"name": name, "kernel": kernel, "op": packaged.op, "feat_size": feat, "arch": arch,
            "entry": cuda.entry, "library": f"{name}.so", "cpu_library": f"{name}.cpu.so",
            "params": params}
    out_dir.mkdir(parents=True, exist_ok=True)
    cuda.executable.export_library(str(out_dir / spec["library"]))
    twin.executable.export_library(str(out_dir / spec["cpu_library"]))
    (out_dir / f"{name}.json").write_text(json.dumps(spec, indent=1) + "\n")
    return spec


def describe(signature, roles: dict) -> list:
    """The parameters of a ``Kernel``'s signature as JSON records, in call order."""
    params = []
    for param in signature.params:
        record = {"name": param.name, "role": roles[param.name]}
        if isinstance(param, BufferParam):
            if param.keeps_shape:
                raise ValueError(f"parameter {param.name} keeps its shape; "
                                 "the runner passes flat buffers")
            record.update(kind="buffer", dtype=param.dtype, length=str(param.length),
                          written=param.written)
        else:
            record.update(kind="scalar", dtype=str(param.var.ty.dtype))
        params.append(record)
    return params
