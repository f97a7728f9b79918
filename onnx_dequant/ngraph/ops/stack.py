"""Stack (v0 fused op): the inputs, of one shape, joined along a new axis ``axis`` (negative counts from
the end of the output's rank): nGraph's decomposition, a Reshape adding the axis to each and Concat;
here Unsqueeze and Concat."""

from __future__ import annotations

from ...contract import Dim, TensorType, merge_shapes
from ..context import OpContext, shape_str
from . import register


@register("Stack")
def stack(ctx: OpContext) -> list[TensorType]:
    if not ctx.inputs:
        raise ctx.error("Stack takes at least one input, got 0")
    t0 = ctx.types[0]
    shape = t0.shape
    for i, t in enumerate(ctx.types):
        if t.elem_type is not t0.elem_type:
            raise ctx.error(f"Argument element types are inconsistent ({t0.elem_type} and {t.elem_type} at input {i})")
        ok, shape = merge_shapes(shape, t.shape)
        if not ok:
            raise ctx.error(
                f"Argument shapes are inconsistent; they must have the same rank, and must have equal dimension "
                f"everywhere except on the concatenation axis ({shape_str(t0.shape)} and {shape_str(t.shape)})"
            )
    rank = ctx.rank(0)
    axis = ctx.attr_int("axis", lo=-(rank + 1), hi=rank)
    if axis < 0:
        axis += rank + 1
    ctx.require_onnx(t0.elem_type, "Unsqueeze", "Concat")
    parts = [ctx.emit("Unsqueeze", [x, ctx.int64s([axis])]) for x in ctx.inputs]
    ctx.emit("Concat", parts, ctx.out(), axis=axis)
    out: list[Dim] = list(shape)  # type: ignore[arg-type]
    out.insert(axis, len(ctx.inputs))
    return [TensorType(t0.elem_type, tuple(out))]
