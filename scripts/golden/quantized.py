"""nGraph's quantized compute ops and FakeQuantize: every type combination, ties at the rounding step,
zero points at the type limits, padding / strides / dilation, Dot contractions.

nGraph 0.26's INTERPRETER runs QuantizedConvolution and QuantizedDot (per-tensor scales, empty axes sets,
one contracted axis) and FakeQuantize (op_version 0): those cases are its results. The rest come from the
ops' definitions (``tests/quantized_reference.py``), each case saying why: the fused forms (nGraph 0.26's
deserializer cannot read them back), scales over axes (nGraph 0.26 requires the axes sets empty), Dot over
two axes (its INTERPRETER always contracts one), the opset 1 broadcast of FakeQuantize, and results beyond
the output type (nGraph's cast is undefined there; the importer saturates).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import quantized_reference as ref  # noqa: E402

NP = {"u8": np.uint8, "i8": np.int8, "i32": np.int32}
EXACT = 0
WHY = (
    "bit-identical: exact int32 accumulation and one rounding; where the model uses QLinearConv / QLinearMatMul "
    "(ties to even) the importer proved no tie is reachable; QuantizeLinear by 1 of an integer-valued f32 only "
    "adds the zero point and saturates"
)
COMBOS = (("i8", "i8"), ("u8", "u8"), ("i8", "i32"), ("u8", "i32"))


def _conv(x, w, pairs, out_t, *, axes=((), (), ()), strides=(1, 1), dil=(1, 1), below=(0, 0), above=(0, 0)):
    f = FunctionWriter()
    px = f.parameter("u8", list(x.shape))
    consts = [f.constant(np.asarray(v)) for v in pairs]
    y = f.op(
        "QuantizedConvolution",
        px,
        f.constant(w),
        *consts,
        window_movement_strides=list(strides),
        window_dilation_strides=list(dil),
        padding_below=list(below),
        padding_above=list(above),
        data_dilation_strides=[1, 1],
        output_type=out_t,
        input_axes=list(axes[0]),
        filter_axes=list(axes[1]),
        output_axes=list(axes[2]),
    )
    f.result(y)
    return graph(f)


def _dot(a, b, pairs, out_t, n=1, axes=((), (), ())):
    f = FunctionWriter()
    pa = f.parameter("u8", list(a.shape))
    consts = [f.constant(np.asarray(v)) for v in pairs]
    y = f.op(
        "QuantizedDot",
        pa,
        f.constant(b),
        *consts,
        reduction_axes_count=n,
        output_type=out_t,
        input0_axes=list(axes[0]),
        input1_axes=list(axes[1]),
        output_axes=list(axes[2]),
    )
    f.result(y)
    return graph(f)


def _filter(rng, wt, shape, lo=None, hi=None):
    if wt == "i8":
        return rng.integers(-128 if lo is None else lo, 128 if hi is None else hi, shape).astype(np.int8)
    return rng.integers(0 if lo is None else lo, 256 if hi is None else hi, shape).astype(np.uint8)


def _tie_free_scale(rng, w, zx, zw, zo, axis0=True) -> np.float32:
    """A filter scale for which the QLinear form is provably exact (so the case exercises it)."""
    m = w.astype(np.int64)
    m = m.reshape(m.shape[0], -1) if axis0 else m.reshape(-1, m.shape[-1]).T
    d = m - int(zw)
    lo = np.minimum(-zx * d, (255 - zx) * d).sum(1)
    hi = np.maximum(-zx * d, (255 - zx) * d).sum(1)
    for _ in range(10000):
        sf = np.float32(rng.uniform(0.01, 0.05))
        s = np.float32(np.float32(np.float32(0.1) * sf) / np.float32(0.5))
        if ref.tie_free(np.full(lo.size, s), lo, hi, zo + 128):
            return sf
    raise AssertionError("no tie-free scale")


def conv_cases(rng) -> list[GoldenCase]:
    out = []
    # a small filter and a tie-free scale: the QLinearConv form against nGraph
    xq = rng.integers(0, 256, (1, 3, 4, 4), dtype=np.uint8)
    wq = _filter(rng, "i8", (2, 3, 1, 1), -64, 65)
    sf = _tie_free_scale(rng, wq, 100, 0, 1)
    pairs = (np.float32(0.1), np.uint8(100), sf, np.int8(0), np.float32(0.5), np.int8(1))
    out.append(
        GoldenCase(
            "qconv_qlinear",
            _conv(xq, wq, pairs, "i8"),
            {"Parameter_0": xq},
            note="a scale with no reachable tie: converted to QLinearConv",
            ulp=EXACT,
            why=WHY,
        )
    )
    x = rng.integers(0, 256, (1, 2, 5, 4), dtype=np.uint8)
    for wt, ot in COMBOS:
        w = _filter(rng, wt, (3, 2, 2, 2))
        zw = np.array(-3 if wt == "i8" else 128, NP[wt])
        zo = np.array({"i8": 2, "u8": 120, "i32": -5}[ot], NP[ot])
        so = np.float32(0.4 if ot == "i32" else 30.0)
        pairs = (np.float32(0.05), np.uint8(7), np.float32(0.02), zw, so, zo)
        geo = {"below": (1, 0), "above": (0, 1), "strides": (2, 1)}
        out.append(
            GoldenCase(
                f"qconv_u8_{wt}_{ot}",
                _conv(x, w, pairs, ot, **geo),
                {"Parameter_0": x},
                note=f"QuantizedConvolution u8 x {wt} -> {ot}, padding and strides",
                ulp=EXACT,
                why=WHY,
            )
        )
    # ties: scale 0.5, every odd accumulator is halfway (nGraph rounds away from zero)
    xt = np.arange(16, dtype=np.uint8).reshape(1, 1, 4, 4)
    wt1 = np.array([[[[1, -1], [1, 1]]]], np.int8)
    pairs = (np.float32(0.5), np.uint8(3), np.float32(1.0), np.int8(0), np.float32(1.0), np.int8(0))
    out.append(
        GoldenCase(
            "qconv_ties",
            _conv(xt, wt1, pairs, "i8"),
            {"Parameter_0": xt},
            note="scale 0.5: halfway accumulators round away from zero",
            ulp=EXACT,
            why=WHY,
        )
    )
    # zero points at the limits, dilation and negative padding; results kept in range
    xl = rng.integers(0, 256, (1, 2, 6, 6), dtype=np.uint8)
    wl = _filter(rng, "i8", (2, 2, 2, 2))
    for zx, zw, zo in ((255, -128, 127), (0, -128, -128), (0, 127, 127)):  # the sums' sign keeps them in range
        acc = ref.conv_acc(xl, wl, zx, zw, dilations=[2, 1], pads_below=[-1, 0], pads_above=[0, -1])
        so = np.float32(np.abs(acc).max() * 0.05 * 0.05 / 250)
        pairs = (np.float32(0.05), np.uint8(zx), np.float32(0.05), np.int8(zw), so, np.int8(zo))
        assert ref.in_range(acc, np.float32(np.float32(np.float32(0.05) * np.float32(0.05)) / so), zo, np.int8).all()
        out.append(
            GoldenCase(
                f"qconv_zero_points_{zx}_{zw}_{zo}",
                _conv(xl, wl, pairs, "i8", dil=(2, 1), below=(-1, 0), above=(0, -1)),
                {"Parameter_0": xl},
                note="zero points at the type limits, dilation, negative padding",
                ulp=EXACT,
                why=WHY,
            )
        )
    # beyond the output type: nGraph's cast is undefined, ours saturates (from the definition)
    w = _filter(rng, "i8", (3, 2, 2, 2))
    pairs = (np.float32(0.5), np.uint8(0), np.float32(0.5), np.int8(0), np.float32(1.0), np.int8(0))
    out.append(
        GoldenCase(
            "qconv_saturates",
            _conv(x, w, pairs, "i8"),
            {"Parameter_0": x},
            note="results beyond i8: saturated (nGraph's static_cast is undefined there)",
            expected={"Result_9": ref.quantized_convolution(x, w, *pairs, np.int8)},
            ulp=EXACT,
            why=WHY,
        )
    )
    # per-channel filter scale, multi-axis output scale: nGraph 0.26 requires empty axes sets
    sf = rng.uniform(0.01, 0.03, 3).astype(np.float32)
    zwc = np.zeros(3, np.int8)
    so = rng.uniform(2.0, 4.0, (3, 5)).astype(np.float32)
    zo = rng.integers(-3, 4, (3, 5)).astype(np.int8)
    pairs = (np.float32(0.05), np.uint8(9), sf, zwc, so, zo)
    w = _filter(rng, "i8", (3, 2, 2, 2), -60, 61)
    want = ref.quantized_convolution(
        x,
        w,
        0.05,
        9,
        sf.reshape(1, 3, 1, 1),
        0,
        so.reshape(1, 3, 5, 1),
        zo.reshape(1, 3, 5, 1),
        np.int8,
        pads_above=[1, 0],
    )
    out.append(
        GoldenCase(
            "qconv_per_channel_multi_axis",
            _conv(x, w, pairs, "i8", axes=((), (0,), (1, 2)), above=(1, 0)),
            {"Parameter_0": x},
            note="filter scale per output channel, output scale over axes {1, 2} (the definition: nGraph 0.26 "
            "refuses non-empty axes sets)",
            expected={"Result_9": want},
            ulp=EXACT,
            why=WHY,
        )
    )
    return out


def dot_cases(rng) -> list[GoldenCase]:
    out = []
    aq = rng.integers(0, 256, (3, 4), dtype=np.uint8)
    bq = _filter(rng, "i8", (4, 2), -64, 65)
    sf = _tie_free_scale(rng, bq, 100, 0, 1, axis0=False)
    pairs = (np.float32(0.1), np.uint8(100), sf, np.int8(0), np.float32(0.5), np.int8(1))
    out.append(
        GoldenCase(
            "qdot_qlinear",
            _dot(aq, bq, pairs, "i8"),
            {"Parameter_0": aq},
            note="a scale with no reachable tie: converted to QLinearMatMul",
            ulp=EXACT,
            why=WHY,
        )
    )
    a = rng.integers(0, 256, (3, 8), dtype=np.uint8)
    for wt, ot in COMBOS:
        b = _filter(rng, wt, (8, 5))
        zb = np.array(4 if wt == "i8" else 130, NP[wt])
        zo = np.array({"i8": -4, "u8": 128, "i32": 11}[ot], NP[ot])
        so = np.float32(0.3 if ot == "i32" else 10.0)
        pairs = (np.float32(0.05), np.uint8(128), np.float32(0.02), zb, so, zo)
        out.append(
            GoldenCase(
                f"qdot_u8_{wt}_{ot}",
                _dot(a, b, pairs, ot),
                {"Parameter_0": a},
                note=f"QuantizedDot u8 x {wt} -> {ot}",
                ulp=EXACT,
                why=WHY,
            )
        )
    at = np.arange(8, dtype=np.uint8).reshape(2, 4)
    bt = np.ones((4, 3), np.int8)
    pairs = (np.float32(0.25), np.uint8(0), np.float32(1.0), np.int8(0), np.float32(0.5), np.int8(0))
    out.append(
        GoldenCase("qdot_ties", _dot(at, bt, pairs, "i8"), {"Parameter_0": at}, note="halfway sums", ulp=EXACT, why=WHY)
    )
    a3 = rng.integers(0, 256, (2, 3, 4), dtype=np.uint8)
    b3 = _filter(rng, "i8", (3, 4, 2))
    pairs = (np.float32(0.02), np.uint8(5), np.float32(0.03), np.int8(1), np.float32(4.0), np.int8(0))
    out.append(
        GoldenCase(
            "qdot_two_axes",
            _dot(a3, b3, pairs, "i8", n=2),
            {"Parameter_0": a3},
            note="reduction_axes_count 2 (the definition: nGraph 0.26's INTERPRETER always contracts one axis)",
            expected={"Result_9": ref.quantized_dot(a3, b3, *pairs, np.int8, n=2)},
            ulp=EXACT,
            why=WHY,
        )
    )
    return out


def _fused(op, x, w, extra, **attrs):
    f = FunctionWriter()
    px = f.parameter("u8", list(x.shape))
    ins = [px, f.constant(w)]
    feeds = {"Parameter_0": x}
    for v in extra:
        if isinstance(v, tuple):
            p = f.parameter(v[0], list(v[1].shape))
            feeds[str(p)] = v[1]
            ins.append(p)
        else:
            ins.append(f.constant(np.asarray(v)))
    r = f.result(f.op(op, *ins, **attrs))
    return graph(f), feeds, str(r)


CONV_ATTRS = {
    "window_movement_strides": [1, 1],
    "window_dilation_strides": [1, 1],
    "padding_below": [1, 1],
    "padding_above": [1, 1],
    "data_dilation_strides": [1, 1],
}
GEO = {"pads_below": [1, 1], "pads_above": [1, 1]}
FUSED_NOTE = "by the definition: nGraph 0.26's deserializer cannot read the fused forms back"


def fused_cases(rng) -> list[GoldenCase]:
    out = []
    x = rng.integers(0, 256, (1, 2, 4, 4), dtype=np.uint8)
    w = _filter(rng, "i8", (3, 2, 3, 3))
    bias = rng.integers(-2000, 2000, 3).astype(np.int32)
    for relu in (False, True):
        g, feeds, r = _fused("QuantizedConvolutionBias", x, w, [bias, np.float32(0.004)], with_relu=relu, **CONV_ATTRS)
        want = ref.fused_conv(x, w, 0.004, np.uint8 if relu else np.int8, bias=bias, relu=relu, **GEO)
        out.append(
            GoldenCase(
                f"qconv_bias_relu_{int(relu)}", g, feeds, note=FUSED_NOTE, expected={r: want}, ulp=EXACT, why=WHY
            )
        )
    g, feeds, r = _fused("QuantizedConvolutionRelu", x, w, [np.float32(0.004)], **CONV_ATTRS)
    out.append(
        GoldenCase(
            "qconv_relu",
            g,
            feeds,
            note=FUSED_NOTE,
            expected={r: ref.fused_conv(x, w, 0.004, np.uint8, relu=True, **GEO)},
            ulp=EXACT,
            why=WHY,
        )
    )
    s_u8 = rng.integers(0, 256, (1, 3, 4, 4)).astype(np.uint8)
    s_i8 = rng.integers(-128, 128, (1, 3, 4, 4)).astype(np.int8)
    for op, s, relu in (
        ("QuantizedConvolutionBiasAdd", ("u8", s_u8), True),
        ("QuantizedConvolutionBiasSignedAdd", ("i8", s_i8), True),
    ):
        g, feeds, r = _fused(op, x, w, [bias, s, np.float32(0.004), np.float32(0.5)], with_relu=relu, **CONV_ATTRS)
        dt = np.int8 if op.endswith("SignedAdd") else np.uint8
        want = ref.fused_conv(x, w, 0.004, dt, bias=bias, relu=relu, sum_input=s[1], sum_scale=0.5, **GEO)
        out.append(GoldenCase(f"{op[9:].lower()}", g, feeds, note=FUSED_NOTE, expected={r: want}, ulp=EXACT, why=WHY))
    xd = rng.integers(0, 256, (3, 8), dtype=np.uint8)
    wd = _filter(rng, "i8", (4, 8))
    bd = rng.integers(-500, 500, 4).astype(np.int32)
    for requant, relu in ((True, False), (True, True), (False, False)):
        g, feeds, r = _fused("QuantizedDotBias", xd, wd, [bd, np.float32(0.01)], requantize=requant, with_relu=relu)
        want = ref.dot_bias(xd, wd, bd, np.float32(0.01), requantize_out=requant, relu=relu)
        out.append(
            GoldenCase(
                f"qdot_bias_{int(requant)}_{int(relu)}",
                g,
                feeds,
                note=FUSED_NOTE,
                expected={r: want},
                ulp=EXACT,
                why=WHY,
            )
        )
    return out


def _fq(x, lows, levels, **attrs):
    f = FunctionWriter(era="v0.29" if attrs else "v0.26")
    px = f.parameter({np.float32: "f32", np.float64: "f64"}[x.dtype.type], list(x.shape))
    consts = [f.constant(np.asarray(v, x.dtype)) for v in lows]
    r = f.result(f.op("FakeQuantize", px, *consts, levels=levels, **attrs))
    return graph(f), str(r)


def fake_quantize_cases(rng) -> list[GoldenCase]:
    out = []
    for dt in (np.float32, np.float64):
        x = (rng.standard_normal((2, 3, 2, 2)) * 1.5).astype(dt)
        x.flat[:4] = [0.5, -0.5, 1e30, -1e30]
        name = {np.float32: "f32", np.float64: "f64"}[dt]
        g, _ = _fq(x, (-1.0, 1.0, -2.0, 2.0), 256)
        out.append(GoldenCase(f"fake_quantize_{name}_scalar", g, {"Parameter_0": x}, note="scalar ranges, 256 levels"))
        per = (np.array([-1, -2, -0.5]), np.array([1, 2, 0.7]), np.array([-1.0, 0, 1]), np.array([3, 4, 5.0]))
        g, _ = _fq(x, per, 17)
        out.append(GoldenCase(f"fake_quantize_{name}_channel", g, {"Parameter_0": x}, note="one range per channel"))
    xt = np.linspace(-1, 1, 9).astype(np.float32).reshape(1, 1, 9)
    g, _ = _fq(xt, (-1.0, 1.0, 0.0, 8.0), 5)
    out.append(GoldenCase("fake_quantize_ties", g, {"Parameter_0": xt}, note="halfway steps round away from zero"))
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    il = np.full((1, 1, 4), -1, np.float32)
    g, r = _fq(x, (il, 1.0, -1.0, 1.0), 9, auto_broadcast="NUMPY", attribute_visitor=True)
    want = ref.fake_quantize(x, il, np.float32(1), np.float32(-1), np.float32(1), 9)
    out.append(
        GoldenCase(
            "fake_quantize_opset1_numpy",
            g,
            {"Parameter_0": x},
            note="the attribute-visitor form with NUMPY broadcasting (the definition: nGraph 0.26 reads only "
            "scalars or per-channel ranges)",
            expected={r: want},
        )
    )
    return out


def cases() -> list[GoldenCase]:
    rng = np.random.default_rng(20261201)
    return conv_cases(rng) + dot_cases(rng) + fused_cases(rng) + fake_quantize_cases(rng)
