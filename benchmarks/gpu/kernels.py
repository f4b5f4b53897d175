"""The kernels packaged for the GPU machine: built by ``sparsetir.build``, exported, described.

Each zoo kernel (``tests/kernel_zoo.py``) is specialised to a feature size and built twice from the
same Stage I function: for CUDA with the default schedule (the library the GPU runs) and for a
generic x86-64 CPU (its *CPU twin*, which the self-test calls to check the parameter order and the
runner's calling code without a GPU). Both must have the same Stage III parameters; the JSON lists
them in call order (``runner/bundle.py`` describes the format).

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

import sparsetir
from sparsetir.runtime import BufferParam

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from kernel_zoo import KERNELS  # noqa: E402

_CSR = {"indptr": "indptr", "indices": "indices", "m": "rows", "n": "cols", "nnz": "nnz"}
# zoo kernel -> (the op the runner checks it as, the role of each Stage I parameter; see ops.py)
PACKAGED = {
    "csrmm": ("spmm", {"a": "values", "b": "x", "c": "out", **_CSR}),
    "sddmm": ("sddmm", {"a": "x", "b": "y", "c": "out", **_CSR}),
    "fused_sddmm": ("sddmm", {"a": "x", "b": "y", "c": "out", **_CSR}),
}
FEATS = (32, 128)
CPU_TARGET = {"kind": "llvm"}  # no -mcpu: the twins run on any x86-64


def export_kernel(kernel: str, feat: int, arch: str, out_dir: Path) -> dict:
    """Build zoo kernel ``kernel`` at feature size ``feat`` into ``out_dir``; return its JSON."""
    op, roles = PACKAGED[kernel]
    func = KERNELS[kernel].specialize({"feat_size": feat})
    cuda = sparsetir.build(func, {"kind": "cuda", "arch": arch})
    twin = sparsetir.build(func, CPU_TARGET)
    params = describe(cuda.signature, roles)
    if describe(twin.signature, roles) != params:
        raise RuntimeError(f"{kernel}: the CUDA and CPU builds take different parameters")
    name = f"{kernel}_f{feat}"
    spec = {"name": name, "kernel": kernel, "op": op, "feat_size": feat, "arch": arch,
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
