"""nGraph's quantized compute ops and FakeQuantize: the converted models under ONNX Runtime against the ops'
NumPy definitions (``quantized_reference.py``; the golden suite has nGraph's own results), bit for bit,
the form chosen (QLinear* only where proven exact), and the errors."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from quantized_reference import (
    conv_acc,
    dot_acc,
    dot_bias,
    fake_quantize,
    fused_conv,
    in_range,
    quantized_convolution,
    quantized_dot,
    tie_free,
)

import onnx_dequant as odq
from onnx_dequant.ngraph.ops import quantized
from onnx_dequant.ngraph.writer import FunctionWriter, dumps

LEVELS = ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL")
NP = {"u8": np.uint8, "i8": np.int8, "i32": np.int32, "f32": np.float32}
CONV_ATTRS = {
    "window_movement_strides": [1, 1],
    "window_dilation_strides": [1, 1],
    "padding_below": [0, 0],
    "padding_above": [0, 0],
    "data_dilation_strides": [1, 1],
}


def run(w: FunctionWriter, feeds: dict[str, np.ndarray]) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """The converted model and its outputs, checked equal at ORT's default level and with optimizations off."""
    model = odq.ngraph.convert(dumps([w]))
    onnx.checker.check_model(model, full_check=True)
    outs = []
    for level in LEVELS:
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        so.log_severity_level = 3
        s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        outs.append(s.run(None, feeds))
    for a, b in zip(*outs):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    return model, outs[0]


def op_types(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def conv_graph(x, w, pairs, out_t, *, param_w=False, axes=((), (), ()), op="QuantizedConvolution", **geom):
    f = FunctionWriter("f")
    px = f.parameter("u8", list(x.shape))
    pw = f.parameter({np.uint8: "u8", np.int8: "i8"}[w.dtype.type], list(w.shape)) if param_w else f.constant(w)
    consts = [f.constant(np.asarray(v)) for v in pairs]
    attrs = {**CONV_ATTRS, **geom}
    y = f.op(
        op,
        px,
        pw,
        *consts,
        **attrs,
        output_type=out_t,
        input_axes=list(axes[0]),
        filter_axes=list(axes[1]),
        output_axes=list(axes[2]),
    )
    f.result(y)
    feeds = {"Parameter_0": x} | ({"Parameter_1": w} if param_w else {})
    return f, feeds


def _pairs(rng, wt, out_t, so=3.0):
    zw = np.array(rng.integers(-5, 6) if wt == "i8" else rng.integers(120, 136), NP[wt])
    zo = np.array(3 if out_t == "i8" else 100 if out_t == "u8" else -7, NP[out_t])
    return (np.float32(0.05), np.uint8(9), np.float32(0.02), zw, np.float32(so), zo)


@pytest.mark.parametrize("combo", sorted(quantized.COMBOS))
@pytest.mark.parametrize("param_w", [False, True])
def test_quantized_convolution_every_type_combination(combo, param_w):
    rng = np.random.default_rng(1)
    _, wt, out_t = combo
    x = rng.integers(0, 256, (2, 3, 6, 5), dtype=np.uint8)
    w = (rng.integers(-128, 128, (4, 3, 3, 2)) if wt == "i8" else rng.integers(0, 256, (4, 3, 3, 2))).astype(NP[wt])
    pairs = _pairs(rng, wt, out_t, so=40.0 if out_t != "i32" else 0.5)
    geom = {"padding_below": [1, 0], "padding_above": [2, -1], "window_movement_strides": [2, 1]}
    f, feeds = conv_graph(x, w, pairs, out_t, param_w=param_w, **geom)
    model, (got,) = run(f, feeds)
    g = {"strides": [2, 1], "pads_below": [1, 0], "pads_above": [2, -1]}
    want = quantized_convolution(x, w, *pairs, NP[out_t], **g)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    acc = conv_acc(x, w, pairs[1], pairs[3], **g)
    scale = np.float32(np.float32(pairs[0] * pairs[2]) / pairs[4])
    assert in_range(acc, scale, pairs[5], NP[out_t]).mean() > 0.9  # mostly where nGraph itself is defined
    node = next(n for n in model.graph.node if n.name == "QuantizedConvolution_8")
    assert node.output[0] == "Result_9"  # the op's identity: its node writes the result
    assert ("ConvInteger" in op_types(model)) != ("QLinearConv" in op_types(model))
    if out_t == "i32":  # QLinearConv has no i32 output
        assert "ConvInteger" in op_types(model)


def test_saturation_beyond_the_output_type_and_zero_points_at_the_limits():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (1, 4, 5, 5), dtype=np.uint8)
    x[0, :, 0, 0] = 255
    w = rng.integers(-128, 128, (3, 4, 3, 3), dtype=np.int8)
    w[0] = 127  # |w| > 64: ORT's AVX2 u8 x i8 kernels would saturate their int16 pair sums
    seen = []
    for zx, zw, zo in ((0, -128, -128), (255, 127, 127), (128, 0, 0)):
        pairs = (np.float32(0.1), np.uint8(zx), np.float32(0.1), np.int8(zw), np.float32(1.0), np.int8(zo))
        f, feeds = conv_graph(x, w, pairs, "i8")
        _, (got,) = run(f, feeds)
        want = quantized_convolution(x, w, *pairs, np.int8)
        assert np.array_equal(got, want)
        seen.append(got)
    seen = np.concatenate([g.ravel() for g in seen])
    assert (seen == -128).any() and (seen == 127).any()  # saturated both ways (undefined in nGraph)


def test_ties_round_away_from_zero():
    # scale 0.5 exactly: every odd accumulator is a tie, which ONNX's QLinearConv would round to even with
    # that scale; with the next f32 above it, every tie rounds up and no other value changes
    x = np.arange(2 * 9, dtype=np.uint8).reshape(1, 2, 3, 3)
    w = np.ones((1, 2, 1, 1), np.int8)
    pairs = (np.float32(0.5), np.uint8(0), np.float32(1.0), np.int8(0), np.float32(1.0), np.int8(0))
    f, feeds = conv_graph(x, w, pairs, "i8")
    model, (got,) = run(f, feeds)
    want = quantized_convolution(x, w, *pairs, np.int8)
    assert np.array_equal(got, want)
    acc = conv_acc(x, w)
    assert np.array_equal(got.astype(np.int64), (acc + 1) // 2)  # 0.5 -> 1, 1.5 -> 2: away from zero
    (qlc,) = [n for n in model.graph.node if n.op_type == "QLinearConv"]
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    assert inits[qlc.input[1]] == np.nextafter(np.float32(0.5), np.float32(1))  # x_scale: one f32 up
    assert inits[qlc.input[4]] == 1 and inits[qlc.input[6]] == 1  # w_scale, y_scale


def tie_free_scales(rng, x, w, zx, zw, n=3, out=np.int8):
    """Scales (s_in, s_f, s_out) for which the QLinear form is provably exact on this filter (and differ
    between the two f32 orders of the scale product)."""
    d = w.astype(np.int64).reshape(w.shape[0], -1) - np.asarray(zw, np.int64).reshape(-1, 1)
    xl, xh = -int(zx), 255 - int(zx)
    lo, hi = np.minimum(xl * d, xh * d).sum(1), np.maximum(xl * d, xh * d).sum(1)
    zo = 0 if out == np.uint8 else 128
    for _ in range(20000):
        si, sf, so = (np.float32(v) for v in rng.uniform(0.001, 0.01, n))
        a = np.float32(np.float32(si * sf) / so)
        if a == np.float32(si * np.float32(sf / so)):
            continue
        if tie_free(np.full(lo.size, a), lo, hi, zo):
            return si, sf, so
    raise AssertionError("no tie-free scales found")


def tie_free_per_channel(rng, lo, hi, base=np.float32(1), zo=128):
    """One f32 factor per channel such that ``base * factor`` is tie-free on that channel's range."""
    out = []
    for a, b in zip(lo, hi):
        for _ in range(20000):
            f = np.float32(rng.uniform(0.005, 0.05))
            if tie_free(np.array([np.float32(base * f)]), np.array([a]), np.array([b]), zo):
                out.append(f)
                break
        else:
            raise AssertionError("no tie-free factor")
    return np.array(out, np.float32)


def _ranges(w, zx, zw, axis0=True):
    m = w.astype(np.int64)
    m = m.reshape(m.shape[0], -1) if axis0 else m.reshape(-1, m.shape[-1]).T
    d = m - np.asarray(zw, np.int64).reshape(-1, 1)
    xl, xh = -int(zx), 255 - int(zx)
    return np.minimum(xl * d, xh * d).sum(1), np.maximum(xl * d, xh * d).sum(1)


def test_qlinear_scale_order_is_ngraphs():
    # (s_in * s_f) / s_out and s_in * (s_f / s_out) differ in f32 for these: ORT must compute the first
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 4, 8, 8), dtype=np.uint8)
    w = rng.integers(-64, 65, (8, 4, 1, 1), dtype=np.int8)
    si, sf, so = tie_free_scales(rng, x, w, 128, 0)
    pairs = (si, np.uint8(128), sf, np.int8(0), so, np.int8(0))
    f, feeds = conv_graph(x, w, pairs, "i8")
    model, (got,) = run(f, feeds)
    want = quantized_convolution(x, w, *pairs, np.int8)
    assert "QLinearConv" in op_types(model) and np.array_equal(got, want)


def test_per_channel_and_multi_axis_scales():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2, 3, 5, 5), dtype=np.uint8)
    w = rng.integers(-60, 61, (4, 3, 3, 3), dtype=np.int8)
    sf = rng.uniform(0.01, 0.03, 4).astype(np.float32)
    zw = np.zeros(4, np.int8)
    so = rng.uniform(2, 4, (4, 3)).astype(np.float32)  # per (channel, row): output_axes {1, 2}
    zo = rng.integers(-3, 4, (4, 3)).astype(np.int8)
    si = np.array([0.05, 0.07], np.float32)  # per batch: input_axes {0}
    zx = np.array([9, 9], np.uint8)
    pairs = (si, zx, sf, zw, so, zo)
    f, feeds = conv_graph(x, w, pairs, "i8", axes=((0,), (0,), (1, 2)))
    model, (got,) = run(f, feeds)
    want = quantized_convolution(
        x,
        w,
        si.reshape(2, 1, 1, 1),
        9,
        sf.reshape(1, 4, 1, 1),
        0,
        so.reshape(1, 4, 3, 1),
        zo.reshape(1, 4, 3, 1),
        np.int8,
    )
    assert np.array_equal(got, want)
    # per-channel filter scale alone is QLinearConv's own per-channel form (where proven tie-free)
    w1 = w[:, :, :1, :1]
    lo, hi = _ranges(w1, 9, 0)
    sf = tie_free_per_channel(rng, lo, hi, zo=129) * np.float32(0.01)
    pairs = (np.float32(1.0), np.uint8(9), sf, zw, np.float32(0.01), np.int8(1))
    f, feeds = conv_graph(x, w1, pairs, "i8", axes=((), (0,), ()))
    model, (got,) = run(f, feeds)
    want = quantized_convolution(x, w1, 1.0, 9, sf.reshape(1, 4, 1, 1), zw, 0.01, 1, np.int8)
    assert np.array_equal(got, want)
    assert "QLinearConv" in op_types(model)


def test_filter_zero_point_per_channel():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (1, 3, 5, 5), dtype=np.uint8)
    w = rng.integers(0, 256, (4, 3, 3, 3), dtype=np.uint8)
    zw = np.array([120, 128, 131, 140], np.uint8)
    sf = np.full(4, 0.01, np.float32)
    pairs = (np.float32(0.05), np.uint8(7), sf, zw, np.float32(0.3), np.int32(5))
    for param_w in (False, True):
        f, feeds = conv_graph(x, w, pairs, "i32", axes=((), (0,), ()), param_w=param_w, padding_below=[1, 1])
        _, (got,) = run(f, feeds)
        want = quantized_convolution(x, w, 0.05, 7, sf.reshape(1, 4, 1, 1), zw, 0.3, 5, np.int32, pads_below=[1, 1])
        assert np.array_equal(got, want)


def dot_graph(a, b, pairs, out_t, n=1, axes=((), (), ())):
    f = FunctionWriter("f")
    pa = f.parameter("u8", list(a.shape))
    pb = f.constant(b)
    consts = [f.constant(np.asarray(v)) for v in pairs]
    y = f.op(
        "QuantizedDot",
        pa,
        pb,
        *consts,
        reduction_axes_count=n,
        output_type=out_t,
        input0_axes=list(axes[0]),
        input1_axes=list(axes[1]),
        output_axes=list(axes[2]),
    )
    f.result(y)
    return f, {"Parameter_0": a}


@pytest.mark.parametrize("combo", sorted(quantized.COMBOS))
def test_quantized_dot_every_type_combination(combo):
    rng = np.random.default_rng(6)
    _, wt, out_t = combo
    a = rng.integers(0, 256, (5, 12), dtype=np.uint8)
    b = (rng.integers(-128, 128, (12, 7)) if wt == "i8" else rng.integers(0, 256, (12, 7))).astype(NP[wt])
    pairs = _pairs(rng, wt, out_t, so=10.0 if out_t != "i32" else 0.5)
    f, feeds = dot_graph(a, b, pairs, out_t)
    model, (got,) = run(f, feeds)
    want = quantized_dot(a, b, *pairs, NP[out_t])
    assert np.array_equal(got, want)
    assert ("QLinearMatMul" in op_types(model)) != ("MatMulInteger" in op_types(model))
    if out_t == "i32":
        assert "MatMulInteger" in op_types(model)


def test_quantized_dot_contracts_two_axes_and_per_column_scales():
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (3, 4, 5), dtype=np.uint8)
    b = rng.integers(-100, 100, (4, 5, 6), dtype=np.int8)
    pairs = (np.float32(0.02), np.uint8(3), np.float32(0.03), np.int8(1), np.float32(2.0), np.int8(0))
    f, feeds = dot_graph(a, b, pairs, "i8", n=2)
    _, (got,) = run(f, feeds)
    assert np.array_equal(got, quantized_dot(a, b, *pairs, np.int8, n=2))
    a2 = rng.integers(0, 256, (4, 8), dtype=np.uint8)
    b2 = rng.integers(-100, 100, (8, 6), dtype=np.int8)
    zb = rng.integers(-3, 4, 6).astype(np.int8)
    lo, hi = _ranges(b2, 3, zb, axis0=False)
    sf = tie_free_per_channel(rng, lo, hi, zo=130)
    pairs = (np.float32(1.0), np.uint8(3), sf, zb, np.float32(1.0), np.int8(2))
    f, feeds = dot_graph(a2, b2, pairs, "i8", axes=((), (1,), ()))
    model, (got,) = run(f, feeds)
    assert "QLinearMatMul" in op_types(model)
    assert np.array_equal(got, quantized_dot(a2, b2, 1.0, 3, sf, zb, 1.0, 2, np.int8))


def fused_graph(op, x, w, extra_inputs, **attrs):
    f = FunctionWriter("f")
    px = f.parameter("u8", list(x.shape))
    ins = [px, f.constant(w)]
    feeds = {"Parameter_0": x}
    for v in extra_inputs:
        if isinstance(v, tuple):  # a fed input
            p = f.parameter(v[0], list(v[1].shape))
            feeds[str(p)] = v[1]
            ins.append(p)
        else:
            ins.append(f.constant(np.asarray(v)))
    f.result(f.op(op, *ins, **attrs))
    return f, feeds


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias_t", ["i32", "f32"])
def test_quantized_convolution_bias(relu, bias_t):
    rng = np.random.default_rng(8)
    x = rng.integers(0, 256, (1, 3, 6, 6), dtype=np.uint8)
    w = rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-3000, 3000, 4).astype(NP.get(bias_t, np.float32))
    for scale in (np.float32(0.002), rng.uniform(0.001, 0.003, 4).astype(np.float32)):
        f, feeds = fused_graph("QuantizedConvolutionBias", x, w, [bias, scale], with_relu=relu, **CONV_ATTRS)
        model, (got,) = run(f, feeds)
        want = fused_conv(x, w, scale, np.uint8 if relu else np.int8, bias=bias, relu=relu)
        assert np.array_equal(got, want)
    # a small filter and a tie-free scale: QLinearConv with the bias as its int32 bias
    if bias_t == "i32":
        w1 = w[:, :, :1, :1]
        lo, hi = _ranges(w1, 0, 0)
        scale = tie_free_per_channel(rng, lo + bias, hi + bias, zo=0 if relu else 128)
        f, feeds = fused_graph("QuantizedConvolutionBias", x, w1, [bias, scale], with_relu=relu, **CONV_ATTRS)
        model, (got,) = run(f, feeds)
        assert "QLinearConv" in op_types(model)
        assert np.array_equal(got, fused_conv(x, w1, scale, np.uint8 if relu else np.int8, bias=bias, relu=relu))


def test_quantized_convolution_relu_and_sums():
    rng = np.random.default_rng(9)
    x = rng.integers(0, 256, (1, 3, 6, 6), dtype=np.uint8)
    w = rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)
    geom = {**CONV_ATTRS, "padding_below": [1, 1], "padding_above": [1, 1]}
    g = {"pads_below": [1, 1], "pads_above": [1, 1]}
    f, feeds = fused_graph("QuantizedConvolutionRelu", x, w, [np.float32(0.003)], **geom)
    _, (got,) = run(f, feeds)
    assert np.array_equal(got, fused_conv(x, w, np.float32(0.003), np.uint8, relu=True, **g))
    bias = rng.integers(-3000, 3000, 4).astype(np.int32)
    for op, sum_t, relu in (
        ("QuantizedConvolutionBiasAdd", "u8", True),
        ("QuantizedConvolutionBiasAdd", "u8", False),
        ("QuantizedConvolutionBiasSignedAdd", "i8", True),
    ):
        s = rng.integers(0, 256, (1, 4, 6, 6)) if sum_t == "u8" else rng.integers(-128, 128, (1, 4, 6, 6))
        s = s.astype(NP[sum_t])
        f, feeds = fused_graph(op, x, w, [bias, (sum_t, s), np.float32(0.002), np.float32(0.5)], with_relu=relu, **geom)
        _, (got,) = run(f, feeds)
        dt = np.int8 if op.endswith("SignedAdd") or not relu else np.uint8
        want = fused_conv(x, w, 0.002, dt, bias=bias, relu=relu, sum_input=s, sum_scale=0.5, **g)
        assert np.array_equal(got, want), op


@pytest.mark.parametrize("requant, relu", [(True, False), (True, True), (False, False), (False, True)])
def test_quantized_dot_bias(requant, relu):
    rng = np.random.default_rng(10)
    x = rng.integers(0, 256, (5, 16), dtype=np.uint8)
    w = rng.integers(-128, 128, (6, 16), dtype=np.int8)
    bias = rng.integers(-2000, 2000, 6).astype(np.int32)
    f, feeds = fused_graph("QuantizedDotBias", x, w, [bias, np.float32(0.004)], requantize=requant, with_relu=relu)
    _, (got,) = run(f, feeds)
    want = dot_bias(x, w, bias, np.float32(0.004), requantize_out=requant, relu=relu)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def fq_graph(x, lows, levels, version=0, **attrs):
    f = FunctionWriter("f", era="v0.29" if version else "v0.26")
    px = f.parameter({np.float32: "f32", np.float64: "f64"}[x.dtype.type], list(x.shape))
    consts = [f.constant(np.asarray(v, x.dtype)) for v in lows]
    f.result(f.op("FakeQuantize", px, *consts, version=version, levels=levels, **attrs))
    return f, {"Parameter_0": x}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fake_quantize(dtype):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, 3, 4, 4)) * 2).astype(dtype)
    x.flat[:4] = [0.5, -0.5, np.inf, -np.inf]
    cases = [
        ((-1.0, 1.0, -2.0, 2.0), 256, (-1.0, 1.0, -2.0, 2.0)),
        ((-1.0, 1.0, 0.0, 1.0), 5, (-1.0, 1.0, 0.0, 1.0)),
    ]
    per_ch = (np.array([-1, -2, -0.5]), np.array([1, 2, 0.7]), np.array([-1.0, 0, 1]), np.array([3, 4, 5.0]))
    cases.append((per_ch, 17, tuple(v.reshape(3, 1, 1).astype(dtype) for v in per_ch)))
    for lows, levels, placed in cases:
        f, feeds = fq_graph(x, lows, levels)
        _, (got,) = run(f, feeds)
        want = fake_quantize(x, *(np.asarray(v, dtype) for v in placed), levels)
        assert np.array_equal(got, want)
    # ties: x exactly halfway between two levels rounds away from zero
    xt = np.linspace(-1, 1, 9).astype(dtype).reshape(1, 1, 9)
    f, feeds = fq_graph(xt, (-1.0, 1.0, 0.0, 8.0), 5)
    _, (got,) = run(f, feeds)
    assert got.reshape(-1).tolist() == [0, 2, 2, 4, 4, 6, 6, 8, 8]  # q = 2.5 -> 3 (ties to even: 2)


def test_fake_quantize_opset1_numpy_broadcast():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    il = np.full((1, 1, 4), -1, np.float32)
    f, feeds = fq_graph(x, (il, np.float32(1), np.float32(-1), np.float32(1)), 9, version=0, auto_broadcast="NUMPY")
    _, (got,) = run(f, feeds)
    assert np.array_equal(got, fake_quantize(x, il, np.float32(1), np.float32(-1), np.float32(1), 9))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"output_type": "u8", "w": "i8"}, "unsupported element type: nGraph's INTERPRETER runs QuantizedConvolution"),
        ({"output_type": "f32"}, "Output element type (f32) must be a quantized type"),
        ({"zo": np.uint8(0)}, "Output Zero point element type (u8) must match output element type (i8)"),
        ({"zx": np.int8(0)}, "Input Zero point element type (i8) must match input element type (u8)"),
        ({"si": np.float32([1, 2])}, "Input scale and input zero point shape must be same and 1"),
        ({"filter_axes": [1]}, "'filter_axes' [1] includes axis 1, which QuantizedConvolution sums over"),
        ({"filter_axes": [0]}, "filter scale shape {} must be the filter's dimensions at 'filter_axes' [0]: {2}"),
        ({"output_axes": [7]}, "'output_axes' [7] names axis 7, beyond the output's rank 4"),
        ({"si": np.float64(1)}, "Scale must be a floating point number"),
    ],
)
def test_quantized_convolution_errors(change, message):
    x = np.zeros((1, 2, 3, 3), np.uint8)
    w = np.zeros((2, 2, 1, 1), NP[change.get("w", "i8")])
    vals = {"si": np.float32(1), "zx": np.uint8(0), "sf": np.float32(1), "zw": np.zeros((), w.dtype)}
    vals |= {"so": np.float32(1), "zo": np.zeros((), NP.get(change.get("output_type", "i8"), np.int8))}
    vals |= {k: v for k, v in change.items() if k in vals}
    axes = tuple(change.get(k, []) for k in ("input_axes", "filter_axes", "output_axes"))
    f, _ = conv_graph(x, w, list(vals.values()), change.get("output_type", "i8"), axes=axes)
    with pytest.raises(odq.DequantizeError, match="QuantizedConvolution_8") as e:
        odq.ngraph.convert(dumps([f]))
    assert message in str(e.value)


def test_fused_and_fake_quantize_errors():
    x = np.zeros((1, 2, 3, 3), np.uint8)
    w = np.zeros((2, 2, 1, 1), np.int8)
    f, _ = fused_graph("QuantizedConvolutionBias", x, w, [np.zeros(2, np.int32)], **CONV_ATTRS)  # no scale
    with pytest.raises(odq.DequantizeError, match="QuantizedConvolutionBias takes 4 inputs, got 3"):
        odq.ngraph.convert(dumps([f]))
    f, _ = fused_graph("QuantizedConvolutionBias", x, w, [np.zeros(3, np.int32), np.float32(1)], **CONV_ATTRS)
    with pytest.raises(odq.DequantizeError, match=r"invalid bias \{3\}"):
        odq.ngraph.convert(dumps([f]))
    s = ("i8", np.zeros((1, 2, 3, 3), np.int8))
    f, _ = fused_graph(
        "QuantizedConvolutionBiasSignedAdd",
        x,
        w,
        [np.zeros(2, np.int32), s, np.float32(1), np.float32(1)],
        with_relu=False,
        **CONV_ATTRS,
    )
    with pytest.raises(odq.DequantizeError, match="with_relu must be true"):
        odq.ngraph.convert(dumps([f]))
    f, _ = fused_graph(
        "QuantizedDotBias",
        np.zeros((2, 3), np.uint8),
        np.zeros((4, 5), np.int8),
        [np.zeros(4, np.int32), np.float32(1)],
    )
    with pytest.raises(
        odq.DequantizeError, match=r"only valid tensors of rank 2 supported. data \{2,3\} weights \{4,5\}"
    ):
        odq.ngraph.convert(dumps([f]))
    f, _ = fq_graph(np.zeros((1, 3, 2), np.float32), (np.zeros(2), 1.0, 0.0, 1.0), 4)
    with pytest.raises(odq.DequantizeError, match="Input low tensor shape: \\{2\\}, must either be a scalar"):
        odq.ngraph.convert(dumps([f]))
    f, _ = fq_graph(np.zeros((1, 3, 2), np.float32), (0.0, 1.0, 0.0, 1.0), 1)
    with pytest.raises(odq.DequantizeError, match="'levels' must be an integer in"):
        odq.ngraph.convert(dumps([f]))


def test_sample_quantized_conv_net_is_current_and_exact(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, str(root / "scripts" / "make_models.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    path = root / "models" / "quantized_conv_net.json"
    assert (tmp_path / path.name).read_bytes() == path.read_bytes()
    assert path.stat().st_size < 1 << 20
    fn = json.loads(path.read_text())[0]
    c = {op["name"]: op for op in fn["ops"] if op["op"] == "Constant"}

    def val(name):
        op = c[name]
        dt = {"float": np.float32, "int8_t": np.int8, "uint8_t": np.uint8, "int32_t": np.int32}[op["element_type"]]
        v = np.array([float(s) for s in op["value"]]).astype(dt)
        return np.broadcast_to(v.reshape(-1)[0], op["shape"]).copy() if v.size == 1 else v.reshape(op["shape"])

    ins = {op["name"]: op["inputs"] for op in fn["ops"]}
    by = {op["op"]: op["name"] for op in fn["ops"]}
    x = np.random.default_rng(0).uniform(-2, 2, (1, 3, 16, 16)).astype(np.float32)
    q_in = ins[by["Quantize"]]
    q = np.clip(np.rint(x / val(q_in[1])) + 128, 0, 255).astype(np.uint8)
    b_in = ins[by["QuantizedConvolutionBias"]]
    p1 = {"pads_below": [1, 1], "pads_above": [1, 1]}
    c1 = fused_conv(q, val(b_in[1]), val(b_in[3]), np.uint8, bias=val(b_in[2]), relu=True, **p1)
    r_in = ins[by["QuantizedConvolutionRelu"]]
    c2 = fused_conv(c1, val(r_in[1]), val(r_in[2]), np.uint8, relu=True, strides=[2, 2], **p1)
    k = [val(n) for n in ins[by["QuantizedConvolution"]][1:]]
    c3 = quantized_convolution(c2, k[0], k[1], k[2], k[3].reshape(1, -1, 1, 1), k[4], k[5], k[6], np.int8)
    feat = odq.dequantize(c3, val(ins["Dequantize_21"][1]), val(ins["Dequantize_21"][2]), axes=(1,))
    k = [val(n) for n in ins[by["QuantizedDot"]][1:]]
    d = quantized_dot(c2.reshape(1, 512), *k, np.int8)
    logits = (d.astype(np.float32) * np.float32(0.8)).astype(np.float32)
    model = odq.ngraph.convert(path)
    got = odq.session(model).run(None, {"Parameter_0": x})
    assert np.array_equal(got[0], feat) and np.array_equal(got[1], logits)
    assert len(np.unique(c1)) > 50 and len(np.unique(c2)) > 20 and len(np.unique(c3)) > 10  # not degenerate


@pytest.mark.parametrize(
    "scale, column, want",
    [
        (np.nextafter(np.float32(0.5), np.float32(0)), [1] + [0] * 129, 0),  # 0.49999997 + 0.5 would round to 1
        (np.float32(1.0), [255] * 129 + [254], 130 * 255 * 255 - 255),  # an odd integer above 2^23 stays itself
        (np.float32(-0.5), [3] + [0] * 129, -2),  # -1.5 rounds away from zero
    ],
)
def test_rounding_edges(scale, column, want):
    a = np.full((1, 130), 255, np.uint8) if want > 1 else np.ones((1, 130), np.uint8)
    b = np.array(column, np.uint8).reshape(130, 1)
    pairs = (np.float32(1.0), np.uint8(0), scale, np.uint8(0), np.float32(1.0), np.int32(0))
    f, feeds = dot_graph(a, b, pairs, "i32")
    _, (got,) = run(f, feeds)
    assert got.reshape(-1).tolist() == [want]
    assert quantized_dot(a, b, *pairs, np.int32).reshape(-1).tolist() == [want]


def test_the_output_node_names_the_op_and_its_form():
    rng = np.random.default_rng(13)
    x = rng.integers(0, 256, (1, 2, 4, 4), dtype=np.uint8)
    w = rng.integers(-100, 100, (3, 2, 3, 3), dtype=np.int8)
    pairs = (np.float32(0.5), np.uint8(0), np.float32(1.0), np.int8(0), np.float32(1.0), np.int32(0))
    f, _ = conv_graph(x, w, pairs, "i32")
    model = odq.ngraph.convert(dumps([f]))
    (node,) = [n for n in model.graph.node if n.output[0] == "Result_9"]
    assert node.name == "QuantizedConvolution_8"
    assert (
        node.doc_string == "nGraph QuantizedConvolution 'QuantizedConvolution_8' as ConvInteger, exact requantization"
    )


@pytest.mark.parametrize(
    "scale",
    [np.float32(0.5), np.float32(0.25), np.float32(1.5), np.float32(2.0**-7), np.float32(0.0037), np.float32(1024.0)],
)
@pytest.mark.parametrize("out_t", ["i8", "u8", "i32"])
def test_truncating_rounding_on_every_accumulator(scale, out_t):
    # trunc(2v) - trunc(v) must be std::round on every value: one row per accumulator in [-16000, 16000]
    # ((a0 - 128) + k * (a1 - 128); k = 127 for i8 filters, 255 for u8), so every tie of these scales; with
    # 1024, values past 2^24
    k, wt = (127, np.int8) if out_t == "i8" else (255, np.uint8)
    acc = np.arange(-16000, 16001)
    d1 = np.floor_divide(acc + 127, k)
    a = (np.stack([acc - k * d1, d1], axis=1) + 128).astype(np.uint8)
    b = np.array([[1], [k]], wt)
    zo = {"i8": np.int8(-3), "u8": np.uint8(7), "i32": np.int32(5)}[out_t]
    pairs = (np.float32(1.0), np.uint8(128), scale, wt(0), np.float32(1.0), zo)
    f, feeds = dot_graph(a, b, pairs, out_t)
    model, (got,) = run(f, feeds)
    assert np.array_equal(dot_acc(a, b, za=128).reshape(-1), acc)
    assert "Sign" not in op_types(model) and "Floor" not in op_types(model)  # the truncating form
    assert np.array_equal(got, quantized_dot(a, b, *pairs, NP[out_t]))


def test_requantization_form(monkeypatch):
    # the decomposition (the QLinear form turned off): a constant per-channel scale gives two
    # DequantizeLinear (float(acc) * M and * 2M, each read once: ONNX Runtime copies a DequantizeLinear per
    # reader), trunc(2v) - trunc(v), QuantizeLinear by 1
    monkeypatch.setattr(quantized, "QLINEAR", False)
    rng = np.random.default_rng(21)
    x = rng.integers(0, 256, (1, 4, 6, 6), dtype=np.uint8)
    w = rng.integers(-127, 128, (5, 4, 3, 3), dtype=np.int8)
    sf = rng.uniform(0.5, 1.5, 5).astype(np.float32) * np.float32(0.01)
    pairs = (np.float32(0.02), np.uint8(128), sf, np.zeros(5, np.int8), np.float32(0.5), np.int8(2))
    f, feeds = conv_graph(x, w, pairs, "i8", axes=((), (0,), ()))
    model, (got,) = run(f, feeds)
    want = quantized_convolution(x, w, *pairs[:2], sf.reshape(1, -1, 1, 1), *pairs[3:], np.int8)
    assert np.array_equal(got, want)
    assert sorted(op_types(model)) == sorted(
        ["ConvInteger", "DequantizeLinear", "DequantizeLinear", "Cast", "Cast", "Sub", "Cast", "QuantizeLinear"]
    )
    readers = [i for n in model.graph.node for i in n.input]
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear":
            assert readers.count(n.output[0]) == 1
    # a scale so large that |v| may pass 2^24: clipped first, 2v then an Add of the clipped v (no second
    # DequantizeLinear left unread)
    big = (np.float32(1.0), pairs[1], np.full(5, 20.5, np.float32), pairs[3], np.float32(1.0), pairs[5])
    f3, feeds3 = conv_graph(x, w, big, "i8", axes=((), (0,), ()))
    model3, (got3,) = run(f3, feeds3)
    want3 = quantized_convolution(x, w, *big[:2], big[2].reshape(1, -1, 1, 1), *big[3:], np.int8)
    assert np.array_equal(got3, want3)
    assert op_types(model3).count("DequantizeLinear") == 1 and "Clip" in op_types(model3)
    read = {i for n in model3.graph.node for i in n.input} | {o.name for o in model3.graph.output}
    assert all(o in read for n in model3.graph.node for o in n.output)
    # a scale the importer cannot bound (a parameter filter's zero point varies per channel: still bounded by
    # the count) or an unknown scale keeps exactness; with an unknown scale the 8-bit output clips first
    f2 = FunctionWriter("f")
    px = f2.parameter("u8", list(x.shape))
    ps = f2.parameter("f32", [])
    consts = [f2.constant(np.asarray(v)) for v in (w, pairs[1], sf, pairs[3], pairs[4], pairs[5])]
    attrs = {**CONV_ATTRS, "output_type": "i8", "input_axes": [], "filter_axes": [0], "output_axes": []}
    y = f2.op("QuantizedConvolution", px, consts[0], ps, *consts[1:], **attrs)
    f2.result(y)
    model2, (got2,) = run(f2, {"Parameter_0": x, "Parameter_1": np.array(0.02, np.float32)})
    assert np.array_equal(got2, want)
    assert "Clip" in op_types(model2) and "Sign" not in op_types(model2)
