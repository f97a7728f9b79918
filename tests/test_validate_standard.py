"""Validation of standard ONNX models at opsets 13-27: ONNX Runtime's quantization tool's outputs (made
here), our lowered models at early opsets, models mixing our op with QDQ nodes, and the exact kernels
the reference uses for DequantizeLinear/QuantizeLinear at every version."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from ort_quantized import KINDS, quantized

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.validation.standard_ops import OPS

OPSETS = (13, 17, 21)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ort-quantized"))


def _statuses(report):
    return {p.label: p.status for p in report.paths}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("kind", KINDS)
def test_ort_quantization_tool_models_validate(folder, opset, kind):
    path = quantized(folder, opset, kind, reduce_range=kind == "qdq-per-channel")
    model = onnx.load(path)
    assert model.opset_import[0].version == opset
    report = odq.validate(path)
    if kind == "qoperator":
        # com.microsoft QLinearAdd: no reference; ORT's optimized graph is compared with its plain one
        assert "com.microsoft.QLinearAdd" in report.no_reference
        assert _statuses(report) == {"ort/default": "pass", "ort/off": "skipped"}
        assert report.verdict.startswith("AGREE WITHOUT A REFERENCE")
        assert "NO REFERENCE RAN" in report.to_text()
    else:
        assert not report.no_reference
        assert _statuses(report) == {"ort/default": "pass", "ort/off": "pass"}, report.to_text()
        assert report.verdict.startswith("AGREE: 2 path(s)")


def test_per_channel_without_reduce_range_runs_the_reference(folder):
    """Without reduce_range, ORT's u8s8 QLinearConv may saturate on CPUs without VNNI: either way the
    reference runs, the unoptimized ORT graph agrees with it bit for bit, and the verdict follows ORT."""
    report = odq.validate(quantized(folder, 17, "qdq-per-channel"))
    by = {p.label: p for p in report.paths}
    assert by["ort/off"].status == "pass" and by["ort/off"].outputs[0].max_ulp == 0
    assert by["ort/default"].status in ("pass", "fail")
    assert report.ok == (by["ort/default"].status == "pass")


def test_cli_on_a_qoperator_model_says_no_reference_ran(folder, capsys):
    assert main(["validate", quantized(folder, 13, "qoperator"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "NO REFERENCE RAN" in out and "com.microsoft.QLinearAdd" in out


def _dql_model(opset, x, s, z, **attrs):
    inits = [numpy_helper.from_array(s, "s")] + ([numpy_helper.from_array(z, "z")] if z is not None else [])
    node = helper.make_node("DequantizeLinear", ["x", "s"] + (["z"] if z is not None else []), ["y"], **attrs)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", (10, 13, 17, 19, 21, 23, 25))
def test_dequantize_linear_every_version_is_the_exact_reference(opset):
    rng = np.random.default_rng(opset)
    x = rng.integers(-128, 128, (3, 4, 5)).astype(np.int8)
    cases = [(np.float32(0.37), np.int8(-3), {})]
    if opset >= 13:
        cases.append((rng.random(4).astype(np.float32), rng.integers(-9, 9, 4).astype(np.int8), {"axis": 1}))
    if opset >= 21:
        cases.append((rng.random((3, 4, 3)).astype(np.float32), None, {"axis": 2, "block_size": 2}))
    for s, z, attrs in cases:
        s, z = np.asarray(s), None if z is None else np.asarray(z)
        got = ReferenceEvaluator(_dql_model(opset, x, s, z, **attrs), new_ops=OPS).run(None, {"x": x})[0]
        if "block_size" in attrs:
            full = np.repeat(s, 2, axis=2)[:, :, :5]
            want = odq.dequantize(x, full, None, axes=(0, 1, 2))
        elif s.ndim:
            want = odq.dequantize(x, s, z, axes=(1,))
        else:
            want = odq.dequantize(x, s, z)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint32), want.view(np.uint32)), attrs


def test_dequantize_linear_int32_does_not_round_before_subtracting():
    """onnx's own kernel casts an int32 input to float32 first; the exact one subtracts in integers."""
    x = np.array([2**31 - 1, 16777217], np.int32)
    s, z = np.float32(1.0), np.int32(-(2**31))
    got = ReferenceEvaluator(_dql_model(21, x, np.asarray(s), np.asarray(z)), new_ops=OPS).run(None, {"x": x})[0]
    want = np.array([2**32 - 1, 16777217 + 2**31], np.float64).astype(np.float32)
    assert np.array_equal(got, want)


def test_quantize_linear_rounds_half_even_and_saturates_without_overflow():
    x = np.array([0.5, 1.5, 2.5, -0.5, 1e10, -1e10, 3e9, np.nan], np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [8])],
        [numpy_helper.from_array(np.float32(1.0), "s"), numpy_helper.from_array(np.int8(3), "z")],
    )
    for opset in (13, 21):
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        got = ReferenceEvaluator(m, new_ops=OPS).run(None, {"x": x})[0]
        assert got.tolist() == [3, 5, 5, 3, 127, -128, 127, 3]


@pytest.mark.parametrize("opset", (13, 17))
def test_lowered_models_and_mixed_qdq_models_at_early_opsets(opset):
    """Our op next to a standard QuantizeLinear/DequantizeLinear pair, and the lowered model alone."""
    rng = np.random.default_rng(0)
    s = rng.random(4).astype(np.float32) + 0.5
    z = rng.integers(-5, 5, 4).astype(np.int8)
    nodes = [
        odq.make_node(["x", "s", "z"], ["d"], axes=(1,), name="dq"),
        helper.make_node("QuantizeLinear", ["d", "qs", "qz"], ["q"], name="q"),
        helper.make_node("DequantizeLinear", ["q", "qs", "qz"], ["y"], name="dql"),
    ]
    g = helper.make_graph(
        nodes,
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [2, 4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3])],
        [
            numpy_helper.from_array(s, "s"),
            numpy_helper.from_array(z, "z"),
            numpy_helper.from_array(np.float32(0.25), "qs"),
            numpy_helper.from_array(np.uint8(128), "qz"),
        ],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(odq.DOMAIN, 1)])
    report = odq.validate(model)
    assert report.ok and set(_statuses(report).values()) == {"pass"}, report.to_text()
    lowered = odq.lower(model)
    assert lowered.opset_import[0].version == opset
    report = odq.validate(lowered)
    assert _statuses(report) == {"ort/default": "pass", "ort/off": "pass"}, report.to_text()
