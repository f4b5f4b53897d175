"""Stage I IR: axes, sparse buffers, sparse iterations and sparse functions.

Nodes validate their fields when built; ``replace(node, **changes)`` is the way to change one
(a validated copy). ``iterations`` / ``map_iterations`` / ``tir_stmts`` walk a body;
``structural_equal`` / ``assert_structural_equal`` compare functions (names ignored), the latter
with a short diff.
"""
from .axis import (
                   AXIS_KINDS,
                   AttachedAxis,
                   Axis,
                   FusedAxis,
                   check_fused_group,
                   dense_fixed,
                   dense_variable,
                   sparse_fixed,
                   sparse_variable,
)
from .buffer import BufferDomain, SparseBuffer
from .equality import assert_structural_equal, structural_equal
from .function import SparseFunction
from .iteration import SparseIteration, SpIterVar
from .node import replace
from .visit import iterations, map_iterations, tir_stmts

__all__ = ["AXIS_KINDS", "AttachedAxis", "Axis", "BufferDomain", "FusedAxis", "SparseBuffer",
           "SparseFunction", "SparseIteration", "SpIterVar", "assert_structural_equal",
           "check_fused_group", "dense_fixed", "dense_variable", "iterations", "map_iterations",
           "replace", "sparse_fixed", "sparse_variable", "structural_equal", "tir_stmts"]
