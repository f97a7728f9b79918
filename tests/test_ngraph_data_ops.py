"""Atan2, Stack, the *Like ops, CumSum, the strided slices, ScatterND, DynBroadcast, DynPad: bad input is
a DequantizeError naming the node and nGraph's rule; Atan2's accuracy against the C library's atan2."""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import onnx_dequant as odq
from onnx_dequant.ngraph.writer import FunctionWriter


def _convert(w: FunctionWriter):
    return odq.ngraph.convert([w.to_json()])


def _refused(w: FunctionWriter, match: str, node: str) -> None:
    with pytest.raises(odq.DequantizeError) as info:
        _convert(w)
    assert info.value.node == node and match in str(info.value), str(info.value)


def _run(model, *xs: np.ndarray) -> list[np.ndarray]:
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {i.name: x for i, x in zip(s.get_inputs(), xs)})


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_atan2_within_one_ulp_of_the_c_library(dt):
    rng = np.random.default_rng(5)
    n = 20000
    y, x = (rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20, n) for _ in range(2))
    y, x = y.astype(dt), x.astype(dt)
    w = FunctionWriter()
    w.result(w.op("Atan2", w.parameter(dt, [n]), w.parameter(dt, [n])))
    (got,) = _run(_convert(w), y, x)
    # the C library's double atan2 (rounded once to float32): NumPy's own float32 arctan2 is a SIMD
    # routine on CPUs with AVX-512, 2 ULPs from the C library's there
    want = np.array([math.atan2(float(a), float(b)) for a, b in zip(y, x)]).astype(dt)
    ints = np.int64 if dt == np.float64 else np.int32
    assert np.abs(got.view(ints).astype(np.int64) - want.view(ints).astype(np.int64)).max() <= 1


def test_atan2_refuses_booleans_and_mixed_types():
    w = FunctionWriter()
    w.result(w.op("Atan2", w.parameter("boolean", [2]), w.parameter("boolean", [2])))
    _refused(w, "Arguments cannot have boolean element type", "Atan2_2")
    w = FunctionWriter()
    w.result(w.op("Atan2", w.parameter("f32", [2]), w.parameter("f64", [2])))
    _refused(w, "Argument element types are inconsistent", "Atan2_2")
    w = FunctionWriter()
    w.result(w.op("Atan2", w.parameter("f32", [2]), w.parameter("f32", [3])))
    _refused(w, "Argument shapes are inconsistent", "Atan2_2")


def test_stack_rules():
    w = FunctionWriter()
    w.result(w.op("Stack", w.parameter("f32", [2]), w.parameter("f32", [3]), axis=0))
    _refused(w, "Argument shapes are inconsistent", "Stack_2")
    w = FunctionWriter()
    w.result(w.op("Stack", w.parameter("f32", [2]), w.parameter("i32", [2]), axis=0))
    _refused(w, "Argument element types are inconsistent", "Stack_2")
    w = FunctionWriter()
    w.result(w.op("Stack", w.parameter("f32", [2]), axis=2))
    _refused(w, "'axis' must be an integer in [-2, 1]", "Stack_1")
    w = FunctionWriter()
    w.result(w.op("Stack", axis=0))
    _refused(w, "Stack takes at least one input", "Stack_0")


def test_broadcast_like_rules():
    w = FunctionWriter()
    w.result(w.op("BroadcastLike", w.parameter("f32", [3, 1]), w.parameter("f32", [3, 4]), initial_axes=[]))
    _refused(w, "Broadcast argument shape, specified output shape, and axes are incompatible", "BroadcastLike_2")
    w = FunctionWriter()
    w.result(w.op("BroadcastLike", w.parameter("f32", [3]), w.parameter("f32", [3, 4]), initial_axes=[5]))
    _refused(w, "Broadcast axis index (5) exceeds specified output shape rank", "BroadcastLike_2")
    w = FunctionWriter()
    w.result(w.op("BroadcastLike", w.parameter("f32", [3]), w.parameter("f32", [3, None]), initial_axes=[1]))
    _refused(w, "needs the full shape of its like argument", "BroadcastLike_2")


def test_scalar_constant_like_values():
    w = FunctionWriter()
    w.result(w.op("ScalarConstantLike", w.parameter("u8", [2]), value=256.5))
    _refused(w, "outside u8 [0, 255] (C++ undefined behaviour)", "ScalarConstantLike_1")
    w = FunctionWriter()
    w.result(w.op("ScalarConstantLike", w.parameter("i32", [2]), value=[1]))
    _refused(w, "'value' must be a number or its string", "ScalarConstantLike_1")
    w = FunctionWriter()  # nGraph's writer: the value as a string, parsed in the element type
    w.result(w.op("ScalarConstantLike", w.parameter("i16", [2]), value="-7", element_type="int16_t"))
    (got,) = _run(_convert(w), np.zeros(2, np.int16))
    assert got.dtype == np.int16 and got.shape == () and got == -7
    w = FunctionWriter()
    w.result(w.op("ScalarConstantLike", w.parameter("i16", [2]), value="x"))
    _refused(w, "does not parse as i16", "ScalarConstantLike_1")


def test_cumsum_rules():
    def cumsum(axis, dt="f32", shape=(2, 3), **attrs):
        w = FunctionWriter()
        p = w.parameter(dt, list(shape))
        w.result(w.op("CumSum", p, w.constant(axis), **attrs))
        return w

    _refused(cumsum(np.int64(2)), "axis must be in the range [-rank, rank) (axis 2, rank 2)", "CumSum_2")
    _refused(cumsum(np.int16(0)), "axis element type must be either int64_t or int32_t but got (i16)", "CumSum_2")
    _refused(cumsum(np.int64(0), "boolean"), "Arguments cannot have boolean element type", "CumSum_2")
    _refused(cumsum(np.int64(0), exclusive="yes"), "'exclusive' must be true or false", "CumSum_2")
    _refused(cumsum(np.int64(0), shape=()), "CumSum of a scalar", "CumSum_2")
    w = FunctionWriter()  # a computed axis
    w.result(w.op("CumSum", w.parameter("f32", [2, 3]), w.parameter("i32", [2])))
    _refused(w, "CumSum's computed axis must be a scalar", "CumSum_2")


def test_cumsum_computed_axis_and_default_axis():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = FunctionWriter()
    w.result(w.op("CumSum", w.parameter("f32", [2, 3]), w.parameter("i32", []), exclusive=True))
    (got,) = _run(_convert(w), x, np.array(-1, np.int32))
    assert np.array_equal(got, np.cumsum(x, 1) - x)
    w = FunctionWriter()
    w.result(w.op("CumSum", w.parameter("f32", [2, 3]), reverse=True))
    (got,) = _run(_convert(w), x)
    assert np.array_equal(got, np.flip(np.cumsum(np.flip(x, 0), 0), 0))


def _dyn_slice(begins, ends, strides, shape=(4, 5), et="int64", **masks):
    w = FunctionWriter()
    p = w.parameter("f32", list(shape))
    bounds = [w.constant(np.array(v, et)) for v in (begins, ends, strides)]
    keys = ("lower_bounds_mask", "upper_bounds_mask", "new_axis", "shrink_axis", "ellipsis_mask")
    w.result(w.op("DynSlice", p, *bounds, **{k: masks.get(k, []) for k in keys}))
    return w


def test_slice_plan_rules():
    node = "DynSlice_4"
    _refused(_dyn_slice([0], [1], [0]), "stride must not be zero", node)
    _refused(_dyn_slice([0, 0], [1], [1]), "begins, ends and strides must have one length", node)
    _refused(_dyn_slice([0] * 3, [1] * 3, [1] * 3), "more slice axes than input axes", node)
    _refused(_dyn_slice([4], [5], [1], shrink_axis=[0]), "index 4 is outside [-4, 4)", node)
    _refused(_dyn_slice([0, 0], [1, 1], [1, 1], ellipsis_mask=[0, 1]), "at most one ellipsis", node)
    _refused(_dyn_slice([0], [1], [1], ellipsis_mask=[0], new_axis=[0]), "in the ellipsis mask and the new-axis", node)
    _refused(_dyn_slice([0], [1], [-1], shape=(0, 2)), "a negative stride on axis 0 of size 0", node)
    _refused(_dyn_slice([0], [1], [1], et="int32"), "Lower bounds must have element type i64", node)
    _refused(_dyn_slice([0], [1], [1], lower_bounds_mask="x"), "'lower_bounds_mask' must be a list", node)


def test_slice_bounds_must_be_constants_and_masks_flags():
    w = FunctionWriter()
    p, b = w.parameter("f32", [4]), w.parameter("i64", [1])
    w.result(w.op("DynSlice", p, b, b, b))
    _refused(w, "needs its lower bounds (input 1) as a Constant", "DynSlice_2")

    def strided(**masks):
        w = FunctionWriter(era="v0.29")
        p = w.parameter("f32", [4, 5])
        bounds = [w.constant(np.array(v, np.int64)) for v in ([0, 1], [2, 3])]
        w.result(w.op("StridedSlice", p, *bounds, version=1, **masks))
        return w

    _refused(strided(begin_mask=[0, 2]), "All masks of StridedSlice must have be 0 or 1", "StridedSlice_3")
    _refused(
        strided(begin_mask=[0, 1], end_mask=[1]), "All masks of StridedSlice must have the same size", "StridedSlice_3"
    )
    w = strided(begin_mask=[1, 0], end_mask=[0, 1], shrink_axis_mask=[0, 0])
    (got,) = _run(_convert(w), np.arange(20, dtype=np.float32).reshape(4, 5))
    assert np.array_equal(got, np.arange(20, dtype=np.float32).reshape(4, 5)[:2, 1:])


def test_dyn_replace_slice_shape_and_type():
    def replace(rshape, rtype="f32"):
        w = FunctionWriter()
        p, r = w.parameter("f32", [4, 5]), w.parameter(rtype, rshape)
        bounds = [w.constant(np.array(v, np.int64)) for v in ([1, 0], [3, 5], [1, 2])]
        w.result(w.op("DynReplaceSlice", p, r, *bounds))
        return w

    _refused(
        replace([2, 2]),
        "Shape of the replacement is not compatible with the shape of the slice (shape of slice: {2,3}",
        "DynReplaceSlice_5",
    )
    _refused(replace([2, 3], "f64"), "Argument element type is not compatible with replacement", "DynReplaceSlice_5")
    x, r = np.zeros((4, 5), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    (got,) = _run(_convert(replace([2, 3])), x, r)
    want = x.copy()
    want[1:3, 0:5:2] = r
    assert np.array_equal(got, want)


def test_scatter_nd_rules():
    def scatter(dshape, ishape, ushape, it="i64", ut="f32", opset=None):
        w = FunctionWriter()
        ps = [w.parameter("f32", dshape), w.parameter(it, ishape), w.parameter(ut, ushape)]
        w.result(w.op("ScatterND", *ps))
        return w

    _refused(scatter([4, 3], [2, 3], [2]), "Last dimension of indices ({2,3}) can be at most the rank", "ScatterND_3")
    _refused(scatter([4, 3], [2, 1], [2, 4]), "Updates shape {2,4} does not match indices {2,1}", "ScatterND_3")
    _refused(scatter([4, 3], [2, 1], [2, 3], it="f32"), "Indices element type must be i64 or i32", "ScatterND_3")
    _refused(scatter([4, 3], [2, 1], [2, 3], ut="f64"), "Updates element type (f64) must match", "ScatterND_3")
    _refused(scatter([], [2, 0], [2]), "Data rank is expected to be at least 1", "ScatterND_3")
    with pytest.raises(odq.DequantizeError, match="needs opset 16 or later"):
        odq.ngraph.convert([scatter([4, 3], [2, 1], [2, 3]).to_json()], opset=15)


def test_dyn_broadcast_and_dyn_pad_rules():
    def broadcast(shape, axes, et=np.int64):
        w = FunctionWriter()
        p = w.parameter("f32", [3])
        w.result(w.op("DynBroadcast", p, w.constant(np.array(shape, et)), w.constant(np.array(axes, et))))
        return w

    _refused(
        broadcast([2, 3], [0], np.int32), "DynBroadcast shape must have element type i64, but has i32", "DynBroadcast_3"
    )
    _refused(broadcast([2, 3], [2]), "Broadcast axis index (2) exceeds specified output shape rank", "DynBroadcast_3")
    _refused(
        broadcast([2, 4], [0]),
        "Broadcast argument shape, specified output shape, and axes are incompatible",
        "DynBroadcast_3",
    )
    w = FunctionWriter()
    p, s = w.parameter("f32", [3]), w.parameter("i64", [2])
    w.result(w.op("DynBroadcast", p, s, w.constant(np.array([0], np.int64))))
    _refused(w, "needs its shape (input 1) as a Constant", "DynBroadcast_3")

    def pad(below, above, value=np.float32(0), **attrs):
        w = FunctionWriter()
        p = w.parameter("f32", [2, 3])
        pads = [w.constant(np.array(v, np.int64)) for v in (below, above)]
        w.result(w.op("DynPad", p, *pads, w.constant(value), **attrs))
        return w

    _refused(pad([1], [1, 1]), "Arg and padding below ranks mismatch", "DynPad_4")
    _refused(pad([0, 0], [0, 0], np.float64(0)), "Padding value and arg type mismatch", "DynPad_4")
    _refused(
        pad([0, 0], [0, 0], np.zeros(2, np.float32)),
        "DynPad arg is not scalar (rank = 0), but has rank = 1",
        "DynPad_4",
    )
    _refused(pad([0, -4], [0, 0]), "Inferred result dimension at axis 1 is negative after padding", "DynPad_4")
    _refused(
        pad([0, 1], [0, 0], pad_mode="WRAP"), "'pad_mode' must be CONSTANT, EDGE, REFLECT or SYMMETRIC", "DynPad_4"
    )


def test_slice_bounds_past_int64_range_clip():
    """TensorFlow writes ends of INT64_MAX ("to the end"): the plan clips them."""
    big = np.iinfo(np.int64)
    w = _dyn_slice([big.min, 1], [big.max, big.max], [1, 2])
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    (got,) = _run(_convert(w), x)
    assert np.array_equal(got, x[:, 1::2])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_strided_slice_reads_as_numpy_indexing(data):
    """Random bounds, strides and disjoint masks: the converted slice is NumPy's basic indexing (but for a
    negative stride's begin before the start, which nGraph's plan clips to element 0: golden case
    ops_data/dyn_slice_reverse_from_before), or a refusal where NumPy refuses too (a shrunk index out of range)."""
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    n = data.draw(st.integers(1, len(shape) + 2))
    kinds = data.draw(st.lists(st.sampled_from("ssssnxe"), min_size=n, max_size=n))
    if kinds.count("e") > 1:
        kinds = [k if k != "e" else "s" for k in kinds]
    if sum(k in "sx" for k in kinds) > len(shape):
        kinds = ["s"] * len(shape)
    ints = st.integers(-6, 6)
    begins, ends = data.draw(st.lists(ints, min_size=len(kinds), max_size=len(kinds))), []
    ends = data.draw(st.lists(ints, min_size=len(kinds), max_size=len(kinds)))
    strides = data.draw(st.lists(st.sampled_from([-3, -2, -1, 1, 2, 3]), min_size=len(kinds), max_size=len(kinds)))
    lower = [int(k == "s" and data.draw(st.booleans())) for k in kinds]
    upper = [int(k == "s" and data.draw(st.booleans())) for k in kinds]
    masks = {
        "begin_mask": lower,
        "end_mask": upper,
        "new_axis_mask": [int(k == "n") for k in kinds],
        "shrink_axis_mask": [int(k == "x") for k in kinds],
        "ellipsis_mask": [int(k == "e") for k in kinds],
    }
    index: list = []
    axis, hidden = 0, len(shape) - sum(k in "sx" for k in kinds)
    for k, b, e, s, lo, hi in zip(kinds, begins, ends, strides, lower, upper):
        if k == "s" and s < 0 and not lo and b < -shape[axis]:  # nGraph clips it to element 0; NumPy: empty
            b = 0
        axis += hidden if k == "e" else int(k in "sx")
        index.append(
            Ellipsis
            if k == "e"
            else np.newaxis
            if k == "n"
            else b
            if k == "x"
            else slice(None if lo else b, None if hi else e, s)
        )
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    w = FunctionWriter(era="v0.29")
    p = w.parameter("f32", list(shape))
    bounds = [w.constant(np.array(v, np.int64)) for v in (begins, ends, strides)]
    w.result(w.op("StridedSlice", p, *bounds, version=1, **masks))
    try:
        want = x[tuple(index)]
    except IndexError:
        with pytest.raises(odq.DequantizeError, match="outside"):
            _convert(w)
        return
    (got,) = _run(_convert(w), x)
    assert got.shape == want.shape and np.array_equal(got, want), (kinds, begins, ends, strides, masks)


def test_slices_keep_axes_of_unknown_size_whole():
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    w = _dyn_slice(
        [0, 1, -1], [0, 3, 0], [1, 1, -2], shape=(None, 3, 4), lower_bounds_mask=[0], upper_bounds_mask=[0, 2]
    )
    (got,) = _run(_convert(w), x)
    assert np.array_equal(got, x[:, 1:3, ::-2])
    w = _dyn_slice(
        [0, 0, 1], [0, 0, 2], [1, 1, 1], shape=(None, 3, 4), ellipsis_mask=[0], new_axis=[1], shrink_axis=[2]
    )
    (got,) = _run(_convert(w), x)
    assert np.array_equal(got, x[..., np.newaxis, 1])
    _refused(_dyn_slice([1], [2], [1], shape=(None, 3)), "slice index 0 needs the size of input axis 0", "DynSlice_4")
