"""DGL 1.1.3's ``tests/python/common/ops/test_edge_softmax.py`` on ``sparsetir.ops.edge_softmax``,
through the one graph adapter (``dgl_adapter``), with DGL's graphs, inputs, references and
tolerance (``allclose`` at 1e-4).

DGL's file defines ``test_edge_softmax`` twice; pytest runs only the second (a heterograph whose
``plays`` and ``wishes`` relations make parallel edges once homogeneous). Both run here: the
first as ``test_edge_softmax_clique`` (a softmax over the rows or columns of a dense clique),
the second under its name, where the heterograph's dict of logits is one softmax over the
relations' union, compared with DGL's on ``dgl.to_homogeneous`` as DGL compares it. The second
is parametrized, as DGL's, by the clique fixture it does not read; it runs once per ``norm_by``
and id type here.
"""

import math

import dgl
import numpy as np
import pytest
import torch

import dgl_adapter as port
from graph_cases import get_cases

IDTYPES = pytest.mark.parametrize("idtype", [torch.int32, torch.int64], ids=["int32", "int64"])
FEAT_SIZE = 2


def allclose(a, b):
    return torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("norm_by", ["src", "dst"])
@pytest.mark.parametrize("shp", [(1,), (1, 3), (3, 4, 5)], ids=str)
@IDTYPES
def test_edge_softmax_clique(norm_by, shp, idtype):
    (g,) = get_cases(["clique"])
    g = g.astype(idtype)
    edata = torch.from_numpy(np.random.default_rng(0).random((g.num_edges(), *shp)))
    e1 = edata.clone().requires_grad_()
    score1 = port.edge_softmax(g, e1, norm_by=norm_by)
    score1.sum().backward()

    e2 = edata.clone().requires_grad_()
    e2_2d = e2.reshape(g.num_src_nodes(), g.num_dst_nodes(), *e2.shape[1:])
    score2 = torch.softmax(e2_2d, 1 if norm_by == "src" else 0).reshape(-1, *e2.shape[1:])
    assert allclose(score1, score2)
    score2.sum().backward()
    assert allclose(e2.grad, e1.grad)


def test_edge_softmax_unidirectional():
    g = dgl.heterograph({
        ("A", "AB", "B"): ([1, 2, 3, 1, 2, 3, 1, 2, 3], [0, 0, 0, 1, 1, 1, 2, 2, 2]),
        ("B", "BB", "B"): ([0, 1, 2, 0, 1, 2, 0, 1, 2], [0, 0, 0, 1, 1, 1, 2, 2, 2])})
    result = port.edge_softmax(g, {"AB": torch.ones(9) * 2, "BB": torch.ones(9)})
    ab, bb = result["A", "AB", "B"], result["B", "BB", "B"]
    assert allclose(ab, torch.zeros_like(ab) + math.exp(2) / ((math.exp(2) + math.exp(1)) * 3))
    assert allclose(bb, torch.zeros_like(bb) + math.exp(1) / ((math.exp(2) + math.exp(1)) * 3))


def create_test_heterograph(idtype):
    """3 users, 2 games, 2 developers; ``plays`` and ``wishes`` share three user-game pairs."""
    return dgl.heterograph({
        ("user", "follows", "user"): ([0, 1, 2, 1, 1], [0, 0, 1, 1, 2]),
        ("user", "plays", "game"): ([0, 1, 2, 1], [0, 0, 1, 1]),
        ("user", "wishes", "game"): ([0, 1, 1], [0, 0, 1]),
        ("developer", "develops", "game"): ([0, 1, 0], [0, 1, 1])}, idtype=idtype)


@pytest.mark.parametrize("norm_by", ["src", "dst"])
@IDTYPES
def test_edge_softmax(norm_by, idtype):
    g = create_test_heterograph(idtype)
    torch.manual_seed(0)
    x1, x2, x3, x4 = (torch.randn(g.num_edges(name), FEAT_SIZE)
                      for name in ("plays", "follows", "develops", "wishes"))
    hm_g = dgl.to_homogeneous(g)
    assert dgl.to_simple(hm_g).num_edges() < hm_g.num_edges()      # a multigraph
    hm_e = torch.cat((x3, x2, x1, x4), 0).requires_grad_()
    hm_g.edata["score"] = port.edge_softmax(hm_g, hm_e, norm_by=norm_by)
    ht_g = dgl.to_heterogeneous(hm_g, g.ntypes, g.etypes)
    r1, r2, r3, r4 = (ht_g.edata["score"][name] for name in (
        ("user", "plays", "game"), ("user", "follows", "user"),
        ("developer", "develops", "game"), ("user", "wishes", "game")))
    (r1.sum() + r2.sum()).backward()
    grad_edata_hm = hm_e.grad

    e1, e2, e3, e4 = (x.clone().requires_grad_() for x in (x1, x2, x3, x4))
    score = port.edge_softmax(g, {("user", "follows", "user"): e2, ("user", "plays", "game"): e1,
                                  ("user", "wishes", "game"): e4,
                                  ("developer", "develops", "game"): e3}, norm_by=norm_by)
    r5, r6, r7, r8 = (score[name] for name in (
        ("user", "plays", "game"), ("user", "follows", "user"),
        ("developer", "develops", "game"), ("user", "wishes", "game")))
    (r5.sum() + r6.sum()).backward()
    grad_edata_ht = torch.cat((e3.grad, e2.grad, e1.grad, e4.grad), 0)
    for ours, homogeneous in ((r1, r5), (r2, r6), (r3, r7), (r4, r8)):
        assert allclose(ours, homogeneous)
    assert allclose(grad_edata_hm, grad_edata_ht)
    reference_e = hm_e.detach().clone().requires_grad_()                     # added: DGL's
    reference = dgl.ops.edge_softmax(hm_g, reference_e, norm_by=norm_by)
    assert allclose(hm_g.edata["score"], reference)
    reference[:r3.shape[0] + r2.shape[0] + r1.shape[0]][r3.shape[0]:].sum().backward()
    assert allclose(grad_edata_hm, reference_e.grad)
