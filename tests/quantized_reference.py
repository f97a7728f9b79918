"""NumPy definitions of nGraph's quantized compute ops, independent of the importer.

Transcribes ``runtime/reference/convolution.hpp`` / ``dot.hpp`` (QuantizedConvolution, QuantizedDot), the
CPU backend's fused forms by their definition, and FakeQuantize's decomposition. Where nGraph's cast is
undefined (a result beyond the output type) these saturate, as the importer does; ``in_range`` tells where
nGraph itself is defined.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "conv_acc",
    "dot_acc",
    "std_round",
    "requantize",
    "in_range",
    "quantized_convolution",
    "quantized_dot",
    "fused_conv",
    "dot_bias",
    "fake_quantize",
    "tie_free",
    "qlinear_agrees",
]


def _wrap32(a: np.ndarray) -> np.ndarray:
    return ((a.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int64)


def conv_acc(x, w, zx=0, zw=0, strides=None, dilations=None, pads_below=None, pads_above=None) -> np.ndarray:
    """int32 (wrapping) ``sum (x - zx) * (w - zw)`` of a convolution; padded positions add nothing.
    ``zx`` broadcasts over (N, 1, 1...), ``zw`` over (C_out, 1, 1...)."""
    n_sp = x.ndim - 2
    strides = strides or [1] * n_sp
    dilations = dilations or [1] * n_sp
    pb = pads_below or [0] * n_sp
    pa = pads_above or [0] * n_sp
    zx = np.asarray(zx, np.int64).reshape((-1,) + (1,) * (x.ndim - 1)) if np.ndim(zx) else np.int64(zx)
    zw = np.asarray(zw, np.int64).reshape((-1,) + (1,) * (w.ndim - 1)) if np.ndim(zw) else np.int64(zw)
    xd = x.astype(np.int64) - zx
    wd = w.astype(np.int64) - zw
    # crop negative padding, zero-pad positive (zero after the zero point's subtraction: adds nothing)
    sl = [slice(None), slice(None)] + [
        slice(max(0, -b), xd.shape[2 + i] - max(0, -a)) for i, (b, a) in enumerate(zip(pb, pa))
    ]
    xd = xd[tuple(sl)]
    xd = np.pad(xd, [(0, 0), (0, 0)] + [(max(0, b), max(0, a)) for b, a in zip(pb, pa)])
    eff = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dilations)]
    out_sp = [(xd.shape[2 + i] - eff[i]) // strides[i] + 1 for i in range(n_sp)]
    out = np.zeros((x.shape[0], w.shape[0], *out_sp), np.int64)
    for idx in np.ndindex(*out_sp):
        sl = [slice(None), slice(None)] + [
            slice(idx[i] * strides[i], idx[i] * strides[i] + eff[i], dilations[i]) for i in range(n_sp)
        ]
        patch = xd[tuple(sl)]
        out[(slice(None), slice(None)) + idx] = np.tensordot(patch, wd, axes=(list(range(1, x.ndim)),) * 2)
    return _wrap32(out)


def dot_acc(a, b, n=1, za=0, zb=0) -> np.ndarray:
    """int32 (wrapping) ``tensordot(a - za, b - zb, n)``; ``za``/``zb`` already shaped to broadcast."""
    return _wrap32(np.tensordot(a.astype(np.int64) - za, b.astype(np.int64) - zb, n))


def std_round(v: np.ndarray) -> np.ndarray:
    """C's round() of f32 values: half away from zero (exact: |v| + 0.5 in f64)."""
    return _round_away(np.asarray(v, np.float32))


def _round_away(v: np.ndarray) -> np.ndarray:
    m = np.abs(v)
    f = np.floor(m)
    r = np.where(m - f >= v.dtype.type(0.5), f + v.dtype.type(1), f)
    return np.where(v < 0, -r, r).astype(v.dtype)


def requantize(acc: np.ndarray, scale: np.ndarray, zero: np.ndarray, dtype, *, extra=None, relu=False) -> np.ndarray:
    """``T(std::round(float(acc) * scale [+ extra]) + float(zero))`` in f32, saturated (nGraph: undefined)."""
    v = acc.astype(np.float32) * np.asarray(scale, np.float32)
    if extra is not None:
        v = (v + np.asarray(extra, np.float32)).astype(np.float32)
    r = (std_round(v) + np.asarray(zero).astype(np.float32)).astype(np.float32)
    info = np.iinfo(dtype)
    hi = np.float32(info.max) if info.bits < 32 else np.float32(2147483520)
    return np.clip(r, 0 if relu else np.float32(info.min), hi).astype(dtype)


def in_range(acc: np.ndarray, scale, zero, dtype) -> np.ndarray:
    """Where nGraph's own cast is defined (the rounded result fits the output type)."""
    v = acc.astype(np.float32) * np.asarray(scale, np.float32)
    r = (std_round(v) + np.asarray(zero).astype(np.float32)).astype(np.float64)
    info = np.iinfo(dtype)
    return (r >= info.min) & (r <= info.max)


def quantized_convolution(x, w, si, zx, sf, zw, so, zo, dtype, **geometry) -> np.ndarray:
    """QuantizedConvolution; per-tensor arguments, or already shaped to broadcast against the output
    (si/zx (N,1,1,1), sf (1,M,1,1) with zw given per channel (M,), so/zo over any axes)."""
    zw_c = np.asarray(zw).reshape(-1) if np.ndim(zw) else zw
    zx_b = np.asarray(zx).reshape(-1) if np.ndim(zx) else zx
    acc = conv_acc(x, w, zx_b, zw_c, **geometry)
    scale = (np.asarray(si, np.float32) * np.asarray(sf, np.float32)) / np.asarray(so, np.float32)
    return requantize(acc, scale.astype(np.float32), zo, dtype)


def quantized_dot(a, b, si, za, sf, zb, so, zo, dtype, n=1) -> np.ndarray:
    acc = dot_acc(a, b, n, za, zb)
    scale = ((np.asarray(si, np.float32) * np.asarray(sf, np.float32)) / np.asarray(so, np.float32)).astype(np.float32)
    return requantize(acc, scale, zo, dtype)


def fused_conv(x, w, scale, dtype, *, bias=None, relu=False, sum_input=None, sum_scale=None, **geometry) -> np.ndarray:
    """QuantizedConvolutionBias / Relu / BiasAdd / BiasSignedAdd by their definition:
    ``T(std::round(float(acc + bias) * scale + float(sum) * sum_scale))``, ReLU'd, saturated."""
    acc = conv_acc(x, w, **geometry)
    r = acc.ndim
    ch = (1, -1) + (1,) * (r - 2)
    acc_f = None
    if bias is not None and bias.dtype == np.int32:
        acc = _wrap32(acc + bias.astype(np.int64).reshape(ch))
    if bias is not None and bias.dtype == np.float32:
        acc_f = (acc.astype(np.float32) + bias.reshape(ch)).astype(np.float32)
    s = np.asarray(scale, np.float32)
    s = s.reshape(ch) if s.size > 1 else s.reshape(())
    extra = None
    if sum_input is not None:
        ss = np.asarray(sum_scale, np.float32)
        ss = ss.reshape(ch) if ss.size > 1 else ss.reshape(())
        extra = (sum_input.astype(np.float32) * ss).astype(np.float32)
    if acc_f is not None:
        v = (acc_f * s).astype(np.float32)
        if extra is not None:
            v = (v + extra).astype(np.float32)
        info = np.iinfo(dtype)
        return np.clip(std_round(v), 0 if relu else info.min, info.max).astype(dtype)
    return requantize(acc, s, 0, dtype, extra=extra, relu=relu)


def dot_bias(x, w, bias, scale, *, requantize_out=True, relu=False) -> np.ndarray:
    """QuantizedDotBias: ``x`` (M, K) by ``w`` (N, K) transposed, plus bias, times scale."""
    acc = dot_acc(x, w.T)
    if bias.dtype == np.int32:
        v = _wrap32(acc + bias.astype(np.int64)).astype(np.float32)
    else:
        v = (acc.astype(np.float32) + bias).astype(np.float32)
    v = (v * np.asarray(scale, np.float32).reshape(-1 if np.size(scale) > 1 else ())).astype(np.float32)
    if not requantize_out:
        return np.where(v > 0, v, np.float32(0)) if relu else v
    dt = np.uint8 if relu else np.int8
    info = np.iinfo(dt)
    return np.clip(std_round(v), 0 if relu else info.min, info.max).astype(dt)


def fake_quantize(x, il, ih, ol, oh, levels: int) -> np.ndarray:
    """FakeQuantize's decomposition in x's type (inputs already broadcastable NumPy-style)."""
    t = x.dtype.type
    steps = t(levels - 1)
    qs, ds = (ih - il) / steps, (oh - ol) / steps
    v = np.where(il > x, il, x)
    v = np.where(ih < v, ih, v)
    q = (v - il) / qs
    r = _round_away(q)
    r = np.clip(r, t(-(2.0**31)), np.nextafter(t(2.0**31), t(0))).astype(np.int32).astype(t)
    return (r * ds + ol).astype(t)


def tie_free(scale: np.ndarray, acc_lo: np.ndarray, acc_hi: np.ndarray, zero: int, out_t=np.uint8) -> bool:
    """Whether ``float(acc) * scale`` (f32) is never exactly halfway between integers for any ``acc`` in
    ``[acc_lo, acc_hi]`` (per channel) whose result is not saturated: then rounding ties to even (ONNX)
    and away from zero (nGraph) agree with the scale as it is. Enumerates; False past 2^25 values. Test
    data use it to pick scales that need no proof."""
    info = np.iinfo(out_t)
    lo_v, hi_v = int(info.min) - zero - 1, int(info.max) - zero + 1
    total = 0
    for s, a_lo, a_hi in zip(scale.reshape(-1).tolist(), acc_lo.reshape(-1).tolist(), acc_hi.reshape(-1).tolist()):
        if not math.isfinite(s) or s <= 0:
            return False
        a0 = max(int(a_lo), math.floor(lo_v / s * (1 + 1e-6)) - 2)
        a1 = min(int(a_hi), math.ceil(hi_v / s * (1 + 1e-6)) + 2)
        if a1 < a0:
            continue
        total += a1 - a0 + 1
        if total > 1 << 25:
            return False
        s32 = np.float32(s)
        for start in range(a0, a1 + 1, 1 << 22):
            acc = np.arange(start, min(a1 + 1, start + (1 << 22)), dtype=np.int64)
            v = acc.astype(np.float32) * s32
            if np.any(v - np.floor(v) == np.float32(0.5)):
                return False
    return True


def qlinear_agrees(scale, scale2, acc_lo: int, acc_hi: int, zero: int, dtype) -> bool:
    """Whether ONNX's requantization with ``scale2`` (ties to even) gives nGraph's with ``scale`` (ties away
    from zero) for every accumulator in ``[acc_lo, acc_hi]``, both saturated to ``dtype``, by enumeration."""
    acc = np.arange(acc_lo, acc_hi + 1).astype(np.float32)
    info = np.iinfo(dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # an infinite product saturates, in both
        ngraph = np.clip(std_round(acc * np.float32(scale)).astype(np.float64) + zero, info.min, info.max)
        onnx = np.clip(np.rint(acc * np.float32(scale2)).astype(np.float64) + zero, info.min, info.max)
    return bool(np.array_equal(ngraph, onnx))
