"""Graph neural network layers for torch on ``sparsetir.ops``, with DGL's arguments, defaults
and parameter names: a DGL layer's ``state_dict()`` loads into the layer of the same name.

A layer takes the graph as a ``sparsetir.ops.SparseMatrix`` ``M`` of shape
``(num_dst, num_src)``: row ``v`` holds the sources of ``v``'s in-edges (DGL's graph ``g``
becomes the matrix whose entry ``(v, u)`` is stored for each edge ``u -> v``), and per-edge
tensors (``edge_weight``, ``etypes``, attention) follow ``M``'s CSR order. Only ``M``'s pattern
is read, as DGL reads a graph. The sparse work runs in ``sparsetir.ops`` (with autograd), the
dense work in torch; the layers follow ``.double()``.

- ``GraphConv``: GCN convolution (``norm="both"``, ``"right"``, ``"left"``, ``"none"``).
- ``SAGEConv``: GraphSAGE with the ``"mean"``, ``"gcn"`` and ``"pool"`` aggregators.
- ``GATConv``: multi-head graph attention.
- ``RelGraphConv``: R-GCN with ``"basis"`` and ``"bdd"`` regularizers, on ``TypedLinear``.

Example
-------
>>> import scipy.sparse, torch
>>> from sparsetir.ops import SparseMatrix
>>> from sparsetir.nn import GraphConv
>>> A = scipy.sparse.random(8, 8, density=0.3, format="csr", dtype="float32", random_state=0)
>>> A = A + scipy.sparse.identity(8, dtype="float32", format="csr")     # self-loops
>>> M = SparseMatrix(A)
>>> conv = GraphConv(5, 3)
>>> X = torch.randn(8, 5)
>>> conv(M, X).shape
torch.Size([8, 3])
>>> import dgl                                          # the same layer in DGL
>>> dgl_conv = dgl.nn.GraphConv(5, 3)
>>> conv.load_state_dict(dgl_conv.state_dict())
<All keys matched successfully>
>>> g = dgl.graph((A.tocoo().col, A.tocoo().row), num_nodes=8)   # M's rows: destinations
>>> torch.allclose(conv(M, X), dgl_conv(g, X), atol=1e-5)
True
"""

from .gatconv import GATConv
from .graphconv import GraphConv
from .linear import TypedLinear
from .relgraphconv import RelGraphConv
from .sageconv import SAGEConv

__all__ = ["GATConv", "GraphConv", "RelGraphConv", "SAGEConv", "TypedLinear"]
