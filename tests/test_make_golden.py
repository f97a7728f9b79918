"""scripts/make_golden.py without nGraph (its runner call replaced): the file layout and keys, that one
family's folder is rewritten whole and the others are left alone, byte-identical output on a rerun, nothing
written when the runner fails, and the --summary of the committed suite."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import script_module

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def make_golden():
    with script_module("make_golden") as module:
        yield module


def _fake_run(runner, graph_path, inputs, function):
    """Outputs by Result name, as run_ngraph gives them: here the first input's values, whatever the op."""
    first = next(iter(inputs.values()))
    return {r: np.asarray(first) + k for k, r in enumerate(function["result"])}


def test_family_written_deterministically_and_alone(tmp_path, monkeypatch, make_golden):
    monkeypatch.setattr(make_golden, "run_ngraph", _fake_run)
    out = tmp_path / "golden"
    (out / "other").mkdir(parents=True)
    (out / "other" / "keep.json").write_text("[]")
    (out / "samples").mkdir()
    (out / "samples" / "stale.json").write_text("[]")
    assert make_golden.make_family("samples", "unused", out) == 3
    assert (out / "other" / "keep.json").read_text() == "[]"  # another family: untouched
    committed = ROOT / "tests" / "golden" / "samples"
    names = sorted(f.name for f in (out / "samples").iterdir())
    assert names == sorted(f.name for f in committed.iterdir())  # the stale file gone, the committed cases
    first = {n: (out / "samples" / n).read_bytes() for n in names}
    for n in names:
        if n.endswith(".json"):  # the graph exactly as committed
            assert first[n] == (committed / n).read_bytes()
    with np.load(out / "samples" / "qdq_chain.npz") as z:
        meta = json.loads(str(z["meta"]))
        keys = sorted(z.files)
        assert z["out.Result_28"].tolist() == (z["in.Parameter_0"] + 1).tolist()
    assert keys == sorted(["meta"] + [f"in.{k}" for k in meta["parameters"]] + [f"out.{k}" for k in meta["results"]])
    assert meta["results"] == ["Result_27", "Result_28", "Result_29", "Result_30"]
    assert (meta["ulp"], meta["source"]) == (0, make_golden.SOURCE_NGRAPH)
    assert make_golden.make_family("samples", "unused", out) == 3
    assert {n: (out / "samples" / n).read_bytes() for n in names} == first  # byte-identical rerun


def test_runner_failure_writes_nothing(tmp_path, monkeypatch, make_golden):
    def fail(*args):
        raise make_golden.RunnerError("nGraph error during deserialize: boom")

    monkeypatch.setattr(make_golden, "run_ngraph", fail)
    with pytest.raises(make_golden.RunnerError, match="samples/qdq_chain: nGraph error during deserialize: boom"):
        make_golden.make_family("samples", "unused", tmp_path)
    assert list(tmp_path.iterdir()) == []  # no folder, no temporary left behind
    assert make_golden.main(["--family", "nope", "--out", str(tmp_path)]) == 2


def test_summary_of_the_committed_suite(make_golden):
    text = make_golden.summary(ROOT / "tests" / "golden")
    cases = len(list((ROOT / "tests" / "golden").glob("*/*.json")))
    assert text.startswith(f"{cases} cases in ") and "bit-identical" in text and "op types appear" in text
