"""Check the packaged folder without a GPU (``run.py --selftest-cpu``; what CI can do).

1. TVM's runtime libraries in ``lib/`` load; the CUDA one against the bundled ``libcuda.so.1``
   stand-in (every call answers "no device") when no NVIDIA driver is installed.
2. Every kernel's CUDA library loads with them, has its entry function and carries device code
   (a fatbin, not CUDA source). Calling it needs a GPU.
3. Every kernel's CPU twin (the same scheduled kernel with the same parameters, its GPU threads
   run one after another, compiled for generic x86-64) computes what torch computes on bundled
   graphs when called in its JSON's parameter order. This checks the JSON files, ``tvm_rt``'s
   calling code, which the GPU run uses too, and what the schedule computes.

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

import graphs
import ops
from bundle import arguments, load_specs
from tvm_rt import Runtime, TVMError

FATBIN_MAGIC = bytes.fromhex("50ed55ba")
GRAPHS = ("cora", "citeseer")  # citeseer has empty rows


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
    for graph_name in GRAPHS:
        graph = graphs.load(graph_name, root / "data")
        for spec in specs:
            inputs = ops.make_inputs(spec["op"], graph, spec["feat_size"], torch.device("cpu"))
            try:
                twins[spec["name"]](*arguments(spec, inputs))
            except TVMError as err:
                problems.append(f"{spec['name']} (CPU twin) on {graph_name}: {err}")
                continue
            err, ok = ops.check(inputs["out"], ops.reference(spec["op"], inputs))
            if not ok:
                problems.append(f"{spec['name']} (CPU twin) on {graph_name}: off by {err:.2e}")
    for problem in problems:
        print("selftest-cpu:", problem)
    print(f"selftest-cpu: {'FAILED' if problems else 'OK'}: {len(specs)} CUDA libraries for "
          f"{manifest['arch']} load with the runtime-only TVM in lib/; their CPU twins "
          f"{'do not all match' if problems else 'match'} torch on {', '.join(GRAPHS)}")
    return 1 if problems else 0


def _driver_present() -> bool:
    """Whether a real NVIDIA driver loads (a stand-in lacks ``cuInit``)."""
    try:
        return hasattr(ctypes.CDLL("libcuda.so.1"), "cuInit")
    except OSError:
        return False
