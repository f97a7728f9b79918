"""Dot: nGraph's tensor contraction, not ONNX MatMul's batched product.

``Dot(A, B, n)`` sums over the last ``n`` axes of A paired with the first ``n`` axes of B; the result's
shape is ``A.shape[:-n] + B.shape[n:]`` (with ``n`` absent: 0 if either is a scalar, else 1). For ranks
above 2 that differs from ONNX MatMul, so the general case is Reshape -> MatMul -> Reshape.
8/16-bit integers multiply in 64 bits and cast back, which wraps as nGraph's element-type arithmetic does.
"""

from __future__ import annotations

from ...contract import Dim, TensorType
from ..context import OpContext, accumulator, numel, shape_str
from . import register


@register("Dot")
def dot(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    ta, tb = ctx.types
    if ta.elem_type is not tb.elem_type:
        raise ctx.error(
            f"Arguments do not have the same element type (arg0 element type: {ta.elem_type}, arg1 element type: {tb.elem_type})"  # noqa: E501  (nGraph's message, whole so it can be searched)
        )
    dt = ta.elem_type
    if dt.kind == "boolean":
        raise ctx.error("Dot on boolean is not supported")
    ra, rb = ctx.rank(0), ctx.rank(1)
    n = ctx.attr_int("reduction_axes_count", 0 if ra == 0 or rb == 0 else 1)
    sa, sb = ta.shape, tb.shape
    if n > ra or n > rb:
        raise ctx.error(
            f"Reduction axes count ({n}) is too large (arg0 shape: {shape_str(sa)}, arg1 shape: {shape_str(sb)})"
        )
    for i in range(n):
        da, db = sa[ra - n + i], sb[i]  # type: ignore[index]
        if isinstance(da, int) and isinstance(db, int) and da != db:
            raise ctx.error(
                f"Paired axes (axis {ra - n + i} from arg0, axis {i} from arg1) do not have same length "
                f"(arg0 shape: {shape_str(sa)}, arg1 shape: {shape_str(sb)}, reduction axes count: {n})"
            )
    a_outer, k_dims, b_outer = sa[: ra - n], sa[ra - n :], sb[n:]  # type: ignore[index]
    out_shape: tuple[Dim, ...] = tuple(a_outer) + tuple(b_outer)
    a, b = ctx.inputs
    wide = accumulator(dt)
    if wide is not None:
        ctx.require_onnx(dt, "Cast")
        a = ctx.emit("Cast", [a], to=wide.onnx)
        b = ctx.emit("Cast", [b], to=wide.onnx)
    final = ctx.out() if wide is None else None
    ctx.require_onnx(wide or dt, "Mul" if n == 0 and (ra == 0 or rb == 0) else "MatMul")

    if n == 0 and (ra == 0 or rb == 0):
        if dt.is_real:  # nGraph sums each product into +0: a -0 product gives +0
            ctx.require_onnx(dt, "Add")
            r = ctx.emit("Add", [ctx.emit("Mul", [a, b]), ctx.scalar(0, dt)], final)
        else:
            r = ctx.emit("Mul", [a, b], final)
    elif n == 1 and ra <= 2 and rb <= 2 and ra >= 1 and rb >= 1:
        r = ctx.emit("MatMul", [a, b], final)
    else:
        k = [d for d in k_dims]
        if not all(isinstance(d, int) for d in k) or not all(isinstance(d, int) for d in b_outer):
            raise ctx.error(
                f"Dot needs static contracted and arg1 dimensions here (arg0 shape: {shape_str(sa)}, arg1 shape: {shape_str(sb)})"  # noqa: E501  (nGraph's message, whole so it can be searched)
            )
        dyn = [i for i, d in enumerate(a_outer) if not isinstance(d, int)]
        if dyn and dyn != [0]:
            raise ctx.error(f"Dot supports an unknown dimension only as arg0's first (arg0 shape: {shape_str(sa)})")
        kk = numel(k)  # type: ignore[arg-type]
        nb = numel(b_outer)  # type: ignore[arg-type]
        m = -1 if dyn else numel(a_outer)  # type: ignore[arg-type]
        a2 = _reshape0(ctx, a, [m, kk])
        b2 = _reshape0(ctx, b, [kk, nb])
        c = ctx.emit("MatMul", [a2, b2])
        target = [(-1 if not isinstance(d, int) else d) for d in out_shape]
        r = _reshape0(ctx, c, target, final)
    if wide is not None:
        ctx.emit("Cast", [r], ctx.out(), to=dt.onnx)
    return [TensorType(dt, out_shape)]


def _reshape0(ctx: OpContext, x: str, shape: list[int], out: str | None = None) -> str:
    if 0 in shape:
        if ctx.b.opset < 14 or -1 in shape:
            raise ctx.error("Dot with a zero-sized dimension needs opset 14 or later and a static arg0 shape")
        return ctx.emit("Reshape", [x, ctx.int64s(shape)], out, allowzero=1)
    return ctx.emit("Reshape", [x, ctx.int64s(shape)], out)
