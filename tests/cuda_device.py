"""What a CUDA executable holds, asked of TVM's device module rather than read from its source.

>>> device_kernels(sparsetir.build(CASES["csr2bsr"].func, "cuda").executable)  # doctest: +SKIP
['main_kernel', 'main_kernel_1']
"""

from __future__ import annotations


def device_kernels(executable, host: str = "main") -> list:
    """Names of the ``__global__`` kernels the device module of ``executable`` implements.

    TVM names the kernels split out of host function ``host`` ``<host>_kernel``,
    ``<host>_kernel_1``, ``<host>_kernel_2``, ... in launch order.
    """
    (device,) = [module for module in executable.mod.imports if module.kind == "cuda"]
    names = []
    while device.implements_function(name := f"{host}_kernel" + (f"_{len(names)}" if names else "")):
        names.append(name)
    return names
