"""``validate --expected OUT.npz`` / ``odq.validate(..., expected=...)``: outputs of the user's own nGraph run,
matched by output name, nGraph Result name or position, compared with the reference under the policy; bad or
mismatched files are exit 2 / ``DequantizeError``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.ngraph.writer import FunctionWriter

GOLDEN = Path(__file__).resolve().parent / "golden"


def _golden(name: str) -> tuple[Path, dict[str, np.ndarray], dict[str, np.ndarray]]:
    path = GOLDEN / f"{name}.json"
    with np.load(path.with_suffix(".npz")) as z:
        inputs = {k[3:]: z[k] for k in z.files if k.startswith("in.")}
        outputs = {k[4:]: z[k] for k in z.files if k.startswith("out.")}
    return path, inputs, outputs


def _friendly_graph(tmp_path: Path) -> Path:
    w = FunctionWriter()
    x = w.parameter("f32", [2, 3])
    y = w.parameter("f32", [2, 3])
    w.result(w.binary("Multiply", x, y))
    w.result(w.op("Abs", x))
    js = w.to_json()
    friendly = {"Parameter_0": "_arg_x_0_0", "Parameter_1": "_arg_y_0_1", "Result_3": "_retval_m_0_0"}
    for op in js["ops"]:
        if op["name"] in friendly:
            op["friendly_name"] = friendly[op["name"]]
    path = tmp_path / "friendly.json"
    path.write_text(json.dumps([js]))
    return path


def _expected_row(report: odq.Report):
    rows = [p for p in report.paths if p.path == "expected"]
    assert len(rows) == 1
    return rows[0]


def test_golden_npz_as_expected_api():
    # i32 -> f32 Dequantize: nGraph rounds twice; against it the policy allows 1 ULP
    path, inputs, outputs = _golden("quant/dequantize_i32_f32")
    model = odq.ngraph.convert(path)
    feeds = dict(zip([i.name for i in model.graph.input], inputs.values()))
    report = odq.validate(path, feeds, expected=path.with_suffix(".npz"), paths=["kernel"], levels=["off"])
    row = _expected_row(report)
    assert row.status == "pass" and report.ok
    assert [o.name for o in row.outputs] == [o.name for o in model.graph.output]
    assert all(o.allowed == "1 ULP" and "nGraph" in o.why for o in row.outputs)


def test_expected_by_friendly_result_and_position(tmp_path):
    path = _friendly_graph(tmp_path)
    model = odq.ngraph.convert(path)
    assert [i.name for i in model.graph.input] == ["_arg_x_0_0", "_arg_y_0_1"]
    assert [o.name for o in model.graph.output] == ["_retval_m_0_0", "Result_5"]
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal((2, 3)).astype(np.float32) for i in model.graph.input}
    x, y = feeds.values()
    for keys in (("_retval_m_0_0", "Result_5"), ("Result_3", "out.Result_5"), ("out_0", "1"), ("result_0", "arr_1")):
        expected = dict(zip(keys, (x * y, np.abs(x))))
        row = _expected_row(odq.validate(path, feeds, expected=expected, paths=["kernel"], levels=["off"]))
        assert row.status == "pass" and len(row.outputs) == 2, keys
    wrong = {"Result_3": x * y + 1}
    row = _expected_row(odq.validate(path, feeds, expected=wrong, paths=["kernel"], levels=["off"]))
    assert row.status == "fail" and row.outputs[0].failures == 6


def test_expected_command_and_onnx_model(tmp_path, capsys):
    path = _friendly_graph(tmp_path)
    onnx_path = tmp_path / "m.onnx"
    onnx.save(odq.ngraph.convert(path), onnx_path)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    np.savez(tmp_path / "in.npz", _arg_x_0_0=x, _arg_y_0_1=y)
    np.savez(tmp_path / "good.npz", out_0=x * y, out_1=np.abs(x))
    np.savez(tmp_path / "bad.npz", out_0=x * y, out_1=-np.abs(x))
    for model in (path, onnx_path):
        args = ["validate", str(model), "--inputs", str(tmp_path / "in.npz"), "-q", "--json"]
        assert main(args + ["--expected", str(tmp_path / "good.npz")]) == 0
        d = json.loads(capsys.readouterr().out)
        assert [p for p in d["paths"] if p["path"] == "expected"][0]["status"] == "pass"
        assert main(args + ["--expected", str(tmp_path / "bad.npz")]) == 1
        d = json.loads(capsys.readouterr().out)
        assert "expected/bad.npz" in d["verdict"]


@pytest.mark.parametrize(
    "content, message",
    [
        ({"Result_9": np.zeros((2, 3), np.float32)}, "'Result_9' names no output"),
        ({"out_7": np.zeros((2, 3), np.float32)}, "'out_7' is output 7, but the model has 2"),
        ({"out_0": np.zeros((3, 2), np.float32)}, "has shape [3, 2], the model's output [2, 3]"),
        ({"out_0": np.zeros((2, 3), np.float64)}, "is f64, the model's output is f32"),
        ({"out_0": np.zeros((2, 3), np.float32), "Result_3": np.zeros((2, 3), np.float32)}, "both name output"),
        (None, "cannot read"),
    ],
)
def test_bad_expected_exits_2(tmp_path, capsys, content, message):
    path = _friendly_graph(tmp_path)
    bad = tmp_path / "expected.npz"
    if content is None:
        bad.write_bytes(b"not a zip")
    else:
        np.savez(bad, **content)
    assert main(["validate", str(path), "-q", "--expected", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "expected.npz" in err and len(err.splitlines()) == 1, err
    with pytest.raises(odq.DequantizeError, match="expected"):
        odq.validate(path, expected=str(bad), paths=["kernel"], levels=["off"])


def test_friendly_names_unique_and_node_names(tmp_path):
    w = FunctionWriter()
    a, b = w.parameter("f32", [2]), w.parameter("f32", [2])
    r1 = w.result(w.binary("Add", a, b))
    r2 = w.result(w.op("Negative", a))
    js = w.to_json()
    for op in js["ops"]:  # two parameters and two results with one friendly name each
        if op["name"] in (a, b):
            op["friendly_name"] = "x"
        if op["name"] in (r1, r2):
            op["friendly_name"] = "Add_2_0"  # also an op output name nGraph would write
    model = odq.ngraph.convert(json.dumps([js]))
    onnx.checker.check_model(model, full_check=True)
    names = [i.name for i in model.graph.input] + [o.name for o in model.graph.output]
    assert names == ["x", "x__1", "Add_2_0", "Add_2_0__1"]
    assert [i.doc_string for i in model.graph.input] == ["nGraph Parameter Parameter_0", "nGraph Parameter Parameter_1"]
    assert {n.name for n in model.graph.node} >= {"Add_2", "Negative_4"}
    got = odq.session(model).run(None, {"x": np.array([1, -2], np.float32), "x__1": np.array([3, 4], np.float32)})
    assert [g.tolist() for g in got] == [[4, 2], [-1, 2]]
