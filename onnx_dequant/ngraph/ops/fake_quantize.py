"""FakeQuantize: nGraph's fused op, by its decomposition (``op/fused/fake_quantize.cpp``), in the data's type.

``x`` is clamped to ``[input_low, input_high]`` (nGraph's ``Minimum(ih, Maximum(il, x))``: ``a > b ? a : b``
order, so a NaN ``x`` stays NaN), shifted by ``input_low``, quantized to i32 with scale
``(ih - il) / (levels - 1)`` rounding half away from zero (Quantize's mode 0: divide, round, clamp, cast),
converted back and dequantized: ``q * ((oh - ol) / (levels - 1)) + ol``.

Broadcasting: the op_version 0 form of nGraph 0.26 takes scalars or one value per channel (axis 1); when
``input_low`` is a scalar every input is broadcast NumPy-style, otherwise per channel. The attribute-visitor
form (opset 1's FakeQuantize, ``auto_broadcast`` NUMPY by default, or PDPD, or NONE) broadcasts as it says.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register
from .elementwise import broadcast_shapes, read_autob
from .quant import bounds_inside, emit_round

_I32 = dtypes.parse("i32")
_NAMES = ("Input low", "Input high", "Output low", "Output high")


def _placed(ctx: OpContext, i: int, kind: str, axis: int, rank: int) -> str:
    """Input ``i`` shaped to broadcast NumPy-style against the data, per the op's broadcast rule."""
    name, shape = ctx.inputs[i], ctx.shape(i)
    r = len(shape)  # type: ignore[arg-type]
    if kind == "channel" and r == 1:
        start = 1
    elif kind == "pdpd":
        start = rank - r if axis == -1 else axis
    else:
        return name
    axes = list(range(start)) + list(range(start + r, rank))
    return ctx.emit("Unsqueeze", [name, ctx.int64s(axes)]) if axes else name


def _rule(ctx: OpContext, rank: int) -> tuple[str, int]:
    data = ctx.shape(0)
    if ctx.has("auto_broadcast") or ctx.has("autob") or ctx.op.version >= 1:
        kind, axis = read_autob(ctx)
        if kind == "none" and not (ctx.has("auto_broadcast") or ctx.has("autob")):
            kind = "numpy"  # the attribute visitor's default
        for i in range(1, 5):
            s = ctx.shape(i)
            if kind == "none":
                ok = s == data
            elif kind == "numpy":
                ok = broadcast_shapes(data, s) == data  # type: ignore[arg-type]
            else:
                start = rank - len(s) if axis == -1 else axis  # type: ignore[arg-type]
                ok = 0 <= start and start + len(s) <= rank  # type: ignore[arg-type]
                ok = ok and all(d == 1 or data[start + k] == d for k, d in enumerate(s))  # type: ignore[arg-type, index]
            if not ok:
                raise ctx.error(
                    f"Argument shapes are inconsistent ({_NAMES[i - 1].lower()} {shape_str(s)}, data {shape_str(data)})"
                )
        return kind, axis
    channels = data[1] if rank > 1 else None  # type: ignore[index]
    for i in range(1, 5):
        s = ctx.shape(i)
        if not (s == () or (s is not None and len(s) == 1 and rank > 1 and s[0] == channels)):
            raise ctx.error(
                f"{_NAMES[i - 1]} tensor shape: {shape_str(s)}, must either be a scalar or a vector of size equal to number of channels."  # noqa: E501  (nGraph's message, whole so it can be searched)
            )
    if ctx.shape(1) == ():
        for i in range(2, 5):
            if broadcast_shapes(data, ctx.shape(i)) != data:
                raise ctx.error(
                    f"{_NAMES[i - 1]} {shape_str(ctx.shape(i))} does not broadcast NumPy-style to the data "
                    f"{shape_str(data)} (nGraph broadcasts every input NumPy-style when input low is a scalar)"
                )
        return "numpy", -1
    return "channel", 1


@register("FakeQuantize", versions=(0, 1))
def fake_quantize(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(5)
    t = ctx.elem(0)
    for i in range(1, 5):
        if ctx.elem(i) is not t:
            raise ctx.error(
                f"Arguments do not have the same element type (data element type: {t}, {_NAMES[i - 1].lower()} element type: {ctx.elem(i)})"  # noqa: E501
            )
    if not t.is_real:
        raise ctx.error(f"FakeQuantize on {t} is not supported (real types only)")
    levels = ctx.attr_int("levels", lo=2)
    rank = ctx.rank(0)
    for i in range(1, 5):
        ctx.rank(i)
    kind, axis = _rule(ctx, rank)
    ctx.require_onnx(t, "Where", "Greater", "Less", "Sub", "Div", "Mul", "Add", "Clip", "Cast")
    ctx.require_onnx(t, "Abs", "Floor", "GreaterOrEqual", "Neg")
    x = ctx.inputs[0]
    il, ih, ol, oh = (_placed(ctx, i, kind, axis, rank) for i in range(1, 5))
    steps = ctx.scalar(np.array(levels - 1).astype(t.numpy), t)
    q_scale = ctx.emit("Div", [ctx.emit("Sub", [ih, il]), steps])
    d_scale = ctx.emit("Div", [ctx.emit("Sub", [oh, ol]), steps])
    v = ctx.emit("Where", [ctx.emit("Greater", [il, x]), il, x])  # Maximum(il, x)
    v = ctx.emit("Where", [ctx.emit("Less", [ih, v]), ih, v])  # Minimum(ih, .)
    v = ctx.emit("Sub", [v, il])
    q = emit_round(ctx, ctx.emit("Div", [v, q_scale]), 0, t)
    lo, hi = bounds_inside(t, _I32)
    q = ctx.emit("Clip", [q, ctx.scalar(lo, t), ctx.scalar(hi, t)])
    q = ctx.emit("Cast", [ctx.emit("Cast", [q], to=_I32.onnx)], to=t.onnx)
    ctx.emit("Add", [ctx.emit("Mul", [q, d_scale]), ol], ctx.out())
    return [TensorType(t, ctx.shape(0))]
