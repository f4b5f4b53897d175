"""The issue's acceptance test: a two-layer GCN on Cora (with self-loops) trained 100 epochs
with ``sparsetir.nn.GraphConv`` follows the loss curve of the same model written with dense
torch ops from the same initial weights, within 1e-4 relative at every epoch. The reference
passes messages as PyG does, over the edge list with ``index_select`` and ``index_add_`` (a
dense n x n adjacency gives the same curve, at ten times the test's time). Features are seeded bags of words like Cora's (width 1433, about
18 words a node), the 7 labels a seeded linear function of the neighbourhood's features (so
that there is something to learn), dropout 0, Adam with lr 0.01."""

import numpy as np
import scipy.sparse
import torch

from sparsetir.data import load_graph
from sparsetir.nn import GraphConv
from sparsetir.ops import SparseMatrix

EPOCHS, HIDDEN, CLASSES, WIDTH = 100, 16, 7, 1433


class GCN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GraphConv(WIDTH, HIDDEN, activation=torch.relu)
        self.conv2 = GraphConv(HIDDEN, CLASSES)

    def forward(self, M, x):
        return self.conv2(M, self.conv1(M, x))


class DenseGCN(torch.nn.Module):
    """The same model, each layer ``D^-1/2 (A + I) D^-1/2 X W + b`` summed over the edge list."""

    def __init__(self, gcn, adjacency):
        super().__init__()
        coo = adjacency.tocoo()
        self.src = torch.from_numpy(coo.col.astype(np.int64))
        self.dst = torch.from_numpy(coo.row.astype(np.int64))
        scale = torch.from_numpy(np.asarray(adjacency.sum(axis=1)).ravel()) ** -0.5
        self.edge_scale = (scale[self.dst] * scale[self.src]).unsqueeze(1)
        self.params = torch.nn.ParameterList(
            torch.nn.Parameter(p.detach().clone()) for p in
            (gcn.conv1.weight, gcn.conv1.bias, gcn.conv2.weight, gcn.conv2.bias))

    def aggregate(self, h):
        messages = h.index_select(0, self.src) * self.edge_scale
        return torch.zeros_like(h).index_add_(0, self.dst, messages)

    def forward(self, x):
        w1, b1, w2, b2 = self.params
        h = torch.relu(self.aggregate(x @ w1) + b1)
        return self.aggregate(h @ w2) + b2


def losses(model, call, x, labels):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    curve = []
    for _ in range(EPOCHS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(call(x), labels)
        loss.backward()
        optimizer.step()
        curve.append(loss.item())
    return np.array(curve)


def test_gcn_on_cora_follows_the_dense_loss_curve():
    A = load_graph("cora")
    A = (A + scipy.sparse.identity(A.shape[0], dtype=np.float32, format="csr")).tocsr()
    M = SparseMatrix(A)
    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(A.shape[0], WIDTH, generator=gen) < 18 / WIDTH).float()
    projection = torch.randn(WIDTH, CLASSES, generator=gen).numpy()
    labels = torch.from_numpy((A @ (x.numpy() @ projection)).argmax(axis=1))
    torch.manual_seed(0)
    gcn = GCN()
    dense = DenseGCN(gcn, A)
    ours = losses(gcn, lambda features: gcn(M, features), x, labels)
    reference = losses(dense, dense, x, labels)
    assert reference[-1] < 0.25 * reference[0]        # it learns
    np.testing.assert_allclose(ours, reference, rtol=1e-4)
