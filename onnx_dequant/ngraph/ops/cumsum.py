"""CumSum (v0): running sums of the input along ``axis`` (input 1, a scalar i32 / i64; negative counts
from the end), ``exclusive`` (the j-th sum leaves out element j) and ``reverse`` (from the end).

nGraph's kernel adds in the element type, one element after another along the axis: ONNX CumSum, which
ONNX Runtime computes the same way for f32 and f64. For f16 and bf16 (whose every partial sum nGraph
rounds to the type; ONNX Runtime's f16 CumSum does not) a Scan adds slice by slice in f32 and rounds.
Integers other than i32 / i64 are summed in int64 and cast back (the sums wrap as the element type's
would). nGraph's kernel accepts ``axis == rank`` and then indexes past the coordinate (undefined
behaviour): refused when the axis is a Constant; a computed axis is passed to ONNX CumSum (int64).
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext
from . import register
from .elementwise import no_boolean

_I32, _I64, _F32 = dtypes.parse("i32"), dtypes.parse("i64"), dtypes.parse("f32")
_NATIVE = frozenset(dtypes.parse(n) for n in ("i32", "i64"))
"""The integer types ONNX Runtime's CumSum kernel takes (other integers are summed in int64)."""


def _stepwise(ctx: OpContext, t: TensorType, axis: str, exclusive: bool, reverse: bool) -> None:
    """A Scan whose body adds one slice in f32 and rounds the sum to f16 / bf16: every partial sum rounded
    to the element type, as nGraph's (ONNX Runtime's f16 CumSum rounds only at the end)."""
    shape = ctx.static_shape(0)
    ax = int(ctx.b.values[axis].reshape(-1)[0]) if axis in ctx.b.values else None
    if ax is None:
        raise ctx.error(f"CumSum on {t.elem_type} needs its axis as a Constant (input 1)")
    ax %= len(shape)
    part = shape[:ax] + shape[ax + 1 :]
    dt, f32 = t.elem_type, _F32.onnx
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["s"], ["s32"], to=f32),
            helper.make_node("Cast", ["x"], ["x32"], to=f32),
            helper.make_node("Add", ["s32", "x32"], ["sum32"]),
            helper.make_node("Cast", ["sum32"], ["s_next"], to=dt.onnx),
            helper.make_node("Identity", ["s" if exclusive else "s_next"], ["y"]),
        ],
        f"{ctx.name}_step",
        [vi("s", dt.onnx, part), vi("x", dt.onnx, part)],
        [vi("s_next", dt.onnx, part), vi("y", dt.onnx, part)],
    )
    zeros = ctx.const(np.zeros(part, dt.numpy), dt, f"{ctx.name}/zeros")
    d = int(reverse)
    ctx.emit_multi(
        "Scan",
        [zeros, ctx.inputs[0]],
        [ctx.b.reserve(f"{ctx.name}/total"), ctx.out()],
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[ax],
        scan_output_axes=[ax],
        scan_input_directions=[d],
        scan_output_directions=[d],
    )


@register("CumSum")
def cumsum(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1, 2)
    t = ctx.types[0]
    dt = t.elem_type
    no_boolean(ctx, dt)
    exclusive = ctx.attr_bool("exclusive", False)
    reverse = ctx.attr_bool("reverse", False)
    rank = ctx.rank(0)
    if rank == 0:
        raise ctx.error("CumSum of a scalar: nGraph's kernel indexes axis 0 of a coordinate that has none (undefined)")
    if len(ctx.inputs) == 1:  # the constructor without an axis: axis 0
        axis = ctx.scalar(0, _I64)
    else:
        at = ctx.elem(1)
        if at not in (_I32, _I64):
            raise ctx.error(f"axis element type must be either int64_t or int32_t but got ({at}).")
        if ctx.value(1) is not None:  # nGraph reads the first element
            ax = (ctx.constant_ints(1, "axis") or [None])[0]
            if ax is None or not -rank <= ax < rank:
                raise ctx.error(f"axis must be in the range [-rank, rank) (axis {ax}, rank {rank})")
            axis = ctx.scalar(ax, _I64)
        elif ctx.shape(1) in ((), (1,)):
            axis = ctx.inputs[1] if at is _I64 else ctx.emit("Cast", [ctx.inputs[1]], to=_I64.onnx)
            if ctx.shape(1) == (1,):
                axis = ctx.emit("Reshape", [axis, ctx.int64s([])])
        else:
            raise ctx.error(f"CumSum's computed axis must be a scalar, got shape {ctx.shape(1)}")
    flags = {"exclusive": int(exclusive), "reverse": int(reverse)}
    if dt.is_real and dt.bits < 32:
        _stepwise(ctx, t, axis, exclusive, reverse)
    elif dt in _NATIVE or dt.is_real:
        ctx.require_onnx(dt, "CumSum")
        ctx.emit("CumSum", [ctx.inputs[0], axis], ctx.out(), **flags)
    else:
        ctx.require_onnx(dt, "Cast")
        wide = ctx.emit("Cast", [ctx.inputs[0]], to=_I64.onnx)
        ctx.emit("Cast", [ctx.emit("CumSum", [wide, axis], **flags)], ctx.out(), to=dt.onnx)
    return [t]
