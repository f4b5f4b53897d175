"""Stage I IR: axes, sparse buffers, sparse iterations and sparse functions.

Nodes validate their fields when built; ``replace(node, **changes)`` is the way to change one
(a validated copy). ``iterations`` / ``map_iterations`` / ``tir_stmts`` walk a body.
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
from .function import SparseFunction
from .iteration import SparseIteration, SpIterVar
from .node import replace
from .visit import iterations, map_iterations, tir_stmts

__all__ = ["AXIS_KINDS", "AttachedAxis", "Axis", "BufferDomain", "FusedAxis", "SparseBuffer",
           "SparseFunction", "SparseIteration", "SpIterVar", "check_fused_group", "dense_fixed",
           "dense_variable", "iterations", "map_iterations", "replace", "sparse_fixed",
           "sparse_variable", "tir_stmts"]
