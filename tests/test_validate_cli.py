"""``onnx-dequant validate`` and ``scripts/validate_model.py``: output, exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import (
    dq_model,
    hand_lowered_two_stage,
    plain_model,
    swap_axis,
    tamper_scale,
    two_stage_model,
)

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.validation.inputs import generate, graph_inputs

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def files(tmp_path):
    m = two_stage_model()
    good = hand_lowered_two_stage(m)
    paths = {
        "model": tmp_path / "model.onnx",
        "good": tmp_path / "good.onnx",
        "bad": tmp_path / "bad.onnx",
        "plain": tmp_path / "plain.onnx",
        "inputs": tmp_path / "in.npz",
    }
    onnx.save(m, paths["model"])
    onnx.save(good, paths["good"])
    onnx.save(tamper_scale(good, "s2", index=(1, 2)), paths["bad"])
    onnx.save(plain_model(), paths["plain"])
    np.savez(paths["inputs"], **generate(graph_inputs(m), seed=1))
    return {k: str(v) for k, v in paths.items()}


def test_agreement_exits_0_with_a_table(files, capsys):
    assert main(["validate", files["model"], "--against", files["good"], "-q"]) == 0
    out = capsys.readouterr().out
    assert "against/default" in out and "against/off" in out and "AGREE" in out and "max ULP" in out


def test_plain_model_with_dims(files, capsys):
    assert main(["validate", files["plain"], "--dim", "B=7", "--json", "-q"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] and d["inputs"][0]["shape"] == [7, 5]
    assert [(p["path"], p["level"]) for p in d["paths"]] == [("ort", "default"), ("ort", "off")]


def test_tampered_against_exits_1_and_names_the_node(files, capsys):
    assert main(["validate", files["model"], "--against", files["bad"], "--inputs", files["inputs"], "-q"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "first differing node: 'dq2' (Dequantize)" in out and "DISAGREE" in out


@pytest.mark.parametrize("tamper", ["scale", "axis"])
def test_tampered_lowering_against_exits_1_naming_the_original_node(tmp_path, capsys, tamper):
    """Our own lowering, tampered with after the fact (one scale value changed; the axis swapped)."""
    from onnx_dequant.lowering import lower

    m = dq_model("u8", "f32", shape=(5, 5), axes=(0,), relu=True)  # square: a swapped axis still loads
    lowered = lower(m)
    if tamper == "axis":
        bad = swap_axis(lowered)
    else:
        used = next(n.input[1] for n in lowered.graph.node if n.op_type == "DequantizeLinear")
        scale = next(t for t in lowered.graph.initializer if t.name == used)
        bad = tamper_scale(lowered, scale.name, index=(0,) * len(scale.dims))
    onnx.save(m, tmp_path / "m.onnx")
    onnx.save(lowered, tmp_path / "good.onnx")
    onnx.save(bad, tmp_path / "bad.onnx")
    assert main(["validate", str(tmp_path / "m.onnx"), "--against", str(tmp_path / "good.onnx"), "-q"]) == 0
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "m.onnx"), "--against", str(tmp_path / "bad.onnx"), "-q"]) == 1
    out = capsys.readouterr().out
    assert "first differing node: 'dq1' (Dequantize)" in out and "DISAGREE: against/default, against/off" in out


def test_tampered_against_json(files, capsys):
    assert main(["validate", files["model"], "--against", files["bad"], "--json", "-q", "--level", "off"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] is False and len(d["paths"]) == 1
    assert d["paths"][0]["first_difference"]["node"] == "dq2"
    assert d["paths"][0]["outputs"][0]["first_failure"]["index"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["{tmp}/missing.onnx"], "model file not found"),
        (["{model}", "--inputs", "{tmp}/missing.npz"], "inputs file not found"),
        (["{model}", "--inputs", "{model}"], "cannot read inputs"),
        (["{model}", "--dim", "N"], "NAME=SIZE"),
        (["{model}", "--against", "{plain}"], "other model"),
        (["{notonnx}"], "Not a valid ONNX model"),
        (["{model}", "--inputs", "{wrongnpz}"], "missing input"),
    ],
)
def test_bad_input_exits_2_without_traceback(files, tmp_path, capsys, args, message):
    (tmp_path / "notonnx.onnx").write_bytes(b"this is not protobuf \xff\xff\xff")
    np.savez(tmp_path / "wrong.npz", x=np.zeros((3, 4), np.int8))
    fill = dict(
        tmp=str(tmp_path),
        model=files["model"],
        plain=files["plain"],
        notonnx=str(tmp_path / "notonnx.onnx"),
        wrongnpz=str(tmp_path / "wrong.npz"),
    )
    assert main(["validate", *(a.format(**fill) for a in args), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("onnx-dequant validate: error:") and message in err
    assert "Traceback" not in err


def test_usage_errors_exit_2(files, capsys):
    assert main(["validate", files["model"], "--float-ulp", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("onnx-dequant validate: error: argument --float-ulp") and err.count("\n") == 1


def test_script_is_a_thin_wrapper(files):
    ok = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "validate_model.py"), files["model"], "--against", files["good"], "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert "AGREE" in ok.stdout
    bad = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "validate_model.py"), files["model"], "--inputs", files["plain"]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "error:" in bad.stderr


def _sample_graphs():
    return sorted((ROOT / "models").glob("*.json"))


@pytest.mark.skipif(not _sample_graphs(), reason="no sample nGraph graphs in models/ yet")
@pytest.mark.parametrize("graph", _sample_graphs(), ids=lambda p: p.name)
def test_sample_ngraph_graphs_validate(graph, capsys):
    """Every path agrees, except (known) ORT's default-level fusions of the lowered DQL -> MatMul."""
    pytest.importorskip("onnx_dequant.ngraph")
    main(["validate", str(graph), "--json", "-q"])
    d = json.loads(capsys.readouterr().out)
    assert d["dequantize_nodes"] >= 1
    for p in d["paths"]:
        if (p["path"], p["level"]) != ("lowered", "default"):
            assert p["status"] == "pass", json.dumps(p, indent=1)[:3000]
        elif p["status"] == "fail":  # then it must say where and why
            fd = p["first_difference"]
            assert fd["node"] and "ONNX Runtime's optimized graph has" in fd["note"], fd


_FUSED_BY_ORT = ("quantized_mlp.json", "conv_block.json")
"""Samples whose lowered DequantizeLinear -> MatMul ORT's default level fuses into MatMulNBits, which
quantizes activations to int8 (ORT's session.qdq_matmulnbits_accuracy_level defaults to 4)."""


def _agreeing_graphs():
    return [p for p in _sample_graphs() if p.name not in _FUSED_BY_ORT]


@pytest.mark.skipif(not _sample_graphs(), reason="no sample nGraph graphs in models/ yet")
@pytest.mark.parametrize("graph", _agreeing_graphs(), ids=lambda p: p.name)
def test_sample_ngraph_graphs_agree_on_every_path(graph, capsys):
    pytest.importorskip("onnx_dequant.ngraph")
    code = main(["validate", str(graph), "--json", "-q"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0, json.dumps(d, indent=1)[:4000]
    assert {(p["path"], p["level"]) for p in d["paths"]} == {
        (p, lv) for p in ("lowered", "kernel") for lv in ("default", "off")
    }


def test_qdq_chain_outputs_are_held_to_0_ulp(capsys):
    """Every output of the README's sample is computed by Dequantize, exact ops and correctly rounded
    arithmetic on exact tensors: no float-op allowance, and every path is bit-exact."""
    pytest.importorskip("onnx_dequant.ngraph")
    code = main(["validate", str(ROOT / "models" / "qdq_chain.json"), "--json", "-q"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    outs = [o for p in d["paths"] for o in p["outputs"]]
    assert len(outs) == 16 and {o["allowed"] for o in outs} == {"0 ULP"}
    assert all(o["mismatches"] == 0 for o in outs)
    assert any("Dequantize" in o["why"] for o in outs)


def test_progress_on_stderr_for_slow_runs(files, capsys, monkeypatch):
    from onnx_dequant.validation import progress

    monkeypatch.setattr(progress, "SLOW_AFTER", 0.0)
    assert main(["validate", files["model"], "--against", files["good"]]) == 0
    err = capsys.readouterr().err
    assert "validate: running the reference" in err and "validate: running against/default" in err


def test_dq_model_via_cli_paths(tmp_path, capsys):
    path = tmp_path / "dq.onnx"
    onnx.save(dq_model("u8", "f32", axes=(1,)), path)
    assert main(["validate", str(path), "--path", "kernel", "--level", "off", "-q"]) == 0
    assert "kernel/off" in capsys.readouterr().out


@pytest.mark.parametrize("name", _FUSED_BY_ORT)
def test_matmulnbits_accuracy_config_makes_the_fused_samples_agree(name, capsys):
    pytest.importorskip("onnx_dequant.ngraph")
    mlp = str(ROOT / "models" / name)
    code = main(["validate", mlp, "--path", "lowered", "--level", "default", "-q"])
    out = capsys.readouterr().out
    # ORT 1.32's default MatMulNBits accuracy level quantizes the activations: a real difference, which the
    # report must name; an ORT whose default fusion is exact agrees, and then there is nothing to name
    assert code in (0, 1), out
    if code == 1:
        assert "DISAGREE: lowered/default" in out, out
        assert "first differing node: 'Dot_" in out and "(MatMul)" in out, out
        assert "MatMulNBits" in out and "qdq_matmulnbits_accuracy_level" in out, out
    code = main(["validate", mlp, "--ort-config", "session.qdq_matmulnbits_accuracy_level=0", "--json", "-q"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["ort_config"] == {"session.qdq_matmulnbits_accuracy_level": "0"}


def test_bad_ort_config_exits_2(files, capsys):
    assert main(["validate", files["model"], "--ort-config", "novalue", "-q"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def _no_output_model(with_dq: bool) -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    vi = helper.make_tensor_value_info
    if with_dq:
        s = numpy_helper.from_array(np.full(4, 0.5, np.float32), "s")
        g = helper.make_graph(
            [odq.make_node(["x", "s"], ["y"], axes=(1,), name="dq")], "g", [vi("x", TensorProto.INT8, [2, 4])], [], [s]
        )
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])
    g = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "g", [vi("a", TensorProto.FLOAT, [2])], [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("with_dq", [False, True])
def test_model_without_outputs_is_bad_input(tmp_path, capfd, with_dq):
    path = tmp_path / "noout.onnx"
    onnx.save(_no_output_model(with_dq), path)
    assert main(["validate", str(path)]) == 2
    captured = capfd.readouterr()
    assert (
        captured.err.strip()
        == f"onnx-dequant validate: error: {path}: the model has no outputs: there is nothing to compare"
    )
    with pytest.raises(odq.DequantizeError, match="no outputs"):
        odq.validate(str(path))


def test_a_path_onnx_runtime_fails_to_run_is_reported_without_its_cpp_log(tmp_path, capfd):
    """ONNX Runtime logs a kernel's run-time failure on stderr at error level; validation reports it in the
    table (exit 1) and ORT's own coloured log stays silent."""
    from onnx import TensorProto, helper, numpy_helper

    vi = helper.make_tensor_value_info
    paths = {}
    for name, idx in (("ok", 0), ("bad", 7)):
        g = helper.make_graph(
            [helper.make_node("Gather", ["x", "i"], ["y"])],
            "g",
            [vi("x", TensorProto.FLOAT, [3])],
            [vi("y", TensorProto.FLOAT, [1])],
            [numpy_helper.from_array(np.array([idx], np.int64), "i")],
        )
        paths[name] = tmp_path / f"{name}.onnx"
        onnx.save(onnx.helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), paths[name])
    assert main(["validate", str(paths["ok"]), "--against", str(paths["bad"]), "-q"]) == 1
    captured = capfd.readouterr()
    assert "out of data bounds" in captured.out and "ERROR" in captured.out
    assert captured.err == ""


def test_validate_tree_script_counts_each_converted_graphs_outcome(tmp_path):
    """``scripts/validate_tree.py``: a folder converted, each model validated in a process of its own; exit 1
    where one does not agree, each outcome in the JSON."""
    src = tmp_path / "graphs"
    (src / "idx").mkdir(parents=True)
    shutil.copy(ROOT / "models" / "qdq_chain.json", src / "qdq_chain.json")
    # ONNX Runtime's MatMulNBits fusion quantizes the activations: a diagnosed disagreement
    shutil.copy(ROOT / "tests" / "golden" / "samples" / "conv_block.json", src / "idx" / "block.json")
    (src / "broken.json").write_text("[{")
    # token ids computed by an Add: generation does not follow arithmetic, and the reference refuses them
    graph = json.loads((ROOT / "tests" / "golden" / "ops_index" / "embedding_lookup.json").read_text())
    ops = graph[0]["ops"]
    ops.insert(2, {**ops[0], "name": "Parameter_9", "outputs": ["Parameter_9_0"]})
    add = {"auto_broadcast": {"axis": -1, "type": 0}, "inputs": ["Parameter_0", "Parameter_9"], "op": "Add"}
    ops.insert(3, {**add, "name": "Add_8", "op_version": 0, "outputs": ["Add_8_0"]})
    ops[4]["inputs"][0] = "Add_8"
    graph[0]["parameters"].append("Parameter_9")
    (src / "idx" / "ids.json").write_text(json.dumps(graph))
    out = tmp_path / "r.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "validate_tree.py"), str(src), "--jobs", "2", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stderr
    assert "4 graphs under" in run.stdout and "1 agree" in run.stdout and "1 disagree" in run.stdout
    assert "1 error" in run.stdout
    assert "1 refused" in run.stdout
    graphs = json.loads(out.read_text())["graphs"]
    assert {g: o["outcome"] for g, o in graphs.items()} == {
        "broken.json": "refused",
        "idx/block.json": "disagree",
        "idx/ids.json": "error",
        "qdq_chain.json": "agree",
    }
    assert graphs["idx/block.json"]["detail"].startswith("DISAGREE: lowered/default")
    assert graphs["idx/ids.json"]["detail"].startswith("idx/ids.onnx: the reference cannot run the model")
