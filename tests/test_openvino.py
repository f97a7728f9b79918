"""OpenVINO as a second runtime: ``lower(target="openvino")`` is bit-exact in OpenVINO wherever the ONNX
Runtime path is exact, and ``validate(runtimes=...)`` adds OpenVINO's paths. Runs when openvino is
installed (the ``[openvino]`` extra; CI installs it)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from helpers import one_node_model, random_case

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.lowering import LowerOptions, lower_model

ov = pytest.importorskip("openvino")

from onnx_dequant.validation.openvino_runner import default_hint  # noqa: E402

ZERO_POINTS = ((True, True), (True, False), (False, True))  # (has one, constant)
CASES = (
    [(qt, "f32", axes, zp, c) for qt in ("i8", "u8", "i16", "u16") for axes in ((1,), (0, 2)) for zp, c in ZERO_POINTS]
    + [("i8", "f32", (), zp, c) for zp, c in ZERO_POINTS]
    + [("u8", "f16", (0, 2), zp, c) for zp, c in ZERO_POINTS]
    + [("i8", "bf16", (1,), zp, c) for zp, c in ZERO_POINTS]
)
"""8/16-bit inputs to f32, 8-bit inputs to f16/bf16: where the ONNX Runtime path is exact."""


def _statuses(report):
    return {p.label: p.status for p in report.paths}


@pytest.mark.parametrize("qt,rt,axes,zp,const", CASES)
def test_openvino_target_is_bit_exact_in_openvino(qt, rt, axes, zp, const):
    rng = np.random.default_rng(zlib.crc32(repr((qt, rt, axes, zp, const)).encode()))  # not hash(): per process
    x, s, z = random_case(rng, (4, 6, 8), axes, qt, rt, zp)
    if z is not None:
        x.reshape(-1)[:4] = z.reshape(-1)[0]  # x == zp: where OpenVINO's fma form is furthest off
    model = one_node_model(x, s, z, axes, const=const)
    feeds = {"x": x} if const else {"x": x, "s": s, **({"z": z} if z is not None else {})}
    report = odq.validate(
        model,
        feeds,
        paths=["lowered"],
        target="openvino",
        runtimes=("onnxruntime", "openvino"),
        levels=["default"],
        localize=False,
    )
    assert report.ok, report.to_text()
    assert all(p.outputs[0].max_ulp == 0 for p in report.paths if p.status == "pass")
    assert "lowered/openvino-f32" in _statuses(report)


def test_openvino_target_forms():
    rng = np.random.default_rng(0)
    x, s, z = random_case(rng, (4, 6, 8), (1,), "i8", "f32", True)
    ov_target = LowerOptions(target="openvino")
    report = lower_model(one_node_model(x, s, z, (1,)), ov_target).nodes
    assert report[0].strategy == "cast-sub-min-mul"
    assert "fma" in report[0].refused["dql-per-axis"]
    report = lower_model(one_node_model(x, s, None, (1,)), ov_target).nodes
    assert report[0].strategy == "dql-per-axis"
    report = lower_model(one_node_model(x, s, z, (1,), const=False), ov_target).nodes
    assert report[0].strategy == "dql-per-axis"  # a fed zero point is not folded
    for axes in ((), (1,), (0, 2)):  # 16-bit to f16: not the f64 form (OpenVINO runs it in f32), <= 1 ULP
        x, s, z = random_case(rng, (4, 6, 8), axes, "i16", "f16", True)
        for const in (True, False):
            report = lower_model(one_node_model(x, s, z, axes, const=const), ov_target).nodes
            assert report[0].strategy != "cast-sub-mul", (axes, const)


@pytest.mark.parametrize("qt,rt", [("i32", "f32"), ("i8", "f64")])
def test_openvino_target_refuses_what_openvino_cannot_compute_exactly(qt, rt):
    rng = np.random.default_rng(1)
    x, s, z = random_case(rng, (4, 6), (1,), qt, rt, True)
    with pytest.raises(odq.DequantizeError, match="OpenVINO's CPU computes f64 in f32"):
        odq.lower(one_node_model(x, s, z, (1,)), target="openvino")


def test_validate_runtime_option(capsys):
    rng = np.random.default_rng(2)
    x, s, z = random_case(rng, (4, 6, 8), (0, 2), "u8", "f32", True)
    import tempfile

    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/m.onnx"
        onnx.save(one_node_model(x, s, z, (0, 2)), path)
        assert main(["validate", path, "--runtime", "onnxruntime,openvino", "--target", "openvino", "-q"]) == 0
        out = capsys.readouterr().out
        assert "lowered/openvino-f32" in out and "kernel/openvino-f32" in out  # the kernel path: skipped
        assert ("lowered/openvino-default" in out) == (default_hint() not in ("f32", "float32"))
        assert main(["validate", path, "--runtime", "tensorrt", "-q"]) == 2


@pytest.mark.parametrize(
    "shape,axes,rt,opset,ops",
    [
        ((0, 3, 4), (1,), "f32", 21, ["ConstantOfShape"]),
        ((2, 0), (), "f16", 13, ["ConstantOfShape"]),
        ((2, 0, 3), (1,), "bf16", 20, ["ConstantOfShape"]),
        ((2, 0, 3), (1,), "bf16", 17, ["ConstantOfShape", "Cast"]),  # no bf16 ConstantOfShape below 20
    ],
)
def test_an_empty_output_keeps_its_shape_in_openvino(shape, axes, rt, opset, ops):
    """OpenVINO returns an empty initializer that is a graph output with shape ``()``: for its target the
    empty output is a ConstantOfShape (of f32 and a Cast for bf16 below opset 20), which it returns with
    the output's shape."""
    import onnx

    x, s, z = random_case(np.random.default_rng(3), shape, axes, "i8", rt)
    model = one_node_model(x, s, z, axes, opset=opset)
    lowered = lower_model(model, LowerOptions(target="openvino"))
    assert [n.strategy for n in lowered.nodes] == ["empty-output"]
    assert [n.op_type for n in lowered.model.graph.node] == ops
    onnx.checker.check_model(lowered.model, full_check=True)
    report = odq.validate(
        model, {"x": x}, paths=["lowered"], target="openvino", runtimes=("onnxruntime", "openvino"), levels=["default"]
    )
    assert report.ok and "lowered/openvino-f32" in _statuses(report), report.to_text()


def test_the_openvino_target_inlines_local_functions():
    """OpenVINO converts no model-local function (``No conversion rule found for operations: local.F``):
    its target inlines them, and OpenVINO runs the model exactly."""
    from onnx import TensorProto, helper

    x, s, z = random_case(np.random.default_rng(4), (2, 3), (1,), "i8", "f32")
    body = [odq.make_node(["a", "s", "z"], ["b"], axes=(1,), name="dq_in_fn")]
    fn = helper.make_function(
        "local", "F", ["a", "s", "z"], ["b"], body, [helper.make_opsetid("", 21), odq.schema.opset_import()]
    )
    graph = helper.make_graph(
        [helper.make_node("F", ["x", "s", "z"], ["y"], domain="local", name="call")],
        "g",
        [
            helper.make_tensor_value_info(n, t, v.shape)
            for n, t, v in (("x", TensorProto.INT8, x), ("s", TensorProto.FLOAT, s), ("z", TensorProto.INT8, z))
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)],
    )
    opsets = [helper.make_opsetid("", 21), odq.schema.opset_import(), helper.make_opsetid("local", 1)]
    model = helper.make_model(graph, opset_imports=opsets, functions=[fn])
    lowered = lower_model(model, LowerOptions(target="openvino"))
    assert (
        not lowered.model.functions
        and "inlined the model's local functions (OpenVINO converts none)" in lowered.changes
    )
    assert (
        len(lower_model(helper.make_model(graph, opset_imports=opsets, functions=[fn])).model.functions) == 1
    )  # ort keeps them
    report = odq.validate(
        model,
        {"x": x, "s": s, "z": z},
        paths=["lowered"],
        target="openvino",
        runtimes=("onnxruntime", "openvino"),
        levels=["default"],
    )
    assert report.ok and _statuses(report)["lowered/openvino-default"] == "pass", report.to_text()


def test_a_runtime_error_in_the_report_keeps_the_reason_of_a_multi_line_message():
    from onnx_dequant.validation.report import error_line

    where = "Exception from src/inference/src/cpp/core.cpp:105:"
    why = "-- No conversion rule found for operations: local.F"
    assert error_line(RuntimeError(f"{where}\nSummary:\n{why}\n")) == f"RuntimeError: {where} Summary: {why}"
    assert len(error_line(RuntimeError("x" * 1000))) == 400
