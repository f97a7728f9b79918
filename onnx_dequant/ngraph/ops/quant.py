"""Dequantize (our op, checked by the contract) and Quantize (nGraph's nine round modes, exactly).

nGraph's Quantize computes, in the input's real type T: ``q = x / scale``, rounds ``q`` by
``round_mode``, adds the offset (converted to T), clamps to the output type's range (as T) and casts.
The ``q + 0.5`` / ``q - 0.5`` steps of modes 0-3 happen in double (a double literal in nGraph's C++),
so for f32, f16 and bf16 they are exact. Round-half-to-even on f32 input with an 8-bit (or, from
opset 21, 16-bit) output and at most one axis is ONNX QuantizeLinear, which ONNX Runtime computes the
same way (division, not a reciprocal). Every other case is an exact decomposition that follows
nGraph's formula for the mode step by step.
The one deliberate difference: nGraph clamps an i32 output to ``float(INT32_MAX)`` = 2^31, which does
not fit (undefined in C++); we clamp to the largest T value inside the range.
"""

from __future__ import annotations

import numpy as np
import onnx

from ... import dtypes, schema
from ...contract import TensorType, infer
from ..context import OpContext
from . import register

ROUND_MODES = (
    "ROUND_NEAREST_TOWARD_INFINITY",  # 0: half away from zero (std::round)
    "ROUND_NEAREST_TOWARD_ZERO",  # 1: half toward zero
    "ROUND_NEAREST_UPWARD",  # 2: half up: floor(q + 0.5)
    "ROUND_NEAREST_DOWNWARD",  # 3: half down: ceil(q - 0.5)
    "ROUND_NEAREST_TOWARD_EVEN",  # 4: half to even
    "ROUND_TOWARD_INFINITY",  # 5: away from zero
    "ROUND_TOWARD_ZERO",  # 6: truncate
    "ROUND_UP",  # 7: ceil
    "ROUND_DOWN",  # 8: floor
)
_ALIASES = {"HALF_AWAY_FROM_ZERO": 0}


def _round_mode(ctx: OpContext) -> int:
    v = ctx.raw("round_mode")
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(ROUND_MODES):
        return v
    if isinstance(v, str):
        name = v.strip().upper()
        if name in ROUND_MODES:
            return ROUND_MODES.index(name)
        if name in _ALIASES:
            return _ALIASES[name]
    raise ctx.error(f"'round_mode' must be 0..8 or a round mode name, got {v!r:.40}")


_INFERRED: dict[tuple, TensorType] = {}
"""Contract results by (input types, axes, type): layers of a model repeat the same signature."""
_TEMPLATES: dict[tuple, onnx.NodeProto] = {}
"""A node from ``schema.make_node`` per (axes, type, input count); nodes copy its attributes."""


@register("Dequantize")
def dequantize(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3, 2)
    dtype = ctx.attr_type("type")
    axes = ctx.attr_axes("axes")
    zp = ctx.types[2] if len(ctx.types) > 2 else None
    key = (ctx.types[0], ctx.types[1], zp, axes, dtype)
    out = _INFERRED.get(key)
    if out is None:
        out = infer(ctx.types[0], ctx.types[1], zp, axes=axes, dtype=dtype)
        if len(_INFERRED) < 4096:
            _INFERRED[key] = out
    tkey = (axes, dtype, len(ctx.inputs))
    template = _TEMPLATES.get(tkey)
    if template is None:
        template = _TEMPLATES[tkey] = schema.make_node(ctx.inputs, [ctx.out()], axes=axes, dtype=dtype)
    node = ctx.b.graph.node.add()
    node.CopyFrom(template)
    node.input[:] = ctx.inputs
    node.output[0] = ctx.out()
    node.name = ctx.name
    ctx.b.uses_custom_domain = True
    return [out]


def bounds_inside(real: dtypes.DType, quant: dtypes.DType) -> tuple[np.ndarray, np.ndarray]:
    """The output type's range as values of ``real`` that lie inside it (the nearest ones toward zero)."""
    out = []
    for bound in (quant.min, quant.max):
        with np.errstate(over="ignore"):
            v = np.array(float(bound)).astype(real.numpy)
        while abs(float(v)) > abs(bound):  # one step toward zero: the bit pattern minus one
            bits = v.reshape(1).view(f"u{v.dtype.itemsize}")
            v = (bits - 1).view(v.dtype).reshape(())
        out.append(v)
    return out[0], out[1]


_MODE_OPS = (
    ("Abs", "Add", "Floor", "Less", "Neg", "Where"),
    ("Abs", "Sub", "Ceil", "Less", "Neg", "Where"),
    ("Add", "Floor"),
    ("Sub", "Ceil"),
    ("Round",),
    ("Abs", "Ceil", "Less", "Neg", "Where"),
    ("Less", "Ceil", "Floor", "Where"),
    ("Ceil",),
    ("Floor",),
)
"""The ONNX ops ``_round`` emits for each round mode."""


_F64 = dtypes.parse("f64")
_HALF_STEP_MODES = (0, 1, 2, 3)
"""Modes whose ``q +- 0.5`` nGraph computes in double (C++'s ``0.5`` is a double literal), whatever T is."""


def emit_round(ctx: OpContext, q: str, mode: int, t: dtypes.DType) -> str:
    """``q`` rounded to an integer value by nGraph's formula for ``mode``, as type ``t``."""
    if mode in _HALF_STEP_MODES and t is not _F64:  # exact in double; the integer fits t again
        r = emit_round(ctx, ctx.emit("Cast", [q], to=_F64.onnx), mode, _F64)
        return ctx.emit("Cast", [r], to=t.onnx)
    half = ctx.scalar(0.5, t)
    zero = ctx.scalar(0, t)

    def signed(mag: str) -> str:  # sign of q applied to a magnitude
        return ctx.emit("Where", [ctx.emit("Less", [q, zero]), ctx.emit("Neg", [mag]), mag])

    if mode == 0:  # floor(|q| + 0.5) with q's sign: not std::round for f64 q = 0.5 - 2^-54 (nGraph gives 1)
        return signed(ctx.emit("Floor", [ctx.emit("Add", [ctx.emit("Abs", [q]), half])]))
    if mode == 1:  # ceil(|q| - 0.5) with q's sign
        return signed(ctx.emit("Ceil", [ctx.emit("Sub", [ctx.emit("Abs", [q]), half])]))
    if mode == 2:
        return ctx.emit("Floor", [ctx.emit("Add", [q, half])])
    if mode == 3:
        return ctx.emit("Ceil", [ctx.emit("Sub", [q, half])])
    if mode == 4:
        return ctx.emit("Round", [q])
    if mode == 5:
        return signed(ctx.emit("Ceil", [ctx.emit("Abs", [q])]))
    if mode == 6:
        return ctx.emit("Where", [ctx.emit("Less", [q, zero]), ctx.emit("Ceil", [q]), ctx.emit("Floor", [q])])
    if mode == 7:
        return ctx.emit("Ceil", [q])
    return ctx.emit("Floor", [q])


def _quantize_linear_fits(
    ctx: OpContext, real: dtypes.DType, quant: dtypes.DType, axes: tuple[int, ...], mode: int
) -> bool:
    """Whether ONNX's QuantizeLinear computes this Quantize: round half to even (mode 4), f32, at most one
    axis, 8-bit (16-bit from opset 21)."""
    if mode != 4 or real.name != "f32" or len(axes) > 1:
        return False
    return quant.name in ("i8", "u8") or (quant.name in ("i16", "u16") and ctx.b.opset >= 21)


@register("Quantize")
def quantize(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3)
    quant = ctx.attr_type("type")
    axes = ctx.attr_axes("axes")
    mode = _round_mode(ctx)
    tx, ts, tz = ctx.types
    if not quant.is_quantized:
        raise ctx.error(f"Output element type ({quant}) must be a quantized type")
    if tz.elem_type is not quant:
        raise ctx.error(f"Offset element type ({tz.elem_type}) must match output element type ({quant})")
    real = tx.elem_type
    if not real.is_real:
        raise ctx.error(f"Input element type ({real}) must be a floating point type")
    if ts.elem_type is not real:
        raise ctx.error(f"Scale element type ({ts.elem_type}) must match input element type ({real})")
    # the axis and shape rules are Dequantize's, with the roles of the types swapped
    shape = infer(TensorType(quant, tx.shape), TensorType(real, ts.shape), TensorType(quant, tz.shape), axes=axes).shape
    x, s, z = ctx.inputs
    if _quantize_linear_fits(ctx, real, quant, axes, mode):
        attrs = {"axis": axes[0]} if axes else {}
        ctx.emit("QuantizeLinear", [x, s, z], ctx.out(), **attrs)
        return [TensorType(quant, shape)]
    ctx.require_onnx(real, "Div", "Add", "Clip", "Cast")
    ctx.require_onnx(_F64 if mode in _HALF_STEP_MODES else real, *_MODE_OPS[mode])
    rank = ctx.rank(0)
    others = [i for i in range(rank) if i not in axes]
    if axes and others:  # scale / offset indexed by the axes: unsqueeze the rest to broadcast
        s = ctx.emit("Unsqueeze", [s, ctx.int64s(others)])
        z = ctx.emit("Unsqueeze", [z, ctx.int64s(others)])
    q = ctx.emit("Div", [x, s])
    r = emit_round(ctx, q, mode, real)
    v = ctx.emit("Add", [r, ctx.emit("Cast", [z], to=real.onnx)])
    lo, hi = bounds_inside(real, quant)
    c = ctx.emit("Clip", [v, ctx.scalar(lo, real), ctx.scalar(hi, real)])
    ctx.emit("Cast", [c], ctx.out(), to=quant.onnx)
    return [TensorType(quant, shape)]
