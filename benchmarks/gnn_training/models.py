"""The four models of the GNN benchmark, their canonical initial weights, and one network class
that runs them on any framework of ``frameworks.py``.

- ``gcn``: GCN, 2 layers ``in -> 16 -> classes`` (Kipf and Welling's width), ReLU between,
  symmetric normalisation ``D^-1/2 (A + I) D^-1/2`` (DGL ``norm="both"``) on the graph with
  self-loops.
- ``sage``: GraphSAGE, 3 layers ``in -> 128 -> 128 -> classes``, mean aggregation, ReLU between,
  on the graph without self-loops (the layer has its own self term; a node with no neighbours
  aggregates 0).
- ``gat``: GAT, 2 layers of 4 heads, 16 features per head: ``in -> 4 x 16`` (heads
  concatenated, ELU), ``64 -> 4 x classes`` (heads averaged); negative slope 0.2, on the graph
  with self-loops.
- ``rgcn``: RGCN, 2 layers ``in -> 16 -> classes``, ReLU between, ``tasks.NUM_RELATIONS``
  relations with a basis decomposition of 3 bases, a self-loop weight and a bias; each edge's
  message scaled by ``1 / |N_r(v)|`` (mean per relation, RGCN's normaliser), on the graph
  without self-loops.

Dropout is 0 everywhere. The canonical weights (``canonical_weights``) are numpy arrays under
DGL's parameter names and shapes (``layers.<k>.<DGL name>``), each drawn from its own seeded
generator (seed, CRC32 of the name): matrices Glorot-uniform, vectors and biases uniform in
``[-0.1, 0.1)`` (not 0, so that a bias that is loaded into the wrong place shows). DGL's and
sparsetir's layers take them as they are; ``frameworks.PyG`` maps them onto PyG's names.

Example
-------
>>> spec = MODELS["gcn"]
>>> spec.dims(1433, 7)
[(1433, 16), (16, 7)]
>>> sorted(canonical_weights(spec, 1433, 7))
['layers.0.bias', 'layers.0.weight', 'layers.1.bias', 'layers.1.weight']
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch

from . import tasks

NUM_BASES = 3


@dataclass(frozen=True)
class ModelSpec:
    """A model: ``name``, a one-line ``title``, its depth and width, heads, and whether it runs
    on the graph with self-loops."""

    name: str
    title: str
    num_layers: int
    hidden: int
    self_loops: bool
    heads: int = 1

    def dims(self, in_feats: int, classes: int) -> list:
        """``(in, out)`` of each layer; ``out`` per head, ``in`` all heads together."""
        widths = [in_feats] + [self.hidden] * (self.num_layers - 1) + [classes]
        ins = [widths[0]] + [w * self.heads for w in widths[1:-1]]
        return list(zip(ins, widths[1:]))

    def shapes(self, i: int, o: int) -> dict:
        """DGL's parameter names and shapes of one layer ``i -> o``."""
        if self.name == "gcn":
            return {"weight": (i, o), "bias": (o,)}
        if self.name == "sage":
            return {"fc_self.weight": (o, i), "fc_self.bias": (o,), "fc_neigh.weight": (o, i)}
        if self.name == "gat":
            h = self.heads
            return {"fc.weight": (h * o, i), "attn_l": (1, h, o), "attn_r": (1, h, o),
                    "bias": (h * o,)}
        if self.name == "rgcn":
            return {"linear_r.W": (NUM_BASES, i, o),
                    "linear_r.coeff": (tasks.NUM_RELATIONS, NUM_BASES),
                    "h_bias": (o,), "loop_weight": (i, o)}
        raise KeyError(self.name)


MODELS = {
    "gcn": ModelSpec("gcn", "GCN, 2 layers, hidden 16, norm both, self-loops", 2, 16, True),
    "sage": ModelSpec("sage", "GraphSAGE, 3 layers, hidden 128, mean aggregation", 3, 128,
                      False),
    "gat": ModelSpec("gat", "GAT, 2 layers, 4 heads x 16, self-loops", 2, 16, True, heads=4),
    "rgcn": ModelSpec("rgcn", f"RGCN, 2 layers, hidden 16, {tasks.NUM_RELATIONS} synthetic "
                      f"relations, {NUM_BASES} bases, mean per relation", 2, 16, False),
}


def _draw(name: str, shape: tuple, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    if len(shape) >= 2 and name.rsplit(".", 1)[-1] not in ("attn_l", "attn_r"):
        fan_in, fan_out = shape[-2], shape[-1]
        bound = np.sqrt(6.0 / (fan_in + fan_out))
    else:
        bound = 0.1
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def canonical_weights(spec: ModelSpec, in_feats: int, classes: int, seed: int = 0) -> dict:
    """Every parameter of ``spec``'s network, by DGL's name (``layers.<k>.<name>``)."""
    weights = {}
    for k, (i, o) in enumerate(spec.dims(in_feats, classes)):
        for name, shape in spec.shapes(i, o).items():
            full = f"layers.{k}.{name}"
            weights[full] = _draw(full, shape, seed)
    return weights


class Net(torch.nn.Module):
    """``spec``'s network built from ``framework``'s layers (``frameworks``): each layer,
    then (except after the last) the activation: ReLU, or for GAT the heads concatenated and
    ELU; GAT's last layer averages its heads.

    ``forward(inputs, x)``: ``inputs`` from ``framework.inputs(task)``, ``x`` node features.
    """

    def __init__(self, spec: ModelSpec, framework, in_feats: int, classes: int):
        super().__init__()
        self.spec, self.framework = spec, framework
        self.layers = torch.nn.ModuleList(
            framework.layer(spec, i, o) for i, o in spec.dims(in_feats, classes))

    def forward(self, inputs, x):
        h = x
        last = len(self.layers) - 1
        for k, layer in enumerate(self.layers):
            h = self.framework.call(self.spec, layer, inputs, h)
            if self.spec.heads > 1:
                h = h.mean(1) if k == last else h.flatten(1)
            if k != last:
                h = torch.nn.functional.elu(h) if self.spec.name == "gat" else torch.relu(h)
        return h
