"""SparseTIR's ``tests/python/sparsetir/test_format_conversion_routine.py`` (HEAD 9b3f843), ported.

| SparseTIR test | status |
|---|---|
| ``test_column_part_hyb`` | passes with documented renames: ``tvm.sparse`` -> ``sparsetir.format.compat``, ``tvm.nd.array`` -> ``tvm.runtime.tensor``; DGL 1.x renames ``g.adj_sparse`` -> ``g.adj_tensors``, ``g.adj(transpose=True, scipy_fmt=...)`` -> ``g.adj_external(...)`` |
| ``test_condense`` | passes with the same renames |
| ``test_hetero_csr_to_ell3d`` | cannot as written: ``AIFBDataset()`` downloads AIFB (no network here); runs on ``SyntheticAIFB``, a seeded labelled relational graph of AIFB's shape, with the same renames; SparseTIR checks nothing, so the result is checked against the input edges |

The text below is SparseTIR's apart from those renames and the added checks (marked ``# added``).
"""

from typing import List

import dgl
import numpy as np
import torch as th
import tvm
from sparsetir.format.compat import csf_to_ell3d, column_part_hyb, condense


def scipy_column_part_hyb(g: dgl.DGLHeteroGraph, column_part: int, bucket_sizes: List[int]):
    mat = g.adj_external(transpose=True, scipy_fmt="csr")
    buckets = bucket_sizes * column_part
    m = mat.shape[0]
    n = mat.shape[1]
    nnz = mat.nnz
    per_column_part_size = (n + column_part - 1) // column_part
    sub_mats = [
        mat[:, i * per_column_part_size : (i + 1) * per_column_part_size]
        for i in range(column_part)
    ]

    num_buckets = len(buckets)
    ell_n = []

    for partition in range(column_part):
        sub_mat = sub_mats[partition]
        in_degrees = sub_mat.indptr[1:] - sub_mat.indptr[:-1]
        for i, bucket_size in enumerate(bucket_sizes[:-1]):
            last_bucket_size = 0 if i == 0 else bucket_sizes[i - 1]
            ell_n.append(int(((in_degrees > last_bucket_size) & (in_degrees <= bucket_size)).sum()))
        sub_indegrees = in_degrees[in_degrees > bucket_sizes[-2]]
        ell_n.append(int(((sub_indegrees + bucket_sizes[-1] - 1) // bucket_sizes[-1]).sum()))

        ell_rows = []
        ell_indices = []

    for partition in range(column_part):
        sub_mat = sub_mats[partition]
        in_degrees = sub_mat.indptr[1:] - sub_mat.indptr[:-1]

        for i, bucket_size in enumerate(bucket_sizes[:-1]):
            last_bucket_size = 0 if i == 0 else bucket_sizes[i - 1]
            ell_rows.append(
                ((in_degrees > last_bucket_size) & (in_degrees <= bucket_size)).nonzero()[0]
            )
        ell_rows.append((in_degrees > bucket_sizes[-2]).nonzero()[0])

        for i, bucket_size in enumerate(bucket_sizes[:-1]):
            indices = np.zeros(
                (ell_n[partition * len(bucket_sizes) + i], bucket_size), dtype=np.int32
            )
            for j, row_id in enumerate(ell_rows[partition * len(bucket_sizes) + i]):
                row = sub_mat[row_id]
                indices[j, : row.nnz] = row.indices + partition * per_column_part_size
            ell_indices.append(indices)

        # split rows for the last bucket
        indices = np.zeros(
            (ell_n[(partition + 1) * len(bucket_sizes) - 1], bucket_sizes[-1]), dtype=np.int32
        )
        new_rows = np.zeros((ell_n[(partition + 1) * len(bucket_sizes) - 1],), dtype=np.int32)
        bucket_size = bucket_sizes[-1]
        i = 0
        for row_id in ell_rows[-1]:
            row = sub_mat[row_id]
            for start_offset in range(0, row.nnz, bucket_size):
                if start_offset + bucket_size >= row.nnz:
                    # last bucket
                    indices[i, : row.nnz - start_offset] = (
                        row.indices[start_offset:] + partition * per_column_part_size
                    )
                else:
                    indices[i] = (
                        row.indices[start_offset : start_offset + bucket_size]
                        + partition * per_column_part_size
                    )
                new_rows[i] = row_id
                i += 1

        ell_indices.append(indices)
        ell_rows[-1] = new_rows

    return ell_rows, ell_indices


def test_column_part_hyb():
    g = dgl.rand_graph(1000, 10000).int()
    column_parts = 4
    buckets = [1, 2, 4]
    indptr, indices, _ = g.adj_tensors("csc")
    indptr_nd = tvm.runtime.tensor(indptr.numpy(), device=tvm.cpu())
    indices_nd = tvm.runtime.tensor(indices.numpy(), device=tvm.cpu())
    # built-in c++ funcion
    row_indices, col_indices, mask = column_part_hyb(
        g.num_dst_nodes(), g.num_src_nodes(), indptr_nd, indices_nd, column_parts, buckets
    )
    # compute indices with scipy
    row_indices_scipy, col_indices_scipy = scipy_column_part_hyb(g, column_parts, buckets)

    for part_id in range(column_parts):
        for bucket_id, _ in enumerate(buckets):
            assert np.array_equal(
                row_indices[part_id][bucket_id].numpy(),
                row_indices_scipy[part_id * len(buckets) + bucket_id],
            )
            assert np.array_equal(
                col_indices[part_id][bucket_id].numpy(),
                col_indices_scipy[part_id * len(buckets) + bucket_id],
            )
    # added: the masks mark exactly the nonzeros
    assert sum(int(m.numpy().sum()) for part in mask for m in part) == g.num_edges()


def condense_py(indptr, indices, block_size):
    m = len(indptr) - 1
    ret_indptr = [0]
    ret_indices = []
    for block_id in range((m + block_size - 1) // block_size):
        start_offset = indptr[block_id * block_size]
        end_offset = (
            indptr[-1] if (block_id + 1) * block_size > m else indptr[(block_id + 1) * block_size]
        )
        tile_indices = indices[start_offset:end_offset]
        unique_col_indices = np.unique(tile_indices)
        ret_indptr.append(ret_indptr[-1] + len(unique_col_indices))
        ret_indices.append(unique_col_indices)
    return np.array(ret_indptr), np.concatenate(ret_indices)


def test_condense():
    g = dgl.rand_graph(1000, 10000).int()
    t = 4
    indptr, indices, _ = g.adj_tensors("csc")
    indptr = indptr.numpy()
    indices = indices.numpy()
    indptr_nd = tvm.runtime.tensor(indptr, device=tvm.cpu())
    indices_nd = tvm.runtime.tensor(indices, device=tvm.cpu())
    # built-in c++ function
    indptr_ret, indices_ret, mask = condense(indptr_nd, indices_nd, t, 1)
    # Python version of function
    indptr_py, indices_py = condense_py(indptr, indices, t)
    assert np.array_equal(
        indptr_ret.numpy().flatten(),
        indptr_py,
    )
    assert np.array_equal(
        indices_ret.numpy().flatten(),
        indices_py,
    )


class SyntheticAIFB:
    """Stands in for DGL's ``AIFBDataset`` (a download): one seeded heterograph of AIFB's
    shape (7 node types, 7262 nodes, 45 relations each with its reverse, 48810 edges, a
    labelled category ``Personen`` of 4 classes), as ``dataset[0]``.

    Example
    -------
    >>> g = SyntheticAIFB()[0]
    >>> len(g.canonical_etypes), g.num_edges()
    (90, 48810)
    """

    predict_category, num_classes = "Personen", 4

    def __init__(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        sizes = [1000, 2000, 2500, 700, 500, 400, 162]
        ntypes = [self.predict_category] + [f"type{t}" for t in range(1, len(sizes))]
        per_relation = rng.multinomial(48810 // 2, rng.dirichlet(np.full(45, 0.5)))
        edges = {}
        for rel, count in enumerate(per_relation):
            src, dst = rng.choice(len(ntypes), 2)
            u = rng.integers(0, sizes[src], count)
            v = rng.integers(0, sizes[dst], count)
            edges[(ntypes[src], f"rel{rel}", ntypes[dst])] = (u, v)
            edges[(ntypes[dst], f"rev-rel{rel}", ntypes[src])] = (v, u)
        self.graph = dgl.heterograph(edges, dict(zip(ntypes, sizes)))
        labels = rng.integers(0, self.num_classes, sizes[0])
        self.graph.nodes[self.predict_category].data["label"] = th.from_numpy(labels)

    def __getitem__(self, i):
        return self.graph


def prepare_hetero_graph_simplified(g: dgl.DGLHeteroGraph):
    ntype_pointer = np.cumsum([0] + [g.number_of_nodes(ntype) for ntype in g.ntypes])

    etype_pointer = [0]
    for etype in g.canonical_etypes:
        g_sub = g[etype]
        etype_pointer.append(etype_pointer[-1] + g_sub.num_edges())

    return {
        "ntype_node_pointer": ntype_pointer,
        "etype_edge_pointer": etype_pointer,
    }


def test_hetero_csr_to_ell3d():
    dataset = SyntheticAIFB()
    g = dataset[0]
    type_pointers = prepare_hetero_graph_simplified(g)
    ntype_node_pointer = type_pointers["ntype_node_pointer"]
    etype_edge_pointer = type_pointers["etype_edge_pointer"]
    csf_indptr_0 = [0]
    csf_indices_0 = []
    csf_indptr_1 = [th.tensor([0], dtype=th.int32)]
    csf_indices_1 = []
    for etype in g.canonical_etypes:
        src_type, _, dst_type = etype
        etype_id = g.get_etype_id(etype)
        src_type_id = g.get_ntype_id(src_type)
        dst_type_id = g.get_ntype_id(dst_type)
        g_sub = g[etype]
        # print(g_sub)
        m, n = g_sub.num_dst_nodes(), g_sub.num_src_nodes()
        indptr, indices, _ = g_sub.adj_tensors(fmt="csc")
        # print(indptr, indices)
        csf_indptr_0.append(csf_indptr_0[-1] + m)
        csf_indices_0.append(ntype_node_pointer[src_type_id] + th.arange(m, dtype=th.int32))
        csf_indptr_1.append(csf_indptr_1[-1][-1] + indptr[1:])
        csf_indices_1.append(ntype_node_pointer[dst_type_id] + indices)

    csf_indptr_0 = th.tensor(csf_indptr_0, dtype=th.int32)
    csf_indices_0 = th.cat(csf_indices_0, dim=-1)
    csf_indptr_1 = th.cat(csf_indptr_1, dim=-1)
    csf_indices_1 = th.cat(csf_indices_1, dim=-1)

    dev = tvm.cpu(0)
    csf_indptr_0_nd = tvm.runtime.tensor(csf_indptr_0.int(), device=dev)
    csf_indices_0_nd = tvm.runtime.tensor(csf_indices_0.int(), device=dev)
    csf_indptr_1_nd = tvm.runtime.tensor(csf_indptr_1.int(), device=dev)
    csf_indices_1_nd = tvm.runtime.tensor(csf_indices_1.int(), device=dev)

    indptr, row_indices, col_indices, mask = csf_to_ell3d(
        csf_indptr_0_nd,
        csf_indices_0_nd,
        csf_indptr_1_nd,
        csf_indices_1_nd,
        [8, 4, 2, 1],
        [1, 2, 4, 8],
    )
    _check_ell3d(csf_indptr_0.numpy(), csf_indices_0.numpy(), csf_indptr_1.numpy(),  # added
                 csf_indices_1.numpy(), [8, 4, 2, 1], [1, 2, 4, 8],
                 indptr, row_indices, col_indices, mask)


def _check_ell3d(indptr_0, indices_0, indptr_1, indices_1, rows_bkt, cols_bkt,
                 indptr, row_indices, col_indices, mask):
    """Every bucket has SparseTIR's shapes, padding is column 0 with mask 0, and the
    (relation, row, column) triples are exactly those of the CSF input."""
    rel_of_row = np.repeat(np.arange(indptr_0.size - 1), np.diff(indptr_0))
    degree = np.diff(indptr_1)
    expected = np.stack([np.repeat(rel_of_row, degree), np.repeat(indices_0, degree),
                         indices_1], axis=1)
    got = []
    for b, (rows, cols) in enumerate(zip(rows_bkt, cols_bkt)):
        ip, ri, ci, m = (a[b].numpy() for a in (indptr, row_indices, col_indices, mask))
        assert ip.shape == (indptr_0.size,) and ri.shape == (ip[-1], rows)
        assert ci.shape == m.shape == (ip[-1], rows, cols)
        assert not ci[m == 0].any()
        rel = np.repeat(np.arange(ip.size - 1), np.diff(ip))
        block, slot, col = np.nonzero(m)
        got.append(np.stack([rel[block], ri[block, slot], ci[block, slot, col]], axis=1))
    got = np.concatenate(got)
    assert np.array_equal(got[np.lexsort(got.T[::-1])], expected[np.lexsort(expected.T[::-1])])


if __name__ == "__main__":
    test_column_part_hyb()
    test_condense()
    test_hetero_csr_to_ell3d()
