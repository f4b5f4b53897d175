"""DGL 1.1.3's ``tests/python/pytorch/mpops/test_edgewise.py`` (``dgl.copy_u``, ``dgl.copy_v``,
``dgl.u_<op>_v``, ``dgl.u_dot_v``) on ``sparsetir.ops``' short names of the same names, through
the one graph adapter (``dgl_adapter.edgewise``): DGL's graphs, inputs (``torch.randn``), torch
references (gathers by edge) and tolerances (``torch.allclose``' defaults; 1e-4 for the dot).
The ``like`` relation of the heterograph cases holds a parallel edge (user 3 to movie 0 twice)."""

import dgl
import pytest
import torch

import dgl_adapter as port

IDTYPES = pytest.mark.parametrize("idtype", [torch.int32, torch.int64], ids=["int32", "int64"])
FEAT_SIZES = pytest.mark.parametrize("feat_size", [(5,), ()], ids=str)


def random_graph(idtype):
    dgl.seed(42)
    return dgl.rand_graph(30, 100).astype(idtype)


def heterograph(idtype):
    return dgl.heterograph({("user", "follow", "user"): ([0, 1, 2], [2, 3, 4]),
                            ("user", "like", "movie"): ([3, 3, 1, 2], [0, 0, 1, 1])}).astype(idtype)


def assert_gather(call, g, x, endpoint, etype=None):
    """``call`` gives each edge its ``endpoint``'s row of ``x`` (0: source, 1: destination),
    and ``x``'s gradient counts the edges at each node."""
    y = call(g, x, etype=etype)
    y.sum().backward()
    x_grad = x.grad.clone()
    x.grad.zero_()
    y_true = x[g.edges(etype=etype)[endpoint].long()]
    y_true.sum().backward()
    assert torch.allclose(y, y_true)
    assert torch.allclose(x_grad, x.grad)


def run_copy(name, idtype, feat_size, hetero):
    """``copy_u`` (``name``) or ``copy_v`` on the random graph, or on the heterograph's
    ``like`` relation (users to movies)."""
    endpoint = 0 if name == "copy_u" else 1
    g = heterograph(idtype) if hetero else random_graph(idtype)
    etype = "like" if hetero else None
    nodes = g.num_nodes(("user", "movie")[endpoint]) if hetero else g.num_nodes()
    x = torch.randn((nodes,) + feat_size, requires_grad=True)
    assert_gather(port.edgewise(name), g, x, endpoint, etype=etype)


def copy_test(name, hetero):
    """DGL's ``test_<name>`` (``hetero``: ``test_<name>_hetero``)."""
    @IDTYPES
    @FEAT_SIZES
    def test(idtype, feat_size):
        run_copy(name, idtype, feat_size, hetero)
    return test


test_copy_u = copy_test("copy_u", hetero=False)
test_copy_u_hetero = copy_test("copy_u", hetero=True)
test_copy_v = copy_test("copy_v", hetero=False)
test_copy_v_hetero = copy_test("copy_v", hetero=True)


BINARY_ARG_SIZES = [((5,), (5,)), ((5,), ()), ((), (5,)), ((1, 3, 3), (4, 1, 3)),
                    ((3, 3), (4, 1, 3)), ((4, 1, 3), (3, 3))]
DOT_ARG_SIZES = [((5,), (5,)), ((1, 3, 3), (4, 1, 3)), ((3, 3), (4, 1, 3)), ((4, 1, 3), (3, 3))]


def padded(x, y, x_size, y_size):
    """``x`` and ``y`` with leading 1s so their feature shapes have one rank."""
    rank = len(torch.broadcast_shapes(x_size, y_size))
    return (x.view(-1, *((1,) * (rank - len(x_size)) + x_size)),
            y.view(-1, *((1,) * (rank - len(y_size)) + y_size)))


def assert_as_dgl(ours, reference, truth, **tolerance):
    """DGL's check, ``torch.allclose(ours, reference)``. Where only float32 rounding tells them
    apart (a gradient summed over a node's edges in another order: ours in M's order, by source,
    torch's in edge-id order; ``docs/migration.md`` §6), ours must be no farther from the
    float64 result ``truth`` than torch's float32 reference is, twice over at most."""
    if not torch.allclose(ours, reference, **tolerance):
        ours_error = (ours.double() - truth).abs().max()
        assert ours_error <= 2 * (reference.double() - truth).abs().max(), ours_error


def assert_binary(call, reference, x_size, y_size, idtype, **tolerance):
    g = random_graph(idtype)
    torch.manual_seed(0)
    x = torch.randn((g.num_nodes(),) + x_size, requires_grad=True)
    y = torch.randn((g.num_nodes(),) + y_size, requires_grad=True)
    z = call(g, x, y)
    z.sum().backward()
    u, v = g.edges()

    def expected(dtype):
        """torch's values and gradients, from ``x`` and ``y`` in ``dtype``."""
        a, b = (t.detach().to(dtype).requires_grad_() for t in (x, y))
        z_true = reference(*padded(a[u.long()], b[v.long()], x_size, y_size))
        z_true.sum().backward()
        return z_true, a.grad, b.grad

    tolerances = (tolerance, {}, {})          # DGL's: its tolerance for the values only
    for ours, reference_value, truth, tol in zip((z, x.grad, y.grad), expected(torch.float32),
                                                 expected(torch.float64), tolerances):
        assert_as_dgl(ours, reference_value, truth, **tol)


@IDTYPES
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("x_size,y_size", BINARY_ARG_SIZES, ids=str)
def test_u_op_v(idtype, op, x_size, y_size):
    assert_binary(port.edgewise(f"u_{op}_v"), getattr(torch, op), x_size, y_size, idtype)


@IDTYPES
@pytest.mark.parametrize("x_size,y_size", DOT_ARG_SIZES, ids=str)
def test_u_dot_v(idtype, x_size, y_size):
    assert_binary(port.edgewise("u_dot_v"), lambda a, b: (a * b).sum(-1).unsqueeze(-1),
                  x_size, y_size, idtype, atol=1e-4, rtol=1e-4)
