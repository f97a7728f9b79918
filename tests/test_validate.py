"""Validation: every path against the reference, the policy, inputs, localization, the report."""

from __future__ import annotations

import io
import json

import ml_dtypes
import numpy as np
import onnx
import pytest
from helpers import (
    dq_model,
    hand_lowered_two_stage,
    one_node_model,
    plain_model,
    scale_values,
    statuses,
    swap_axis,
    tamper_scale,
    two_stage_model,
    zero_points,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import dtypes
from onnx_dequant.lowering import lower
from onnx_dequant.validation import Policy, validate
from onnx_dequant.validation.diff import compare_output
from onnx_dequant.validation.inputs import DEFAULT_DIM, InputSpec, check_feeds, generate, graph_inputs, parse_dims
from onnx_dequant.validation.policy import Tolerance, tolerances
from onnx_dequant.validation.progress import Progress

# ---- every path agrees on valid models ----


@pytest.mark.parametrize(
    "x_dt,out_dt,axes",
    [
        ("i8", "f32", (0, 2)),
        ("u8", "f32", (1,)),
        ("i8", "f16", (2,)),
        ("u8", "bf16", (0, 1)),
        ("i16", "f32", ()),
        ("u16", "f16", (0, 2)),
        ("i32", "f32", (1, 2)),
        ("i8", "f64", (0,)),
        ("u4", "f32", (1,)),
        ("i4", "bf16", (1,)),
    ],
)
def test_valid_models_pass_every_path(x_dt, out_dt, axes):
    report = validate(dq_model(x_dt, out_dt, axes=axes, relu=False))
    assert report.ok, report.to_text()
    st = statuses(report)
    for level in ("default", "off"):
        assert st[f"lowered/{level}"] == "pass"
        assert st[f"kernel/{level}"] == "pass"
    exact, _ = odq.validation.policy.dequantize_ulp(dtypes.parse(x_dt), dtypes.parse(out_dt))
    assert {o.allowed for p in report.paths for o in p.outputs} == {"0 ULP" if exact else "1 ULP"}


def test_symbolic_dims_and_kernel_paths():
    report = validate(dq_model(symbolic=True, axes=(1, 2)), dims=["N=5"], paths=["kernel"])
    assert report.inputs[0]["shape"] == [5, 3, 4]
    assert report.ok, report.to_text()
    assert statuses(report) == {"kernel/default": "pass", "kernel/off": "pass"}


def test_a_0d_input_validates_on_every_path():
    s0 = numpy_helper.from_array(np.array(0.5, np.float32), "s0")
    z0 = numpy_helper.from_array(np.array(3, np.int8), "z0")
    nodes = [odq.make_node(["x", "s0", "z0"], ["y"], name="dq"), helper.make_node("Relu", ["y"], ["r"])]
    x = helper.make_tensor_value_info("x", TensorProto.INT8, [])
    r = helper.make_tensor_value_info("r", TensorProto.FLOAT, [])
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [r], [s0, z0]),
        opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()],
    )
    report = validate(model)
    assert report.ok, report.to_text()  # the bound 0-d input stays 0-d (ascontiguousarray made it (1,))
    assert set(statuses(report).values()) == {"pass"}


def test_model_without_dequantize_runs_ort_against_the_reference():
    report = validate(plain_model())
    assert statuses(report) == {"ort/default": "pass", "ort/off": "pass"}
    assert report.inputs[0]["shape"] == [DEFAULT_DIM, 5]
    out = report.paths[0].outputs[0]
    assert out.why.startswith("Add 'add': arithmetic on inexact") and out.allowed == "64 ULP (or of max |x|)"
    assert report.exit_code == 0


def test_two_stage_model_every_path():
    report = validate(two_stage_model())
    assert report.ok, report.to_text()
    assert len(report.paths) == 4


# ---- a tampered model given with against= fails and names the original node ----


def test_against_hand_lowered_model_agrees():
    m = two_stage_model()
    report = validate(m, against=hand_lowered_two_stage(m))
    assert report.ok, report.to_text()
    assert statuses(report) == {"against/default": "pass", "against/off": "pass"}


@pytest.mark.parametrize("initializer,node", [("s1", "dq1"), ("s2", "dq2")])
def test_against_tampered_scale_names_the_original_node(initializer, node):
    m = two_stage_model()
    bad = tamper_scale(hand_lowered_two_stage(m), initializer, index=(1,) if initializer == "s1" else (1, 2))
    report = validate(m, against=bad)
    assert not report.ok and report.exit_code == 1
    for p in report.paths:
        assert p.status == "fail"
        fd = p.first_difference
        assert fd is not None and fd.node == node and fd.op_type == "Dequantize", report.to_text()
        assert fd.result.failures >= 1 and fd.result.first_failure is not None
    assert f"first differing node: '{node}' (Dequantize)" in report.to_text()


def test_against_swapped_axis_names_the_original_node():
    m = dq_model("i8", "f32", shape=(4, 4), axes=(1,), relu=True)
    s = numpy_helper.to_array(m.graph.initializer[0])
    z = numpy_helper.to_array(m.graph.initializer[1])
    g = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["w"], axis=0, name="swapped"),  # should be 1
            helper.make_node("Relu", ["w"], ["y"], name="relu"),
        ],
        "lowered",
        list(m.graph.input),
        list(m.graph.output),
        [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "zp")],
    )
    bad = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    report = validate(m, against=bad)
    assert report.exit_code == 1
    assert {p.first_difference.node for p in report.paths} == {"dq1"}


def test_against_tampered_real_lowering_names_the_original_node():
    m = two_stage_model()
    lowered = lower(m)
    assert validate(m, against=lowered).ok
    # change one value of the first float initializer that holds dq2's scale values
    s2 = numpy_helper.to_array([t for t in m.graph.initializer if t.name == "s2"][0])
    target = None
    for t in lowered.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32 and a.size == s2.size and np.array_equal(np.sort(a.ravel()), np.sort(s2.ravel())):
            target = t.name
    assert target is not None, "no initializer holds dq2's scale"
    a = numpy_helper.to_array([t for t in lowered.graph.initializer if t.name == target][0])
    bad = tamper_scale(lowered, target, index=tuple(0 for _ in a.shape))
    report = validate(m, against=bad)
    assert report.exit_code == 1
    assert {p.first_difference.node for p in report.paths} == {"dq2"}, report.to_text()


def test_against_swapped_axis_in_real_lowering():
    m = dq_model("u8", "f32", shape=(5, 5), axes=(0,), relu=True)
    report = validate(m, against=swap_axis(lower(m)))
    assert report.exit_code == 1
    assert {p.first_difference.node for p in report.paths if p.status == "fail"} == {"dq1"}, report.to_text()


def test_path_that_cannot_load_is_an_error_not_a_crash():
    m = dq_model(relu=False)
    broken = helper.make_model(
        helper.make_graph(
            [helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=1)],  # scale (2,4) on axis 1: wrong
            "broken",
            list(m.graph.input),
            list(m.graph.output),
            [m.graph.initializer[0]],
        ),
        opset_imports=[helper.make_opsetid("", 21)],
    )
    report = validate(m, against=broken)
    assert report.exit_code == 1
    assert {p.status for p in report.paths} == {"error"}
    assert "ERROR" in report.to_text() and report.paths[0].reason


def test_against_with_other_interface_is_bad_input():
    m = dq_model(relu=False)
    other = plain_model()
    with pytest.raises(odq.DequantizeError, match="other model"):
        validate(m, against=other)


# ---- inputs ----


def test_generated_integers_span_the_type_and_are_reproducible():
    specs = [
        InputSpec("a", TensorProto.INT8, (64, 64)),
        InputSpec("b", TensorProto.UINT16, ("N",)),
        InputSpec("c", TensorProto.INT4, (3, 3)),
        InputSpec("d", TensorProto.FLOAT16, (100,)),
    ]
    f = generate(specs, seed=7, dims={"N": 50}, real_range=(-3.0, 2.0))
    assert f["a"].dtype == np.int8 and f["a"].min() == -128 and f["a"].max() == 127
    assert len(np.unique(f["a"])) > 200  # the whole range, not a corner of it
    assert f["b"].shape == (50,) and f["b"].min() == 0 and f["b"].max() == 65535
    assert f["c"].dtype == ml_dtypes.int4 and int(f["c"].min()) == -8 and int(f["c"].max()) == 7
    assert f["d"].dtype == np.float16 and f["d"].min() >= -3 and f["d"].max() <= 2
    again = generate(specs, seed=7, dims={"N": 50}, real_range=(-3.0, 2.0))
    assert all(np.array_equal(f[k].view(np.uint8), again[k].view(np.uint8)) for k in f)
    other = generate(specs, seed=8, dims={"N": 50}, real_range=(-3.0, 2.0))
    assert not np.array_equal(f["a"], other["a"])


def test_inputs_from_npz_by_name(tmp_path):
    m = two_stage_model()
    feeds = generate(graph_inputs(m), seed=3)
    path = tmp_path / "in.npz"
    np.savez(path, **feeds)
    before = path.read_bytes()
    report = validate(m, str(path), paths=["kernel"], levels=["off"])
    assert report.ok and report.inputs[0]["source"] == "file"
    assert path.read_bytes() == before  # never modified
    same = validate(m, feeds, paths=["kernel"], levels=["off"])
    assert same.ok


@pytest.mark.parametrize(
    "feeds,message",
    [
        ({"x": np.zeros((3, 4), np.int8)}, "missing input.*'wq'"),
        (
            {"x": np.zeros((3, 4), np.int8), "wq": np.zeros((3, 4), np.uint8), "z": np.zeros(1)},
            "unknown input name.*'z'",
        ),
        (
            {"x": np.zeros((3, 4), np.int16), "wq": np.zeros((3, 4), np.uint8)},
            "'x' must have element type int8, got int16",
        ),
        ({"x": np.zeros((3, 5), np.int8), "wq": np.zeros((3, 4), np.uint8)}, "'x' dim 1 must be 4"),
        ({"x": np.zeros((3,), np.int8), "wq": np.zeros((3, 4), np.uint8)}, "'x' must have rank 2"),
        ({"x": [1, 2], "wq": np.zeros((3, 4), np.uint8)}, "must be a NumPy array"),
    ],
)
def test_bad_inputs_are_refused_clearly(feeds, message):
    with pytest.raises(odq.DequantizeError, match=message):
        validate(two_stage_model(), feeds)


def test_symbolic_dims_must_agree():
    specs = [InputSpec("a", TensorProto.INT8, ("N", 2)), InputSpec("b", TensorProto.INT8, ("N",))]
    with pytest.raises(odq.DequantizeError, match="dim 'N' is 3 in input 'a' but 4 in input 'b'"):
        check_feeds(specs, {"a": np.zeros((3, 2), np.int8), "b": np.zeros(4, np.int8)})


def test_feeds_in_the_other_byte_order_are_taken_by_their_values():
    """An npz saved on a big-endian machine holds ``'>f4'``, ``'>i2'``: the same values, in this machine's order."""
    specs = [InputSpec("a", TensorProto.FLOAT, (2,)), InputSpec("b", TensorProto.INT16, (3,))]
    a, b = np.array([1.5, -2.25], ">f4"), np.array([-300, 7, 32767], ">i2")
    got = check_feeds(specs, {"a": a, "b": b})
    assert got["a"].dtype == np.float32 and got["b"].dtype == np.int16
    assert got["a"].tolist() == [1.5, -2.25] and got["b"].tolist() == [-300, 7, 32767]
    with pytest.raises(odq.DequantizeError, match="'b' must have element type int16, got >i4"):
        check_feeds(specs, {"a": a, "b": b.astype(">i4")})


@pytest.mark.parametrize("dims,message", [(["N"], "NAME=SIZE"), (["N=x"], "integer"), (["N=-1"], ">= 0")])
def test_bad_dims(dims, message):
    with pytest.raises(odq.DequantizeError, match=message):
        parse_dims(dims)


def test_inputs_that_break_the_op_are_bad_input():
    message = r"reference cannot run the model on these inputs: .*must match input shape \(\{5,3,4\}\)"
    with pytest.raises(odq.DequantizeError, match=message):
        validate(dq_model(symbolic=True), dims=["N=5"])


def test_bad_real_range():
    with pytest.raises(odq.DequantizeError, match="LOW <= HIGH"):
        validate(plain_model(), real_range=(2.0, 1.0))


def test_invalid_model_is_bad_input():
    m = dq_model()
    m.graph.node[0].attribute[0].ints[:] = [0, 5]  # axis 5 of a rank-3 input
    with pytest.raises(odq.DequantizeError, match=r"Quantization axis \(5\) must be less than input shape rank \(3\)"):
        validate(m)


# ---- policy ----


def test_policy_per_tensor():
    m = two_stage_model()
    tol = tolerances(onnx.shape_inference.infer_shapes(m))
    assert tol["a"] == Tolerance(0, False, "Dequantize 'dq1': i8->f32 rounds once")
    assert tol["r"] == Tolerance(0, False, "Dequantize 'dq1': i8->f32 rounds once, then Relu")
    # Add rounds once in both ORT and NumPy: exact inputs give an exact sum
    assert tol["y"].exact and tol["y"].why.startswith("Add 'add': rounds once")
    m16 = dq_model("i16", "f16", relu=True)
    tol16 = tolerances(onnx.shape_inference.infer_shapes(m16))
    assert tol16["y"].ulp == 1 and not tol16["y"].scaled and "rounds twice" in tol16["y"].why
    strict = tolerances(onnx.shape_inference.infer_shapes(m), Policy(ulp=0))
    assert strict["y"] == Tolerance(0, False, strict["y"].why)
    one = tolerances(onnx.shape_inference.infer_shapes(m), Policy(ulp=3))
    assert one["a"].ulp == one["y"].ulp == 3 and one["x"].ulp == 0
    loose = tolerances(onnx.shape_inference.infer_shapes(plain_model()), Policy(float_ulp=2))
    assert loose["t"] == Tolerance(2, True, loose["t"].why) and loose["t"].why.startswith("Tanh 'tanh': float")
    assert loose["y"].ulp == 2 and loose["y"].scaled  # Add of an inexact tensor
    with pytest.raises(odq.DequantizeError):
        Policy(float_ulp=-1)


def _chain_model(x_dt, out_dt, ops, *, out_type=None):
    """x -> Dequantize 'dq' -> ops (op_type, attrs) one after another -> y."""
    x, out = dtypes.parse(x_dt), dtypes.parse(out_dt)
    nodes = [odq.make_node(["x", "s", "zp"], ["t0"], axes=(1,), name="dq")]
    for i, (op, attrs) in enumerate(ops):
        nodes.append(helper.make_node(op, [f"t{i}"], [f"t{i + 1}"], name=f"n{i}", **attrs))
    nodes[-1].output[0] = "y"
    last = dtypes.parse(out_type) if out_type else out
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", x.onnx, [2, 3, 4])],
        [helper.make_tensor_value_info("y", last.onnx, ["a", "b", "c"])],
        [numpy_helper.from_array(scale_values((3,), out), "s"), numpy_helper.from_array(zero_points((3,), x), "zp")],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])


@pytest.mark.parametrize(
    "x_dt,out_dt,ops,out_type,allowed",
    [
        ("i8", "f32", [("Identity", {})], None, "0 ULP"),
        ("i8", "f32", [("Transpose", {"perm": [2, 0, 1]}), ("Identity", {})], None, "0 ULP"),
        ("u8", "f16", [("Cast", {"to": TensorProto.FLOAT})], "f32", "0 ULP"),
        ("i16", "f16", [("Transpose", {"perm": [1, 0, 2]})], None, "1 ULP"),
        ("i16", "f16", [("Cast", {"to": TensorProto.FLOAT})], "f32", "1 ULP of f16"),
        ("i16", "f16", [("Cast", {"to": TensorProto.FLOAT}), ("Relu", {})], "f32", "1 ULP of f16"),
        ("i8", "f32", [("Tanh", {})], None, "64 ULP (or of max |x|)"),
        ("i8", "f32", [("Tanh", {}), ("Identity", {})], None, "64 ULP (or of max |x|)"),
    ],
)
def test_dequantize_outputs_get_the_strict_budget_through_exact_ops(x_dt, out_dt, ops, out_type, allowed):
    report = validate(_chain_model(x_dt, out_dt, ops, out_type=out_type))
    assert report.ok, report.to_text()
    assert {o.allowed for p in report.paths for o in p.outputs} == {allowed}


def test_integer_results_of_inexact_tensors_allow_one_flip():
    g = helper.make_graph(
        [
            helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
            helper.make_node("QuantizeLinear", ["t", "s"], ["q"], name="q"),
            helper.make_node("QuantizeLinear", ["x", "s"], ["qx"], name="qx"),
        ],
        "flip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [
            helper.make_tensor_value_info("q", TensorProto.UINT8, [4]),
            helper.make_tensor_value_info("qx", TensorProto.UINT8, [4]),
        ],
        [numpy_helper.from_array(np.array(0.01, np.float32), "s")],
    )
    tol = tolerances(onnx.shape_inference.infer_shapes(helper.make_model(g)))
    assert tol["q"].ulp == 1 and "may flip" in tol["q"].why
    assert tol["qx"].exact  # QuantizeLinear divides once and rounds half to even, as the reference does
    h = onnx.ModelProto()
    h.CopyFrom(helper.make_model(g))
    h.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    h.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.array(0.01, np.float16), "s"))
    tol16 = tolerances(onnx.shape_inference.infer_shapes(h))
    assert tol16["qx"].ulp == 1 and "divides in f16" in tol16["qx"].why


def test_unit_counts_ulps_of_the_narrower_type():
    ref = np.array([1.0, 2.0, 3.0], np.float16)
    got = ref.copy()
    got[1] = np.nextafter(ref[1], np.float16(10))
    wide_ref, wide_got = ref.astype(np.float32), got.astype(np.float32)
    assert not compare_output("y", wide_ref, wide_got, Tolerance(1, False, "")).ok  # 8192 f32 ULPs
    r = compare_output("y", wide_ref, wide_got, Tolerance(1, False, "", "f16"))
    assert r.ok and r.max_ulp == 1 and r.mismatches == 1 and r.allowed == "1 ULP of f16"
    got[2] = np.nextafter(np.nextafter(ref[2], np.float16(10)), np.float16(10))
    r = compare_output("y", wide_ref, got.astype(np.float32), Tolerance(1, False, "", "f16"))
    assert not r.ok and r.failures == 1 and r.first_failure["index"] == [2]


def test_compare_output_figures():
    ref = np.array([[1.0, np.nan, 3.0], [0.0, 5.0, np.inf]], np.float32)
    got = ref.copy()
    r = compare_output("y", ref, got, Tolerance(0, False, ""))
    assert r.ok and r.mismatches == 0 and r.max_ulp == 0 and r.first_mismatch is None  # NaN equals NaN
    got[1, 1] = np.nextafter(np.float32(5.0), np.float32(10.0))
    got[0, 2] = np.nan
    r = compare_output("y", ref, got, Tolerance(1, False, ""))
    assert not r.ok and r.mismatches == 2 and r.failures == 1
    assert r.first_mismatch["index"] == [0, 2] and r.first_failure["index"] == [0, 2]
    assert r.max_ulp == np.inf
    got[0, 2] = 3.0
    r = compare_output("y", ref, got, Tolerance(1, False, ""))
    assert r.ok and r.mismatches == 1 and r.max_ulp == 1
    assert r.max_abs == pytest.approx(float(np.spacing(np.float32(5))))
    assert r.first_mismatch == {"index": [1, 1], "reference": 5.0, "got": float(got[1, 1])}
    shape = compare_output("y", ref, ref[:1], Tolerance(0, False, ""))
    assert not shape.ok and "shape" in shape.note
    # scaled: near zero an absolute error within N ULP of the largest magnitude passes
    ref2 = np.array([1000.0, 1e-6], np.float32)
    got2 = np.array([1000.0, 2e-6], np.float32)
    assert not compare_output("y", ref2, got2, Tolerance(4, False, "")).ok
    assert compare_output("y", ref2, got2, Tolerance(4, True, "")).ok


def test_compare_output_bf16_and_integers():
    ref = np.array([1, 2, 3], ml_dtypes.bfloat16)
    got = ref.copy()
    got[2] = ml_dtypes.bfloat16(3.015625)  # next bf16 after 3.0
    r = compare_output("y", ref, got, Tolerance(0, False, ""))
    assert not r.ok and r.max_ulp == 1 and r.first_failure["got"] == 3.015625
    ri = compare_output("q", np.array([1, 2], np.int8), np.array([1, 4], np.int8), Tolerance(0, False, ""))
    assert not ri.ok and ri.max_abs == 2


def test_large_output_compares_in_chunks():
    ref = np.arange(3 * (1 << 20) + 5, dtype=np.float32)
    got = ref.copy()
    got[-1] = -got[-1]
    r = compare_output("y", ref, got, Tolerance(0, False, ""))
    assert r.failures == 1 and r.first_failure["index"] == [ref.size - 1]


# ---- report ----


def test_report_json_and_text():
    m = two_stage_model()
    report = validate(m, against=tamper_scale(hand_lowered_two_stage(m), "s1", index=(1,)))
    d = json.loads(report.to_json())
    assert d["ok"] is False and d["verdict"].startswith("DISAGREE")
    p = d["paths"][0]
    assert p["path"] == "against" and p["level"] == "default" and p["status"] == "fail"
    out = p["outputs"][0]
    assert {"max_abs", "max_ulp", "mismatches", "first_mismatch", "ok", "allowed"} <= set(out)
    assert p["first_difference"]["node"] == "dq1"
    text = report.to_text()
    assert "max ULP" in text and "against/default" in text and "DISAGREE" in text
    # the policy is explicit: every output's budget and where it comes from, once
    assert "allowed, per output (docs/precision.md: 0 ULP where ONNX Runtime can be exact" in text
    assert "  y  0 ULP: Add 'add': rounds once, as the reference does, on exact tensors" in text
    assert out["why"] == "Add 'add': rounds once, as the reference does, on exact tensors"
    assert "one budget: 2 ULP" in validate(m, policy=Policy(ulp=2)).to_text()


def test_all_paths_skipped_is_not_agreement(monkeypatch):
    from onnx_dequant.validation import core, runners

    def skip(*a, **k):
        raise runners.Skip("not here")

    monkeypatch.setattr(core, "OrtRunner", skip)
    report = validate(plain_model())
    assert not report.ok and report.exit_code == 1 and "NOTHING COMPARED" in report.verdict


def test_progress_prints_slow_steps_only():
    buf = io.StringIO()
    p = Progress(True, after=0.0, stream=buf)
    with p.step("running x"):
        pass
    assert "running x ..." in buf.getvalue() and "running x:" in buf.getvalue()
    quiet = io.StringIO()
    q = Progress(True, after=60.0, stream=quiet)
    with q.step("quick"):
        pass
    assert quiet.getvalue() == ""


# ---- reused output buffers ----


def test_poison_makes_every_stride_element_differ():
    from onnx_dequant.validation.buffers import POISON_STRIDE, poison

    for dt in (np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int8, np.uint16, np.bool_):
        expected = np.zeros(3 * POISON_STRIDE + 7, dt)
        if np.dtype(dt).kind == "f" or dt is ml_dtypes.bfloat16:
            expected[::2] = np.nan  # NaN where expected: the poison must not be NaN
        buf = expected.copy()
        poison(buf, expected[::POISON_STRIDE].copy())
        r = compare_output("y", expected, buf, Tolerance(0, False, ""))
        assert r.failures == len(range(0, expected.size, POISON_STRIDE)), dt


def test_buffers_are_written_in_place_and_reused():
    from onnx_dequant.validation.buffers import POISON_STRIDE
    from onnx_dequant.validation.runners import OrtRunner, ReferenceRunner

    m = dq_model("u8", "f32", axes=(1,), relu=True)
    feeds = generate(graph_inputs(m), seed=4)
    expected = ReferenceRunner(m).run(feeds)["y"]
    buf = np.empty_like(expected)
    sample = expected.reshape(-1)[::POISON_STRIDE].copy()
    for kernel in (False, True):
        model = m if kernel else hand_lowered(m)
        got = OrtRunner(model, "default", kernel=kernel).run(feeds, {"y": (buf, sample)})["y"]
        assert got is buf
        assert compare_output("y", expected, got, Tolerance(0, False, "")).ok
    # an output that does not fit the buffer comes back as its own array
    small = np.empty((1,), np.float32)
    got = OrtRunner(m, "off", kernel=True).run(feeds, {"y": (small, small)})["y"]
    assert got is not small and got.shape == expected.shape


def hand_lowered(m):
    """dq_model(axes=(1,), relu=True) as DequantizeLinear (axis 1) and Relu."""
    g = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["w"], axis=1), helper.make_node("Relu", ["w"], ["y"])],
        "lowered",
        list(m.graph.input),
        list(m.graph.output),
        list(m.graph.initializer),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def test_large_outputs_release_the_reference_during_kernel_runs(monkeypatch):
    from onnx_dequant.validation import expected

    monkeypatch.setattr(expected, "RELEASE_BYTES", 1)
    report = validate(dq_model("i8", "f32", axes=(0, 2)))
    assert report.ok, report.to_text()
    assert report.reference_runs == 3  # once, then again after each kernel run
    bad = validate(
        two_stage_model(),
        against=tamper_scale(hand_lowered_two_stage(two_stage_model()), "s1", index=(1,)),
        paths=["against", "kernel"],
    )
    assert statuses(bad) == {
        "against/default": "fail",
        "against/off": "fail",
        "kernel/default": "pass",
        "kernel/off": "pass",
    }


# ---- properties ----


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([np.float32, np.float16, np.float64, ml_dtypes.bfloat16]),
    st.integers(1, 3000),
    st.data(),
)
def test_compare_output_counts_what_was_changed(dt, n, data):
    rng = np.random.default_rng(n)
    ref = rng.uniform(-100, 100, n).astype(dt)
    changed = sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=5)))
    steps = data.draw(st.lists(st.integers(1, 3), min_size=len(changed), max_size=len(changed)))
    got = ref.copy()
    bits = got.view(f"u{got.dtype.itemsize}")
    for i, k in zip(changed, steps):
        bits[i] += k  # k representable values further from zero (ref has no zeros, NaNs or infinities)
    r = compare_output("y", ref, got, Tolerance(1, False, ""))
    assert r.mismatches == len(changed)
    assert r.failures == sum(k > 1 for k in steps)
    assert r.max_ulp == (max(steps) if steps else 0)
    if changed:
        assert r.first_mismatch["index"] == [changed[0]]
    assert r.ok == all(k <= 1 for k in steps)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([("i8", "f32"), ("u8", "f16"), ("i16", "f32"), ("u8", "f64"), ("i32", "f32")]),
    st.sampled_from([(), (0,), (1,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]),
    st.integers(0, 2**31 - 1),
)
def test_any_tampered_scale_value_is_found_and_named(types, axes, seed):
    """Valid models pass on the kernel path; a hand-lowered copy with one scale value changed fails on
    whichever output element it reaches, and the original node is named."""
    x_dt, out_dt = types
    shape = (2, 3, 4)
    m = dq_model(x_dt, out_dt, shape=shape, axes=axes, relu=False)
    s = numpy_helper.to_array(m.graph.initializer[0])
    zp = numpy_helper.to_array(m.graph.initializer[1])
    rng = np.random.default_rng(seed)
    s = s.copy()
    s.reshape(-1)[rng.integers(0, s.size)] = rng.choice([0.0, -1.5, np.inf, np.nan, 1e-40])  # special values
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(s, "s"))
    assert validate(m, seed=seed, paths=["kernel"], levels=["off"]).ok
    # the same node as Cast/Sub/Mul with the scale broadcast by hand: exact for these types
    bshape = tuple(shape[a] if a in axes else 1 for a in range(3))
    out_np = dtypes.parse(out_dt).numpy
    work = np.float64
    sb = s.reshape(bshape).astype(work)
    index = tuple(int(rng.integers(0, d)) for d in sb.shape)
    bad_s = sb.copy()
    bad_s[index] = bad_s[index] * 2 + 1  # always a different value (NaN stays NaN: pick another)
    if np.isnan(sb[index]) or np.isinf(sb[index]):
        bad_s[index] = 0.75

    def lowered(scale):
        g = helper.make_graph(
            [
                helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.DOUBLE),
                helper.make_node("Cast", ["zp"], ["zf"], to=TensorProto.DOUBLE),
                helper.make_node("Sub", ["xf", "zf"], ["d"]),
                helper.make_node("Mul", ["d", "sd"], ["p"]),
                helper.make_node("Cast", ["p"], ["y"], to=dtypes.parse(out_dt).onnx, name="cast_out"),
            ],
            "lowered",
            list(m.graph.input),
            list(m.graph.output),
            [
                numpy_helper.from_array(scale.astype(work), "sd"),
                numpy_helper.from_array(zp.reshape(bshape), "zp"),
            ],
        )
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])

    assert validate(m, seed=seed, against=lowered(sb), levels=["off"]).ok
    if np.float64(bad_s[index]).astype(out_np) == np.float64(sb[index]).astype(out_np):
        return  # the change vanishes in the output type
    report = validate(m, seed=seed, against=lowered(bad_s), levels=["off"])
    p = report.paths[0]
    # it fails unless every input element the scale reaches makes the product equal (x == zp gives 0)
    if p.status == "fail":
        assert p.first_difference.node == "dq1" and p.first_difference.tensor == "y"
    else:
        assert p.outputs[0].mismatches == 0


def test_f64_ulp_distance_is_exact():
    """compare.ulp_distance used to subtract float64 copies of f64 bit patterns (1 ULP read as 0 or 1024)."""
    from onnx_dequant.compare import ulp_distance

    a = np.array([1.0, -3.5, 1e300, np.inf], np.float64)
    b = np.array([np.nextafter(1.0, 2.0), np.nextafter(np.nextafter(-3.5, -9.0), -9.0), 1e300, -np.inf])
    assert ulp_distance(a, b).tolist() == [1.0, 2.0, 0.0, float(2 * 0x7FF0000000000000)]
    r = compare_output("y", a, b, Tolerance(0, False, ""))
    assert r.mismatches == 3 and r.first_failure["index"] == [0]


# ---- functions and subgraphs ----


def _function_model():
    fn = helper.make_function(
        "local",
        "DQF",
        ["x", "s"],
        ["y"],
        [odq.make_node(["x", "s"], ["y"], axes=(1,), name="inner_dq")],
        opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()],
    )
    g = helper.make_graph(
        [helper.make_node("DQF", ["x", "s"], ["y"], domain="local", name="call")],
        "fn",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(scale_values((4,), "f32"), "s")],
    )
    opsets = [helper.make_opsetid("", 21), odq.schema.opset_import(), helper.make_opsetid("local", 1)]
    return helper.make_model(g, opset_imports=opsets, functions=[fn])


def test_model_local_function_with_dequantize():
    report = validate(_function_model())
    assert report.ok, report.to_text()
    assert report.dequantize_nodes == 1 and len(report.paths) == 4
    assert {o.allowed for p in report.paths for o in p.outputs} == {"0 ULP"}  # the body is seen by the policy


def test_if_subgraph_with_dequantize_both_branches():
    s = scale_values((4,), "f32")
    then_g = helper.make_graph(
        [odq.make_node(["x", "s"], ["t"], axes=(1,), name="dq_then")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 4])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["e"], to=TensorProto.FLOAT)],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 4])],
    )
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="if")],
        "ifg",
        [
            helper.make_tensor_value_info("x", TensorProto.INT8, [3, 4]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(s, "s")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])
    x = generate(graph_inputs(m), seed=2)["x"]
    for c in (True, False):
        report = validate(m, {"x": x, "c": np.array(c)})
        assert report.ok and report.dequantize_nodes == 1, report.to_text()


def test_large_initializers_are_left_out_of_checking_and_typing_only(monkeypatch):
    from onnx_dequant import graphs

    monkeypatch.setattr(graphs, "LARGE_BYTES", 0)  # every initializer counts as large
    m = two_stage_model()
    light = graphs.without_large_initializers(m)
    assert not light.graph.initializer and {"s1", "z1", "s2", "z2"} <= {i.name for i in light.graph.input}
    assert len(m.graph.initializer) == 4  # the model itself is untouched
    report = validate(m)
    assert report.ok and report.paths[0].outputs[0].allowed == "0 ULP", report.to_text()
    bad = onnx.ModelProto()
    bad.CopyFrom(m)
    bad.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones(5, np.float32), "s1"))  # 5 scales, axis has 4
    with pytest.raises(odq.DequantizeError, match=r"Scale shape \(\{5\}\) and zero point shape \(\{4\}\) must match"):
        validate(bad)


def test_failing_lowered_path_names_the_original_node(monkeypatch):
    """A lowering that went wrong (here: our lowering, then one scale value changed) fails the
    ``lowered`` path, and the report names the original model's Dequantize node."""
    from onnx_dequant import lowering

    real = lowering.lower

    def wrong(model, **kw):
        out = real(model, **kw)
        used = next(n.input[1] for n in out.graph.node if n.op_type == "DequantizeLinear")
        scale = next(t for t in out.graph.initializer if t.name == used)
        return tamper_scale(out, scale.name, index=(0,) * len(scale.dims))

    monkeypatch.setattr(lowering, "lower", wrong)
    m = dq_model("i8", "f32", shape=(3, 4), axes=(1,), relu=False)
    report = validate(m, paths=["lowered"])
    assert report.exit_code == 1 and statuses(report) == {"lowered/default": "fail", "lowered/off": "fail"}
    for p in report.paths:
        assert p.first_difference.node == "dq1" and p.first_difference.op_type == "Dequantize", report.to_text()
        assert "first differing node: 'dq1' (Dequantize)" in report.to_text()
        assert p.outputs[0].allowed == "0 ULP" and p.outputs[0].failures >= 1


def test_a_lowered_float64_form_cast_to_f16_is_allowed_orts_double_rounding():
    """A u16 -> f16 node lowered below opset 21 computes in float64 and Casts to f16, which ONNX Runtime 1.32
    rounds through f32: these products land next to an f16 midpoint, where that flips the last bit. The
    validation of the lowered model allows the Cast 1 ULP (a review found it reporting FAIL)."""
    x = np.array([28677, 36859, 57354, 1, 2], np.uint16)
    s = np.array(0.0999755859375, np.float16)
    m = one_node_model(x, s, None, (), opset=18)
    lowered = lower(m, opset=18)
    tol = tolerances(lowered)
    (out,) = [o.name for o in lowered.graph.output]
    assert tol[out].ulp == 1 and "rounds twice" in tol[out].why
    assert validate(lowered, {"x": x}).ok
