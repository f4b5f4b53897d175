"""The GNN benchmark's pieces (``benchmarks/gnn*.py``), cheaply: no timing, no full run.

- the canonical weights give the same initial logits, loss and first-epoch gradients on DGL,
  PyG and sparsetir.nn for every model, on a tiny graph with an isolated node (float64; 6
  classes, so that GAT's output layer broadcasts 4 heads x 6 features, citeseer's shape);
- the graph preparation (symmetric, loop-free, sorted) and RGCN's per-relation normaliser
  against brute force;
- the profiler rule: a DGL epoch's sparse time is positive and below the epoch's, and nothing
  is sparse when no operator is named;
- the loss check marks a contender whose float64 losses drift beyond 1e-4 as an error, and
  the ratios and table follow;
- the variants (ours under bfloat16 autocast, ours and PyG under ``torch.compile``) train the
  same model as their eager contender in float32 within their tolerance, and a variant that
  does not is refused before timing; a compiled network's graph breaks are counted and named,
  and a network that ``torch.compile`` cannot compile is reported ``refused``, not a crash;
- ``ours_compiled`` and ``pyg_compiled`` are set side by side with their compile times;
- the command line: ``--quick`` is GCN on cora, options override the preset.
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import gnn  # noqa: E402
from gnn_training import frameworks, models, results, sparse_time, tasks  # noqa: E402
from gnn_training import worker  # noqa: E402
from gnn_training.worker import Training  # noqa: E402

WIDTH, CLASSES = 6, 6   # GAT's output layer: 4 heads x 6 classes, as on citeseer


@pytest.fixture(scope="module")
def tiny_graph():
    """A random symmetric graph of 12 nodes, node 11 isolated."""
    rng = np.random.default_rng(7)
    dense = rng.random((12, 12)) < 0.3
    dense[11, :] = dense[:, 11] = False
    return tasks.symmetric_without_loops(scipy.sparse.csr_matrix(dense.astype(np.float32)))


def _installed(name):
    module = {"dgl": "dgl", "pyg": "torch_geometric", "ours": "sparsetir.nn"}[name]
    return importlib.util.find_spec(module.split(".")[0]) is not None


def _first_epoch(name, model, A):
    spec = models.MODELS[model]
    task = tasks.seeded_task("tiny", A, WIDTH, CLASSES, spec.self_loops)
    run = Training(spec, frameworks.load_framework(name), task, torch.float64)
    logits = run.logits()
    loss = torch.nn.functional.cross_entropy(logits, run.labels)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in run.net.named_parameters()}
    return logits.detach(), loss.item(), grads


@pytest.mark.parametrize("model", list(models.MODELS))
@pytest.mark.parametrize("name", ["pyg", "ours"])
def test_same_initial_model_as_dgl(tiny_graph, model, name):
    if not _installed(name):
        pytest.skip(f"{name} is not installed")
    ref_logits, ref_loss, ref_grads = _first_epoch("dgl", model, tiny_graph)
    logits, loss, grads = _first_epoch(name, model, tiny_graph)
    np.testing.assert_allclose(logits.numpy(), ref_logits.numpy(), rtol=1e-10, atol=1e-12)
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    if name == "ours":   # same parameter names as DGL's: every gradient compares
        assert grads.keys() == ref_grads.keys()
        for key, grad in grads.items():
            np.testing.assert_allclose(grad.numpy(), ref_grads[key].numpy(), rtol=1e-9,
                                       atol=1e-12, err_msg=key)


def test_pyg_weight_map_covers_every_parameter():
    for model, spec in models.MODELS.items():
        names = {k.split(".", 2)[2] for k in models.canonical_weights(spec, WIDTH, CLASSES)}
        assert names == set(frameworks.PYG_NAMES[model]), model


def test_canonical_weights_are_seeded_and_nonzero():
    spec = models.MODELS["rgcn"]
    first = models.canonical_weights(spec, WIDTH, CLASSES, seed=1)
    again = models.canonical_weights(spec, WIDTH, CLASSES, seed=1)
    other = models.canonical_weights(spec, WIDTH, CLASSES, seed=2)
    for key, value in first.items():
        assert value.dtype == np.float32 and np.all(value != 0), key
        np.testing.assert_array_equal(value, again[key])
        assert not np.array_equal(value, other[key]), key
    assert first["layers.0.linear_r.W"].shape == (models.NUM_BASES, WIDTH, 16)


def test_graph_preparation(tiny_graph):
    rng = np.random.default_rng(3)
    raw = scipy.sparse.random(30, 30, density=0.1, random_state=rng, format="csr") * 3
    A = tasks.symmetric_without_loops(raw)
    dense = (raw.toarray() != 0) | (raw.toarray().T != 0)
    np.fill_diagonal(dense, False)
    np.testing.assert_array_equal(A.toarray(), dense.astype(np.float32))
    assert A.has_sorted_indices and A.indices.dtype == np.int32
    B = tasks.with_self_loops(A)
    np.testing.assert_array_equal(B.toarray(), dense + np.eye(30))
    etypes = rng.integers(0, tasks.NUM_RELATIONS, A.nnz)
    norm = tasks.relation_norm(A, etypes)
    rows = np.repeat(np.arange(30), np.diff(A.indptr))
    for e in range(A.nnz):
        same = np.sum((rows == rows[e]) & (etypes == etypes[e]))
        assert norm[e] == pytest.approx(1 / same)


@pytest.mark.skipif(not _installed("dgl"), reason="dgl is not installed")
def test_profiler_rule_counts_dgl_sparse_calls(tiny_graph):
    spec = models.MODELS["gat"]
    framework = frameworks.load_framework("dgl")
    task = tasks.seeded_task("tiny", tiny_graph, WIDTH, CLASSES, spec.self_loops)
    run = Training(spec, framework, task)
    names = framework.sparse_operator_names()
    assert {"GSpMM", "GSDDMM", "EdgeSoftmax"} <= names
    sparse_s, total_s = sparse_time.sparse_seconds(run.epoch, names, epochs=1)
    assert 0 < sparse_s < total_s
    assert sparse_time.sparse_seconds(run.epoch, set(), epochs=1)[0] == 0


@pytest.mark.parametrize("name", frameworks.VARIANTS)
def test_variants_train_the_eager_model(tiny_graph, name):
    if not _installed(name.split("_")[0]):
        pytest.skip(f"{name} is not installed")
    spec = models.MODELS["sage"]
    task = tasks.seeded_task("tiny", tiny_graph, WIDTH, CLASSES, spec.self_loops)
    framework = frameworks.load_framework(name)
    torch._dynamo.utils.counters.clear()
    run = Training(spec, framework, task)
    losses = [run.epoch() for _ in range(3)]
    worst, note = worker.eager_check(framework, spec, task, losses, 3)
    assert note == "" and worst <= framework.loss_rtol
    if name == "ours_bf16":          # the products do run in bfloat16: the losses differ
        assert worst > 0
        with framework.forward_context():
            assert run.net.layers[0].fc_neigh(run.features).dtype == torch.bfloat16
    else:                            # compiled whole: GraphSAGE has no graph break on either
        assert run.model is not run.net and framework.compiles
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
        assert framework.compile_report() == {"graph_breaks": 0}
        if name == "ours_compiled":
            assert "sparsetir::gspmm" in framework.sparse_operator_names()
        else:                        # fused by inductor: no sparse time to measure
            assert not framework.sparse_calls_visible
    worst, note = worker.eager_check(framework, spec, task, [x * 1.05 for x in losses], 3)
    assert "NOT THE SAME MODEL: loss at epoch 1" in note and worst > 0.04
    assert f"eager float32 {framework.eager}'s" in note


def test_compile_report_counts_and_names_graph_breaks():
    def split(x):                    # .item() in the middle: dynamo breaks the graph there
        scale = x.sum().item()
        return torch.relu(x) * scale

    torch._dynamo.utils.counters.clear()
    assert frameworks.Compiled.compile_report() == {"graph_breaks": 0}
    x = torch.randn(5)
    torch.testing.assert_close(torch.compile(split)(x), split(x))
    report = frameworks.Compiled.compile_report()
    assert report["graph_breaks"] >= 1
    assert report["note"].startswith(f"not fullgraph: {report['graph_breaks']} graph breaks")
    assert "Tensor.item()" in report["note"] and "\n" not in report["note"]


@pytest.mark.skipif(not _installed("pyg"), reason="pyg is not installed")
def test_a_network_torch_compile_refuses_is_reported_refused(monkeypatch, tmp_path):
    def refusing_backend(graph_module, example_inputs):
        raise RuntimeError("this backend compiles nothing")

    monkeypatch.setattr(frameworks.PyGCompiled, "prepare",
                        lambda self, net: torch.compile(net, backend=refusing_backend))
    tasks.prepare("cora", tmp_path)
    args = worker.parse_args(["--contender", "pyg_compiled", "--model", "gcn", "--graph", "cora",
                              "--cache", str(tmp_path), "--warmup", "1", "--epochs", "1",
                              "--profile-epochs", "0", "--check-epochs", "0"])
    fields = worker.outcome(args)
    assert fields == {"status": "refused", "note": "torch.compile refused: RuntimeError: this "
                      "backend compiles nothing"}
    json.dumps(fields)


def _record(contender, condition="idle", epoch_ms=10.0, losses=(1.0, 0.9, 0.8), live=4.0):
    return {"contender": contender, "model": "gcn", "graph": "cora", "condition": condition,
            "status": "ok", "epoch_ms": epoch_ms, "sparse_ms": epoch_ms / 2, "peak_mib": 8.0,
            "live_peak_mib": live if condition == "idle" else "",
            "final_loss": 0.5, "check_losses": list(losses) if condition == "idle" else None}


def test_loss_check_ratios_and_table():
    records = [_record("dgl"), _record("ours", epoch_ms=5.0, live=3.0),
               _record("pyg", losses=(1.0, 0.9, 0.8 * (1 + 3e-4))),
               _record("dgl", "load", 20.0), _record("ours", "load", 6.0)]
    rows = results.finish(results.check_losses(records))
    by = {(r["contender"], r["condition"]): r for r in rows}
    assert by["ours", "idle"]["status"] == "ok" and by["ours", "idle"]["check_vs_dgl"] == 0
    assert by["pyg", "idle"]["status"] == "error"
    assert "epoch 3 (after 2 updates)" in by["pyg", "idle"]["note"]
    assert by["pyg", "idle"]["epoch_ms"] == 10.0
    assert by["dgl", "idle"]["ours_over_this_epoch"] == pytest.approx(0.5)
    assert by["dgl", "load"]["ours_over_this_epoch"] == pytest.approx(0.3)
    assert by["dgl", "idle"]["ours_over_this_live"] == pytest.approx(0.75)
    assert by["dgl", "idle"]["ours_over_this_peak"] == pytest.approx(1.0)
    assert by["ours", "load"]["load_slowdown"] == pytest.approx(1.2)
    assert by["pyg", "idle"]["ours_over_this_epoch"] == ""   # an error gives no ratio
    settings = gnn.settings_of(gnn.parse_args(["--quick"]))
    info = {"cpu_model": "cpu", "llvm_cpu": "x", "cpus_usable": 2, "cpus_total": 2,
            "memory": "1 kB"}
    text = results.table(rows, info, settings)
    assert "ERROR" in text and "NOT THE SAME MODEL" in text and "0.50" in text


def test_compiled_contenders_side_by_side():
    records = [_record("dgl"), _record("ours", epoch_ms=5.0), _record("pyg", epoch_ms=8.0),
               dict(_record("ours_compiled", epoch_ms=4.0), compile_ms=30_000.0, graph_breaks=0,
                    check_vs_eager=1e-7),
               dict(_record("pyg_compiled", epoch_ms=16.0), compile_ms=12_000.0, graph_breaks=9,
                    check_vs_eager=2e-7, note="not fullgraph: 9 graph breaks while compiling "
                    "(Dynamic shape operator)")]
    for r in records[3:]:
        r["check_losses"] = None     # variants are checked against eager, not DGL
    refused = {"contender": "pyg_compiled", "model": "gcn", "graph": "cora", "condition": "load",
               "status": "refused", "note": "torch.compile refused: RuntimeError: no"}
    rows = results.finish(results.check_losses(records + [refused]))
    by = {(r["contender"], r["condition"]): r for r in rows}
    assert by["pyg_compiled", "idle"]["ours_over_this_epoch"] == pytest.approx(0.25)
    assert by["ours_compiled", "idle"]["ours_over_this_epoch"] == pytest.approx(1.25)
    assert by["pyg", "idle"]["ours_over_this_epoch"] == pytest.approx(5 / 8)
    settings = gnn.settings_of(gnn.parse_args(["--quick"]))
    lines = results.compiled(rows, settings).splitlines()
    assert lines[1].split() == ["model", "graph", "ours", "ms", "pyg", "ms", "epoch", "o/p",
                                "sparse", "o/p", "ours", "cmp", "s", "pyg", "cmp", "s", "ours",
                                "brk", "pyg", "brk"]
    assert lines[2].split() == ["gcn", "cora", "4", "16", "0.25", "0.25", "30.0", "12.0", "0",
                                "9"]
    info = {"cpu_model": "cpu", "llvm_cpu": "x", "cpus_usable": 2, "cpus_total": 2,
            "memory": "1 kB"}
    text = results.table(rows, info, settings)
    assert "REFUSED, torch.compile refused: RuntimeError: no" in text
    assert "pyg_compiled gcn cora idle: OK, not fullgraph: 9 graph breaks" in text
    body = text.split("\n\n", 1)[1]  # below the header
    assert "ERROR" not in body and "2e-07 eager" in body and " refused" in body


def test_rounds_keep_the_median_epoch_round_and_median_sparse_time_and_memory():
    rounds = [dict(_record("ours", epoch_ms=ms, live=live), sparse_ms=sparse)
              for ms, sparse, live in ((12.0, 1.0, 4.0), (10.0, 3.0, 6.0), (11.0, 2.0, 9.0))]
    rounds.append(dict(_record("ours", "load", 30.0)))
    merged = {r["condition"]: r for r in gnn.median_of_rounds(rounds)}
    idle = merged["idle"]
    assert (idle["epoch_ms"], idle["rounds"], idle["round_ms"]) == (11.0, 3, [12.0, 10.0, 11.0])
    assert (idle["sparse_ms"], idle["live_peak_mib"]) == (2.0, 6.0)
    assert merged["load"]["live_peak_mib"] == "" and merged["load"]["sparse_ms"] == 15.0


def test_idle_cases_measure_live_memory_in_a_second_run(monkeypatch, tmp_path):
    """The idle run gives the times; a short run with a fixed mmap threshold, the live peak."""
    calls = []

    def fake_worker(case, epochs, settings, cache, env=None):
        calls.append((case["condition"], epochs["epochs"], env))
        return dict(case, status="ok", epoch_ms=1.0, peak_mib=50.0 if env is None else 20.0)

    monkeypatch.setattr(gnn, "run_worker", fake_worker)
    settings = gnn.settings_of(gnn.parse_args(["--quick"]))
    case = {"contender": "ours", "model": "gcn", "graph": "cora", "condition": "idle"}
    record = gnn.measure(case, gnn.EPOCHS, settings, tmp_path)
    assert (record["peak_mib"], record["live_peak_mib"]) == (50.0, 20.0)
    assert calls == [("idle", gnn.EPOCHS["epochs"], None),
                     ("memory", gnn.MEMORY_EPOCHS["epochs"], gnn.LIVE_MEMORY_ENV)]


def test_command_line():
    quick = gnn.settings_of(gnn.parse_args(["--quick"]))
    assert quick["models"] == ["gcn"] and quick["graphs"] == ["cora"]
    assert quick["contenders"] == ["ours", "dgl"] and quick["conditions"] == ["idle"]
    assert gnn.settings_of(gnn.parse_args(["--quick", "--contenders", "pyg"]))["contenders"] \
        == ["pyg"]
    full = gnn.settings_of(gnn.parse_args(["--models", "sage", "gat", "--epochs", "7",
                                           "--conditions", "idle", "--threads", "1"]))
    assert full["contenders"] == ["ours", "ours_bf16", "ours_compiled", "dgl", "pyg",
                                  "pyg_compiled"]
    assert full["models"] == ["sage", "gat"] and full["graphs"] == tasks.labels()
    assert full["epochs"] == 7 and full["threads"] == 1 and full["conditions"] == ["idle"]
    assert gnn.epochs_for("synthetic-arxiv", full)["epochs"] == 7
    assert gnn.epochs_for("cora", quick) == gnn.EPOCHS
    with pytest.raises(SystemExit):
        gnn.parse_args(["--models", "gin"])
