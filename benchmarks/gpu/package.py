"""Write a self-contained folder that runs sparsetir's CUDA kernels on a GPU machine without TVM.

The GPU machine has python3 with torch (CUDA) and numpy, but no TVM, no network and maybe another
Python version. The folder (under 40 MB) holds:

* ``lib/``: TVM's runtime libraries only (``libtvm_ffi.so``, ``libtvm_runtime.so``,
  ``libtvm_runtime_cuda.so``), CUDA's ``libcudart.so.13`` they need, TVM's LICENSE and NOTICE;
  no compiler and no Python package: ``tvm_rt.py`` calls them through TVM FFI's C ABI.
* ``kernels/``: zoo CSR SpMM (``csrmm``) and SDDMM (``sddmm``, ``fused_sddmm``) with the default
  CUDA schedule at feature sizes 32 and 128, the ``sparsetir.ops`` CUDA kernels (``ops_spmm``,
  ``ops_spmm_unweighted``, ``ops_sddmm``, and ``ops_spmm_segments``,
  ``ops_spmm_unweighted_segments`` over rows cut into segments; schedules of
  ``schedule/operators_cuda.py``) at 32, 64, 128 and 256, and the fp16 tensor-core BSR SpMM
  (``tc_bsrmm``, ``ops/tensorcore.py``) at block sizes 16 and 32 and feature sizes 64 and 128,
  built by ``sparsetir.build`` for ``--arch`` and exported (fatbin inside), each with its CPU
  twin and a JSON of its parameters (``kernels.py``).
* ``segments.py``: ``sparsetir.format.segments.segment_bounds``, its source copied.
* ``data/``: the bundled graphs; ``graphs.py`` makes the seeded synthetic ones with numpy.
* ``run.py`` and its modules (copied from ``runner/``): checks against torch and times next to
  torch.sparse (cuSPARSE for CSR) on the GPU, and the BSR kernel also next to cuBLAS fp16
  dense; ``run.py --selftest-cpu`` checks the folder without one, with the
  ``libcuda.so.1`` stand-in in ``selftest/``.
* ``manifest.json`` (what was packaged, with which versions) and ``README.md``.

Run: ``.venv/bin/python benchmarks/gpu/package.py --out build/gpu_bundle [--arch sm_90]``

Example
-------
>>> package(Path("build/gpu_bundle"), "sm_90")["kernels"][:3]    # doctest: +SKIP
['csrmm_f32', 'csrmm_f128', 'sddmm_f32']
"""

from __future__ import annotations

import argparse
import inspect
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import tvm
import tvm_ffi

import sparsetir.data
from sparsetir.format.segments import segment_bounds
from sparsetir.backend.target import _build_stub  # the libcuda.so.1 stand-in CUDA builds use here

from kernels import PACKAGED, export_kernel

HERE = Path(__file__).resolve().parent
SEGMENTS_MODULE = '''"""sparsetir.format.segments.segment_bounds, copied by package.py: the rows of a
CSR cut into segments for the ``*_segments`` kernels (numpy only)."""

import numpy as np


{source}'''
MAX_BYTES = 40 * 2**20


def package(out: Path, arch: str = "sm_90") -> dict:
    """Write the folder ``out`` (replacing an earlier package there); return its manifest.

    The folder is assembled beside ``out`` and renamed into place once complete.
    """
    if out.exists() and any(out.iterdir()) and not (out / "manifest.json").exists():
        raise FileExistsError(f"{out} is not empty and holds no earlier package; "
                              "choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        manifest = _assemble(work, arch)
        shutil.rmtree(out, ignore_errors=True)
        work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return manifest


def _assemble(out: Path, arch: str) -> dict:
    """Write every part of the package into the empty folder ``out``; return the manifest."""
    shutil.copytree(HERE / "runner", out, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (out / "segments.py").write_text(SEGMENTS_MODULE.format(
        source=inspect.getsource(segment_bounds)))
    specs = [export_kernel(kernel, sizes, arch, out / "kernels")
             for kernel, packaged in PACKAGED.items() for sizes in packaged.sizes]
    runtime = _copy_runtime(out / "lib")  # after the CUDA builds: they load libcudart
    data_dir = Path(sparsetir.data.__file__).parent
    (out / "data").mkdir()
    for path in sorted(data_dir.glob("*.npz")) + [data_dir / "graphs.json", data_dir / "README.md"]:
        shutil.copy(path, out / "data")
    (out / "selftest").mkdir()
    shutil.copy(_build_stub(), out / "selftest" / "libcuda_stub.so")
    manifest = {
        "arch": arch, "tvm": tvm.__version__, "tvm_ffi": tvm_ffi.__version__,
        "cuda_compiler": _nvcc_version(), "kernels": [spec["name"] for spec in specs],
        "graphs": sorted(path.stem for path in data_dir.glob("*.npz")),
        "runtime": runtime, "cuda_stub": "selftest/libcuda_stub.so",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    size = folder_bytes(out)
    if size > MAX_BYTES:
        raise RuntimeError(f"the package holds {size / 2**20:.1f} MB, "
                           f"over the {MAX_BYTES // 2**20} MB limit")
    return manifest


def folder_bytes(folder: Path) -> int:
    """Total size of the files under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _copy_runtime(lib: Path) -> list:
    """Copy TVM's runtime libraries and the libcudart this process loaded; return their paths."""
    lib.mkdir()
    tvm_lib = Path(tvm.__file__).parent / "lib"
    sources = [Path(tvm_ffi.__file__).parent / "lib" / "libtvm_ffi.so",
               tvm_lib / "libtvm_runtime.so", tvm_lib / "libtvm_runtime_cuda.so",
               _loaded_library("libcudart.so.13"),
               Path(tvm.__file__).parent / "LICENSE", Path(tvm.__file__).parent / "NOTICE"]
    for source in sources:
        shutil.copy(source, lib / source.name)
    return [f"lib/{source.name}" for source in sources if ".so" in source.name]


def _loaded_library(soname: str) -> Path:
    """The file of the shared library ``soname`` that this process has loaded."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[-1]
        if path.endswith("/" + soname):
            return Path(path)
    raise RuntimeError(f"{soname} is not loaded: TVM's CUDA runtime did not load")


def _nvcc_version() -> str:
    """nvcc's "Cuda compilation tools, release 13.0, V13.0.88" line."""
    lines = subprocess.run(["nvcc", "--version"], check=True, capture_output=True, text=True).stdout
    return next(line for line in lines.splitlines() if "release" in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True,
                        help="folder to write (e.g. build/gpu_bundle)")
    parser.add_argument("--arch", default="sm_90",
                        help="CUDA architecture of the GPU (sm_90: H100/H200)")
    args = parser.parse_args()
    manifest = package(args.out, args.arch)
    print(f"wrote {args.out}: {len(manifest['kernels'])} kernels for {manifest['arch']}, "
          f"{folder_bytes(args.out) / 2**20:.1f} MB; check it with "
          f"python {args.out / 'run.py'} --selftest-cpu")


if __name__ == "__main__":
    main()
