"""odq.session: models that keep Dequantize run under ONNX Runtime with the Python kernel, bit-exact."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import zlib

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import SHAPE, ints, model_of, scales, single_node_model, vi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import dtypes
from onnx_dequant.compare import same_bits
from onnx_dequant.ort import KernelSession, kernels, runs
from onnx_dequant.ort.prepare import prepare
from onnx_dequant.ort.runs import Fed
from onnx_dequant.reference import DequantizeOp

KERNEL_INPUTS = ["i8", "u8", "i16", "u16", "i32"]
KERNEL_OUTPUTS = ["f32", "f64"]
AXES_PATTERNS = [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]


# ---- every type pair the kernel carries, every axes pattern: bit-exact, exact dtype ----


@pytest.mark.parametrize("zero_point", [True, False], ids=["zp", "nozp"])
@pytest.mark.parametrize("out_elem", KERNEL_OUTPUTS)
@pytest.mark.parametrize("x_elem", KERNEL_INPUTS)
def test_every_type_pair_and_axes_pattern_bit_exact(x_elem, out_elem, zero_point, placement):
    rng = np.random.default_rng(zlib.crc32(repr((x_elem, out_elem, zero_point)).encode()))  # not hash(): per process
    nodes, vis, outs, feed, expected = [], [vi("x", x_elem, SHAPE)], [], {}, {}
    x = ints(rng, x_elem, SHAPE)
    feed["x"] = x
    for k, axes in enumerate(AXES_PATTERNS):
        sshape = tuple(SHAPE[a] for a in axes)
        s = scales(rng, out_elem, sshape)
        z = ints(rng, x_elem, sshape) if zero_point else None
        vis.append(vi(f"s{k}", out_elem, sshape))
        feed[f"s{k}"] = s
        ins = ["x", f"s{k}"]
        if zero_point:
            vis.append(vi(f"z{k}", x_elem, sshape))
            feed[f"z{k}"] = z
            ins.append(f"z{k}")
        nodes.append(odq.make_node(ins, [f"y{k}"], axes=axes, dtype=out_elem if k % 2 else None, name=f"dq{k}"))
        outs.append(vi(f"y{k}", out_elem, SHAPE))
        expected[f"y{k}"] = odq.dequantize(x, s, z, axes=axes)
    sess = odq.session(model_of(nodes, vis, outs))
    assert isinstance(sess, ort.InferenceSession)
    assert sess.kernel_nodes == tuple(f"dq{k}" for k in range(len(AXES_PATTERNS)))
    assert sess.lowered_nodes == ()
    placed = kernels.stats()["placed"]
    results = sess.run(None, feed)
    assert kernels.stats()["placed"] - placed == (len(outs) if placement == "bound" else 0)
    for out, got in zip(outs, results):
        want = expected[out.name]
        assert got.dtype == dtypes.parse(out_elem).numpy
        assert got.shape == SHAPE
        assert same_bits(got, want), out.name


def test_i32_extremes_never_wrap():
    x = np.array([2**31 - 1, -(2**31), 0, 7], np.int32)
    z = np.array(-(2**31), np.int32)
    for out_elem in KERNEL_OUTPUTS:
        s = np.array(1.0, dtypes.parse(out_elem).numpy)
        (y,) = odq.session(single_node_model("i32", out_elem, (), x_shape=(4,))).run(None, {"x": x, "s": s, "z": z})
        assert y[0] == float(2**32 - 1)  # ORT's own DequantizeLinear wraps to -1 here
        assert same_bits(y, odq.dequantize(x, s, z))


def test_special_scales_flow_through():
    s = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    x = np.array([[1, -1, 0, 2, 3]] * 2, np.int8)
    z = np.zeros(5, np.int8)
    (y,) = odq.session(single_node_model("i8", "f32", (1,), x_shape=(2, 5))).run(None, {"x": x, "s": s, "z": z})
    assert same_bits(y, odq.dequantize(x, s, z, axes=(1,)))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(KERNEL_INPUTS),
    st.sampled_from(KERNEL_OUTPUTS),
    st.lists(st.integers(1, 4), min_size=0, max_size=4),
    st.data(),
)
def test_random_shapes_and_axes(x_elem, out_elem, shape, data):
    shape = tuple(shape)
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, max(0, len(shape) - 1)), max_size=len(shape)))))
    axes = tuple(a for a in axes if a < len(shape))
    zero_point = data.draw(st.booleans())
    rng = np.random.default_rng(len(shape) * 31 + len(axes))
    sshape = tuple(shape[a] for a in axes)
    x, s = ints(rng, x_elem, shape), scales(rng, out_elem, sshape)
    z = ints(rng, x_elem, sshape) if zero_point else None
    model = single_node_model(x_elem, out_elem, axes, zero_point=zero_point, x_shape=shape)
    feed = {"x": x, "s": s, **({"z": z} if zero_point else {})}
    (y,) = odq.session(model).run(None, feed)
    assert y.dtype == dtypes.parse(out_elem).numpy
    assert same_bits(y, odq.dequantize(x, s, z, axes=axes))


def test_large_multi_axis_matches_reference():
    rng = np.random.default_rng(5)
    shape = (8, 3, 64, 96)
    x = ints(rng, "i8", shape)
    s = scales(rng, "f32", (8, 96))
    z = ints(rng, "i8", (8, 96))
    (y,) = odq.session(single_node_model("i8", "f32", (0, 3), x_shape=shape)).run(None, {"x": x, "s": s, "z": z})
    assert same_bits(y, odq.dequantize(x, s, z, axes=(0, 3)))


# ---- models mixing the op with standard ops; subgraphs; initializers ----


def test_mixed_with_standard_ops_matches_reference_evaluator():
    rng = np.random.default_rng(1)
    w = ints(rng, "i8", (6, 4))
    ws = scales(rng, "f32", (4,))
    wz = ints(rng, "i8", (4,))
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(ws, "ws"), numpy_helper.from_array(wz, "wz")]
    nodes = [
        helper.make_node("Transpose", ["xq"], ["xt"], perm=[1, 0]),  # standard op feeding ours
        odq.make_node(["xt", "xs"], ["xf"], axes=[0], name="dq_act"),  # per-row, no zero point
        odq.make_node(["w", "ws", "wz"], ["wf"], axes=[1], name="dq_weight"),  # from initializers
        helper.make_node("MatMul", ["xf", "wf"], ["mm"]),
        helper.make_node("Relu", ["mm"], ["out"]),
    ]
    vis = [vi("xq", "u8", (6, 5)), vi("xs", "f32", (5,))]
    outs = [vi("out", "f32", (5, 4)), vi("xf", "f32", (5, 6)), vi("wf", "f32", (6, 4))]
    model = model_of(nodes, vis, outs, inits)
    xq = ints(rng, "u8", (6, 5))
    xs = scales(rng, "f32", (5,))
    sess = odq.session(model)
    assert set(sess.kernel_nodes) == {"dq_act", "dq_weight"}
    got, got_xf, got_wf = sess.run(None, {"xq": xq, "xs": xs})
    want, _, _ = onnx.reference.ReferenceEvaluator(model, new_ops=[DequantizeOp]).run(None, {"xq": xq, "xs": xs})
    xf = odq.dequantize(xq.T.copy(), xs, axes=(0,))
    wf = odq.dequantize(w, ws, wz, axes=(1,))
    assert same_bits(got_xf, xf) and same_bits(got_wf, wf)  # our nodes exact, fed by and feeding standard ops
    np.testing.assert_allclose(got, np.maximum(xf @ wf, 0), rtol=1e-5, atol=1e-5)  # MatMul's summation order
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_op_inside_if_subgraph_and_unnamed_nodes():
    then_g = helper.make_graph(
        [odq.make_node(["x", "s"], ["t_out"], axes=[0])], "then", [], [vi("t_out", "f64", (2, 3))]
    )
    else_g = helper.make_graph(
        [odq.make_node(["x", "s", "z"], ["e_out"], axes=[0])], "else", [], [vi("e_out", "f64", (2, 3))]
    )
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    model = model_of(
        [node],
        [vi("c", "boolean", ()), vi("x", "i16", (2, 3)), vi("s", "f64", (2,)), vi("z", "i16", (2,))],
        [vi("y", "f64", (2, 3))],
    )
    sess = odq.session(model)
    assert sorted(sess.kernel_nodes) == ["Dequantize->e_out", "Dequantize->t_out"]
    x = np.array([[1, -2, 3], [32767, -32768, 0]], np.int16)
    s = np.array([0.5, 3.0])
    z = np.array([-3, 5], np.int16)
    for cond, want in ((True, odq.dequantize(x, s, axes=[0])), (False, odq.dequantize(x, s, z, axes=[0]))):
        (y,) = sess.run(None, {"c": np.array(cond), "x": x, "s": s, "z": z})
        assert same_bits(y, want)


def test_local_function_with_the_op_is_inlined():
    fn = helper.make_function(
        "local",
        "DQ",
        ["a", "b"],
        ["c"],
        [odq.make_node(["a", "b"], ["c"], axes=[1], name="in_fn")],
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)],
    )
    model = model_of(
        [helper.make_node("DQ", ["x", "s"], ["y"], domain="local")],
        [vi("x", "u8", (2, 3)), vi("s", "f32", (3,))],
        [vi("y", "f32", (2, 3))],
    )
    model.functions.append(fn)
    model.opset_import.append(helper.make_opsetid("local", 1))
    sess = odq.session(model)
    assert len(sess.kernel_nodes) == 1
    x = np.arange(6, dtype=np.uint8).reshape(2, 3)
    s = np.array([1.5, -2.0, 0.25], np.float32)
    (y,) = sess.run(None, {"x": x, "s": s})
    assert same_bits(y, odq.dequantize(x, s, axes=[1]))


def test_op_in_an_if_inside_a_local_function_is_inlined():
    then_g = helper.make_graph(
        [odq.make_node(["a", "b"], ["t"], axes=[1], name="in_if")], "then", [], [vi("t", "f32", (2, 3))]
    )
    else_g = helper.make_graph(
        [helper.make_node("Cast", ["a"], ["e"], to=TP.FLOAT)], "else", [], [vi("e", "f32", (2, 3))]
    )
    fn = helper.make_function(
        "local",
        "F",
        ["c", "a", "b"],
        ["o"],
        [helper.make_node("If", ["c"], ["o"], then_branch=then_g, else_branch=else_g)],
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)],
    )
    vis = [vi("c", "boolean", ()), vi("x", "i8", (2, 3)), vi("s", "f32", (3,))]
    model = model_of([helper.make_node("F", ["c", "x", "s"], ["y"], domain="local")], vis, [vi("y", "f32", (2, 3))])
    model.functions.append(fn)
    model.opset_import.append(helper.make_opsetid("local", 1))
    sess = odq.session(model)
    assert len(sess.kernel_nodes) == 1
    x = np.array([[1, -2, 3], [-128, 127, 0]], np.int8)
    s = np.array([0.5, -3.0, 0.125], np.float32)
    assert same_bits(sess.run(None, {"c": np.array(True), "x": x, "s": s})[0], odq.dequantize(x, s, axes=[1]))


# ---- nodes the kernel cannot carry are lowered ----


def _lower_available() -> bool:
    try:
        from onnx_dequant.lowering import lower  # noqa: F401
    except ImportError:
        return False
    return True


needs_lower = pytest.mark.skipif(not _lower_available(), reason="onnx_dequant.lower not built yet")


@needs_lower
def test_fallback_nodes_are_lowered_logged_and_listed(caplog):
    rng = np.random.default_rng(2)
    x = ints(rng, "i8", (4, 6))
    s16 = scales(rng, "f16", (4,))
    s32 = scales(rng, "f32", (6,))
    sbf = scales(rng, "f32", (4,)).astype(ml_dtypes.bfloat16)
    z = ints(rng, "i8", (4,))
    x4 = np.array([[-8, 7, 0, 1], [3, -1, -8, 7]], ml_dtypes.int4)
    s4 = np.array([0.5, 2.0], np.float32)
    xu4 = np.array([[0, 15, 7], [8, 1, 2]], ml_dtypes.uint4)
    su4 = np.array([0.25, -1.0, 3.0])
    inits = [
        numpy_helper.from_array(sbf.astype(np.float32), "sbf32"),
        helper.make_tensor("x4", TP.INT4, [2, 4], x4.astype(np.int8).flatten().tolist()),
        numpy_helper.from_array(s4, "s4"),
        helper.make_tensor("xu4", TP.UINT4, [2, 3], xu4.astype(np.uint8).flatten().tolist()),
        numpy_helper.from_array(su4, "su4"),
    ]
    nodes = [
        odq.make_node(["x", "s16", "z"], ["y16"], axes=[0], name="to_f16"),
        odq.make_node(["x", "s32"], ["y32"], axes=[1], name="to_f32"),
        helper.make_node("Cast", ["sbf32"], ["sbf"], to=TP.BFLOAT16),
        odq.make_node(["x", "sbf", "z"], ["ybf"], axes=[0], name="to_bf16"),
        helper.make_node("Cast", ["ybf"], ["ybf_f32"], to=TP.FLOAT),  # ORT cannot hand bf16 to NumPy
        odq.make_node(["x4", "s4"], ["y4"], axes=[0], name="from_i4"),
        odq.make_node(["xu4", "su4"], ["yu4"], axes=[1], name="from_u4"),
    ]
    vis = [vi("x", "i8", (4, 6)), vi("s16", "f16", (4,)), vi("s32", "f32", (6,)), vi("z", "i8", (4,))]
    outs = [
        vi("y16", "f16", (4, 6)),
        vi("y32", "f32", (4, 6)),
        vi("ybf_f32", "f32", (4, 6)),
        vi("y4", "f32", (2, 4)),
        vi("yu4", "f64", (2, 3)),
    ]
    model = model_of(nodes, vis, outs, inits)
    with caplog.at_level(logging.INFO, logger="onnx_dequant.ort"):
        sess = odq.session(model)
    assert sess.kernel_nodes == ("to_f32",)
    assert sess.lowered_nodes == ("to_f16", "to_bf16", "from_i4", "from_u4")
    assert set(sess.lowered) == set(sess.lowered_nodes)
    for name in sess.lowered_nodes:
        assert any(name in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
    y16, y32, ybf, y4, yu4 = sess.run(None, {"x": x, "s16": s16, "s32": s32, "z": z})
    assert y16.dtype == np.float16 and same_bits(y16, odq.dequantize(x, s16, z, axes=[0]))
    assert same_bits(y32, odq.dequantize(x, s32, axes=[1]))
    assert same_bits(ybf, odq.dequantize(x, sbf, z, axes=[0]).astype(np.float32))
    assert same_bits(y4, odq.dequantize(x4, s4, axes=[0]))
    assert same_bits(yu4, odq.dequantize(xu4, su4, axes=[1]))


@needs_lower
def test_model_with_only_fallback_nodes_needs_no_kernel():
    model = single_node_model("u8", "f16", (1,))
    sess = odq.session(model)
    assert sess.kernel_nodes == () and sess.lowered_nodes == ("dq",)
    rng = np.random.default_rng(3)
    x, s, z = ints(rng, "u8", SHAPE), scales(rng, "f16", (4,)), ints(rng, "u8", (4,))
    (y,) = sess.run(None, {"x": x, "s": s, "z": z})
    assert same_bits(y, odq.dequantize(x, s, z, axes=[1]))


# ---- the caller's model and file are never modified ----


def test_callers_model_and_file_untouched(tmp_path):
    model = single_node_model("i8", "f32", (0, 2))
    before = model.SerializeToString()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    stat = os.stat(path)
    file_before = path.read_bytes()
    sess_a = odq.session(model)
    sess_b = odq.session(path)
    sess_c = odq.session(before)
    assert model.SerializeToString() == before
    assert path.read_bytes() == file_before and os.stat(path).st_mtime_ns == stat.st_mtime_ns
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]
    rng = np.random.default_rng(4)
    feed = {"x": ints(rng, "i8", SHAPE), "s": scales(rng, "f32", (3, 5)), "z": ints(rng, "i8", (3, 5))}
    ra, rb, rc = (s.run(None, feed)[0] for s in (sess_a, sess_b, sess_c))
    assert same_bits(ra, rb) and same_bits(ra, rc)
    assert [i.name for i in sess_a.get_inputs()] == ["x", "s", "z"]  # the run token stays hidden


# ---- contract errors at session creation; runtime errors from run, never a crash ----


def test_contract_error_at_session_creation_names_node():
    model = single_node_model("i8", "f32", (0, 2), scale_shape=(3, 4))
    with pytest.raises(odq.DequantizeError, match=r"node 'dq'.*must match input shape"):
        odq.session(model)


def test_output_declared_with_another_type_is_a_clear_error():
    model = single_node_model("i8", "f32", (0,))
    model.graph.output[0].type.tensor_type.elem_type = TP.DOUBLE
    with pytest.raises(odq.DequantizeError, match="node 'dq'.*Output 'y' is declared f64, but the node produces f32"):
        odq.session(model)


def test_unknown_input_type_is_a_clear_error():
    node = odq.make_node(["x", "s"], ["y"], axes=[], name="dq")
    x_vi = helper.make_tensor_value_info("x", TP.UNDEFINED, None)
    model = model_of([node], [x_vi, vi("s", "f32", ())], [vi("y", "f32", None)])
    with pytest.raises(odq.DequantizeError, match="node 'dq'.*element type of input 'x' is unknown"):
        odq.session(model)


def test_wrong_scale_shape_at_run_time_raises_dequantize_error(placement):
    sess = odq.session(single_node_model("i8", "f32", (0, 2), scale_shape=None))
    x = np.zeros(SHAPE, np.int8)
    bad = {"x": x, "s": np.ones((3, 4), np.float32), "z": np.zeros((3, 4), np.int8)}
    with pytest.raises(odq.DequantizeError, match=r"node 'dq'.*Scale / zero point shape \(\{3,4\}\)") as info:
        sess.run(None, bad)
    assert info.value.node == "dq"
    assert kernels.stats()["errors"] >= 1
    # the session is still good afterwards
    ok = {"x": x, "s": np.ones((3, 5), np.float32), "z": np.zeros((3, 5), np.int8)}
    (y,) = sess.run(None, ok)
    assert y.shape == SHAPE and not y.any()


def test_error_feeding_standard_ops_still_raises_ours():
    nodes = [odq.make_node(["x", "s"], ["d"], axes=[1], name="bad_dq"), helper.make_node("Add", ["d", "b"], ["y"])]
    model = model_of(
        nodes, [vi("x", "i8", (2, 3)), vi("s", "f32", None), vi("b", "f32", (2, 3))], [vi("y", "f32", (2, 3))]
    )
    sess = odq.session(model)
    with pytest.raises(odq.DequantizeError, match="node 'bad_dq'"):
        sess.run(None, {"x": np.zeros((2, 3), np.int8), "s": np.ones(7, np.float32), "b": np.ones((2, 3), np.float32)})


def test_run_with_ort_values_and_iobinding_report_errors():
    sess = odq.session(single_node_model("u16", "f64", (1,), scale_shape=None, zero_point=False))
    x = np.arange(60, dtype=np.uint16).reshape(SHAPE)
    s_ok, s_bad = np.linspace(-1, 1, 4), np.ones(2)
    vals = {"x": ort.OrtValue.ortvalue_from_numpy(x), "s": ort.OrtValue.ortvalue_from_numpy(s_ok)}
    (y,) = sess.run_with_ort_values(None, vals)
    assert same_bits(y.numpy(), odq.dequantize(x, s_ok, axes=[1]))
    vals["s"] = ort.OrtValue.ortvalue_from_numpy(s_bad)
    with pytest.raises(odq.DequantizeError, match="node 'dq'"):
        sess.run_with_ort_values(None, vals)
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_cpu_input("s", s_ok)
    binding.bind_output("y")
    sess.run_with_iobinding(binding)
    assert same_bits(binding.copy_outputs_to_cpu()[0], odq.dequantize(x, s_ok, axes=[1]))
    binding.bind_cpu_input("s", s_bad)
    with pytest.raises(odq.DequantizeError, match="node 'dq'"):
        sess.run_with_iobinding(binding)


def test_run_async_reports_kernel_error_through_callback():
    sess = odq.session(single_node_model("i8", "f32", (1,), scale_shape=None, zero_point=False))
    x = np.ones(SHAPE, np.int8)
    results: dict[str, object] = {}
    done = threading.Event()

    def callback(res, data, err):
        results[data] = (res, err)
        done.set()

    for key, s in (("good", np.full(4, 2.0, np.float32)), ("bad", np.ones(9, np.float32))):
        done.clear()
        sess.run_async(None, {"x": x, "s": s}, callback, key)
        assert done.wait(30)
    good_res, good_err = results["good"]
    assert not good_err and same_bits(good_res[0], np.full(SHAPE, 2.0, np.float32))
    bad_res, bad_err = results["bad"]
    assert bad_res is None and "node 'dq'" in bad_err


_SUBPROCESS = textwrap.dedent(
    """
    import sys
    import numpy as np
    import onnx_dequant as odq
    from onnx import helper, TensorProto as TP
    from onnx_dequant.ort import kernels

    node = odq.make_node(["x", "s"], ["y"], axes=[0], name="runtime_bad")
    g = helper.make_graph([node], "g",
        [helper.make_tensor_value_info("x", TP.INT8, [2, 3]), helper.make_tensor_value_info("s", TP.FLOAT, None)],
        [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("ngraph", 1)]
    m = helper.make_model(g, opset_imports=opsets, ir_version=10)
    sess = odq.session(m)
    x = np.ones((2, 3), np.int8)
    try:
        sess.run(None, {"x": x, "s": np.ones((5,), np.float32)})
    except odq.DequantizeError as e:
        print("CAUGHT", e)
    else:
        sys.exit(10)
    # an unexpected failure inside the kernel (not bad input) also comes back as an exception
    def broken(*a, **k):
        raise ZeroDivisionError("boom")
    kernels.dequantize = broken
    try:
        sess.run(None, {"x": x, "s": np.ones((2,), np.float32)})
    except RuntimeError as e:
        print("CAUGHT", e)
    else:
        sys.exit(11)
    sys.exit(3)
    """
)


def test_kernel_errors_never_abort_the_interpreter():
    proc = subprocess.run([sys.executable, "-c", _SUBPROCESS], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CAUGHT")]
    assert len(lines) == 2
    assert "node 'runtime_bad'" in lines[0] and "Scale / zero point shape ({5})" in lines[0]
    assert "node 'runtime_bad'" in lines[1] and "ZeroDivisionError: boom" in lines[1]


# ---- threads, many sessions, caller's SessionOptions ----


def test_threads_running_concurrently_get_their_own_results_and_errors(placement):
    model = single_node_model("i16", "f32", (0, 2), scale_shape=None)
    assert set(prepare(model).fed) == {"x", "s", "z"}  # each run's kernel reads that run's own arrays
    sess = odq.session(model)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for i in range(15):
                x = ints(rng, "i16", SHAPE)
                bad = (seed + i) % 4 == 0
                sshape = (3, 2) if bad else (3, 5)
                s, z = scales(rng, "f32", sshape), ints(rng, "i16", sshape)
                if bad:
                    with pytest.raises(odq.DequantizeError, match="node 'dq'"):
                        sess.run(None, {"x": x, "s": s, "z": z})
                else:
                    (y,) = sess.run(None, {"x": x, "s": s, "z": z})
                    assert same_bits(y, odq.dequantize(x, s, z, axes=(0, 2)))
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[0]


def test_parallel_execution_mode_attributes_errors_to_the_right_run(placement):
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    nodes = [odq.make_node(["x", f"s{k}"], [f"y{k}"], axes=[1], name=f"dq{k}") for k in range(3)]
    vis = [vi("x", "u8", (2, 4))] + [vi(f"s{k}", "f64", None) for k in range(3)]
    sess = odq.session(model_of(nodes, vis, [vi(f"y{k}", "f64", None) for k in range(3)]), sess_options=so)
    x = np.arange(8, dtype=np.uint8).reshape(2, 4)
    good = {f"s{k}": np.full(4, k + 1.0) for k in range(3)}
    for k in range(3):
        ys = sess.run(None, {"x": x, **good})
        assert all(same_bits(y, x * (j + 1.0)) for j, y in enumerate(ys))
        with pytest.raises(odq.DequantizeError, match=f"node 'dq{k}'"):
            sess.run(None, {"x": x, **good, f"s{k}": np.ones(3)})


def test_many_and_repeated_sessions_in_one_process():
    rng = np.random.default_rng(6)
    x = ints(rng, "u8", SHAPE)
    s, z = scales(rng, "f32", (4,)), ints(rng, "u8", (4,))
    want = odq.dequantize(x, s, z, axes=[1])
    model = single_node_model("u8", "f32", (1,))
    sessions = [odq.session(model) for _ in range(25)]
    for sess in sessions:
        assert same_bits(sess.run(None, {"x": x, "s": s, "z": z})[0], want)
    del sessions
    for _ in range(5):  # sessions created after others were dropped
        assert same_bits(odq.session(model).run(None, {"x": x, "s": s, "z": z})[0], want)
    # no op name was ever defined twice with the extension
    from onnxruntime_extensions import _ocos

    names = [od.op_type for od in _ocos.Opdef._odlist.values() if od.op_type.startswith(odq.DOMAIN + "::")]
    assert len(names) == len(set(names)) == 40  # 5 input types x 2 outputs x the inputs each takes (OP_INPUTS)


def test_caller_session_options_are_used_and_reusable():
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    model = single_node_model("i8", "f64", (2,))
    a = odq.session(model, sess_options=so)
    b = odq.session(model, so)  # the same options again: the library is not registered twice
    plain = model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", "f32", (2,))], [vi("y", "f32", (2,))])
    c = ort.InferenceSession(plain.SerializeToString(), so)  # they still work for plain ORT sessions
    assert c.run(None, {"x": np.array([-1.0, 1.0], np.float32)})[0].tolist() == [0.0, 1.0]
    assert a.get_session_options().intra_op_num_threads == 1
    assert a.get_session_options().graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    rng = np.random.default_rng(7)
    feed = {"x": ints(rng, "i8", SHAPE), "s": scales(rng, "f64", (5,)), "z": ints(rng, "i8", (5,))}
    want = odq.dequantize(feed["x"], feed["s"], feed["z"], axes=[2])
    assert same_bits(a.run(None, feed)[0], want) and same_bits(b.run(None, feed)[0], want)


def test_threads_creating_sessions_with_shared_options():
    so = ort.SessionOptions()
    model = single_node_model("u16", "f32", (0, 1))
    rng = np.random.default_rng(11)
    feed = {"x": ints(rng, "u16", SHAPE), "s": scales(rng, "f32", (3, 4)), "z": ints(rng, "u16", (3, 4))}
    want = odq.dequantize(feed["x"], feed["s"], feed["z"], axes=(0, 1))
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        try:
            barrier.wait(30)
            for _ in range(3):
                assert same_bits(odq.session(model, so).run(None, feed)[0], want)
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[0]


def test_options_with_extensions_already_registered_is_a_clear_error():
    import onnxruntime_extensions as ox

    so = ort.SessionOptions()
    so.register_custom_ops_library(ox.get_library_path())
    with pytest.raises(odq.DequantizeError, match="already have onnxruntime-extensions registered"):
        odq.session(single_node_model("i8", "f32", ()), sess_options=so, enable_fallback=0)


def test_model_without_the_op_is_a_plain_session():
    model = model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", "f32", (2,))], [vi("y", "f32", (2,))])
    sess = odq.session(model)
    assert isinstance(sess, KernelSession) and sess.kernel_nodes == () and sess.lowered_nodes == ()
    assert sess.run(None, {"x": np.array([-1.0, 2.0], np.float32)})[0].tolist() == [0.0, 2.0]


@needs_lower
def test_fallback_in_an_opset_lowering_cannot_emit_needs_opset():
    model = single_node_model("i8", "f16", (0,))
    model.opset_import[0].version = 28  # onnx 1.23's default; ORT has no DequantizeLinear-28
    with pytest.raises(odq.DequantizeError, match="opset 28.*lowering dq"):
        odq.session(model)
    sess = odq.session(model, opset=21)
    assert sess.lowered_nodes == ("dq",)
    rng = np.random.default_rng(8)
    x, s, z = ints(rng, "i8", SHAPE), scales(rng, "f16", (3,)), ints(rng, "i8", (3,))
    assert same_bits(sess.run(None, {"x": x, "s": s, "z": z})[0], odq.dequantize(x, s, z, axes=[0]))


# ---- graph inputs read from the caller's arrays (the extension would copy each at every call) ----


def _fed_case(seed=30):
    rng = np.random.default_rng(seed)
    x, s, z = ints(rng, "i16", SHAPE), scales(rng, "f32", (3, 5)), ints(rng, "i16", (3, 5))
    return single_node_model("i16", "f32", (0, 2)), x, s, z, odq.dequantize(x, s, z, axes=(0, 2))


def test_kernels_read_graph_inputs_from_the_callers_arrays(monkeypatch):
    model, x, s, z, want = _fed_case()
    seen = []
    real = kernels.dequantize

    def spy(x, scale, zero_point=None, **kw):
        seen.append((x, scale, zero_point))
        return real(x, scale, zero_point, **kw)

    monkeypatch.setattr(kernels, "dequantize", spy)
    sess = odq.session(model)
    assert sess.get_inputs()[0].name == "x" and [i.name for i in sess.get_inputs()] == ["x", "s", "z"]
    (y,) = sess.run(None, {"x": x, "s": s, "z": z})
    assert same_bits(y, want)
    assert seen[-1][0] is x and seen[-1][1] is s and seen[-1][2] is z  # no copy of any input
    (y,) = odq.session(model, read_feeds=False).run(None, {"x": x, "s": s, "z": z})
    assert same_bits(y, want) and not any(np.shares_memory(a, b) for a, b in zip(seen[-1], (x, s, z)))


def test_every_run_path_hands_the_kernel_the_inputs_it_reads():
    model, x, s, z, want = _fed_case(31)
    sess = odq.session(model)
    # a list is converted to the input's declared type, as ONNX Runtime converts it
    assert same_bits(sess.run(None, {"x": x.tolist(), "s": s, "z": z})[0], want)
    assert same_bits(sess.run(None, {"x": np.asfortranarray(x), "s": s, "z": z})[0], want)  # not C-contiguous
    ovs = {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in (("x", x), ("s", s), ("z", z))}
    assert same_bits(sess.run_with_ort_values(None, ovs)[0].numpy(), want)
    assert same_bits(sess.run(None, ovs)[0], want)  # OrtValues in run's feed
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_ortvalue_input("s", ovs["s"])
    binding.bind_input("z", "cpu", 0, np.int16, list(z.shape), z.ctypes.data)
    binding.bind_output("y")
    sess.run_with_iobinding(binding)
    assert same_bits(binding.copy_outputs_to_cpu()[0], want)
    other = ints(np.random.default_rng(32), "i16", SHAPE)
    binding.clear_binding_inputs()
    for k, v in (("x", other), ("s", s), ("z", z)):
        binding.bind_cpu_input(k, v)
    sess.run_with_iobinding(binding)
    assert same_bits(binding.copy_outputs_to_cpu()[0], odq.dequantize(other, s, z, axes=(0, 2)))
    results, done = [], threading.Event()
    sess.run_async(
        None, {"x": x, "s": s, "z": z}, lambda res, data, err: (results.append((res, err)), done.set()), None
    )
    assert done.wait(30) and not results[0][1] and same_bits(results[0][0][0], want)
    with pytest.raises(Exception, match="data type"):  # ONNX Runtime still checks what it is fed
        sess.run(None, {"x": x.astype(np.int32), "s": s, "z": z})


def test_a_binding_the_session_did_not_make_is_refused_with_the_remedy():
    model, x, s, z, want = _fed_case(33)

    def bound(sess):
        binding = ort.IOBinding(sess)  # not sess.io_binding(): nothing keeps the inputs where kernels read them
        for k, v in (("x", x), ("s", s), ("z", z)):
            binding.bind_cpu_input(k, v)
        binding.bind_output("y")
        return binding

    sess = odq.session(model)
    with pytest.raises(odq.DequantizeError, match=r"io_binding\(\), or create the session with read_feeds=False"):
        sess.run_with_iobinding(bound(sess))
    plain = odq.session(model, read_feeds=False)
    binding = bound(plain)
    if isinstance(getattr(binding, "_bound_inputs", None), dict):  # ORT records what it bound: checked, run
        plain.run_with_iobinding(binding)
        assert same_bits(binding.copy_outputs_to_cpu()[0], want)
    else:  # nothing to check a foreign binding's inputs by: refused
        with pytest.raises(odq.DequantizeError, match=r"io_binding\(\)"):
            plain.run_with_iobinding(binding)


_PREALLOCATED = textwrap.dedent(
    """
    import sys
    import numpy as np
    import onnxruntime as ort
    import onnxruntime_extensions as ox
    sys.path.insert(0, sys.argv[1])
    from helpers import ints, scales, single_node_model
    import onnx_dequant as odq
    from onnx_dequant.ort import kernels
    from onnx_dequant.ort.prepare import prepare

    rng = np.random.default_rng(36)
    model = single_node_model("i8", "f32", (1,), x_shape=(3, 4, 5))
    x, s, z = ints(rng, "i8", (3, 4, 5)), scales(rng, "f32", (4,)), ints(rng, "i8", (4,))
    # 1. an input left unbound (after clear_binding_inputs), the output preallocated: refused, no abort
    sess = odq.session(model)
    b = sess.io_binding()
    b.bind_cpu_input("s", s)
    b.bind_cpu_input("z", z)
    b.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_shape_and_type([3, 4, 5], np.float32))
    try:
        sess.run_with_iobinding(b)
    except odq.DequantizeError as e:
        print("REFUSED", e)
    # 2. the rewritten model in a plain session, the output preallocated: zeros of its shape, logged
    kernels.ensure_registered()
    so = ort.SessionOptions()
    so.register_custom_ops_library(ox.get_library_path())
    so.log_severity_level = 3
    prepared = prepare(model)
    plain = ort.InferenceSession(prepared.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    b = plain.io_binding()
    for k, v in {"x": x, "s": s, "z": z, prepared.token_input: np.array(0, np.int64)}.items():
        b.bind_cpu_input(k, v)
    y = ort.OrtValue.ortvalue_from_shape_and_type([3, 4, 5], np.float32)
    b.bind_ortvalue_output("y", y)
    plain.run_with_iobinding(b)
    print("ZEROS", y.numpy().shape, bool(y.numpy().any()))
    # 3. None fed to an input a kernel takes as an op input (read_feeds=False): refused, no abort
    try:
        odq.session(model, read_feeds=False).run(None, {"x": None, "s": s, "z": z})
    except odq.DequantizeError as e:
        print("NONE", e)
    # 4. a binding the session did not make, x unbound, the kernel in an If branch (nothing read from
    # the feed): refused, no abort
    from onnx import helper, numpy_helper
    from helpers import model_of, vi
    then = helper.make_graph([odq.make_node(["x", "s", "z"], ["t"], axes=[1])], "then", [], [vi("t", "f32", [3, 4])])
    other = helper.make_graph([helper.make_node("Cast", ["x"], ["e"], to=1)], "else", [], [vi("e", "f32", [3, 4])])
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    branch = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    ins = [vi("c", "bool", []), vi("x", "i8", [3, 4])]
    sess = odq.session(model_of([branch], ins, [vi("y", "f32", [3, 4])], inits))
    b = ort.IOBinding(sess)
    b.bind_cpu_input("c", np.array(True))
    b.bind_output("y")
    try:
        sess.run_with_iobinding(b)
    except odq.DequantizeError as e:
        print("FOREIGN", e)
    """
)


def test_inputs_a_kernel_cannot_read_never_abort_the_process():
    tests = os.path.dirname(__file__)
    proc = subprocess.run([sys.executable, "-c", _PREALLOCATED, tests], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "REFUSED input(s) ['x'] not bound: bind every model input" in proc.stdout
    assert "ZEROS (3, 4, 5) False" in proc.stdout
    assert "NONE input(s) ['x'] fed None" in proc.stdout
    # refused by the names ORT's IOBinding records, or, where it records none, as a binding not checkable
    assert "FOREIGN input(s) ['x'] not bound" in proc.stdout or "FOREIGN bind inputs with this" in proc.stdout


def test_what_onnx_runtime_would_refuse_or_copy_the_kernel_reads_the_same_way():
    model, x, s, z, want = _fed_case(37)
    sess = odq.session(model)
    # values ORT refuses for a typed input stay refused: not cast to the input's type on the way
    for bad in (np.int64(3), 2.5, (1, 2, 3)):
        with pytest.raises(Exception) as caught:
            sess.run(None, {"x": bad, "s": s, "z": z})
        assert not isinstance(caught.value, AssertionError)
    # a big-endian array is read by its values, by ORT and the kernel alike
    assert same_bits(sess.run(None, {"x": x.astype(">i2"), "s": s.astype(">f4"), "z": z})[0], want)
    # an array ORT would copy (not C-contiguous) is copied once, before the run: a write to the
    # caller's array after binding (or after run_async returns) reaches neither ORT nor the kernel
    xf = np.asfortranarray(x)
    binding = sess.io_binding()
    binding.bind_cpu_input("x", xf)
    binding.bind_cpu_input("s", s)
    binding.bind_cpu_input("z", z)
    binding.bind_output("y")
    xf[...] = 0
    sess.run_with_iobinding(binding)
    assert same_bits(binding.copy_outputs_to_cpu()[0], want)
    # a 0-d input ORT would copy (unaligned, big-endian) stays 0-d
    model0 = single_node_model("i16", "f32", (), x_shape=())
    buf = np.zeros(3, np.uint8)
    unaligned = buf[1:3].view(np.int16).reshape(())
    unaligned[()] = -5
    s0, z0 = np.array(0.5, np.float32), np.array(3, np.int16)
    for read_feeds in (True, False):
        for x0 in (unaligned, np.array(-5, ">i2")):
            (y0,) = odq.session(model0, read_feeds=read_feeds).run(None, {"x": x0, "s": s0, "z": z0})
            assert y0.shape == () and same_bits(y0, odq.dequantize(np.array(-5, np.int16), s0, z0))
    # run_with_ort_values takes OrtValues; a list there is ORT's to refuse, unchanged by the session
    with pytest.raises(Exception, match="list"):
        ovs = {"s": ort.OrtValue.ortvalue_from_numpy(s), "z": ort.OrtValue.ortvalue_from_numpy(z)}
        sess.run_with_ort_values(None, {"x": x.tolist(), **ovs})


def test_an_input_bound_off_the_cpu_is_not_read():
    from onnx_dequant.ort.session import _cpu_view

    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    assert same_bits(_cpu_view("cpu", np.int16, [2, 3], a.ctypes.data), a)
    assert same_bits(_cpu_view("cpu", np.dtype(">i2"), [2, 3], a.ctypes.data), a)  # the bytes as ORT reads them
    assert same_bits(_cpu_view("cpu", TP.INT16, (2, 3), a.ctypes.data), a)
    assert _cpu_view("cuda", np.int16, [2, 3], a.ctypes.data) is None


# ---- constant scales and zero points: held by the session, not fed to the kernel ----


def _const_model(x_elem="u16", out_elem="f32", axes=(0, 2), *, zero_point=True, overridable=False, also_output=False):
    """x -> Dequantize 'dq' with initializer scale (and zero point) -> y; ``overridable``: the scale is
    also a graph input (a default the feed may replace); ``also_output``: the scale is a graph output too."""
    rng = np.random.default_rng(12)
    sshape = tuple(SHAPE[a] for a in axes)
    s, z = scales(rng, out_elem, sshape), ints(rng, x_elem, sshape)
    inits = [numpy_helper.from_array(s, "s")] + ([numpy_helper.from_array(z, "z")] if zero_point else [])
    ins = [vi("x", x_elem, SHAPE)] + ([vi("s", out_elem, sshape)] if overridable else [])
    outs = [vi("y", out_elem, SHAPE)] + ([vi("s", out_elem, sshape)] if also_output else [])
    node = odq.make_node(["x", "s"] + (["z"] if zero_point else []), ["y"], axes=axes, name="dq")
    return model_of([node], ins, outs, inits), s, (z if zero_point else None)


@pytest.mark.parametrize("read_feeds", [True, False], ids=["x-read", "x-fed"])
@pytest.mark.parametrize("zero_point", [True, False], ids=["zp", "nozp"])
@pytest.mark.parametrize("x_elem,out_elem,axes", [("u16", "f32", (0, 2)), ("i8", "f64", ()), ("i32", "f32", (0, 1, 2))])
def test_constant_params_are_held_by_the_session_not_fed(x_elem, out_elem, axes, zero_point, read_feeds, placement):
    model, s, z = _const_model(x_elem, out_elem, axes, zero_point=zero_point)
    before = model.SerializeToString()
    sess = odq.session(model, read_feeds=read_feeds)
    prepared = prepare(model, read_feeds=read_feeds)
    kernel = prepared.model.graph.node[-1]
    if read_feeds:  # x is a graph input: the kernel reads it from the caller's feed, and takes its shape
        (shape,) = prepared.model.graph.node[:-1]
        assert shape.op_type == "Shape" and list(shape.input) == ["x"]
        assert kernel.op_type == f"Dequantize_{x_elem}_{out_elem}_shape"
        assert list(kernel.input) == [shape.output[0], prepared.token_input]
        assert prepared.params["dq"].x == Fed("x") and set(prepared.fed) == {"x"}
    else:
        assert len(prepared.model.graph.node) == 1
        assert kernel.op_type == f"Dequantize_{x_elem}_{out_elem}_x"
        assert list(kernel.input) == ["x", prepared.token_input]
        assert prepared.params["dq"].x is None and prepared.fed == {}
    assert [t.name for t in prepared.model.graph.initializer] == []  # the session holds them instead
    held = prepared.params["dq"]
    assert same_bits(held.scale, s) and (held.zero_point is None if z is None else same_bits(held.zero_point, z))
    assert not held.scale.flags.writeable
    x = ints(np.random.default_rng(13), x_elem, SHAPE)
    for _ in range(2):
        (y,) = sess.run(None, {"x": x})
        assert same_bits(y, odq.dequantize(x, s, z, axes=axes))
    assert model.SerializeToString() == before  # the caller's model keeps its initializers


def test_a_constant_weight_is_held_too(placement):
    """Dequantize(W, s, zp) of constants (a weight, as nGraph's quantized models have): the kernel takes
    W's shape and the token, and the session holds W, so the extension copies nothing at each run."""
    rng = np.random.default_rng(19)
    w, s, z = ints(rng, "i8", SHAPE), scales(rng, "f32", (SHAPE[1],)), ints(rng, "i8", (SHAPE[1],))
    inits = [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (s, "s"), (z, "z"))]
    nodes = [odq.make_node(["w", "s", "z"], ["d"], axes=[1], name="dq"), helper.make_node("Add", ["d", "b"], ["y"])]
    model = model_of(nodes, [vi("b", "f32", SHAPE)], [vi("y", "f32", SHAPE)], inits)
    prepared = prepare(model)
    (kernel, _) = prepared.model.graph.node
    (shape,) = prepared.model.graph.initializer  # the weight's shape, where the weight was
    assert kernel.op_type == "Dequantize_i8_f32_shape" and list(kernel.input) == [shape.name, prepared.token_input]
    assert list(numpy_helper.to_array(shape)) == list(SHAPE)
    held = prepared.params["dq"]
    assert same_bits(held.x, w) and not held.x.flags.writeable and prepared.fed == {}
    b = scales(rng, "f32", SHAPE)
    for _ in range(2):
        (y,) = odq.session(model).run(None, {"b": b})
        assert same_bits(y, odq.dequantize(w, s, z, axes=[1]) + b)


def test_a_scale_the_caller_may_override_stays_fed():
    model, s, z = _const_model(overridable=True)
    prepared = prepare(model)
    assert prepared.params == {} and prepared.model.graph.node[0].op_type == "Dequantize_u16_f32"
    sess = odq.session(model)
    x = ints(np.random.default_rng(14), "u16", SHAPE)
    other = (s * 2).astype(np.float32)
    assert same_bits(sess.run(None, {"x": x})[0], odq.dequantize(x, s, z, axes=(0, 2)))
    assert same_bits(sess.run(None, {"x": x, "s": other})[0], odq.dequantize(x, other, z, axes=(0, 2)))


def test_a_held_initializer_another_reader_needs_stays_in_the_model():
    model, s, z = _const_model(also_output=True)
    prepared = prepare(model)
    assert "dq" in prepared.params and [t.name for t in prepared.model.graph.initializer] == ["s"]
    x = ints(np.random.default_rng(15), "u16", SHAPE)
    y, s_out = odq.session(model).run(None, {"x": x})
    assert same_bits(y, odq.dequantize(x, s, z, axes=(0, 2))) and same_bits(s_out, s)


def test_a_constant_scale_with_a_fed_zero_point():
    model, s, z = _const_model()
    model.graph.input.append(vi("z", "u16", z.shape))
    del model.graph.initializer[1]
    x = ints(np.random.default_rng(16), "u16", SHAPE)
    # read from the feed: the kernel takes the token alone, the scale held, x and z the caller's arrays
    prepared = prepare(model)
    assert prepared.params["dq"] == runs.NodeInputs(Fed("x"), prepared.params["dq"].scale, Fed("z"))
    assert same_bits(odq.session(model).run(None, {"x": x, "z": z})[0], odq.dequantize(x, s, z, axes=(0, 2)))
    # every input through ONNX Runtime: a fed zero point keeps the scale fed too (one op takes both)
    prepared = prepare(model, read_feeds=False)
    assert prepared.params == {} and list(prepared.model.graph.node[0].input)[:3] == ["x", "s", "z"]
    sess = odq.session(model, read_feeds=False)
    assert same_bits(sess.run(None, {"x": x, "z": z})[0], odq.dequantize(x, s, z, axes=(0, 2)))


def test_a_held_params_kernel_outside_its_session_gives_zeros_and_logs(caplog):
    import onnxruntime_extensions as ox

    model, _, _ = _const_model()
    prepared = prepare(model, read_feeds=False)
    kernels.ensure_registered()
    so = ort.SessionOptions()
    so.register_custom_ops_library(ox.get_library_path())
    plain = ort.InferenceSession(prepared.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = ints(np.random.default_rng(17), "u16", SHAPE)
    with caplog.at_level(logging.ERROR, logger="onnx_dequant.ort"):
        (y,) = plain.run(None, {"x": x, prepared.token_input: np.array(-1, np.int64)})
    assert y.dtype == np.float32 and y.shape == SHAPE and not y.any()
    assert any("handed to it by the onnx_dequant.session" in r.getMessage() for r in caplog.records)


def test_a_constant_shared_by_nodes_is_held_once():
    rng = np.random.default_rng(18)
    s, z = scales(rng, "f32", (SHAPE[1],)), ints(rng, "u8", (SHAPE[1],))
    nodes = [odq.make_node(["x", "s", "z"], [f"y{k}"], axes=[1], name=f"dq{k}") for k in range(2)]
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    model = model_of(nodes, [vi("x", "u8", SHAPE)], [vi(f"y{k}", "f32", SHAPE) for k in range(2)], inits)
    prepared = prepare(model)
    assert (
        prepared.params["dq0"].scale is prepared.params["dq1"].scale
        and prepared.params["dq0"].zero_point is prepared.params["dq1"].zero_point
    )
    x = ints(rng, "u8", SHAPE)
    for y in odq.session(model).run(None, {"x": x}):
        assert same_bits(y, odq.dequantize(x, s, z, axes=[1]))


def test_a_run_after_one_whose_kernels_cut_a_call_rouses_the_helpers_first(monkeypatch):
    """Where a run's kernels cut a call among the reference's threads, the session's next run (``run``,
    ``run_with_ort_values``, ``run_with_iobinding``) has the helpers spin for it first
    (``_split.rouse``), for ``ROUSE`` seconds; a run after one that cut nothing does not."""
    from onnx_dequant import _split

    session_module = sys.modules["onnx_dequant.ort.session"]
    cutting, count, roused = [True], [0], []

    def cuts() -> int:  # a run's kernels cut a call where the count moves between two asks
        count[0] += cutting[0]
        return count[0]

    monkeypatch.setattr(_split, "cuts", cuts)
    monkeypatch.setattr(_split, "rouse", roused.append)
    sess = odq.session(single_node_model("i8", "f32", (0, 2)))
    rng = np.random.default_rng(3)
    feed = {
        "x": ints(rng, "i8", SHAPE),
        "s": scales(rng, "f32", (SHAPE[0], SHAPE[2])),
        "z": ints(rng, "i8", (SHAPE[0], SHAPE[2])),
    }
    want = odq.dequantize(feed["x"], feed["s"], feed["z"], axes=(0, 2))

    def by_ort_values():
        return sess.run_with_ort_values(None, {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in feed.items()})[
            0
        ].numpy()

    def by_binding():
        binding = sess.io_binding()
        for k, v in feed.items():
            binding.bind_cpu_input(k, v)
        binding.bind_output("y")
        sess.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()[0]

    runs_ = [lambda: sess.run(None, feed)[0], by_ort_values, by_binding]
    assert same_bits(runs_[0](), want) and roused == []  # the first run: nothing cut before it
    for run in runs_:
        assert same_bits(run(), want)
        assert roused == [session_module.ROUSE]
        roused.clear()
    cutting[0] = False
    assert same_bits(runs_[0](), want) and roused == [session_module.ROUSE]  # the last run cut
    roused.clear()
    for run in runs_:
        assert same_bits(run(), want) and roused == []
