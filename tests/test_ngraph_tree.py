"""Folder conversion: ``odq.ngraph.convert_tree`` and ``onnx-dequant convert DIR -o OUTDIR``: the tree kept,
each graph converted or refused on its own (nothing written for a refused one), the migration report,
exit codes 0 / 1 / 2, the same results on one or several processes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import pytest

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.graphs import count_dequantize

MODELS = Path(__file__).resolve().parents[1] / "models"
SEND = [{"name": "f", "ops": [{"name": "Send_1", "op": "Send", "inputs": []}], "parameters": [], "result": ["Send_1"]}]


def _tree(root: Path, bad: bool = True) -> Path:
    src = root / "src"
    (src / "nets" / "deep").mkdir(parents=True)
    shutil.copy(MODELS / "qdq_chain.json", src / "qdq_chain.json")
    shutil.copy(MODELS / "conv_block.json", src / "nets" / "conv_block.json")
    shutil.copy(MODELS / "quantized_mlp.json", src / "nets" / "deep" / "mlp.json")
    (src / "nets" / "notes.txt").write_text("not a graph")
    (src / ".hidden").mkdir()
    (src / ".hidden" / "skipped.json").write_text("[]")
    if bad:
        (src / "nets" / "send.json").write_text(json.dumps(SEND))
        (src / "broken.json").write_text("[{")
    return src


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("jobs", [1, 2])
def test_convert_tree_keeps_the_tree_and_reports_each_graph(tmp_path, jobs):
    src = _tree(tmp_path)
    before = _snapshot(src)
    seen = []
    report = odq.ngraph.convert_tree(src, tmp_path / "out", jobs=jobs, progress=lambda d, t, r: seen.append((d, t)))
    assert _snapshot(src) == before  # inputs untouched
    assert [r.graph for r in report.results] == [
        "broken.json",
        "nets/conv_block.json",
        "nets/deep/mlp.json",
        "nets/send.json",
        "qdq_chain.json",
    ]
    assert sorted(seen) == [(i, 5) for i in range(1, 6)]
    by = {r.graph: r for r in report.results}
    assert [r.graph for r in report.converted] == ["nets/conv_block.json", "nets/deep/mlp.json", "qdq_chain.json"]
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written == ["nets/conv_block.onnx", "nets/deep/mlp.onnx", "qdq_chain.onnx"]  # none for refused graphs
    for r in report.converted:
        model = onnx.load(tmp_path / "out" / r.output)
        onnx.checker.check_model(model, full_check=True)
        assert r.nodes == len(model.graph.node)
        assert r.ops == len(json.loads((src / r.graph).read_text())[-1]["ops"])
    send = by["nets/send.json"]
    assert (send.status, send.node, send.op_type) == ("refused", "Send_1", "Send")
    assert "Send" in send.error and "nets/send.json: node 'Send_1'" in send.message
    broken = by["broken.json"]
    assert broken.status == "refused" and broken.op_type is None and "malformed JSON" in broken.error
    assert report.stopped_by == [("(file)", 1), ("Send", 1)]
    assert not report.ok
    d = report.to_dict()
    assert (d["graphs"], d["converted"], d["refused"]) == (5, 3, 2)
    assert d["stopped_by"] == {"(file)": 1, "Send": 1}


def test_convert_tree_same_models_on_one_or_two_processes(tmp_path):
    src = _tree(tmp_path, bad=False)
    one = odq.ngraph.convert_tree(src, tmp_path / "one", jobs=1)
    two = odq.ngraph.convert_tree(src, tmp_path / "two", jobs=2, lower=True)
    assert one.ok and two.ok and two.jobs == 2
    assert _snapshot(tmp_path / "one").keys() == _snapshot(tmp_path / "two").keys()
    for r in two.converted:  # --lower: standard ONNX only
        assert not odq.graphs.has_dequantize(onnx.load(tmp_path / "two" / r.output))


def test_convert_tree_bad_usage(tmp_path):
    with pytest.raises(odq.DequantizeError, match="not a folder"):
        odq.ngraph.convert_tree(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(odq.DequantizeError, match=r"no \*.json graphs"):
        odq.ngraph.convert_tree(tmp_path / "empty", tmp_path / "out")
    src = _tree(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(odq.DequantizeError, match="exists and is not a folder"):
        odq.ngraph.convert_tree(src, tmp_path / "file")
    with pytest.raises(odq.DequantizeError, match="jobs must be at least 1"):
        odq.ngraph.convert_tree(src, tmp_path / "out", jobs=0)


def test_cli_folder_report_exit_codes_and_json(tmp_path, capsys):
    src = _tree(tmp_path)
    assert main(["convert", str(src), "-o", str(tmp_path / "out"), "--jobs", "2"]) == 1
    out, err = capsys.readouterr()
    assert "migration report: 5 graph(s)" in out
    assert "refused    nets/send.json" in out and "node 'Send_1' (Send)" in out
    assert "converted 3, refused 2" in out and "ops that stopped graphs" in out
    assert "[5/5]" in err  # progress while it runs
    assert main(["convert", str(src), "-o", str(tmp_path / "out2"), "--json", "--jobs", "1"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["refused"] == 2 and report["stopped_by"]["Send"] == 1
    good = _tree(tmp_path / "good", bad=False)
    assert main(["convert", str(good), "-o", str(tmp_path / "out3")]) == 0
    capsys.readouterr()
    assert main(["convert", str(tmp_path / "nowhere"), "-o", str(tmp_path / "x")]) == 2
    assert main(["convert", str(MODELS / "qdq_chain.json"), "-o", str(tmp_path / "m.onnx"), "--jobs", "2"]) == 2
    err = capsys.readouterr().err
    assert "--jobs applies to a folder" in err and "Traceback" not in err


def test_save_converted_checks_shapes_and_writes_nothing_on_failure(tmp_path):
    """The importer's write path runs ONNX's shape inference (Add of [2] and [3] passes the plain checker)
    and leaves no file behind when the model fails it; a good model is written through modelio."""
    from onnx import TensorProto, helper

    from onnx_dequant.ngraph.export import save_converted

    bad = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["a", "b"], ["c"])],
            "g",
            [
                helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
                helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
            ],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [3])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    onnx.checker.check_model(bad)  # the plain checker accepts it
    out = tmp_path / "m.onnx"
    with pytest.raises(odq.DequantizeError) as e:
        save_converted(bad, out, path="g.json")
    assert e.value.path == "g.json" and "checker" in e.value.rule
    assert list(tmp_path.iterdir()) == []

    model = odq.ngraph.convert(str(MODELS / "qdq_chain.json"))
    written = save_converted(model, out, lower=True)
    assert count_dequantize(model) > 0 and count_dequantize(written) == 0
    assert onnx.load(str(out)).graph.node == written.graph.node
