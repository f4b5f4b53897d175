"""The kernels packaged for the GPU machine: scheduled, built by ``sparsetir.build``, described.

Three families, each a Stage I function specialised to its sizes and scheduled for CUDA:

* zoo kernels (``tests/kernel_zoo.py``: ``csrmm``, ``sddmm``, ``fused_sddmm``) with ``build``'s
  default CUDA schedule, at feature sizes 32 and 128;
* the ``sparsetir.ops`` CUDA kernels (``ops_spmm``, ``ops_spmm_unweighted``, ``ops_sddmm``, and
  ``ops_spmm_segments``, ``ops_spmm_unweighted_segments``, ``ops_sddmm_segments`` over rows
  cut into segments:
  ``kernels.CUDA_KERNELS`` with the schedules of ``schedule/operators_cuda.py``), at 32, 64,
  128, 256;
* the fp16 tensor-core BSR SpMM (``tc_bsrmm``: ``ops.tensorcore.bsr_spmm_tensorcore``, WMMA) at
  block sizes 16 and 32 and feature sizes 64 and 128.

Each is compiled twice: for CUDA (the library the GPU runs) and for a generic x86-64 CPU: its
*CPU twin*, which the self-test calls without a GPU to check the parameter order, the runner's
calling code and what the kernel computes. The twin of a CSR kernel is its CUDA schedule with
the thread loops made serial (``tests/cuda_emulation.py``); that of ``tc_bsrmm`` is its Stage I
function ``bsrmm_fp16`` with sparsetir's default CPU schedule, since WMMA fragments do not run on
a CPU. Both builds must have the same Stage III parameters; the JSON lists them in call order,
with the byte alignment the CUDA build assumes (``runner/bundle.py`` describes the format).

Example
-------
>>> spec = export_kernel("csrmm", {"feat_size": 32}, "sm_90", Path("out/kernels"))  # doctest: +SKIP
>>> spec["library"], [p["name"] for p in spec["params"]]                   # doctest: +SKIP
('csrmm_f32.so', ['a', 'b', 'c', 'indptr', 'indices', 'm', 'n', 'nnz'])
>>> export_kernel("tc_bsrmm", {"block_size": 16, "feat_size": 64}, "sm_90",
...               Path("out/kernels"))["name"]                              # doctest: +SKIP
'tc_bsrmm_b16_f64'
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, NamedTuple

import tvm

import sparsetir
from sparsetir.ops.kernels import CUDA_KERNELS
from sparsetir.schedule.operators import schedule_for
from sparsetir.ops.tensorcore import bsr_spmm_tensorcore, bsrmm_fp16
from sparsetir.runtime import BufferParam
from sparsetir.schedule import default_schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from cuda_emulation import emulate  # noqa: E402
from kernel_zoo import KERNELS as ZOO  # noqa: E402

CPU_TARGET = {"kind": "llvm"}  # no -mcpu: the twins run on any x86-64


class Packaged(NamedTuple):
    """A packaged kernel: the op the runner checks it as, the role of each Stage I parameter
    (see ``runner/ops.py`` and ``runner/blocksparse.py``), the sizes it is built at (one dict of
    keyword arguments of ``build`` per library), and ``build(arch, **sizes)``: its CUDA kernel
    for ``arch`` and its CPU twin (two ``sparsetir.runtime.Kernel``)."""

    op: str
    roles: dict
    sizes: tuple
    build: Callable[..., tuple]


def _emulated(schedule: Callable[[int], tvm.IRModule]) -> Callable[..., tuple]:
    """``build`` of a CUDA schedule ``schedule(feat)``: the CPU twin runs the same schedule
    with its thread loops serial."""
    def build(arch: str, feat_size: int) -> tuple:
        scheduled = schedule(feat_size)
        return (sparsetir.build(scheduled, {"kind": "cuda", "arch": arch}, schedule="none"),
                emulate(scheduled, target=CPU_TARGET))
    return build


def _scheduled(func, schedule) -> Callable[[int], tvm.IRModule]:
    """``feat -> schedule(lower_sparse_iter(func at feat), feat)``."""
    return lambda feat: schedule(
        sparsetir.lower_sparse_iter(func.specialize({"feat_size": feat})), feat)


def _zoo(name: str) -> Callable[..., tuple]:
    return _emulated(_scheduled(ZOO[name], lambda mod, feat: default_schedule(mod, "cuda").mod))


def _ops(name: str) -> Callable[..., tuple]:
    return _emulated(_scheduled(CUDA_KERNELS[name],
                                lambda mod, feat: schedule_for(name, mod, feat, "cuda")))


def _tensorcore(arch: str, block_size: int, feat_size: int) -> tuple:
    """``build`` of the tensor-core BSR SpMM; its twin is the Stage I function built for the
    CPU with sparsetir's default schedule (same parameters, in the same order)."""
    sizes = {"blk": block_size, "feat_size": feat_size}
    return (bsr_spmm_tensorcore(block_size, feat_size, {"kind": "cuda", "arch": arch}),
            sparsetir.build(bsrmm_fp16.specialize(sizes), CPU_TARGET))


def _feats(*feats: int) -> tuple:
    return tuple({"feat_size": feat} for feat in feats)


_CSR = {"indptr": "indptr", "indices": "indices", "m": "rows", "n": "cols", "nnz": "nnz"}
_SEGMENTS = {"seg_ptr": "seg_ptr", "seg_rows": "seg_rows", "indices": "indices",
             "s": "segments", "m": "rows", "n": "cols", "nnz": "nnz"}
ZOO_SIZES = _feats(32, 128)
OPS_SIZES = _feats(32, 64, 128, 256)
TC_SIZES = tuple({"block_size": block, "feat_size": feat} for block in (16, 32)
                 for feat in (64, 128))
PACKAGED = {
    "csrmm": Packaged("spmm", {"a": "values", "b": "x", "c": "out", **_CSR}, ZOO_SIZES,
                      _zoo("csrmm")),
    "sddmm": Packaged("sddmm", {"a": "x", "b": "y", "c": "out", **_CSR}, ZOO_SIZES,
                      _zoo("sddmm")),
    "fused_sddmm": Packaged("sddmm", {"a": "x", "b": "y", "c": "out", **_CSR}, ZOO_SIZES,
                            _zoo("fused_sddmm")),
    "ops_spmm": Packaged("spmm", {"a": "values", "x": "x", "y": "out", **_CSR}, OPS_SIZES,
                         _ops("spmm")),
    "ops_spmm_unweighted": Packaged("spmm_unweighted", {"x": "x", "y": "out", **_CSR},
                                    OPS_SIZES, _ops("spmm_unweighted")),
    "ops_spmm_segments": Packaged("spmm", {"a": "values", "x": "x", "y": "out", **_SEGMENTS},
                                  OPS_SIZES, _ops("spmm_segments")),
    "ops_spmm_unweighted_segments": Packaged("spmm_unweighted",
                                             {"x": "x", "y": "out", **_SEGMENTS}, OPS_SIZES,
                                             _ops("spmm_unweighted_segments")),
    "ops_sddmm": Packaged("sddmm", {"x": "x", "y": "y", "out": "out", **_CSR}, OPS_SIZES,
                          _ops("sddmm")),
    "ops_sddmm_segments": Packaged("sddmm", {"x": "x", "y": "y", "out": "out", **_SEGMENTS},
                                   OPS_SIZES, _ops("sddmm_segments")),
    "tc_bsrmm": Packaged("bsr_spmm", {"a": "blocks", "x": "x", "y": "out", "indptr": "indptr",
                                      "indices": "indices", "mb": "block_rows",
                                      "nb": "block_cols", "nnzb": "nnzb"},
                         TC_SIZES, _tensorcore),
}


def library_name(kernel: str, sizes: dict) -> str:
    """``csrmm_f32``, ``tc_bsrmm_b16_f64``: the kernel and its sizes by initial, in order.

    >>> library_name("tc_bsrmm", {"block_size": 16, "feat_size": 64})
    'tc_bsrmm_b16_f64'
    """
    return kernel + "".join(f"_{key[0]}{value}" for key, value in sizes.items())


def export_kernel(kernel: str, sizes: dict, arch: str, out_dir: Path) -> dict:
    """Build ``kernel`` (a key of ``PACKAGED``) at ``sizes`` (one of its ``sizes``) into
    ``out_dir``; return its JSON."""
    packaged = PACKAGED[kernel]
    cuda, twin = packaged.build(arch, **sizes)
    params = describe(cuda.signature, packaged.roles)
    if _unaligned(describe(twin.signature, packaged.roles)) != _unaligned(params):
        raise RuntimeError(f"{kernel}: the CUDA and CPU builds take different parameters")
    name = library_name(kernel, sizes)
    spec = {"name": name, "kernel": kernel, "op": packaged.op, **sizes, "arch": arch,
            "entry": cuda.entry, "library": f"{name}.so", "cpu_library": f"{name}.cpu.so",
            "cuda_source": f"{name}.cu", "params": params}
    out_dir.mkdir(parents=True, exist_ok=True)
    cuda.executable.export_library(str(out_dir / spec["library"]))
    (out_dir / spec["cuda_source"]).write_text(cuda.inspect_source("cuda"))
    twin.executable.export_library(str(out_dir / spec["cpu_library"]))
    (out_dir / f"{name}.json").write_text(json.dumps(spec, indent=1) + "\n")
    return spec


def describe(signature, roles: dict) -> list:
    """The parameters of a ``Kernel``'s signature as JSON records, in call order; a buffer's
    ``alignment`` is the byte alignment the compiled code assumes for its start."""
    params = []
    for param in signature.params:
        record = {"name": param.name, "role": roles[param.name]}
        if isinstance(param, BufferParam):
            if param.keeps_shape:
                raise ValueError(f"parameter {param.name} keeps its shape; "
                                 "the runner passes flat buffers")
            record.update(kind="buffer", dtype=param.dtype, length=str(param.length),
                          written=param.written,
                          alignment=max(param.alignment, tvm.DataType(param.dtype).itemsize))
        else:
            record.update(kind="scalar", dtype=str(param.var.ty.dtype))
        params.append(record)
    return params


def _unaligned(params: list) -> list:
    """``describe``'s records without the alignments (a CPU twin assumes less than CUDA)."""
    return [{key: value for key, value in record.items() if key != "alignment"}
            for record in params]
