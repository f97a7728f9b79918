"""DynBroadcast and DynPad (v0): Broadcast and Pad whose shape, axes and paddings are inputs (i64, 1-D),
here Constants.

- DynBroadcast(arg, shape, axes) is Broadcast(arg, shape, axes) with v0 Broadcast's checks.
- DynPad(arg, padding_below, padding_above, padding_value) is Pad v0 with those paddings and
  ``pad_mode`` (CONSTANT when absent: nGraph's writer never writes it). No nGraph backend has a DynPad
  kernel (INTERPRETER throws "Unsupported op"): the conversion is the op's definition, Pad's kernel.
"""

from __future__ import annotations

from ... import dtypes
from ...contract import TensorType
from ..context import MAX_DIM, OpContext, shape_str
from . import register
from .pad import pad_with
from .shape import broadcast_to

_I64 = dtypes.parse("i64")


def _i64_vector(ctx: OpContext, i: int, what: str, lo: int) -> list[int]:
    if ctx.elem(i) is not _I64:
        raise ctx.error(f"{ctx.op.op} {what} must have element type i64, but has {ctx.elem(i)}")
    s = ctx.shape(i)
    if s is not None and len(s) != 1:
        raise ctx.error(f"{ctx.op.op} {what} rank must be 1, but has {len(s)}")
    values = ctx.constant_ints(i, what, lo=lo)
    ctx.value(i)  # folded: the initializer goes if no node uses it
    return values


@register("DynBroadcast")
def dyn_broadcast(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3)
    shape = _i64_vector(ctx, 1, "shape", 0)
    axes = tuple(sorted(set(_i64_vector(ctx, 2, "axes", 0))))
    return broadcast_to(ctx, shape, axes)


@register("DynPad")
def dyn_pad(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(4)
    t, tv = ctx.types[0], ctx.types[3]
    if tv.elem_type is not t.elem_type:
        raise ctx.error(f"Padding value and arg type mismatch ({t.elem_type} and {tv.elem_type})")
    if tv.shape is not None and tv.shape != ():
        raise ctx.error(f"DynPad arg is not scalar (rank = 0), but has rank = {len(tv.shape)}")
    below = _i64_vector(ctx, 1, "padding below", -MAX_DIM)
    above = _i64_vector(ctx, 2, "padding above", -MAX_DIM)
    rank = ctx.rank(0)
    if len(below) != rank:
        raise ctx.error(f"Arg and padding below ranks mismatch (arg {shape_str(t.shape)}, padding below {below})")
    if len(above) != rank:
        raise ctx.error(f"Arg and padding above ranks mismatch (arg {shape_str(t.shape)}, padding above {above})")
    return pad_with(ctx, below, above, True)
