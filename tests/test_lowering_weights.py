"""``lower`` leaves alone what it does not lower (bytes, IR version, opset imports), and ``weights=``:
constant weights kept quantized (ORT's fusions) or folded to exact float initializers."""

from __future__ import annotations

import importlib
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.lowering import LowerOptions, lower_file, lower_model


def _plain(opset=13, ir=8):
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="someone")
    m.ir_version = ir
    return m


def _weight_model(opset=17, ir=8, k=64, n=32):
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    s = (rng.random(n) + 0.5).astype(np.float32) / 64
    z = rng.integers(-3, 4, n).astype(np.int8)
    g = helper.make_graph(
        [odq.make_node(["w", "s", "z"], ["wd"], axes=(1,), name="dq"), helper.make_node("MatMul", ["x", "wd"], ["y"])],
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(odq.DOMAIN, 1)])
    m.ir_version = ir
    return m, (w, s, z)


def test_a_model_without_our_op_is_written_byte_identical(tmp_path, capsys):
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    src.write_bytes(_plain().SerializeToString() + b"")
    assert main(["lower", str(src), "-o", str(dst), "--json"]) == 0
    assert dst.read_bytes() == src.read_bytes()
    out = json.loads(capsys.readouterr().out)
    assert out["lowered"] == 0 and out["changes"] == [] and out["notes"] == []


def test_ir_version_and_imports_stay_unless_needed(tmp_path):
    plain = _plain(opset=21, ir=8)  # an old IR with a new opset: nothing to lower, so nothing changes
    assert odq.lower(plain).ir_version == 8
    model, _ = _weight_model(opset=17, ir=8)
    result = lower_model(model)
    lowered, changes = result.model, result.changes
    assert lowered.ir_version == 8
    assert [(o.domain, o.version) for o in lowered.opset_import] == [("", 17)]
    assert changes == [f"removed the '{odq.DOMAIN}' opset import (no node uses it any more)"]
    src = tmp_path / "w.onnx"
    onnx.save(_weight_model(opset=17, ir=8)[0], src)
    result = lower_file(src, tmp_path / "w21.onnx", LowerOptions(opset=21))
    converted, changes = result.model, result.changes
    assert converted.ir_version >= 10 and onnx.load(tmp_path / "w21.onnx").ir_version == converted.ir_version
    assert any("opset 17 to 21" in c for c in changes) and any(c.startswith("IR version 8 -> ") for c in changes)


def test_weights_float_folds_with_the_exact_reference():
    model, (w, s, z) = _weight_model()
    folded = odq.lower(model, weights="float")
    assert [n.op_type for n in folded.graph.node] == ["MatMul"]
    (init,) = folded.graph.initializer
    want = odq.dequantize(w, s, z, axes=(1,))
    assert init.name == "wd" and np.array_equal(numpy_helper.to_array(init).view(np.uint32), want.view(np.uint32))
    report = odq.validate(folded)
    assert report.ok and {p.status for p in report.paths} == {"pass"}
    kept = odq.lower(model)
    assert "DequantizeLinear" in [n.op_type for n in kept.graph.node]


def test_cli_weights_notes(tmp_path, capsys):
    src = tmp_path / "w.onnx"
    onnx.save(_weight_model()[0], src)
    assert main(["lower", str(src), "-o", str(tmp_path / "q.onnx")]) == 0
    out = capsys.readouterr().out
    assert "1 constant weight(s) kept quantized" in out and "--weights float" in out
    assert main(["lower", str(src), "-o", str(tmp_path / "f.onnx"), "--weights", "float"]) == 0
    out = capsys.readouterr().out
    assert "1 fold-weight" in out and "kept quantized" not in out
    with pytest.raises(odq.DequantizeError, match="weights mode"):
        odq.lower(_weight_model()[0], weights="half")


def test_a_weight_too_large_to_fold_is_kept_quantized_saying_why(monkeypatch, tmp_path, capsys):
    """A folded weight over protobuf's limit for one tensor (2 GB; 8 KiB here) could not be held in the
    lowered model: ``weights='float'`` keeps that weight quantized, the refusal in the report."""
    folded = importlib.import_module("onnx_dequant.lowering.strategies.folded")
    monkeypatch.setattr(folded, "PROTOBUF_LIMIT", 8 << 10)  # the weight folds to 64 * 32 * 4 = 8 KiB + 0
    model, (w, s, z) = _weight_model()
    result = lower_model(model, LowerOptions(weights="float"))
    assert [n.strategy for n in result.nodes] == ["fold-weight"]
    model, _ = _weight_model(k=65)
    result = lower_model(model, LowerOptions(weights="float"))
    (node,) = result.nodes
    assert node.strategy != "fold-weight"
    assert node.refused["fold-weight"] == "folded, the weight would be 0.0 GiB: over protobuf's 2 GB for one tensor"
    kept = {t.name: t.data_type for t in result.model.graph.initializer}
    assert kept["w"] == TensorProto.INT8
    onnx.save(_weight_model(k=65)[0], tmp_path / "w.onnx")
    assert main(["lower", str(tmp_path / "w.onnx"), "-o", str(tmp_path / "f.onnx"), "--weights", "float"]) == 0
    out = capsys.readouterr().out
    assert "1 constant weight(s) kept quantized: see why fold-weight refused each" in out
    assert "--weights float" not in out
