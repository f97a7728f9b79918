"""The scale that makes ONNX's ties-to-even requantization give nGraph's ties-away bits (``ties.py``):
checked against enumeration of every accumulator, and through ONNX Runtime on every accumulator value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from quantized_reference import dot_acc, qlinear_agrees, quantized_convolution, quantized_dot, tie_free
from test_ngraph_quantized import conv_graph, dot_graph, op_types, run

from onnx_dequant import dtypes
from onnx_dequant.ngraph.ops.ties import qlinear_scales

U8, I8 = dtypes.parse("u8"), dtypes.parse("i8")

scales = st.one_of(
    st.floats(0.0001220703125, 4.0, width=32),
    st.sampled_from([0.5, 0.25, 1.5, 0.125, 0.375, 2.0**-7, 0.75]),  # every multiple of an odd accumulator a tie
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(scales, min_size=1, max_size=4),
    st.integers(-40000, 5),
    st.integers(-5, 40000),
    st.integers(0, 255),
    st.sampled_from([U8, I8]),
)
def test_a_proven_scale_rounds_every_accumulator_as_ngraph(ms, lo, hi, zero, out_t):
    if out_t is I8:
        zero -= 128
    m = np.array(ms, np.float32)
    got = qlinear_scales(m, np.full(m.size, lo), np.full(m.size, hi), zero, out_t)
    assert got.shape == m.shape and got.dtype == np.float32
    for s, s2 in zip(m, got):
        if not np.isnan(s2):
            assert qlinear_agrees(s, s2, lo, hi, zero, out_t.numpy)
    if len(set(ms)) == 1 and not np.isnan(got).any():  # equal channels: one value serves them all
        assert len(set(got.tolist())) == 1


@settings(max_examples=150, deadline=None)
@given(scales, st.integers(-3000, 5), st.integers(-5, 3000), st.integers(0, 255))
def test_an_unproven_channel_has_no_scale_nearby(m, lo, hi, zero):
    m = np.float32(m)
    (got,) = qlinear_scales(np.array([m]), np.array([lo]), np.array([hi]), zero, U8)
    if np.isnan(got):  # not merely unproven: no f32 within 32 of it rounds as nGraph does
        bits = np.array([m]).view(np.int32)[0]
        for d in range(-32, 33):
            s2 = np.array([bits + d], np.int32).view(np.float32)[0]
            assert not qlinear_agrees(m, s2, lo, hi, zero, np.uint8)
    elif tie_free(np.array([m]), np.array([lo]), np.array([hi]), zero):
        assert got == m  # nothing to move: the scale itself


def test_no_scale_for_what_is_not_a_positive_finite_scale():
    for bad in (0.0, -0.5, np.nan, np.inf):
        (got,) = qlinear_scales(np.array([bad], np.float32), np.array([-100]), np.array([100]), 0, U8)
        assert np.isnan(got)


@pytest.mark.parametrize("m", [1e-40, 1e-30, 2.0**-149, 3e38])
def test_extreme_scales_are_proven_or_left_unproven_never_wrong(m):
    # steps far beyond (or within one accumulator of) every reachable value: whatever is returned rounds as
    # nGraph does on every accumulator
    lo, hi = -3000, 3000
    (got,) = qlinear_scales(np.array([m], np.float32), np.array([lo]), np.array([hi]), 7, U8)
    assert np.isnan(got) or qlinear_agrees(np.float32(m), got, lo, hi, 7, np.uint8)


def test_accumulators_beyond_f32_integers_are_left_unproven():
    # a tiny scale puts the rounding steps among accumulators f32 cannot hold exactly
    (got,) = qlinear_scales(np.array([1e-7], np.float32), np.array([-(1 << 30)]), np.array([1 << 30]), 0, U8)
    assert np.isnan(got)


def every_accumulator(k: int, dtype=np.int8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of two u8 values and a 2x1 filter [1, k] whose products, with zero point 128, are every
    accumulator in [-120 k, 120 k]."""
    acc = np.arange(-120 * k, 120 * k + 1)
    d1 = np.floor_divide(acc + 127, k)
    a = (np.stack([acc - k * d1, d1], axis=1) + 128).astype(np.uint8)
    return a, np.array([[1], [k]], dtype), acc


@pytest.mark.parametrize(
    "k, out_t",
    [(64, "i8"), (127, "i8"), (255, "u8")],  # the u8 x i8 kernels (|w| <= 64), i8 shifted to u8, u8 filters
)
def test_qlinear_matmul_with_a_moved_scale_on_every_accumulator(k, out_t):
    a, b, acc = every_accumulator(k, np.int8 if out_t == "i8" else np.uint8)
    assert np.array_equal(dot_acc(a, b, za=128).reshape(-1), acc)
    zo = np.int8(-3) if out_t == "i8" else np.uint8(120)
    zq = int(zo) + (128 if out_t == "i8" else 0)
    rng = np.random.default_rng(3)
    for _ in range(200):  # a realistic scale with ties that round to even in ONNX, and a proof
        s = np.float32(rng.uniform(0.005, 0.05))
        (s2,) = qlinear_scales(np.array([s]), np.array([acc[0]]), np.array([acc[-1]]), zq, U8)
        if not np.isnan(s2) and s2 != s and not qlinear_agrees(s, s, acc[0], acc[-1], zq, np.uint8):
            break
    else:
        raise AssertionError("no scale that needs moving")
    pairs = (np.float32(1.0), np.uint8(128), s, b.dtype.type(0), np.float32(1.0), zo)
    f, feeds = dot_graph(a, b, pairs, out_t)
    model, (got,) = run(f, feeds)
    assert "QLinearMatMul" in op_types(model) and "MatMulInteger" not in op_types(model)
    assert np.array_equal(got, quantized_dot(a, b, *pairs, {"i8": np.int8, "u8": np.uint8}[out_t]))


def test_qlinear_conv_with_moved_per_channel_scales_on_every_accumulator():
    a, b, acc = every_accumulator(127)
    x = np.ascontiguousarray(a.T).reshape(1, 2, 1, -1)  # one position per accumulator
    rng = np.random.default_rng(4)
    found = []
    while len(found) < 3:  # three channels, each needing its own moved scale
        s = np.float32(rng.uniform(0.005, 0.05))
        (s2,) = qlinear_scales(np.array([s]), np.array([acc[0]]), np.array([acc[-1]]), 128, U8)
        if not np.isnan(s2) and s2 != s and not qlinear_agrees(s, s, acc[0], acc[-1], 128, np.uint8):
            found.append(s)
    sf = np.array(found, np.float32)
    w = np.repeat(b.reshape(1, 2, 1, 1), 3, 0)
    pairs = (np.float32(1.0), np.uint8(128), sf, np.zeros(3, np.int8), np.float32(1.0), np.int8(0))
    f, feeds = conv_graph(x, w, pairs, "i8", axes=((), (0,), ()))
    model, (got,) = run(f, feeds)
    assert "QLinearConv" in op_types(model) and "ConvInteger" not in op_types(model)
    want = quantized_convolution(x, w, 1.0, 128, sf.reshape(1, -1, 1, 1), 0, 1.0, 0, np.int8)
    assert np.array_equal(got, want)
