"""nGraph's quantized compute ops: QuantizedConvolution, QuantizedDot and their fused forms.

What nGraph 0.26's INTERPRETER computes (``runtime/reference/convolution.hpp``, ``dot.hpp``): the sum of
``(x - x_zero) * (w - w_zero)`` in int32 (padding contributes nothing), then
``static_cast<T>(std::round(float(acc) * ((s_in * s_f) / s_out)) + z_out)``, all in f32, ties away
from zero. An out-of-range result is an undefined C++ cast there; here it saturates.

Each op becomes the fastest ONNX form that gives those bits (``_plan``):

- **QLinearConv / QLinearMatMul** when every scale and zero point is a constant, the scales are per
  tensor (the filter's may be per output channel) and ``ties.qlinear_scales`` finds, for every output
  channel, an f32 scale ``M'`` with which ONNX's rounding (ties to even) gives nGraph's (ties away from
  zero) on every reachable accumulator: ``x_scale = M'`` (or ``w_scale`` per channel), the other scales 1,
  so ONNX Runtime's ``(x_scale * w_scale) / y_scale`` is ``M'`` itself.
- **ConvInteger / MatMulInteger + exact requantization** otherwise: ``v = float(acc) * scale`` (and
  ``2v``) as DequantizeLinear of the int32 accumulator where the scale is a constant per tensor or per
  channel, else Cast and Mul; ``std::round(v)`` as ``trunc(2v) - trunc(v)`` (two Casts to int32 and a
  Sub) where ``|v| < 2^30`` is proven or an 8-bit output lets it be clipped first, else
  ``floor(|v| + 0.49999997) * sign(v)`` (``round_half_away``); then QuantizeLinear by 1 (adds an 8-bit
  output's one zero point and saturates), or Add / Clip / Cast.

ONNX Runtime's u8 x i8 kernels on AVX2 without VNNI sum pairs of products in saturating int16
(``vpmaddubsw``), so an i8 filter reaches QLinearConv / QLinearMatMul / MatMulInteger only when every
``|w| <= 64`` is proven; other i8 filters, and every i8 filter of a ConvInteger (whose u8 x i8 path is
many times slower than its u8 x u8 one), are shifted to u8 (``w + 128`` with zero point ``z + 128``:
the differences are unchanged).

The scales' axes (``input_axes``, ``filter_axes``, ``output_axes``; ``input0_axes``...) follow the
definition: a scale indexed by those axes of its tensor. nGraph 0.26 itself requires them empty
("Input, filter and output AxisSet should be empty"); we accept every axes set for which integer
accumulation stays exact: the input's and filter's scales may not vary along a summed axis.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import dtypes
from ...contract import Dim, TensorType
from ..context import OpContext, shape_str
from . import register
from .conv import conv_geometry
from .dot import contract, dot_shape
from .quant import bounds_inside
from .ties import qlinear_scales

__all__ = ["requantize", "finish", "round_half_away", "COMBOS"]

_F32, _I32 = dtypes.parse("f32"), dtypes.parse("i32")
_U8, _I8 = dtypes.parse("u8"), dtypes.parse("i8")
COMBOS = frozenset({("u8", "i8", "i8"), ("u8", "u8", "u8"), ("u8", "i8", "i32"), ("u8", "u8", "i32")})
"""(input, filter, output) element types nGraph 0.26's INTERPRETER runs (it throws "unsupported element
type" for the rest)."""
QLINEAR = True
"""Whether the QLinear forms may be used where proven (benchmarks turn it off to time the decomposition)."""
_S8_SAFE = 64
"""Largest |w| of an i8 filter for which ONNX Runtime's saturating int16 pair sums stay exact (255 * 128 < 2^15)."""


# ---- checks ----


def _check_types(ctx: OpContext, names: tuple[str, str, str], out_t: dtypes.DType) -> tuple[dtypes.DType, ...]:
    """nGraph's type checks of the eight-input ops, then the INTERPRETER's combinations."""
    t_in, t_f = ctx.elem(0), ctx.elem(1)
    a, b, o = names
    if not out_t.is_quantized:
        raise ctx.error(f"Output element type ({out_t}) must be a quantized type")
    if not t_in.is_quantized:
        raise ctx.error(f"{a} element type ({t_in}) must be a quantized type")
    if not t_f.is_quantized:
        raise ctx.error(f"{b} element type ({t_f}) must be a quantized type")
    for i in (2, 4, 6):
        if ctx.elem(i) is not _F32:
            raise ctx.error(
                f"Scale must be a floating point number (nGraph's INTERPRETER reads every scale as f32; input {i} is {ctx.elem(i)})"  # noqa: E501
            )
    for i, (who, t) in ((3, (a, t_in)), (5, (b, t_f)), (7, (o, out_t))):
        if ctx.elem(i) is not t:
            raise ctx.error(
                f"{who} Zero point element type ({ctx.elem(i)}) must match {who.lower()} element type ({t})"
            )
    if (t_in.name, t_f.name, out_t.name) not in COMBOS:
        raise ctx.error(
            f"unsupported element type: nGraph's INTERPRETER runs {ctx.op.op} on u8 input with i8 filters (i8 or i32 "
            f"output) or u8 filters (u8 or i32 output), not {t_in} x {t_f} -> {out_t}"
        )
    return t_in, t_f, out_t


def _pair(
    ctx: OpContext, s: int, z: int, shape: Any, axes: tuple[int, ...], what: str, key: str, summed: tuple[int, ...]
) -> None:
    """A scale and zero point indexed by ``axes`` of a tensor of ``shape``: their shapes and which axes they may use."""
    rank = len(shape)
    bad = [a for a in axes if a >= rank]
    if bad:
        raise ctx.error(f"'{key}' {list(axes)} names axis {bad[0]}, beyond the {what}'s rank {rank}")
    along = [a for a in axes if a in summed]
    if along:
        raise ctx.error(
            f"'{key}' {list(axes)} includes axis {along[0]}, which {ctx.op.op} sums over: the {what} scale must be "
            "constant along summed axes for the integer accumulation to stay exact"
        )
    ss, zs = ctx.shape(s), ctx.shape(z)
    want = tuple(shape[a] for a in axes)
    if not axes:
        if ss != () or zs != ():
            cap = what[0].upper() + what[1:]
            raise ctx.error(f"{cap} scale and {what} zero point shape must be same and 1")
        return
    for got, who in ((ss, "scale"), (zs, "zero point")):
        ok = got is not None and len(got) == len(want)
        ok = ok and all(not (isinstance(g, int) and isinstance(w, int)) or g == w for g, w in zip(got, want))
        if not ok:
            raise ctx.error(
                f"{what} {who} shape {shape_str(got)} must be the {what}'s dimensions at '{key}' {list(axes)}: "
                f"{shape_str(want)}"
            )


# ---- values and placement ----


def _place(ctx: OpContext, name: str, axes: tuple[int, ...], rank: int) -> str:
    """A tensor indexed by output ``axes`` reshaped to broadcast against a rank-``rank`` output."""
    others = [i for i in range(rank) if i not in axes]
    if not axes or not others:
        return name
    return ctx.emit("Unsqueeze", [name, ctx.int64s(others)])


def _placed(value: np.ndarray, axes: tuple[int, ...], rank: int) -> np.ndarray:
    shape = [1] * rank
    for a, d in zip(axes, value.shape):
        shape[a] = d
    return value.reshape(shape) if axes else value.reshape(())


def _uniform(v: np.ndarray | None) -> bool:
    return v is not None and v.size > 0 and bool(np.all(v == v.reshape(-1)[0]))


def _acc_bounds(
    x_t: dtypes.DType, zx: int, w: np.ndarray | None, w_t: dtypes.DType, zw: np.ndarray, count: int, axis0: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel, the range of ``sum (x - zx) * (w - zw)`` over ``count`` products (``w`` known: exact)."""
    xl, xh = int(x_t.min) - zx, int(x_t.max) - zx
    zw = zw.astype(np.int64).reshape(-1)
    if w is None:
        d_lo, d_hi = int(w_t.min) - zw, int(w_t.max) - zw
        ext = np.stack([xl * d_lo, xl * d_hi, xh * d_lo, xh * d_hi])
        return ext.min(0) * count, ext.max(0) * count
    wm = w.astype(np.int64)
    wm = wm.reshape(wm.shape[0], -1) if axis0 else wm.reshape(-1, wm.shape[-1]).T  # (channels, summed)
    d = wm - zw.reshape(-1, 1)
    lo = np.minimum(xl * d, xh * d).sum(1)
    hi = np.maximum(xl * d, xh * d).sum(1)
    return lo, hi


# ---- emitting ----


def requantize(
    ctx: OpContext,
    acc: str,
    scale: str | None,
    out_t: dtypes.DType,
    zero: str | None = None,
    zero_value: np.ndarray | None = None,
    *,
    scale_value: np.ndarray | None = None,
    acc_limit: float | None = None,
) -> None:
    """nGraph's requantization of an int32 accumulator into the op's output:
    ``T(std::round(float(acc) * scale) + float(zero))`` in f32, saturated. ``scale_value``: the scale when
    it is a constant (placed on the output; ``scale`` may then be None); ``acc_limit``: a bound on ``|acc|``."""
    limit = None
    if scale_value is not None and acc_limit is not None:
        m = float(np.max(np.abs(scale_value), initial=0))
        limit = acc_limit * m * (1 + 2**-20) if math.isfinite(m) else None
    truncating = limit is not None and limit < TRUNC_LIMIT and not _clipped(out_t, limit)
    v, twice = _scaled(ctx, acc, scale, scale_value, truncating)
    finish(ctx, v, out_t, zero=zero, zero_value=zero_value, limit=limit, twice=twice)


def _scaled(
    ctx: OpContext, acc: str, scale: str | None, scale_value: np.ndarray | None, twice: bool
) -> tuple[str, str | None]:
    """``float(acc) * scale`` in f32, and with ``twice`` ``float(acc) * (2 * scale)`` (exactly twice it) where
    that is as cheap: DequantizeLinear (int32 input, no zero point: ``float(acc) * s``) when the scale is a
    constant per tensor or along one axis other than the last (there ONNX Runtime's per-axis kernel is
    slow), one for each: a DequantizeLinear read by several nodes is copied once per reader by ONNX
    Runtime. Else Cast and Mul (and no ``2v``)."""
    if scale_value is not None:
        axes = [i for i, d in enumerate(scale_value.shape) if d != 1]
        if not axes or (len(axes) == 1 and axes[0] != scale_value.ndim - 1):
            one = scale_value.reshape(-1 if axes else ())
            attrs = {"axis": axes[0]} if axes else {}

            def dq(k: np.float32) -> str:
                return ctx.emit("DequantizeLinear", [acc, ctx.const(k * one, _F32, f"{ctx.name}/scale")], **attrs)

            return dq(np.float32(1)), dq(np.float32(2)) if twice else None
        scale = ctx.const(scale_value, _F32, f"{ctx.name}/scale")
    return ctx.emit("Mul", [ctx.emit("Cast", [acc], to=_F32.onnx), scale]), None  # type: ignore[list-item]


_SATURATED = float(1 << 24)
"""|v| beyond which an 8-bit output saturates whatever its zero point: ``finish`` clips there first."""


def _clipped(out_t: dtypes.DType, limit: float | None) -> bool:
    """Whether ``finish`` clips ``v`` to +-2^24 first: an 8-bit output not known to lie within."""
    return out_t in (_U8, _I8) and (limit is None or limit > _SATURATED)


def finish(
    ctx: OpContext,
    v: str,
    out_t: dtypes.DType,
    *,
    zero: str | None = None,
    zero_value: np.ndarray | None = None,
    relu: bool = False,
    limit: float | None = None,
    twice: str | None = None,
) -> None:
    """``v`` (f32, ``|v| <= limit`` when given) rounded half away from zero (std::round), plus the zero
    point (as f32), clipped to the output type's range (from 0 with ``relu``) and cast: the op's output.

    An 8-bit output's ``v`` is first clipped to +-2^24 unless ``limit`` bounds it (integer bounds past
    saturation change no result), so the fast truncating rounding applies (``round_half_away``; ``twice``:
    ``2v`` where already computed). An 8-bit output with one zero point is then QuantizeLinear by 1 (adds
    the zero point and saturates; the value is an integer, so its own rounding does nothing)."""
    eight = out_t in (_U8, _I8)
    if _clipped(out_t, limit):
        v = ctx.emit("Clip", [v, ctx.scalar(np.float32(-_SATURATED), _F32), ctx.scalar(np.float32(_SATURATED), _F32)])
        limit, twice = _SATURATED, None
    r = round_half_away(ctx, v, limit, twice)
    one_zero = (zero_value is None or zero_value.size == 1) and (zero is None or ctx.b.types[zero].shape in ((), (1,)))
    if eight and one_zero and not (relu and out_t is _I8):
        if zero_value is not None:
            zero = ctx.const(zero_value.reshape(()).astype(out_t.numpy), out_t, "zero_point")
        elif zero is None:
            zero = ctx.scalar(np.array(0, out_t.numpy), out_t)
        ctx.emit("QuantizeLinear", [r, ctx.scalar(np.float32(1), _F32), zero], ctx.out())
        return
    if zero_value is not None:
        if np.any(zero_value != 0):
            r = ctx.emit("Add", [r, ctx.const(zero_value.astype(np.float32), _F32, "zero_point")])
    elif zero is not None:
        r = ctx.emit("Add", [r, ctx.emit("Cast", [zero], to=_F32.onnx)])
    lo, hi = bounds_inside(_F32, out_t)
    c = ctx.emit("Clip", [r, ctx.scalar(np.float32(0) if relu else lo, _F32), ctx.scalar(hi, _F32)])
    ctx.emit("Cast", [c], ctx.out(), to=out_t.onnx)


_BELOW_HALF = np.nextafter(np.float32(0.5), np.float32(0))
TRUNC_LIMIT = float(1 << 30)
"""``round_half_away`` truncates when ``|v| < TRUNC_LIMIT`` is known: ``2v`` then fits int32 for Cast."""


def round_half_away(ctx: OpContext, v: str, limit: float | None = None, twice: str | None = None) -> str:
    """C's ``std::round`` of an f32 tensor (``|v| <= limit`` when given; ``twice``: ``2v`` if computed), as
    an integer-valued f32.

    With ``limit < TRUNC_LIMIT``: ``trunc(2v) - trunc(v)`` (Cast to int32 truncates). Exact: with
    ``v = n + f``, ``n = trunc(v)``, ``|f| < 1`` of ``v``'s sign, ``2v`` is exact and
    ``trunc(2v) = 2n + trunc(2f)``, and ``trunc(2f)`` is ``sign(v)`` exactly when ``|f| >= 0.5``.
    Otherwise ``floor(|v| + 0.49999997) * sign(v)`` (slower; with 0.5 the sum would round up at 0.49999997
    and at odd integers from 2^23). ``scripts/check_round_away.py`` checks both for every f32."""
    if limit is not None and limit < TRUNC_LIMIT:
        t2 = ctx.emit("Cast", [twice or ctx.emit("Add", [v, v])], to=_I32.onnx)
        t1 = ctx.emit("Cast", [v], to=_I32.onnx)
        return ctx.emit("Cast", [ctx.emit("Sub", [t2, t1])], to=_F32.onnx)
    m = ctx.emit("Floor", [ctx.emit("Add", [ctx.emit("Abs", [v]), ctx.scalar(_BELOW_HALF, _F32)])])
    return ctx.emit("Mul", [m, ctx.emit("Sign", [v])])


def _u8_filter(ctx: OpContext, w: str, w_value: np.ndarray | None, zw: str, zw_value: np.ndarray | None):
    """An i8 filter and its zero point as u8 (``+ 128`` each: differences unchanged), folded when constant."""
    return _u8_values(ctx, w, w_value, f"{ctx.name}/filter_u8"), _u8_values(ctx, zw, zw_value, "zero_point")


def _u8_values(ctx: OpContext, name: str, value: np.ndarray | None, hint: str) -> str:
    """An i8 tensor as u8 ``+ 128``: a constant when its value is known, else Cast / Add / Cast."""
    if value is not None:
        return ctx.const((value.astype(np.int16) + 128).astype(np.uint8), _U8, hint)
    w32 = ctx.emit("Add", [ctx.emit("Cast", [name], to=_I32.onnx), ctx.scalar(128, _I32)])
    return ctx.emit("Cast", [w32], to=_U8.onnx)


def _s8_safe(w_t: dtypes.DType, w_value: np.ndarray | None) -> bool:
    return w_t is not _I8 or (w_value is not None and int(np.abs(w_value.astype(np.int16)).max(initial=0)) <= _S8_SAFE)


def _shifted_output(ctx: OpContext, y_u8: str) -> None:
    """An i8 result from its u8 form ``y + 128`` (exact: DequantizeLinear by 1 with zero point 128, Cast)."""
    f = ctx.emit("DequantizeLinear", [y_u8, ctx.scalar(np.float32(1), _F32), ctx.scalar(np.uint8(128), _U8)])
    ctx.emit("Cast", [f], ctx.out(), to=_I8.onnx)


class _Scales:
    """The three (scale, zero point) pairs of an eight-input op, as input indices with their axes placed
    on the output (``place[k]``: the output axes pair ``k`` is indexed by)."""

    def __init__(self, ctx: OpContext, place: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], rank: int):
        self.ctx, self.place, self.rank = ctx, place, rank
        self.values = [ctx.value(i) for i in range(2, 8)]  # s_in, z_in, s_f, z_f, s_out, z_out

    def known(self) -> bool:
        return all(v is not None for v in self.values)

    def scale_value(self) -> np.ndarray:
        """``(s_in * s_f) / s_out`` in f32, each placed on the output."""
        si, _, sf, _, so, _ = self.values
        r = self.rank
        a = _placed(si, self.place[0], r) * _placed(sf, self.place[1], r)  # type: ignore[arg-type]
        return (a / _placed(so, self.place[2], r)).astype(np.float32)  # type: ignore[arg-type]

    def scale(self) -> str:
        ctx = self.ctx
        if self.values[0] is not None and self.values[2] is not None and self.values[4] is not None:
            return ctx.const(self.scale_value(), _F32, f"{ctx.name}/scale")
        si, sf, so = (_place(ctx, ctx.inputs[i], self.place[k], self.rank) for k, i in enumerate((2, 4, 6)))
        return ctx.emit("Div", [ctx.emit("Mul", [si, sf]), so])

    def zero_scalar(self, k: int) -> str | None:
        """Input ``k``'s (0: input, 1: filter) zero point as one value: itself when per tensor, a constant when
        all its values are equal; None when it really varies."""
        ctx = self.ctx
        i = 3 + 2 * k
        if not self.place[k]:
            return ctx.inputs[i]
        v = self.values[2 * k + 1]
        if _uniform(v):
            return ctx.const(v.reshape(-1)[0], ctx.elem(i), "zero_point")  # type: ignore[union-attr]
        return None

    def requantize(self, acc: str, out_t: dtypes.DType, count: int | None) -> None:
        """``requantize`` of the int32 accumulator of ``count`` products of 8-bit differences (``|x - zx|``,
        ``|w - zw|`` at most 255) into the op's output, the scale folded when constant."""
        zero, zero_value = self.out_zero()
        known = all(self.values[i] is not None for i in (0, 2, 4))
        requantize(
            self.ctx,
            acc,
            None if known else self.scale(),
            out_t,
            zero,
            zero_value,
            scale_value=self.scale_value() if known else None,
            acc_limit=None if count is None else count * 255.0 * 255.0,
        )

    def out_zero(self) -> tuple[str | None, np.ndarray | None]:
        v = self.values[5]
        if v is not None:
            return None, _placed(v, self.place[2], self.rank)
        return _place(self.ctx, self.ctx.inputs[7], self.place[2], self.rank), None


def _integer_acc(
    ctx: OpContext,
    op: str,
    run: Any,
    w_t: dtypes.DType,
    w_value: np.ndarray | None,
    sc: _Scales,
    what: str,
    always_u8: bool = False,
) -> str:
    """The int32 accumulator through ConvInteger / MatMulInteger (``run(x, w, zx, zw)``), a varying filter
    zero point by the identity ``sum (x-zx)(w-zw) = sum (x-zx) w - zw sum (x-zx)``."""
    zx = sc.zero_scalar(0)
    if zx is None:
        raise ctx.error(
            f"the {what} zero point varies along '{_AXES_KEYS[ctx.op.op][0]}': ONNX {op} takes one "
            f"{what} zero point (a constant with equal values is accepted)"
        )
    w, zw = ctx.inputs[1], sc.zero_scalar(1)
    varying = zw is None  # a zero point per output channel: subtract zw * sum(x - zx) below
    zw_value: np.ndarray | None = None
    if zw is None:
        zw, zw_value = ctx.scalar(np.array(0, w_t.numpy), w_t), np.zeros((), w_t.numpy)
    elif sc.place[1]:
        zw_value = sc.values[3].reshape(-1)[:1].reshape(())  # type: ignore[union-attr]
    else:
        zw_value = sc.values[3]
    if (always_u8 and w_t is _I8) or not _s8_safe(w_t, w_value):
        w, zw = _u8_filter(ctx, w, w_value, zw, zw_value)
    acc = run(w, zx, zw, None)
    if varying:
        sums = run(None, zx, None, None)
        zw32 = _place(ctx, ctx.emit("Cast", [ctx.inputs[5]], to=_I32.onnx), sc.place[1], sc.rank)
        acc = ctx.emit("Sub", [acc, ctx.emit("Mul", [sums, zw32])])
    return acc


_AXES_KEYS = {
    "QuantizedConvolution": ("input_axes", "filter_axes", "output_axes"),
    "QuantizedDot": ("input0_axes", "input1_axes", "output_axes"),
}


_FORMS = ("QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger")


def identified(fn: Any) -> Any:
    """A converter whose output node's ``doc_string`` names the nGraph op and the form it became."""

    def wrapped(ctx: OpContext) -> list[TensorType]:
        start = len(ctx.b.graph.node)
        out = fn(ctx)
        nodes = ctx.b.graph.node[start:]
        forms = sorted({n.op_type for n in nodes if n.op_type in _FORMS})
        exact = "rounding proven" if any(f.startswith("QLinear") for f in forms) else "exact requantization"
        how = f"{' + '.join(forms)}, {exact}" if forms else "its decomposition"
        for n in nodes:
            if ctx.out() in n.output:
                n.doc_string = f"nGraph {ctx.op.op} '{ctx.name}' as {how}"
        return out

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


# ---- QuantizedConvolution ----


@register("QuantizedConvolution")
@identified
def quantized_convolution(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(8)
    out_t = ctx.attr_type("output_type")
    t_in, t_f, _ = _check_types(ctx, ("Input", "Filter", "Output"), out_t)
    keys = _AXES_KEYS["QuantizedConvolution"]
    ia, fa, oa = (ctx.attr_axes(k, ()) for k in keys)
    x, attrs, out_shape = conv_geometry(ctx)
    rank = len(out_shape)
    in_shape, f_shape = ctx.shape(0), ctx.shape(1)
    _pair(ctx, 2, 3, in_shape, ia, "input", keys[0], tuple(range(1, rank)))
    _pair(ctx, 4, 5, f_shape, fa, "filter", keys[1], tuple(range(1, rank)))
    _pair(ctx, 6, 7, out_shape, oa, "output", keys[2], ())
    sc = _Scales(ctx, (ia, tuple(a + 1 for a in fa), oa), rank)
    w_value = ctx.value(1)
    count = math.prod(d for d in f_shape[1:]) if all(isinstance(d, int) for d in f_shape[1:]) else None  # type: ignore[union-attr]
    out_t_shape = TensorType(out_t, out_shape)

    plan = _qlinear_plan(sc, out_t, ia, oa, t_in, t_f, w_value, count, axis0=True)
    if plan is not None:
        zx = ctx.inputs[3]

        def qconv(w: str, sx: str, sw: str, zw: str, zo: str, out: str | None) -> str:
            return ctx.emit("QLinearConv", [x, sx, zx, w, sw, zw, ctx.scalar(np.float32(1), _F32), zo], out, **attrs)

        if _qlinear_form(ctx, sc, out_t, t_f, w_value, plan, qconv):
            return [out_t_shape]

    def run(w: str | None, zx: str, zw: str | None, out: str | None) -> str:
        if w is None:  # the sum of (x - zx) over each window
            cin = f_shape[1]  # type: ignore[index]
            ones = np.ones((1, cin, *attrs["kernel_shape"]), np.uint8)
            return ctx.emit("ConvInteger", [x, ctx.const(ones, _U8, f"{ctx.name}/ones"), zx], out, **attrs)
        return ctx.emit("ConvInteger", [x, w, zx, zw], out, **attrs)  # type: ignore[list-item]

    # ConvInteger's u8 x i8 path is many times slower than its u8 x u8 one in ONNX Runtime: always u8
    acc = _integer_acc(ctx, "ConvInteger", run, t_f, w_value, sc, "input", always_u8=True)
    sc.requantize(acc, out_t, count)
    return [out_t_shape]


def _qlinear_plan(
    sc: _Scales,
    out_t: dtypes.DType,
    ia: tuple[int, ...],
    oa: tuple[int, ...],
    t_in: dtypes.DType,
    t_f: dtypes.DType,
    w_value: np.ndarray | None,
    count: int | None,
    axis0: bool,
) -> np.ndarray | None:
    """Per output channel, the f32 scale with which QLinearConv / QLinearMatMul give nGraph's bits (NaN
    where none does: ``ties.qlinear_scales``); None where the QLinear forms do not apply at all (an i32
    output, scales over input or output axes, a scale or zero point computed at run time)."""
    if not QLINEAR or out_t.name not in ("u8", "i8") or ia or oa or not sc.known() or count is None:
        return None
    zx = int(sc.values[1].reshape(()))  # type: ignore[union-attr]
    zw = sc.values[3].reshape(-1)  # type: ignore[union-attr]
    zo = int(sc.values[5].reshape(()))  # type: ignore[union-attr]
    lo, hi = _acc_bounds(t_in, zx, w_value, t_f, zw, count, axis0)
    return qlinear_scales(sc.scale_value().reshape(-1), lo, hi, _u8_zero(out_t, zo), _U8)


def _u8_zero(out_t: dtypes.DType, zero: int) -> int:
    """The output zero point of the QLinear op's u8 result: an i8 output is computed as ``y + 128``."""
    return zero if out_t is _U8 else zero + 128


def _qlinear_form(
    ctx: OpContext, sc: _Scales, out_t: dtypes.DType, t_f: dtypes.DType, w_value: Any, plan: np.ndarray, qlinear: Any
) -> bool:
    """The op as its QLinear form (``qlinear(w, x_scale, w_scale, w_zero, y_zero, out)``) where ``plan``
    proves every channel (an i8 output computed as u8 ``y + 128``); False (nothing emitted) otherwise."""
    if np.isnan(plan).any():
        return False
    zw = sc.values[3].reshape(-1)  # type: ignore[union-attr]
    zo = _u8_zero(out_t, int(sc.values[5].reshape(())))  # type: ignore[union-attr]
    y = _qlinear_u8(ctx, ctx.inputs[1], t_f, w_value, zw, plan, zo, qlinear, ctx.out() if out_t is _U8 else None)
    if out_t is not _U8:
        _shifted_output(ctx, y)
    return True


def _qlinear_u8(
    ctx: OpContext,
    w: str,
    w_t: dtypes.DType,
    w_value: np.ndarray | None,
    zw: np.ndarray,
    scales: np.ndarray,
    zo: int,
    qlinear: Any,
    out: str | None,
) -> str:
    """``qlinear(w, x_scale, w_scale, w_zero, y_zero, out)`` with y_scale 1 and ``scales`` (one per output
    channel, proven) as x_scale where they are one value, else as the per-channel w_scale: ONNX Runtime's
    ``(x_scale * w_scale) / y_scale`` is then the scale itself. The filter is shifted to u8 unless proven
    safe for ONNX Runtime's u8 x i8 kernels; the result is u8 with zero point ``zo``."""
    if not _s8_safe(w_t, w_value):
        w, zw, w_t = _u8_values(ctx, w, w_value, f"{ctx.name}/filter_u8"), zw.astype(np.int16) + 128, _U8
    one = ctx.scalar(np.float32(1), _F32)
    if np.all(scales == scales[0]) and np.all(zw == zw[0]):
        sx, sw, z = ctx.const(scales[0], _F32, "scale"), one, zw[0]
    else:
        sx, sw, z = one, ctx.const(scales, _F32, "scale"), np.broadcast_to(zw, scales.shape)
    zwn = ctx.const(np.asarray(z).astype(w_t.numpy), w_t, "zero_point")
    return qlinear(w, sx, sw, zwn, ctx.scalar(np.uint8(zo), _U8), out)


# ---- QuantizedDot ----


@register("QuantizedDot")
@identified
def quantized_dot(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(8)
    out_t = ctx.attr_type("output_type")
    t_in, t_f, _ = _check_types(ctx, ("Input0", "Input1", "Output"), out_t)
    keys = _AXES_KEYS["QuantizedDot"]
    ia, fa, oa = (ctx.attr_axes(k, ()) for k in keys)
    ra, rb = ctx.rank(0), ctx.rank(1)
    n = ctx.attr_int("reduction_axes_count", 1)
    out_shape = dot_shape(ctx, n)
    if n == 0:
        raise ctx.error("QuantizedDot with reduction_axes_count 0 (an outer product) is not supported")
    rank = len(out_shape)
    sa, sb = ctx.shape(0), ctx.shape(1)
    _pair(ctx, 2, 3, sa, ia, "input0", keys[0], tuple(range(ra - n, ra)))
    _pair(ctx, 4, 5, sb, fa, "input1", keys[1], tuple(range(n)))
    _pair(ctx, 6, 7, out_shape, oa, "output", keys[2], ())
    sc = _Scales(ctx, (ia, tuple(a - n + ra - n for a in fa), oa), rank)
    w_value = ctx.value(1)
    k_dims = sb[:n]  # type: ignore[index]
    count = math.prod(k_dims) if all(isinstance(d, int) for d in k_dims) else None
    result = TensorType(out_t, out_shape)
    per_col = fa and (rb - n != 1 or fa != (n,))
    plan = None if per_col else _qlinear_plan(sc, out_t, ia, oa, t_in, t_f, _as_columns(w_value, n), count, axis0=False)
    if plan is not None:
        zx, one = ctx.inputs[3], ctx.scalar(np.float32(1), _F32)

        def qmatmul(w: str, sx: str, sw: str, zw: str, zo: str, out: str | None) -> str:
            def product(a2: str, b2: str, o: str | None) -> str:
                return ctx.emit("QLinearMatMul", [a2, sx, zx, b2, sw, zw, one, zo], o)

            return contract(ctx, ctx.inputs[0], w, n, product, out)

        if _qlinear_form(ctx, sc, out_t, t_f, w_value, plan, qmatmul):
            return [result]

    a = ctx.inputs[0]

    def run(w: str | None, za: str, zb: str | None, out: str | None) -> str:
        if w is None:  # the row sums of (a - za), in every column
            ones = ctx.const(np.ones(ctx.static_shape(1, "input1"), np.uint8), _U8, f"{ctx.name}/ones")
            return contract(ctx, a, ones, n, lambda a2, b2, o: ctx.emit("MatMulInteger", [a2, b2, za], o), out)
        return contract(ctx, a, w, n, lambda a2, b2, o: ctx.emit("MatMulInteger", [a2, b2, za, zb], o), out)  # type: ignore[list-item]

    acc = _integer_acc(ctx, "MatMulInteger", run, t_f, w_value, sc, "input0")
    sc.requantize(acc, out_t, count)
    return [result]


def _as_columns(w: np.ndarray | None, n: int) -> np.ndarray | None:
    if w is None:
        return None
    k = math.prod(w.shape[:n])
    return w.reshape(k, -1)


# ---- the fused forms (CPU backend ops; nGraph 0.26 cannot read them back: their definition) ----


def _fused_checks(ctx: OpContext, bias: int | None, scale: int, channels: Dim) -> None:
    if ctx.elem(0) is not _U8:
        raise ctx.error(f"{ctx.op.op} takes u8 data, got {ctx.elem(0)}")
    if ctx.elem(1) not in (_I8, _U8):
        raise ctx.error(f"{ctx.op.op} takes i8 or u8 filters, got {ctx.elem(1)}")
    if bias is not None:
        if ctx.elem(bias) not in (_I32, _F32):
            raise ctx.error(f"{ctx.op.op}'s bias must be i32 (or f32), got {ctx.elem(bias)}")
        bs = ctx.shape(bias)
        if bs is None or len(bs) != 1 or (isinstance(bs[0], int) and isinstance(channels, int) and bs[0] != channels):
            raise ctx.error(f"invalid bias {shape_str(bs)}: {ctx.op.op} takes one bias per output channel ({channels})")
    _scale_check(ctx, scale, channels, "scale")


def _scale_check(ctx: OpContext, i: int, channels: Dim, what: str) -> None:
    if ctx.elem(i) is not _F32:
        raise ctx.error(f"{ctx.op.op}'s {what} must be f32, got {ctx.elem(i)}")
    s = ctx.shape(i)
    if s is None or not (s == () or s == (1,) or (len(s) == 1 and (s[0] == channels or s[0] is None))):
        raise ctx.error(f"{ctx.op.op}'s {what} shape {shape_str(s)} must be a scalar, (1) or one per output channel")


def _fused_scale(ctx: OpContext, i: int, rank: int) -> str:
    s = ctx.shape(i)
    if s == () or s == (1,):
        return ctx.inputs[i]
    return _place(ctx, ctx.inputs[i], (1,), rank)


def _fused_conv(ctx: OpContext, *, bias: bool, relu: bool, sum_kind: str | None, out_t: dtypes.DType) -> TensorType:
    """Convolution (exact int32) + bias, times ``scale``, plus ``sum * sum_scale``, rounded (std::round),
    ReLU'd and saturated: the CPU backend's fusions by their definition."""
    n_in = 3 + int(bias) + (2 if sum_kind else 0)
    ctx.expect_inputs(n_in)
    i_bias = 2 if bias else None
    i_sum = 3 if sum_kind else None
    i_scale = n_in - (2 if sum_kind else 1)
    x, attrs, out_shape = conv_geometry(ctx)
    rank = len(out_shape)
    _fused_checks(ctx, i_bias, i_scale, out_shape[1])
    if sum_kind:
        if ctx.elem(i_sum) is not dtypes.parse(sum_kind):  # type: ignore[arg-type]
            raise ctx.error(f"{ctx.op.op}'s sum input must be {sum_kind}, got {ctx.elem(i_sum)}")  # type: ignore[arg-type]
        ss = ctx.shape(i_sum)  # type: ignore[arg-type]
        if ss is not None and len(ss) == len(out_shape):
            for a, b in zip(ss, out_shape):
                if isinstance(a, int) and isinstance(b, int) and a != b:
                    raise ctx.error(f"sum input shape {shape_str(ss)} must be the output's {shape_str(out_shape)}")
        else:
            raise ctx.error(f"sum input shape {shape_str(ss)} must be the output's {shape_str(out_shape)}")
        _scale_check(ctx, n_in - 1, out_shape[1], "sum scale")
    w, w_t, w_value = ctx.inputs[1], ctx.elem(1), ctx.value(1)
    zw = ctx.scalar(np.array(0, w_t.numpy), w_t)
    zw_value = np.zeros((), w_t.numpy)
    as_u8: list[tuple[str, str]] = []

    def u8_form() -> tuple[str, str]:  # the filter shifted to u8, made once
        if not as_u8:
            as_u8.append(_u8_filter(ctx, w, w_value, zw, zw_value))
        return as_u8[0]

    zx = ctx.scalar(np.uint8(0), _U8)
    result = TensorType(out_t, out_shape)
    scale_v = ctx.value(i_scale)
    if QLINEAR and not sum_kind and scale_v is not None and (not bias or ctx.elem(2) is _I32):
        if _fused_qlinear(ctx, x, scale_v, bias, out_t, attrs):
            return result
    if w_t is _I8:  # ConvInteger's u8 x i8 path is many times slower than u8 x u8 in ONNX Runtime
        w, zw = u8_form()
    acc = ctx.emit("ConvInteger", [x, w, zx, zw], **attrs)
    if bias and ctx.elem(2) is _I32:
        acc = ctx.emit("Add", [acc, _place(ctx, ctx.inputs[2], (1,), rank)])
    accf = ctx.emit("Cast", [acc], to=_F32.onnx)
    if bias and ctx.elem(2) is _F32:  # an f32 bias: added to float(acc) before scaling
        accf = ctx.emit("Add", [accf, _place(ctx, ctx.inputs[2], (1,), rank)])
    v = ctx.emit("Mul", [accf, _fused_scale(ctx, i_scale, rank)])
    if sum_kind:
        term = ctx.emit("Cast", [ctx.inputs[i_sum]], to=_F32.onnx)  # type: ignore[index]
        v = ctx.emit("Add", [v, ctx.emit("Mul", [term, _fused_scale(ctx, n_in - 1, rank)])])
    finish(ctx, v, out_t, relu=relu)
    return result


def _fused_qlinear(
    ctx: OpContext, x: str, scale_v: np.ndarray, bias: bool, out_t: dtypes.DType, attrs: dict[str, Any]
) -> bool:
    """QLinearConv with the proven scales (``_qlinear_u8``: ``scale`` itself where it already rounds as
    nGraph does) and the bias as its int32 bias, where ``ties.qlinear_scales`` proves every channel."""
    w_t, w_value = ctx.elem(1), ctx.value(1)
    b_value = ctx.value(2) if bias else None
    if bias and b_value is None:
        return False
    zw = np.zeros(1, np.int64)
    count = math.prod(ctx.shape(1)[1:])  # type: ignore[index]
    lo, hi = _acc_bounds(_U8, 0, w_value, w_t, zw, count, True)
    if b_value is not None:
        lo, hi = lo + b_value.astype(np.int64), hi + b_value.astype(np.int64)
    zo = _u8_zero(out_t, 0)
    plan = qlinear_scales(scale_v.reshape(-1), lo, hi, zo, _U8)
    if np.isnan(plan).any():
        return False
    zx = ctx.scalar(np.uint8(0), _U8)

    def qconv(w: str, sx: str, sw: str, zwn: str, zq: str, out: str | None) -> str:
        ins = [x, sx, zx, w, sw, zwn, ctx.scalar(np.float32(1), _F32), zq] + ([ctx.inputs[2]] if bias else [])
        return ctx.emit("QLinearConv", ins, out, **attrs)

    y = _qlinear_u8(ctx, ctx.inputs[1], w_t, w_value, zw, plan, zo, qconv, ctx.out() if out_t is _U8 else None)
    if out_t is not _U8:
        _shifted_output(ctx, y)
    return True


def _with_relu(ctx: OpContext, default: bool = False) -> bool:
    return ctx.attr_bool("with_relu", default)


@register("QuantizedConvolutionBias")
@identified
def quantized_convolution_bias(ctx: OpContext) -> list[TensorType]:
    relu = _with_relu(ctx)
    return [_fused_conv(ctx, bias=True, relu=relu, sum_kind=None, out_t=_U8 if relu else _I8)]


@register("QuantizedConvolutionRelu")
@identified
def quantized_convolution_relu(ctx: OpContext) -> list[TensorType]:
    return [_fused_conv(ctx, bias=False, relu=True, sum_kind=None, out_t=_U8)]


@register("QuantizedConvolutionBiasAdd")
@identified
def quantized_convolution_bias_add(ctx: OpContext) -> list[TensorType]:
    relu = _with_relu(ctx, True)
    return [_fused_conv(ctx, bias=True, relu=relu, sum_kind="u8", out_t=_U8 if relu else _I8)]


@register("QuantizedConvolutionBiasSignedAdd")
@identified
def quantized_convolution_bias_signed_add(ctx: OpContext) -> list[TensorType]:
    if not _with_relu(ctx, True):
        raise ctx.error("with_relu must be true")
    return [_fused_conv(ctx, bias=True, relu=True, sum_kind="i8", out_t=_I8)]


@register("QuantizedDotBias")
@identified
def quantized_dot_bias(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(4)
    requant = ctx.attr_bool("requantize", True)
    relu = _with_relu(ctx)
    sd, sw = ctx.shape(0), ctx.shape(1)
    if (
        sd is None
        or sw is None
        or len(sd) != 2
        or len(sw) != 2
        or (isinstance(sd[1], int) and isinstance(sw[1], int) and sd[1] != sw[1])
    ):
        raise ctx.error(f"only valid tensors of rank 2 supported. data {shape_str(sd)} weights {shape_str(sw)}")
    _fused_checks(ctx, 2, 3, sw[0])
    out_t = (_U8 if relu else _I8) if requant else _F32
    w, w_t, w_value = ctx.inputs[1], ctx.elem(1), ctx.value(1)
    zw = ctx.scalar(np.array(0, w_t.numpy), w_t)
    if not _s8_safe(w_t, w_value):
        w, zw = _u8_filter(ctx, w, w_value, zw, np.array(0, np.int8))
    wt = ctx.emit("Transpose", [w], perm=[1, 0])
    acc = ctx.emit("MatMulInteger", [ctx.inputs[0], wt, ctx.scalar(np.uint8(0), _U8), zw])
    scale = _fused_scale(ctx, 3, 2)
    if ctx.elem(2) is _I32:
        acc = ctx.emit("Add", [acc, ctx.inputs[2]])
        accf = ctx.emit("Cast", [acc], to=_F32.onnx)
    else:
        accf = ctx.emit("Add", [ctx.emit("Cast", [acc], to=_F32.onnx), ctx.inputs[2]])
    v = ctx.emit("Mul", [accf, scale])
    if not requant:
        if relu:
            zero = ctx.scalar(np.float32(0), _F32)
            ctx.emit("Where", [ctx.emit("Greater", [v, zero]), v, zero], ctx.out())
        else:
            ctx.emit("Identity", [v], ctx.out())
        return [TensorType(_F32, (sd[0], sw[0]))]
    finish(ctx, v, out_t, relu=relu)
    return [TensorType(out_t, (sd[0], sw[0]))]
