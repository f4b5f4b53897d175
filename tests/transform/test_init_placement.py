"""Where ``T.init`` lands, so that TVM sees reductions and the init runs for every output.

Stage II keeps ``T.init`` as the native init of the block of the first reduction loop, which
makes that block a reduction block for TVM's checked primitives. ``lower_sparse_buffer`` then
decomposes every reduction whose loops may be empty (an empty row, a zero feature size), so
the init runs before the reduction loop instead of at its first iteration. Where a native init
would run twice for one output element (rgcn_hetero_forward's relation does not index Y) or
cannot be placed (a spatial loop below the reduction block), it gets a nest of its own
(``lower.init_placement``); a CSC SpMV with a T.init is refused with what to write instead. The
numeric tests (outputs filled with NaN, inputs with empty rows, zero extents) check the effect;
most tests here check the structure, the RGCN and CSC ones the numbers too.
"""

import numpy as np
import pytest
import scipy.sparse
import tvm_ffi
from kernel_zoo import CASES
from tvm import s_tir, tirx
from zoo_check import check_kernel

import sparsetir
from sparsetir.errors import LoweringError
from sparsetir.ir import replace
from sparsetir.ir.attrs import INIT_PER_POINT_ANNOTATION
from sparsetir.ir.utils import is_identity_store
from sparsetir.script import tir as T


def _blocks(mod):
    found = []
    tvm_ffi.structural_walk(mod["main"].body, (s_tir.SBlock, found.append), order="pre")
    return {b.name_hint: b for b in found}, [b.name_hint for b in found]


def _summing_rgcn():
    """rgcn_hetero_forward as SparseTIR wrote it: the zoo's without its init_per_point."""
    func = CASES["rgcn_hetero_forward"].func
    it = func.body[0]
    annotations = {k: v for k, v in it.annotations.items() if k != INIT_PER_POINT_ANNOTATION}
    return replace(func, body=[replace(it, annotations=annotations)])


def _stage2(name, values=None):
    func = CASES[name].func
    return sparsetir.lower_sparse_iter(func.specialize(values) if values else func)


def test_csrmm_init_is_native_in_stage2_and_hoisted_before_the_row_in_stage3():
    mod = _stage2("csrmm")
    blocks, order = _blocks(mod)
    assert order == ["root", "csrmm0", "csrmm1"]
    assert blocks["csrmm1"].init is not None and blocks["csrmm0"].init is None
    blocks, order = _blocks(sparsetir.lower_sparse_buffer(mod))
    assert order == ["root", "csrmm0", "csrmm1_init", "csrmm1_update"]
    store = blocks["csrmm1_init"].body
    assert isinstance(store, tirx.BufferStore) and store.value.value == 0.0
    assert blocks["csrmm1_update"].init is None


def test_bsrmm_init_sits_in_the_block_of_its_first_reduction():
    blocks, order = _blocks(_stage2("bsrmm"))
    assert order == ["root", "bsrmm0", "bsrmm1"]
    assert blocks["bsrmm0"].init is not None       # bj is bsrmm0's reduction variable
    assert blocks["bsrmm1"].init is None


def test_segment_reduce_init_is_a_block_without_loops_before_the_row():
    _, order = _blocks(sparsetir.lower_sparse_buffer(_stage2("segment_reduce")))
    assert order == ["root", "segment_reduce0", "segment_reduce1_init", "segment_reduce1_update"]


@pytest.mark.parametrize("values,decomposed", [({"col": 4, "blk": 2}, False),
                                               ({"blk": 2}, True), ({"col": 4}, True)])
def test_only_reductions_that_may_be_empty_are_decomposed(values, decomposed):
    # ellmm reduces over j (extent col) and bj (extent blk)
    blocks, _ = _blocks(sparsetir.lower_sparse_buffer(_stage2("ellmm", values)))
    assert ("ellmm0_init" in blocks) == decomposed
    assert ("ellmm0" in blocks) != decomposed


def test_init_of_a_spatial_point_not_in_the_output_runs_in_a_nest_of_its_own():
    # rgcn_hetero: relation r is spatial but Y[i, fo] ignores it; a native init would reset
    # Y[i] once per relation, so the init zeroes all of Y (its axes I_detach, F_out) first
    blocks, order = _blocks(sparsetir.lower_sparse_iter(_summing_rgcn()))
    assert order == ["root", "rgcn_hetero_forward_init0", "rgcn_hetero_forward0",
                     "rgcn_hetero_forward1", "rgcn_hetero_forward2"]
    # the update keeps a native init that leaves Y as it is, so TVM sees a reduction block
    init = blocks["rgcn_hetero_forward2"].init
    assert is_identity_store(init)
    assert [name for name, b in blocks.items() if b.init is not None] == ["rgcn_hetero_forward2"]
    zero = blocks["rgcn_hetero_forward_init0"]
    assert [v.dom.extent.name for v in zero.iter_vars] == ["m", "feat_size"]
    assert isinstance(zero.body, tirx.BufferStore) and zero.body.value.value == 0.0


def test_spatial_loop_below_a_reduction_block_gets_its_init_nest():
    # SparseTIR's reordered BSR SpMM: f (spatial) lies in the block of the reduction j
    sch = sparsetir.Schedule(CASES["bsrmm"].func)
    i, bi, bj, f, j = sch.get_sp_iters("bsrmm")
    sch.sparse_reorder("bsrmm", [bi, bj, i, j, f])
    blocks, order = _blocks(sparsetir.lower_sparse_iter(sch.func))
    assert order == ["root", "bsrmm_init0", "bsrmm0", "bsrmm1"]
    assert all(b.init is None for b in blocks.values())


def test_native_init_kept_where_every_spatial_variable_indexes_the_output():
    for name in ("csrmm", "sddmm", "fused_sddmm", "rgcn_homo_forward", "bsrmm"):
        _, order = _blocks(_stage2(name))
        assert not any(n.endswith("_init0") for n in order), name


def test_rgcn_node_under_several_relations_gets_the_sum_over_relations():
    """Destinations 2 and 3 under relations 0 and 1, node 1 and 5 under none (zero), relation
    2 empty, one (relation, destination) pair without edges; outputs start as NaN."""
    rng = np.random.default_rng(0)
    m, n, rels, feat = 6, 5, 3, 4
    indptr_i, indices_i = np.array([0, 3, 5, 5], np.int32), np.array([0, 2, 3, 2, 3], np.int32)
    edges = scipy.sparse.random(len(indices_i), n, density=0.5, format="lil", random_state=1)
    edges[2, :] = 0
    edges = edges.tocsr()
    inputs = dict(a=rng.standard_normal(edges.nnz).astype(np.float32),
                  w=rng.standard_normal(rels * feat * feat).astype(np.float32),
                  x=rng.standard_normal(n * feat).astype(np.float32),
                  y=np.full(m * feat, np.nan, np.float32),
                  indptr_i=indptr_i, indices_i=indices_i,
                  indptr_j=edges.indptr.astype(np.int32), indices_j=edges.indices.astype(np.int32),
                  m=m, n=n, num_rels=rels, feat_size=feat, nnz_i=len(indices_i), nnz_j=edges.nnz)
    func = _summing_rgcn()
    out = check_kernel(sparsetir.build(func, "llvm"), func, "rgcn_hetero_forward", inputs)
    y = out["y"].reshape(m, feat)
    assert np.all(y[[1, 4, 5]] == 0) and np.all(y[[2, 3]] != 0)


@T.prim_func
def csc_spmv(a: T.handle, x: T.handle, y: T.handle, indptr: T.handle, indices: T.handle,
             m: T.int32, n: T.int32, nnz: T.int32) -> None:
    J = T.dense_fixed(n)
    I = T.sparse_variable(J, (m, nnz), (indptr, indices), "int32")
    I_detach = T.dense_fixed(m)
    A = T.match_sparse_buffer(a, (J, I), "float32")
    X = T.match_sparse_buffer(x, (J,), "float32")
    Y = T.match_sparse_buffer(y, (I_detach,), "float32")
    with T.sp_iter([J, I], "RS", "csc_spmv") as [j, i]:
        with T.init():
            Y[i] = T.float32(0)
        Y[i] = Y[i] + A[j, i] * X[j]


def test_csc_spmv_with_init_is_refused_saying_what_to_write():
    with pytest.raises(LoweringError) as failure:
        sparsetir.lower_sparse_iter(csc_spmv)
    assert str(failure.value) == (
        "sparse iteration csc_spmv: the spatial variable i iterates I, which lies under the "
        "reduction variable j, so an output element is reached from several values of j and a "
        "T.init cannot run once per element. Drop the T.init and zero the output first, in an "
        'iteration of its own (with T.sp_iter([I_detach], "S", "zero") as [v0]: '
        "Y[v0] = T.float32(0.0)) or before the call; the update then adds into it, and "
        'T.sp_iter_attr({"atomic": True}) in the iteration runs the j loop in parallel with '
        "atomic adds. Or iterate the rows outside (a CSR kernel)")


def test_csc_spmv_written_as_the_error_says_is_right():
    """The zero iteration the error shows, then the update without T.init: y = A @ x, empty
    columns and empty rows included, from a NaN output."""
    dense = np.array([[1, 0, 2], [0, 0, 0], [3, 0, 4], [0, 0, 5]], np.float32)
    csc = scipy.sparse.csc_matrix(dense)
    x = np.array([1.0, 7.0, -2.0], np.float32)
    y = np.full(4, np.nan, np.float32)
    sparsetir.build(csc_spmv_zeroed, "llvm")(csc.data, x, y, csc.indptr.astype(np.int32),
                                             csc.indices.astype(np.int32), 4, 3, csc.nnz)
    np.testing.assert_allclose(y, dense @ x)


@T.prim_func
def csc_spmv_zeroed(a: T.handle, x: T.handle, y: T.handle, indptr: T.handle,
                    indices: T.handle, m: T.int32, n: T.int32, nnz: T.int32) -> None:
    J = T.dense_fixed(n)
    I = T.sparse_variable(J, (m, nnz), (indptr, indices), "int32")
    I_detach = T.dense_fixed(m)
    A = T.match_sparse_buffer(a, (J, I), "float32")
    X = T.match_sparse_buffer(x, (J,), "float32")
    Y = T.match_sparse_buffer(y, (I_detach,), "float32")
    with T.sp_iter([I_detach], "S", "zero") as [v0]:
        Y[v0] = T.float32(0.0)
    with T.sp_iter([J, I], "RS", "csc_spmv") as [j, i]:
        Y[i] = Y[i] + A[j, i] * X[j]


def test_init_per_point_annotation_keeps_the_native_init():
    """Row tiles never share a row (the caller's contract): such a kernel keeps its init per
    point (the zoo's rgcn_hetero_forward, for SparseTIR's benchmark schedule), and the
    annotation does not reach the lowered block."""
    blocks, order = _blocks(_stage2("rgcn_hetero_forward"))
    assert "rgcn_hetero_forward_init0" not in order
    assert blocks["rgcn_hetero_forward2"].init.value.value == 0.0
    assert INIT_PER_POINT_ANNOTATION not in blocks["rgcn_hetero_forward0"].annotations
