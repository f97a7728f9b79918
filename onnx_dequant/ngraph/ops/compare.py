"""Comparisons, logical ops and Select.

Comparisons (v0 and v1 names: GreaterEq / GreaterEqual, LessEq / LessEqual) give booleans with C++'s
NaN rules (every comparison with NaN false, NotEqual true), which are ONNX's. Logical ops (v0 And, Or,
Xor, Not; v1 LogicalAnd, LogicalOr, LogicalXor, LogicalNot) take booleans only, as nGraph. Broadcasting
is each era's (v0: none unless ``auto_broadcast`` says; v1: numpy). Select v0 takes three inputs of one
shape; v1 broadcasts them (numpy). All become the ONNX op of the same meaning.
"""

from __future__ import annotations

from ... import dtypes
from ...contract import TensorType, merge_shapes
from ..context import OpContext, shape_str
from . import register
from .elementwise import binary_inputs, broadcast_shapes, read_autob

_BOOL = dtypes.parse("boolean")


def _comparison(onnx_op: str):
    def convert(ctx: OpContext) -> list[TensorType]:
        a, b, t = binary_inputs(ctx)
        ctx.require_onnx(t.elem_type, onnx_op)
        ctx.emit(onnx_op, [a, b], ctx.out())
        return [TensorType(_BOOL, t.shape)]

    return convert


for _names, _onnx in (
    (("Equal",), "Equal"),
    (("Greater",), "Greater"),
    (("Less",), "Less"),
):
    register(*_names, versions=(0, 1))(_comparison(_onnx))
register("GreaterEq")(_comparison("GreaterOrEqual"))
register("GreaterEqual", versions=(1,))(_comparison("GreaterOrEqual"))
register("LessEq")(_comparison("LessOrEqual"))
register("LessEqual", versions=(1,))(_comparison("LessOrEqual"))


@register("NotEqual", versions=(0, 1))
def not_equal(ctx: OpContext) -> list[TensorType]:
    a, b, t = binary_inputs(ctx)
    ctx.require_onnx(t.elem_type, "Equal")
    ctx.emit("Not", [ctx.emit("Equal", [a, b])], ctx.out())
    return [TensorType(_BOOL, t.shape)]


def _boolean_only(ctx: OpContext, t: TensorType) -> None:
    if t.elem_type is not _BOOL:
        raise ctx.error(
            f"Operands for logical operators must have boolean element type but have element type {t.elem_type}"
        )  # noqa: E501  (nGraph's message, whole so it can be searched)


def _logical(onnx_op: str):
    def convert(ctx: OpContext) -> list[TensorType]:
        a, b, t = binary_inputs(ctx)
        _boolean_only(ctx, t)
        ctx.emit(onnx_op, [a, b], ctx.out())
        return [t]

    return convert


for _v0, _v1, _onnx in (("And", "LogicalAnd", "And"), ("Or", "LogicalOr", "Or"), ("Xor", "LogicalXor", "Xor")):
    register(_v0)(_logical(_onnx))
    register(_v1, versions=(1,))(_logical(_onnx))


@register("Not")
@register("LogicalNot", versions=(1,))
def not_(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    t = ctx.types[0]
    _boolean_only(ctx, t)
    ctx.emit("Not", ctx.inputs, ctx.out())
    return [t]


@register("Select", versions=(0, 1))
def select(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3)
    tc, ta, tb = ctx.types
    if tc.elem_type is not _BOOL:
        raise ctx.error(f"Argument 0 does not have boolean element type (element type: {tc.elem_type})")
    if ta.elem_type is not tb.elem_type:
        raise ctx.error(f"Argument 1 and 2 element types are inconsistent ({ta.elem_type} and {tb.elem_type})")
    kind = "none" if ctx.op.version == 0 and not ctx.has("auto_broadcast") else read_autob(ctx)[0]
    shapes = (tc.shape, ta.shape, tb.shape)
    if kind == "none":
        ok, shape = merge_shapes(tc.shape, ta.shape)
        if ok:
            ok, shape = merge_shapes(shape, tb.shape)
    elif kind == "numpy":
        shape = broadcast_shapes(tc.shape, ta.shape)
        if shape is not False:
            shape = broadcast_shapes(shape, tb.shape)
        ok = shape is not False
    else:
        raise ctx.error("Select supports NONE and NUMPY broadcasting only (got PDPD)")
    if not ok:
        raise ctx.error(f"Argument shapes are inconsistent ({', '.join(shape_str(s) for s in shapes)})")
    ctx.require_onnx(ta.elem_type, "Where")
    ctx.emit("Where", ctx.inputs, ctx.out())
    return [TensorType(ta.elem_type, shape)]
