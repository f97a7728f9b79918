"""Validation of models whose large initializers (weights) go to ONNX Runtime as in-memory OrtValues."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import dtypes
from onnx_dequant.graphs import LARGE_BYTES
from onnx_dequant.validation import validate
from onnx_dequant.validation.runners import OrtRunner
from onnx_dequant.validation.weights import externalize, in_memory

ROWS, COLS = 16, (LARGE_BYTES // 16) + 64  # an int8 weight just over the limit


def weights_model(x_dt="i8", out_dt="f32", *, matmul=False):
    """W (x_dt initializer over 1 MiB) -> Dequantize 'dq' axes {0} -> y; with ``matmul`` x @ dq(W)^T."""
    xd, od = dtypes.parse(x_dt), dtypes.parse(out_dt)
    rng = np.random.default_rng(7)
    w = rng.integers(int(xd.min), int(xd.max) + 1, (ROWS, COLS)).astype(xd.numpy)
    s = rng.uniform(0.01, 1.0, (ROWS,)).astype(od.numpy)
    zp = rng.integers(int(xd.min), int(xd.max) + 1, (ROWS,)).astype(xd.numpy)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(s, "s"), numpy_helper.from_array(zp, "zp")]
    nodes = [odq.make_node(["W", "s", "zp"], ["y" if not matmul else "dw"], axes=(0,), name="dq")]
    inputs, out_shape = [], [ROWS, COLS]
    if matmul:
        nodes.append(helper.make_node("MatMul", ["dw", "v"], ["y"], name="mm"))
        inputs = [helper.make_tensor_value_info("v", od.onnx, [COLS, 2])]
        out_shape = [ROWS, 2]
    g = helper.make_graph(nodes, "weights", inputs, [helper.make_tensor_value_info("y", od.onnx, out_shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])


def test_externalize_leaves_the_model_alone_and_shares_the_weight_data():
    m = weights_model()
    before = m.SerializeToString()
    light, arrays = externalize(m)
    assert m.SerializeToString() == before
    assert len(arrays) == 1  # W only: s and zp are small, and read by the lowering anyway
    (w,) = [t for t in light.graph.initializer if t.name == "W"]
    assert w.data_location == TensorProto.EXTERNAL and not w.raw_data and list(w.dims) == [ROWS, COLS]
    (data,) = arrays.values()
    assert np.array_equal(data, numpy_helper.to_array(m.graph.initializer[0]))
    names, values = in_memory(light, arrays)
    assert names == ["W"] and values[0].numpy().shape == (ROWS, COLS)
    assert light.ByteSize() < 4096


def test_scales_and_zero_points_keep_their_data():
    m = weights_model()
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.zeros((4,), np.int8), "W"))
    big_s = np.full((ROWS, COLS), 0.5, np.float32)
    m.graph.initializer[1].CopyFrom(numpy_helper.from_array(big_s, "s"))
    assert externalize(m) == (m, {})


@pytest.mark.parametrize("x_dt,out_dt", [("i8", "f32"), ("u8", "f16"), ("i16", "f32"), ("u8", "bf16")])
def test_weights_model_passes_every_path(x_dt, out_dt):
    m = weights_model(x_dt, out_dt)
    before = m.SerializeToString()
    report = validate(m)
    assert report.ok, report.to_text()
    assert {p.label: p.status for p in report.paths} == {
        "lowered/default": "pass",
        "lowered/off": "pass",
        "kernel/default": "pass",
        "kernel/off": "pass",
    }
    assert m.SerializeToString() == before


def test_in_memory_runs_match_runs_on_the_serialized_model():
    m = weights_model(matmul=True)
    lowered = odq.lower(m)
    light, arrays = externalize(lowered)
    assert arrays
    v = {"v": np.random.default_rng(3).uniform(-1, 1, (COLS, 2)).astype(np.float32)}
    for level in ("default", "off"):
        a = OrtRunner(lowered, level).run(v)["y"]
        b = OrtRunner(light, level, arrays=arrays).run(v)["y"]
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_tampered_weights_fail_and_name_the_node():
    m = weights_model()
    bad = odq.lower(m)
    for t in bad.graph.initializer:
        if t.name == "W":
            w = numpy_helper.to_array(t).copy()
            w[3, 5] ^= 1
            t.CopyFrom(numpy_helper.from_array(w, "W"))
    report = validate(m, against=bad)
    assert report.exit_code == 1, report.to_text()
    for p in report.paths:
        assert p.status == "fail" and p.first_difference is not None and p.first_difference.node == "dq"
        assert p.outputs[0].mismatches == 1


def test_a_placeholder_without_its_data_does_not_run():
    m = weights_model()
    light, arrays = externalize(m)
    (w,) = [t for t in light.graph.initializer if t.name == "W"]
    w.external_data[0].value = "elsewhere"  # a placeholder whose data is not at hand
    with pytest.raises(Exception, match="[Ee]xternal data") as e:
        OrtRunner(light, "off", kernel=True, arrays=arrays)
    assert "elsewhere" in str(e.value)
    onnx.checker.check_model(m)  # the caller's model is intact


# ---- the reference's output memory reused by the kernel runs and the reference's reruns ----


def plain_dq_model():
    """x int8 (6, 40) graph input -> Dequantize axes {1} -> y f32 (y is the node's output)."""
    rng = np.random.default_rng(5)
    s = rng.uniform(0.01, 1.0, (40,)).astype(np.float32)
    zp = rng.integers(-128, 128, (40,)).astype(np.int8)
    g = helper.make_graph(
        [odq.make_node(["x", "s", "zp"], ["y"], axes=(1,), name="dq")],
        "plain_dq",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [6, 40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 40])],
        [numpy_helper.from_array(s, "s"), numpy_helper.from_array(zp, "zp")],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])


def test_reference_writes_into_the_arrays_it_is_given():
    from onnx_dequant.validation.runners import ReferenceRunner

    m = plain_dq_model()
    feeds = {"x": np.random.default_rng(1).integers(-128, 128, (6, 40)).astype(np.int8)}
    runner = ReferenceRunner(m)
    fresh = runner.run(feeds)["y"]
    into = np.full((6, 40), np.nan, np.float32)
    got = runner.run(feeds, into={"y": into})["y"]
    assert got is into and np.array_equal(fresh.view(np.uint32), into.view(np.uint32))
    wrong = np.zeros((6, 41), np.float32)  # does not fit: ignored
    again = runner.run(feeds, into={"y": wrong})["y"]
    assert again is not wrong and np.array_equal(again.view(np.uint32), fresh.view(np.uint32))
    assert not wrong.any()
    assert runner.run(feeds)["y"] is not into  # only the run that names it writes into it


def test_released_reference_reruns_into_its_own_memory(monkeypatch):
    from onnx_dequant.validation import expected

    monkeypatch.setattr(expected, "RELEASE_BYTES", 1)
    report = validate(plain_dq_model())
    assert report.ok and report.reference_runs == 3, report.to_text()


def test_a_rerun_that_leaves_elements_unwritten_cannot_pass(monkeypatch):
    """The reused memory holds the kernel's values before the rerun; poisoning it makes a reference that
    skips elements disagree, instead of passing on the kernel's own values."""
    from onnx_dequant import reference
    from onnx_dequant.validation import buffers, expected

    real = reference.dequantize

    def lazy(x, scale, zero_point=None, *, axes=(), dtype=None, out=None):
        if out is None:
            return real(x, scale, zero_point, axes=axes, dtype=dtype)
        return out  # writes nothing

    monkeypatch.setattr(expected, "RELEASE_BYTES", 1)
    monkeypatch.setattr(reference, "dequantize", lazy)
    report = validate(plain_dq_model(), paths=["kernel"], localize=False)
    assert report.reference_runs == 3
    assert {p.label: p.status for p in report.paths} == {"kernel/default": "fail", "kernel/off": "fail"}
    for p in report.paths:
        assert p.outputs[0].failures == len(range(0, 6 * 40, buffers.POISON_STRIDE))


def test_weights_read_inside_a_model_local_function():
    m = weights_model()
    node = m.graph.node[0]
    fn = helper.make_function(
        "local",
        "deq",
        ["w", "s", "zp"],
        ["out"],
        [odq.make_node(["w", "s", "zp"], ["out"], axes=(0,), name="dq")],
        opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()],
    )
    del m.graph.node[:]
    m.graph.node.append(helper.make_node("deq", list(node.input), ["y"], domain="local", name="call"))
    m.functions.append(fn)
    m.opset_import.append(helper.make_opsetid("local", 1))
    assert externalize(m)[1]
    report = validate(m)
    assert report.ok, report.to_text()
    assert {p.status for p in report.paths} == {"pass"}


def test_weights_that_are_also_declared_graph_inputs():
    """An initializer also declared as a graph input (a default value) is not an input validation feeds."""
    m = weights_model()
    m.graph.input.append(helper.make_tensor_value_info("W", TensorProto.INT8, [ROWS, COLS]))
    report = validate(m)
    assert report.ok, report.to_text()
    assert report.inputs == [] and {p.status for p in report.paths} == {"pass"}
