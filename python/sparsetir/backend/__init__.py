"""Stage III -> binary: targets, the TIR pipeline ``tvm.compile`` runs with its own passes,
gcc-built helper libraries and the on-disk cache folder they and the kernels are kept in.

``target`` (``make_target``, ``compile_module``, CUDA without a GPU), ``pipeline`` (the
``"sparsetir"`` TIR pipeline and every TVM 0.27 workaround it needs), the passes it runs
(``index_loads``, ``prefetch``, ``vector_reductions``, ``parallel_checks``,
``uniform_conditions``), ``native`` (gcc), ``cpu_atomics`` (the CPU's atomic adds, a gcc-built
helper) and ``cache_folder``.

Example
-------
>>> from sparsetir.backend.target import compile_module
>>> from sparsetir.driver.build_module import lower_to_stage3
>>> from sparsetir.ops.kernels import spmm
>>> stage3_module = lower_to_stage3(spmm.specialize({"feat_size": 16}), "llvm")
>>> executable = compile_module(stage3_module, "llvm")
>>> executable["main"]
ffi.Function
"""
