"""What each rank runs in the multi-process tests (``launch.run`` starts them; a module's
top-level functions, so that spawned processes can import them). Each compares its own rows
with the single-process ``sparsetir.ops`` result and raises on a difference.

Example
-------
>>> # run(check_operators, 2, args=(A, parts_by_method))
"""

import numpy as np
import torch

from sparsetir import ops
from sparsetir.distributed import DistSparseMatrix, dist_sddmm, dist_spmm

FEATS = 8
RTOL, ATOL = 1e-5, 1e-5


def reference(A, seed: int = 0) -> dict:
    """Single-process ``sparsetir.ops`` results and gradients on the whole matrix ``A``."""
    rng = np.random.default_rng(seed)
    n = A.shape[0]
    data = {name: torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
            for name, shape in (("X", (n, FEATS)), ("Y", (n, FEATS)), ("W", (n, FEATS)),
                                ("E", (A.nnz,)))}
    X = data["X"].clone().requires_grad_()
    values = torch.from_numpy(A.data.copy()).requires_grad_()
    M = ops.SparseMatrix.from_csr(A.indptr, A.indices, values, A.shape)
    spmm = ops.spmm(M, X)
    (spmm * data["W"]).sum().backward()
    out = dict(data, spmm=spmm.detach(), spmm_grad_x=X.grad, spmm_grad_values=values.grad)
    X = data["X"].clone().requires_grad_()
    Y = data["Y"].clone().requires_grad_()
    sddmm = ops.sddmm(ops.SparseMatrix(A), X, Y)
    (sddmm * data["E"]).sum().backward()
    out.update(sddmm=sddmm.detach(), sddmm_grad_x=X.grad, sddmm_grad_y=Y.grad)
    return out


def _close(name, got, want, rank, what):
    if not np.allclose(got.detach().numpy(), want.detach().numpy(), rtol=RTOL, atol=ATOL):
        worst = float((got - want).abs().max())
        raise AssertionError(f"rank {rank}, {what}: {name} differs (max |diff| {worst})")


def check_operators(rank, world_size, A, parts_by_method):
    """``dist_spmm`` and ``dist_sddmm``, values and gradients (X, Y and the edge values), for
    every partition method and strategy; then the layers (``check_layers``)."""
    ref = reference(A)
    for method, parts in parts_by_method.items():
        part = parts[rank]
        rows = torch.from_numpy(part.owned)
        edges = torch.from_numpy(part.global_edges)
        for strategy in ("broadcast", "halo"):
            what = f"{method}/{strategy}"
            values = torch.from_numpy(A.data[part.global_edges]).requires_grad_()
            DM = DistSparseMatrix(part, values=values, strategy=strategy)
            X = ref["X"][rows].clone().requires_grad_()
            Y = dist_spmm(DM, X)
            _close("spmm", Y, ref["spmm"][rows], rank, what)
            (Y * ref["W"][rows]).sum().backward()
            _close("spmm grad X", X.grad, ref["spmm_grad_x"][rows], rank, what)
            _close("spmm grad values", values.grad, ref["spmm_grad_values"][edges], rank, what)
            plain = DistSparseMatrix(part)           # stored values, no gradient asked
            _close("spmm (stored values)", dist_spmm(plain, ref["X"][rows], strategy),
                   ref["spmm"][rows], rank, what)
            X = ref["X"][rows].clone().requires_grad_()
            Yl = ref["Y"][rows].clone().requires_grad_()
            S = dist_sddmm(DM, X, Yl)
            _close("sddmm", S, ref["sddmm"][edges], rank, what)
            (S * ref["E"][edges]).sum().backward()
            _close("sddmm grad X", X.grad, ref["sddmm_grad_x"][rows], rank, what)
            _close("sddmm grad Y", Yl.grad, ref["sddmm_grad_y"][rows], rank, what)
    check_layers(rank, world_size, A, parts_by_method["metis"])


def train_example_rank(rank, world_size, example_path, folder, epochs, report):
    """``examples/distributed_gcn.py``'s rank, loaded from its path, halo strategy."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    spec = importlib.util.spec_from_file_location("distributed_gcn", example_path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.spawned_rank(rank, world_size, folder, epochs, "halo", report)


def check_layers(rank, world_size, A, parts):
    """``SAGEConv`` (mean, gcn) and ``GraphConv`` with edge weights on this rank's
    ``DistSparseMatrix`` equal the layers on the whole graph: outputs, input and edge-weight
    gradients (the layers on the local graph: ``layer_workers``)."""
    from sparsetir.nn import GraphConv, SAGEConv  # pylint: disable=import-outside-toplevel
    ref = reference(A)
    part = parts[rank]
    rows, edges = torch.from_numpy(part.owned), torch.from_numpy(part.global_edges)
    M = ops.SparseMatrix(A)
    weights = torch.from_numpy(A.data.copy())
    for strategy in ("broadcast", "halo"):
        DM = DistSparseMatrix(part, strategy=strategy)
        for make in (lambda: SAGEConv(FEATS, 4, "mean"), lambda: SAGEConv(FEATS, 4, "gcn"),
                     lambda: GraphConv(FEATS, 4, allow_zero_in_degree=True)):
            torch.manual_seed(0)
            layer = make()
            kwargs_full, kwargs_local = {}, {}
            if isinstance(layer, GraphConv):
                full_w = weights.clone().requires_grad_()
                local_w = weights[edges].clone().requires_grad_()
                kwargs_full, kwargs_local = {"edge_weight": full_w}, {"edge_weight": local_w}
            X = ref["X"].clone().requires_grad_()
            want = layer(M, X, **kwargs_full)
            (want * ref["W"][:, :4]).sum().backward()
            X_local = ref["X"][rows].clone().requires_grad_()
            got = layer(DM, X_local, **kwargs_local)
            what = f"{strategy}/{type(layer).__name__}"
            _close("layer output", got, want[rows], rank, what)
            (got * ref["W"][rows, :4]).sum().backward()
            _close("layer grad X", X_local.grad, X.grad[rows], rank, what)
            if kwargs_local:
                _close("edge_weight grad", local_w.grad, full_w.grad[edges], rank, what)


def hang_or_die(rank, world_size, A, parts, behaviour, report):
    """Rank 1 hangs (``behaviour="hang"``) or exits (``"die"``) after making its matrix; the
    others call ``dist_spmm`` and write the error they get to ``report/error-<rank>.txt``."""
    import os  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel
    DM = DistSparseMatrix(parts[rank], strategy="broadcast")
    if rank == 1:
        if behaviour == "die":
            os._exit(3)
        time.sleep(600)
    try:
        dist_spmm(DM, torch.zeros(parts[rank].num_owned, FEATS))
    except Exception as err:  # pylint: disable=broad-except
        with open(os.path.join(report, f"error-{rank}.txt"), "w") as out:
            out.write(f"{type(err).__name__}: {err}")


def report_threads(rank, world_size, report):
    """Write this rank's kernel threads and torch's to ``report/threads-<rank>.txt``."""
    import os  # pylint: disable=import-outside-toplevel
    from sparsetir.runtime.threads import thread_count  # pylint: disable=import-outside-toplevel
    del world_size
    with open(os.path.join(report, f"threads-{rank}.txt"), "w") as out:
        out.write(f"{thread_count()} {torch.get_num_threads()}")


def spmm_on_parts(rank, world_size, parts, widths, strategy="halo"):
    """``dist_spmm`` of this rank's part of ``parts`` with ``widths[rank]`` features."""
    del world_size
    DM = DistSparseMatrix(parts[rank], strategy=strategy)
    dist_spmm(DM, torch.zeros(parts[rank].num_owned, widths[rank],
                              dtype=getattr(torch, str(parts[rank].blocks[0].data.dtype))))


def widths_agreed_in_the_exchange(rank, world_size, A, parts, widths_by_rank, report):
    """Halo ``dist_spmm`` calls, the ``k``-th with ``widths_by_rank[rank][k]`` features, each
    checked against scipy; a call the ranks disagree on must
    raise ``SparseTIRValueError`` on this rank, and the next agreed call must still compute.
    Writes the explicit checks made and the refusals' messages to ``report/agree-<rank>.txt``."""
    import os  # pylint: disable=import-outside-toplevel
    from sparsetir.errors import SparseTIRValueError  # pylint: disable=import-outside-toplevel
    del world_size
    part = parts[rank]
    DM = DistSparseMatrix(part, strategy="halo")
    rows = part.owned
    lines = []
    for call, width in enumerate(widths_by_rank[rank]):
        X = np.random.default_rng(call).standard_normal((A.shape[0], width)).astype(A.dtype)
        agreed = len({w[call] for w in widths_by_rank}) == 1
        try:
            Y = dist_spmm(DM, torch.from_numpy(X[rows]))
        except SparseTIRValueError as err:
            if agreed:
                raise
            lines.append(f"call {call} refused: {err}")
            continue
        if not agreed:
            raise AssertionError(f"rank {rank}: call {call} computed although the ranks "
                                 "passed rows of different formats")
        want = (A @ X)[rows]
        if not np.allclose(Y.numpy(), want, rtol=RTOL, atol=ATOL):
            raise AssertionError(f"rank {rank}: call {call} (width {width}) differs from scipy")
    lines.append(f"explicit checks {DM.exchange('halo').explicit_checks}")
    with open(os.path.join(report, f"agree-{rank}.txt"), "w") as out:
        out.write("\n".join(lines))


def gather_loop_with_a_raise(rank, world_size, A, parts, widths, bad_call):
    """The loop of ``exchange.py``'s docstring over ``DM.exchange("halo").gather(X_local)``,
    ``widths[k]`` features at call ``k``, ``X_local`` requiring grad; at call ``bad_call`` rank
    0's loop raises on its local piece (and the error is caught). Every other call on every
    rank must equal scipy's."""
    del world_size
    part = parts[rank]
    DM = DistSparseMatrix(part, strategy="halo")
    exchange = DM.exchange("halo")
    for call, width in enumerate(widths):
        X = np.random.default_rng(call).standard_normal((A.shape[0], width)).astype(A.dtype)
        X_local = torch.from_numpy(X[part.owned]).requires_grad_()
        Y = torch.zeros(part.num_owned, width)
        try:
            for q, X_q in exchange.gather(X_local):
                if call == bad_call and rank == 0 and q == rank:
                    raise KeyError("the caller's own error")
                Y += ops.spmm(DM.block(q, "halo"), X_q.detach())
        except KeyError:
            continue
        if not np.allclose(Y.numpy(), (A @ X)[part.owned], rtol=RTOL, atol=ATOL):
            raise AssertionError(f"rank {rank}: call {call} (width {width}) differs from scipy")


def dtypes_refused_together(rank, world_size, A, parts, dtypes_by_rank, strategy, op, report):
    """``op`` (``"spmm"``: ``dist_spmm``; ``"sddmm"``: ``dist_sddmm``, its exchanged ``Y``
    in the call's dtype; ``"gspmm_mul"``, ``"gspmm_max"``: ``ops.gspmm`` on the matrix, the
    exchanged ``lhs_data``) calls whose exchanged rows are ``dtypes_by_rank[rank][k]`` at call
    ``k``: the matrix's dtype on every rank computes (checked against scipy); any other must
    raise on this rank (ranks that disagree: the exchange's ``SparseTIRValueError``; all in
    one other dtype: ``SparseTIRTypeError``), and the next call must still compute. Writes
    each refusal's type to ``report/dtypes-<rank>.txt``."""
    import os  # pylint: disable=import-outside-toplevel
    from sparsetir.errors import (  # pylint: disable=import-outside-toplevel
        SparseTIRTypeError, SparseTIRValueError)
    del world_size
    part = parts[rank]
    DM = DistSparseMatrix(part, strategy=strategy)
    rows = torch.from_numpy(np.asarray(part.owned))
    lines = []
    for call, dtype in enumerate(dtypes_by_rank[rank]):
        X = torch.from_numpy(np.random.default_rng(call).standard_normal((A.shape[0], 4)))
        try:
            sent, want = X[rows].to(getattr(torch, dtype)), None
            if op == "spmm":
                result = dist_spmm(DM, sent)
                want = (A @ X.numpy())[np.asarray(part.owned)]
            elif op == "sddmm":
                result = dist_sddmm(DM, X[rows].float(), sent)
            elif op == "gspmm_mul":                    # u_mul_e_sum: the exchanged lhs_data
                result = ops.gspmm(DM, "mul", "sum", sent, torch.ones(DM.nnz))
            else:                                      # copy_u_max: the local graph's gather
                result = ops.gspmm(DM, "copy_lhs", "max", sent, None)
        except (SparseTIRTypeError, SparseTIRValueError) as err:
            lines.append(f"call {call} refused: {type(err).__name__}")
            continue
        if dtype != str(A.dtype):
            raise AssertionError(f"rank {rank}: call {call} computed on {dtype} rows")
        if want is not None and not np.allclose(result.numpy(), want, rtol=RTOL, atol=ATOL):
            raise AssertionError(f"rank {rank}: call {call} differs from scipy")
        lines.append(f"call {call} computed")
    with open(os.path.join(report, f"dtypes-{rank}.txt"), "w") as out:
        out.write("\n".join(lines))
