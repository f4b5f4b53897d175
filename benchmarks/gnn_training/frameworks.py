"""The GNN benchmark's contenders: how each framework holds the graph, makes and calls each
model's layers, takes the canonical weights, and which of its calls are sparse operators.

- ``ours``: ``sparsetir.nn`` layers on a ``sparsetir.ops.SparseMatrix`` (rows destinations);
- ``dgl``: ``dgl.nn.pytorch`` layers (DGL 1.1.3) on a ``dgl.graph`` with an edge ``u -> v`` for
  every stored ``(v, u)``, in CSR order;
- ``pyg``: ``torch_geometric.nn`` layers (PyG 2.8.1) on ``edge_index = [sources; destinations]``
  in the same order;
- ``ours_bf16``: ``ours`` with each forward and its loss under ``torch.autocast("cpu",
  dtype=torch.bfloat16)`` (mixed precision: bfloat16 products and aggregations, float32
  weights and optimizer);
- ``ours_compiled``: ``ours`` with the network under ``torch.compile`` (inductor, torch's
  default), its sparse operators the custom operators ``torch.ops.sparsetir.*``;
- ``pyg_compiled``: ``pyg`` with the network under ``torch.compile`` the same way (PyG's
  ``MessagePassing`` layers are written to compile; where one cannot be traced whole, dynamo
  splits the network at a graph break and runs that piece eagerly: ``compile_report`` says
  where).

The variants (``VARIANTS``: the two of ``ours`` and ``pyg_compiled``) are checked against
their eager contender (``eager``: ``ours`` or ``pyg``) in float32: the worker trains both from
the same weights and their losses over the warm-up epochs must agree within the variant's
``loss_rtol`` before any epoch is timed. A compiled variant is compared with ``ours_compiled``
(``COUNTERPART``), every other contender with eager ``ours``.

All three get the same edges in the same order, so edge data (RGCN's relations and
normalisers) line up. ``ours`` and ``dgl`` share layer code: sparsetir's layers take DGL's
constructor arguments and parameter names, so each layer is made and called the same way and
``load`` is ``load_state_dict`` on the canonical names. PyG's layers, and how the canonical
weights map onto them (``PYG_NAMES``; PyG's ``Linear.weight`` is ``(out, in)``):

- GCN: ``GCNConv(add_self_loops=False, normalize=True, cached=True)`` on the graph that already
  has self-loops; ``lin.weight = weight.T``, ``bias = bias``. (PyG normalises by the in-degree
  at both ends, DGL's ``norm="both"`` by the source's out-degree and the destination's
  in-degree: the same on these symmetric graphs.)
- GraphSAGE: ``SAGEConv(aggr="mean")``; ``lin_l.weight = fc_neigh.weight``, ``lin_r.weight =
  fc_self.weight``, ``lin_l.bias = fc_self.bias`` (DGL keeps the bias on the self term, PyG on
  the neighbour term: the sum is the same).
- GAT: ``GATConv(heads=4, concat=True, add_self_loops=False)``, output viewed as
  ``(n, heads, out)``; ``lin.weight = fc.weight``, ``att_src = attn_l``, ``att_dst = attn_r``,
  ``bias = bias``.
- RGCN: ``RGCNConv(num_bases=3, aggr="mean")`` (mean per relation = DGL's sum with
  ``norm = 1 / |N_r(v)|``); ``weight = linear_r.W``, ``comp = linear_r.coeff``, ``root =
  loop_weight``, ``bias = h_bias``.

Example
-------
>>> fw = load_framework("dgl")
>>> inputs = fw.inputs(task)            # the graph, made once (float32 edge data by default)
>>> net = Net(MODELS["gcn"], fw, 1433, 7)
>>> fw.load(net, canonical_weights(MODELS["gcn"], 1433, 7))
>>> logits = net(inputs, torch.from_numpy(task.features))
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from . import models, tasks

NAMES = ("ours", "ours_bf16", "ours_compiled", "dgl", "pyg", "pyg_compiled")
VARIANTS = ("ours_bf16", "ours_compiled", "pyg_compiled")
COUNTERPART = {"pyg_compiled": "ours_compiled"}
"""The row of ours that a contender's ``ours_over_this_*`` columns divide by (default ``ours``)."""

# canonical (DGL) suffix -> (PyG suffix, transpose?)
PYG_NAMES = {
    "gcn": {"weight": ("lin.weight", True), "bias": ("bias", False)},
    "sage": {"fc_neigh.weight": ("lin_l.weight", False), "fc_self.bias": ("lin_l.bias", False),
             "fc_self.weight": ("lin_r.weight", False)},
    "gat": {"fc.weight": ("lin.weight", False), "attn_l": ("att_src", False),
            "attn_r": ("att_dst", False), "bias": ("bias", False)},
    "rgcn": {"linear_r.W": ("weight", False), "linear_r.coeff": ("comp", False),
             "loop_weight": ("root", False), "h_bias": ("bias", False)},
}


def autograd_function_names(prefix: str) -> set:
    """Names of the ``torch.autograd.Function`` classes made so far in modules whose name
    starts with ``prefix`` (the profiler records each call under its class name); classes made
    on first use count once they exist."""
    names, pending = set(), [torch.autograd.Function]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if cls.__module__.startswith(prefix):
            names.add(cls.__name__)
    return names


class Framework:
    """What every contender does alike unless it says otherwise: the network runs as it is,
    eagerly, in the dtype it was given."""

    name = ""
    compiles = False
    """Whether the network runs under ``torch.compile`` (its first epoch compiles)."""
    sparse_calls_visible = True
    """Whether the profiler sees each sparse operator as a call of its own (``sparse_time``
    measures the sparse share only then)."""

    def prepare(self, net):
        """The callable that runs ``net`` (``net`` itself, or ``net`` compiled)."""
        return net

    def forward_context(self):
        """The context each forward and loss run in."""
        return contextlib.nullcontext()


class DglStyle(Framework):
    """Layers with DGL's API (``dgl.nn.pytorch`` or ``sparsetir.nn``, module ``nn``)."""

    def __init__(self, nn):
        self.nn = nn

    def layer(self, spec, i: int, o: int):
        if spec.name == "gcn":
            return self.nn.GraphConv(i, o, norm="both")
        if spec.name == "sage":
            return self.nn.SAGEConv(i, o, "mean")
        if spec.name == "gat":
            return self.nn.GATConv(i, o, spec.heads)
        if spec.name == "rgcn":
            return self.nn.RelGraphConv(i, o, tasks.NUM_RELATIONS,
                                        regularizer="basis", num_bases=models.NUM_BASES,
                                        self_loop=True)
        raise KeyError(spec.name)

    def call(self, spec, layer, inputs, h):
        if spec.name == "rgcn":
            return layer(inputs["graph"], h, inputs["etypes"], inputs["norm"])
        return layer(inputs["graph"], h)

    def edge_inputs(self, task, dtype) -> dict:
        return {"etypes": torch.from_numpy(task.etypes),
                "norm": torch.from_numpy(task.relation_norm).to(dtype).unsqueeze(1)}

    def load(self, net, weights: dict) -> None:
        net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()},
                            strict=True)

    def mark_sparse_calls(self, net) -> None:
        """Nothing to mark: the profiler names each autograd Function call already."""


class Dgl(DglStyle):
    name = "dgl"

    def __init__(self):
        import dgl
        import dgl.nn.pytorch

        super().__init__(dgl.nn.pytorch)
        self.dgl = dgl

    def inputs(self, task, dtype=torch.float32) -> dict:
        sources = torch.from_numpy(task.adjacency.indices.astype(np.int64))
        graph = self.dgl.graph((sources, torch.from_numpy(task.rows)),
                               num_nodes=task.num_nodes)
        return {"graph": graph, **self.edge_inputs(task, dtype)}

    def sparse_operator_names(self) -> set:
        return autograd_function_names("dgl.backend.pytorch.sparse")


class Ours(DglStyle):
    name = "ours"

    def __init__(self):
        import sparsetir.nn
        import sparsetir.ops

        super().__init__(sparsetir.nn)
        self.ops = sparsetir.ops

    def inputs(self, task, dtype=torch.float32) -> dict:
        A = task.adjacency
        ones = torch.ones(A.nnz, dtype=dtype)
        graph = self.ops.SparseMatrix.from_csr(A.indptr, A.indices, ones, A.shape)
        return {"graph": graph, **self.edge_inputs(task, dtype)}

    def sparse_operator_names(self) -> set:
        return autograd_function_names("sparsetir.ops")


class OursBf16(Ours):
    """``ours`` under ``torch.autocast("cpu", dtype=torch.bfloat16)``; its first losses within
    ``loss_rtol`` of ``ours`` in float32 (the first, from the same weights, differs by the
    rounding of the bfloat16 products: about 1e-4 relative on GCN/cora)."""

    name = "ours_bf16"
    eager = "ours"
    loss_rtol = 2e-2

    def forward_context(self):
        return torch.autocast("cpu", dtype=torch.bfloat16)


class Compiled:
    """A variant that runs the network under ``torch.compile(net)`` (inductor); its first
    losses within ``loss_rtol`` of its eager contender's (the same operators; inductor's fused
    dense code rounds a little differently). Mixed in before the eager contender's class."""

    compiles = True
    loss_rtol = 1e-4

    def prepare(self, net):
        return torch.compile(net)

    @staticmethod
    def compile_report() -> dict:
        """What dynamo met while compiling in this process so far: ``graph_breaks`` (how many
        times it split the network; 0: it traced every forward whole, as
        ``torch.compile(fullgraph=True)`` requires) and, when it did split it, a ``note``
        naming each distinct reason by its first line."""
        breaks = torch._dynamo.utils.counters["graph_break"]  # pylint: disable=protected-access
        report = {"graph_breaks": sum(breaks.values())}
        if breaks:
            reasons = dict.fromkeys(reason.splitlines()[0] for reason in breaks)
            report["note"] = (f"not fullgraph: {report['graph_breaks']} graph breaks while "
                              f"compiling ({'; '.join(reasons)})")
        return report


class OursCompiled(Compiled, Ours):
    """``ours`` under ``torch.compile(net)``, its sparse operators ``torch.ops.sparsetir.*``."""

    name = "ours_compiled"
    eager = "ours"

    def sparse_operator_names(self) -> set:
        """The custom operators a compiled graph calls (``sparsetir::gspmm``, ... and their
        backward operators): the profiler names each call so."""
        from sparsetir.ops import custom_ops  # pylint: disable=import-outside-toplevel
        CustomOpDef = torch._library.custom_ops.CustomOpDef  # pylint: disable=protected-access
        return {op._qualname for op in vars(custom_ops).values()  # pylint: disable=protected-access
                if isinstance(op, CustomOpDef)}


class PyG(Framework):
    name = "pyg"
    MARK = "pyg::message_passing"

    def __init__(self):
        import torch_geometric.nn

        self.nn = torch_geometric.nn

    def inputs(self, task, dtype=torch.float32) -> dict:
        sources = torch.from_numpy(task.adjacency.indices.astype(np.int64))
        return {"edge_index": torch.stack([sources, torch.from_numpy(task.rows)]),
                "edge_type": torch.from_numpy(task.etypes)}

    def layer(self, spec, i: int, o: int):
        if spec.name == "gcn":
            return self.nn.GCNConv(i, o, add_self_loops=False, normalize=True, cached=True)
        if spec.name == "sage":
            return self.nn.SAGEConv(i, o, aggr="mean")
        if spec.name == "gat":
            return self.nn.GATConv(i, o, heads=spec.heads, concat=True, add_self_loops=False)
        if spec.name == "rgcn":
            return self.nn.RGCNConv(i, o, tasks.NUM_RELATIONS,
                                    num_bases=models.NUM_BASES, aggr="mean")
        raise KeyError(spec.name)

    def call(self, spec, layer, inputs, h):
        if spec.name == "rgcn":
            return layer(h, inputs["edge_index"], inputs["edge_type"])
        out = layer(h, inputs["edge_index"])
        return out.view(out.shape[0], spec.heads, -1) if spec.name == "gat" else out

    def load(self, net, weights: dict) -> None:
        names = PYG_NAMES[net.spec.name]
        state = {}
        for full, value in weights.items():
            layers, k, suffix = full.split(".", 2)
            target, transpose = names[suffix]
            value = value.T if transpose else value
            state[f"{layers}.{k}.{target}"] = torch.from_numpy(value.copy())
        net.load_state_dict(state, strict=True)

    def mark_sparse_calls(self, net) -> None:
        """Record every layer's message passing (``propagate``: gather, message, aggregate;
        ``edge_updater``: GAT's attention logits and softmax) as one profiler range."""
        for layer in net.layers:
            for attr in ("propagate", "edge_updater"):
                setattr(layer, attr, _marked(getattr(layer, attr), self.MARK))

    def sparse_operator_names(self) -> set:
        return {self.MARK}


class PyGCompiled(Compiled, PyG):
    """``pyg`` under ``torch.compile(net)``. Its sparse time is not measured: inductor fuses
    PyG's gathers and scatters with the dense code around them, and dynamo ignores the
    ``record_function`` ranges that mark eager PyG's ``propagate``: no call of its own is the
    message passing."""

    name = "pyg_compiled"
    eager = "pyg"
    sparse_calls_visible = False


def _marked(method, label: str):
    def marked(*args, **kwargs):
        with torch.profiler.record_function(label):
            return method(*args, **kwargs)
    return marked


def load_framework(name: str):
    """Contender ``name``'s framework; ImportError when its library is not installed."""
    return {"ours": Ours, "ours_bf16": OursBf16, "ours_compiled": OursCompiled, "dgl": Dgl,
            "pyg": PyG, "pyg_compiled": PyGCompiled}[name]()

