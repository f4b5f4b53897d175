"""``partition``, ``Part``, ``save`` / ``load``: invariants, the per-part aggregation check
ported from DGL's ``tests/distributed/test_partition.py`` (``check_partition``), and refusals."""

import hashlib
import json

import numpy as np
import pytest
import scipy.sparse

from dist_graphs import small_graph
from sparsetir import ops
from sparsetir.distributed import load, partition, save
from sparsetir.errors import PartitionFileError, SparseTIRTypeError, SparseTIRValueError

METHODS = ("contiguous", "metis")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("num_parts", [1, 2, 3, 4])
def test_invariants(method, num_parts):
    A = small_graph()
    parts = partition(A, num_parts, method)
    owned = np.concatenate([p.owned for p in parts])
    assert np.array_equal(np.sort(owned), np.arange(A.shape[0]))      # every row owned once
    assert all(p.num_owned > 0 for p in parts)
    assert sum(p.nnz for p in parts) == A.nnz
    edges = np.concatenate([p.global_edges for p in parts])
    assert np.array_equal(np.sort(edges), np.arange(A.nnz))           # every edge once
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    for p in parts:
        assert np.all(np.diff(p.owned) > 0)
        assert p.block_offsets()[-1] == p.nnz
        assert set(rows[p.global_edges]) <= set(p.owned.tolist())
        referenced = set(A.indices[p.global_edges].tolist())
        remote = referenced - set(p.owned.tolist())
        halo = set()
        for q, block in enumerate(p.blocks):
            assert block.num_cols == parts[q].num_owned
            global_cols = parts[q].owned[block.indices]
            piece = p.global_edges[p.block_offsets()[q]:p.block_offsets()[q + 1]]
            assert np.array_equal(global_cols, A.indices[piece])     # block q = q's columns
            assert np.allclose(block.data, A.data[piece])
            if q != p.rank:
                halo |= set(parts[q].owned[p.halo(q)].tolist())
        assert halo == remote                  # halo rows: exactly the remote columns used
        assert np.array_equal(p.in_degrees(), np.diff(A.indptr)[p.owned])
        assert np.array_equal(p.out_degrees,
                              np.bincount(A.indices, minlength=A.shape[0])[p.owned])


def test_contiguous_balances_nonzeros():
    A = small_graph(200, 0.05)
    parts = partition(A, 4)
    for p in parts:
        assert np.all(np.diff(p.owned) == 1)
    counts = [p.nnz + p.num_owned for p in parts]
    assert max(counts) - min(counts) <= 2 * np.diff(A.indptr).max() + 2


def test_metis_cuts_fewer_edges_than_contiguous_on_a_shuffled_mesh():
    grid = scipy.sparse.diags([1, 1, 1], [-1, 0, 1], shape=(20, 20), dtype=np.float32)
    mesh = scipy.sparse.kronsum(grid, grid).tocsr().astype(np.float32)
    perm = np.random.default_rng(0).permutation(mesh.shape[0])
    shuffled = mesh[perm][:, perm].tocsr()

    def cut(parts):
        return sum(p.nnz - p.blocks[p.rank].nnz for p in parts)
    assert cut(partition(shuffled, 4, "metis")) < cut(partition(shuffled, 4, "contiguous"))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("num_parts", [1, 4])
def test_check_partition_ported_from_dgl(method, num_parts):
    """Aggregating over each part's blocks, with the halo rows fetched from their owners,
    equals aggregating over the full graph, on the owned nodes."""
    A = small_graph(120, 0.05, seed=1)
    X = np.random.default_rng(0).standard_normal((A.shape[0], 16)).astype(np.float32)
    full = ops.spmm(ops.SparseMatrix(A), X)
    parts = partition(A, num_parts, method)
    for p in parts:
        local = np.zeros((p.num_owned, 16), np.float32)
        for q, block in enumerate(p.blocks):
            halo = p.halo(q)
            if block.nnz:
                compact = ops.SparseMatrix.from_csr(
                    block.indptr, np.searchsorted(halo, block.indices), block.data,
                    (p.num_owned, halo.size))
                local += ops.spmm(compact, X[parts[q].owned[halo]])
        np.testing.assert_allclose(local, full[p.owned], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(local, (A @ X)[p.owned], rtol=1e-5, atol=1e-5)


def test_save_load_round_trip(tmp_path):
    A = small_graph()
    parts = partition(A, 3, "metis")
    save(parts, tmp_path)
    for p in parts:
        back = load(tmp_path, p.rank)
        assert (back.rank, back.num_parts, back.num_nodes, back.nnz_total) == \
            (p.rank, p.num_parts, p.num_nodes, p.nnz_total)
        for name in ("owned", "global_edges", "out_degrees"):
            assert np.array_equal(getattr(back, name), getattr(p, name))
        for b, c in zip(back.blocks, p.blocks):
            assert b.num_cols == c.num_cols
            for name in ("indptr", "indices", "data"):
                assert np.array_equal(getattr(b, name), getattr(c, name))
                assert getattr(b, name).dtype == getattr(c, name).dtype


def test_load_refuses_corrupt_truncated_foreign_and_missing(tmp_path):
    A = small_graph()
    other_values = A.copy()
    other_values.data *= 2
    save(partition(A, 2), tmp_path / "a")
    save(partition(other_values, 2), tmp_path / "b")   # same shapes, another partition id
    part_file = tmp_path / "a" / "part-1.npz"
    good = part_file.read_bytes()
    corrupt = bytearray(good)
    corrupt[len(corrupt) // 2] ^= 0xFF
    part_file.write_bytes(bytes(corrupt))
    with pytest.raises(PartitionFileError, match="SHA-256"):
        load(tmp_path / "a", 1)
    part_file.write_bytes(good[:-10])
    with pytest.raises(PartitionFileError, match="truncated"):
        load(tmp_path / "a", 1)
    part_file.write_bytes((tmp_path / "b" / "part-1.npz").read_bytes())
    with pytest.raises(PartitionFileError):
        load(tmp_path / "a", 1)
    # a foreign file whose description entry was patched: the stored partition id refuses it
    description = json.loads((tmp_path / "a" / "partition.json").read_text())
    other = json.loads((tmp_path / "b" / "partition.json").read_text())
    description["parts"][1] = other["parts"][1]
    (tmp_path / "a" / "partition.json").write_text(json.dumps(description))
    with pytest.raises(PartitionFileError, match="belongs to partition"):
        load(tmp_path / "a", 1)
    with pytest.raises(PartitionFileError, match="rank 2 is not a part"):
        load(tmp_path / "a", 2)
    part_file.unlink()
    with pytest.raises(PartitionFileError, match="cannot read part file"):
        load(tmp_path / "a", 1)
    with pytest.raises(PartitionFileError, match="cannot read"):
        load(tmp_path / "missing", 0)
    (tmp_path / "a" / "partition.json").write_text("{not json")
    with pytest.raises(PartitionFileError, match="not valid JSON"):
        load(tmp_path / "a", 0)


@pytest.mark.parametrize("change, message", [
    (lambda a: a["indices0"].__setitem__(-1, 10**6), r"indices\[\d+\] = 1000000 is out of range"),
    (lambda a: a["indptr0"].__setitem__(0, -5), "indptr"),
    (lambda a: a.__setitem__("indices0", a["indices0"].astype(np.float32)),
     "block 0 is not integer indptr and indices"),
    (lambda a: a.__setitem__("data0", a["data0"][:-1]), "data0 has"),
    (lambda a: a.__setitem__("out_degrees", a["out_degrees"][:-1]), "out_degrees is not one"),
    (lambda a: a.__setitem__("global_edges", -a["global_edges"] - 1), "global_edges is not"),
    (lambda a: a.pop("global_edges"), "global_edges"),
    (lambda a: a.__setitem__("block_cols", a["block_cols"][:1]), "out of bounds")],
    ids=["index", "indptr", "float indices", "short data", "short degrees", "edge ids",
         "no edge ids", "short block_cols"])
def test_load_checks_what_a_part_file_holds_whatever_its_checksum(tmp_path, change, message):
    """A part file changed and its checksum written again (by hand, or by a faulty writer)
    passes the checksum: ``load`` returned such parts (indices out of range, short arrays) or
    raised a bare ``KeyError``/``IndexError``."""
    save(partition(small_graph(), 2), tmp_path)
    part_file = tmp_path / "part-0.npz"
    with np.load(part_file) as stored:
        arrays = {name: stored[name].copy() for name in stored.files}
    change(arrays)
    np.savez(part_file, **arrays)
    payload = part_file.read_bytes()
    description = json.loads((tmp_path / "partition.json").read_text())
    description["parts"][0].update(bytes=len(payload),
                                   sha256=hashlib.sha256(payload).hexdigest())
    (tmp_path / "partition.json").write_text(json.dumps(description))
    with pytest.raises(PartitionFileError, match=message):
        load(tmp_path, 0)


def test_partition_refusals():
    A = small_graph(12, 0.3)
    with pytest.raises(SparseTIRValueError, match="square"):
        partition(A[:5], 2)
    with pytest.raises(SparseTIRTypeError, match="scipy sparse"):
        partition(A.toarray(), 2)
    with pytest.raises(SparseTIRValueError, match="num_parts"):
        partition(A, 0)
    with pytest.raises(SparseTIRValueError, match="exceeds"):
        partition(A, 13)
    with pytest.raises(SparseTIRValueError, match="method"):
        partition(A, 2, "random")
    with pytest.raises(SparseTIRTypeError, match="float32 or float64"):
        partition(A.astype(np.int32), 2)


def test_partition_refuses_malformed_csr():
    """scipy builds these without a full check; partitioned, they read out of bounds or give
    another graph than the arrays say."""
    data, n = np.ones(3, np.float32), 3
    for indices, indptr, problem in (([0, 7, 1], [0, 1, 2, 3], "indices must be < 3"),
                                     ([0, -1, 1], [0, 1, 2, 3], "indices must be >= 0"),
                                     ([0, 1, 1], [0, 2, 1, 3], "indptr must be a non-decreasing")):
        A = scipy.sparse.csr_matrix((data, np.array(indices, np.int32),
                                     np.array(indptr, np.int32)), shape=(n, n))
        with pytest.raises(SparseTIRValueError, match=f"A is not a valid CSR matrix.*{problem}"):
            partition(A, 2)


def test_save_refuses_parts_of_different_partitions(tmp_path):
    A = small_graph(12, 0.3)
    with pytest.raises(SparseTIRValueError, match="rank order"):
        save([partition(A, 2)[0], partition(A, 3)[1]], tmp_path)
    contiguous, metis = partition(A, 2), partition(A, 2, "metis")
    assert not np.array_equal(contiguous[0].owned, metis[0].owned)
    with pytest.raises(SparseTIRValueError, match="cover the 12 nodes once"):
        save([contiguous[0], metis[1]], tmp_path)
    assert not list(tmp_path.iterdir())


def test_save_refuses_parts_of_two_matrices_whose_rows_coincide(tmp_path):
    """The same pattern with other values, or other columns: each part's owned rows cover
    the nodes, but the folder would be a partition of no matrix (was accepted)."""
    A = small_graph(12, 0.3)
    other_values = A.copy()
    other_values.data *= 10
    other_columns = scipy.sparse.csr_matrix((A.data, (A.indices + 1) % 12, A.indptr),
                                            shape=A.shape)
    for B in (other_values, other_columns):
        with pytest.raises(SparseTIRValueError, match="partition_id differ"):
            save([partition(A, 2)[0], partition(B, 2)[1]], tmp_path)
    assert partition(A, 2)[1].partition_id == partition(A.copy(), 2)[0].partition_id
    assert partition(A, 2)[0].partition_id != partition(A, 3)[0].partition_id
    assert not list(tmp_path.iterdir())


def test_parallel_edges_are_refused_by_name():
    """Single-process operators count each parallel edge (copy_u_sum, degrees), a part held
    one entry: distributed results differed from one process's without an error."""
    coo = scipy.sparse.coo_matrix((np.float32([1, 2, 3]), ([0, 0, 2], [1, 1, 0])), shape=(3, 3))
    csr = scipy.sparse.csr_matrix((np.float32([1, 2, 3]), np.int32([1, 1, 0]),
                                   np.int32([0, 2, 2, 3])), shape=(3, 3))
    for A in (coo, csr):
        with pytest.raises(SparseTIRValueError, match=r"entry \(0, 1\) more than once"):
            partition(A, 2)
    merged = coo.tocsr()
    merged.sum_duplicates()
    assert partition(merged, 2)[0].nnz == 1


@pytest.mark.parametrize("field, bad", [("row", [0, 3]), ("row", [0, -1]), ("col", [7, 0]),
                                        ("col", [0, -3])])
def test_coo_coordinates_outside_the_shape_are_refused(field, bad):
    """scipy converts COO without a check: rows out of range crashed the process (segfault,
    heap corruption) or lost an entry; columns gave numpy's bare errors."""
    coords = {"row": [0, 1], "col": [1, 0]}
    A = scipy.sparse.coo_matrix((np.float32([1, 2]), (coords["row"], coords["col"])),
                                shape=(3, 3))
    getattr(A, field)[:] = bad
    with pytest.raises(SparseTIRValueError, match=rf"A\.{field}\[\d\] = -?\d is outside "
                                                  r"\[0, 3\)"):
        partition(A, 2)


@pytest.mark.parametrize("edit, problem", [
    (lambda d: d.pop("partition_id"), "'partition_id' is None, not a string"),
    (lambda d: d["parts"][1].pop("bytes"), r"parts\[1\]: 'bytes' is None"),
    (lambda d: d["parts"][1].update(file=7), r"parts\[1\]: 'file' is 7, not a string"),
    (lambda d: d["parts"].__setitem__(1, None), r"parts\[1\]: None is not an object"),
    (lambda d: d["parts"][1].update(file="../part-1.npz"), "is not a name in the folder"),
    (lambda d: d["parts"][1].update(file="/etc/passwd"), "is not a name in the folder"),
])
def test_a_description_with_wrong_fields_is_refused_by_name(tmp_path, edit, problem):
    """Missing keys and wrong types gave KeyError or TypeError; a file outside the folder
    was read."""
    save(partition(small_graph(12, 0.3), 2), tmp_path)
    path = tmp_path / "partition.json"
    description = json.loads(path.read_text())
    edit(description)
    path.write_text(json.dumps(description))
    with pytest.raises(PartitionFileError, match=problem):
        load(tmp_path, 1)
