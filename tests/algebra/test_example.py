"""examples/coiteration.py runs: A + B, A .* B and A @ B on a bundled graph and its two-hop
pattern, each checked against scipy inside the example."""

import importlib.util
from pathlib import Path


def test_example_runs_and_checks_against_scipy(capsys):
    path = Path(__file__).resolve().parents[2] / "examples" / "coiteration.py"
    spec = importlib.util.spec_from_file_location("coiteration_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main(["cora"])
    rows = capsys.readouterr().out.strip().splitlines()
    assert [r.split()[1] for r in rows[1:]] == ["A", "A", "A"]      # "A + B", "A .* B", "A @ B"
    assert len(rows) == 4
