"""Check the packaged folder without a GPU (``run.py --selftest-cpu``; what CI can do).

1. TVM's runtime libraries in ``lib/`` load; the CUDA one against the bundled ``libcuda.so.1``
   stand-in (every call answers "no device") when no NVIDIA driver is installed.
2. Every kernel's CUDA library loads with them, has its entry function and carries device code
   (a fatbin, not CUDA source). Calling it needs a GPU.
3. Every kernel's CPU twin (compiled for generic x86-64 with the same parameters: the same
   scheduled kernel with its GPU threads run one after another, or for the tensor-core BSR
   SpMM, whose WMMA fragments need a GPU, its Stage I function with sparsetir's CPU schedule)
   computes what torch computes when called in its JSON's parameter order: the CSR kernels on
   bundled graphs, the BSR one on seeded block-sparse matrices (``blocksparse.py``; some block
   rows empty, rows and columns different). This checks the JSON files, ``tvm_rt``'s calling
   code, which the GPU run uses too, and what the CSR schedules compute.

Example
-------
>>> run(Path("build/gpu_bundle"))        # doctest: +SKIP
selftest-cpu: OK ...
0
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

import blocksparse
import graphs
import ops
from bundle import arguments, load_specs
from tvm_rt import Runtime, TVMError

FATBIN_MAGIC = bytes.fromhex("50ed55ba")
GRAPHS = ("cora", "citeseer")  # citeseer has empty rows
SEGMENT_NNZ = (1, 8)           # rows of up to 168 nonzeros cut into many segments
BSR_SHAPES = ((512, 384),)     # 10% of 12 blocks per block row of 32: some rows empty


def run(root: Path) -> int:
    """Run the three checks on the folder ``root``; print what was found; 0 when all pass."""
    manifest, specs = load_specs(root)
    if not _driver_present():
        ctypes.CDLL(str(root / manifest["cuda_stub"]), mode=ctypes.RTLD_GLOBAL)
    runtime = Runtime(root / "lib", cuda=True)
    problems = []
    kernels = root / "kernels"
    for spec in specs:
        library = kernels / spec["library"]
        runtime.load_module(library)[spec["entry"]]
        if FATBIN_MAGIC not in library.read_bytes():
            problems.append(f"{spec['library']}: no fatbin inside (device code missing)")
    twins = {spec["name"]: runtime.load_module(kernels / spec["cpu_library"])[spec["entry"]]
             for spec in specs}
    loaded = {name: graphs.load(name, root / "data") for name in GRAPHS}
    for spec in specs:
        for problem, inputs, expected, tolerance in _cases(spec, loaded):
            try:
                twins[spec["name"]](*arguments(spec, inputs))
            except (TVMError, ValueError) as err:
                problems.append(f"{spec['name']} (CPU twin) on {problem}: {err}")
                continue
            err, ok = ops.check(inputs["out"], expected, *tolerance)
            if not ok:
                problems.append(f"{spec['name']} (CPU twin) on {problem}: off by {err:.2e}")
    for problem in problems:
        print("selftest-cpu:", problem)
    shapes = ", ".join(f"{rows}x{cols}" for rows, cols in BSR_SHAPES)
    print(f"selftest-cpu: {'FAILED' if problems else 'OK'}: {len(specs)} CUDA libraries for "
          f"{manifest['arch']} load with the runtime-only TVM in lib/; their CPU twins "
          f"{'do not all match' if problems else 'match'} torch on {', '.join(GRAPHS)} "
          f"(CSR) and block-sparse {shapes} (BSR)")
    return 1 if problems else 0


def _cases(spec: dict, loaded: dict):
    """(problem name, inputs on the CPU, torch's answer, (rtol, atol)) for each check of
    ``spec``'s twin."""
    cpu = torch.device("cpu")
    if spec["op"] == blocksparse.OP:
        for rows, cols in BSR_SHAPES:
            matrix = blocksparse.make(rows, cols, spec["block_size"])
            inputs = blocksparse.make_inputs(matrix, spec["feat_size"], cpu)
            yield (f"{matrix.name}/b{matrix.block}", inputs, blocksparse.reference(inputs),
                   (blocksparse.RTOL, blocksparse.ATOL))
        return
    segmented = any(param["role"] == "seg_ptr" for param in spec["params"])
    for name, graph in loaded.items():
        inputs = ops.make_inputs(spec["op"], graph, spec["feat_size"], cpu)
        tolerance = (ops.RTOL, ops.ATOL, ops.magnitude(spec["op"], inputs))
        expected = ops.reference(spec["op"], inputs)
        for max_nnz in SEGMENT_NNZ if segmented else (None,):
            yield ((f"{name}/s{max_nnz}", ops.with_segments(inputs, graph, max_nnz), expected,
                    tolerance) if max_nnz else (name, inputs, expected, tolerance))


def _driver_present() -> bool:
    """Whether a real NVIDIA driver loads (a stand-in lacks ``cuInit``)."""
    try:
        return hasattr(ctypes.CDLL("libcuda.so.1"), "cuInit")
    except OSError:
        return False
