"""Dot: nGraph's tensor contraction, not ONNX MatMul's batched product.

``Dot(A, B, n)`` sums over the last ``n`` axes of A paired with the first ``n`` axes of B; the result's
shape is ``A.shape[:-n] + B.shape[n:]`` (with ``n`` absent: 0 if either is a scalar, else 1). For ranks
above 2 that differs from ONNX MatMul, so the general case is Reshape -> MatMul -> Reshape.
8/16-bit integers multiply in 64 bits and cast back, which wraps as nGraph's element-type arithmetic does.
"""

from __future__ import annotations

from collections.abc import Callable

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
    out_shape = dot_shape(ctx, n)
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
    else:
        r = contract(ctx, a, b, n, lambda a2, b2, out: ctx.emit("MatMul", [a2, b2], out), final)
    if wide is not None:
        ctx.emit("Cast", [r], ctx.out(), to=dt.onnx)
    return [TensorType(dt, out_shape)]


def dot_shape(ctx: OpContext, n: int, a: int = 0, b: int = 1) -> tuple[Dim, ...]:
    """The shape of ``Dot(input a, input b, n)``, with nGraph's checks of the paired axes."""
    sa, sb = ctx.types[a].shape, ctx.types[b].shape
    ra, rb = ctx.rank(a), ctx.rank(b)
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
    return tuple(sa[: ra - n]) + tuple(sb[n:])  # type: ignore[index]


def contract(
    ctx: OpContext, a: str, b: str, n: int, matmul: Callable[[str, str, str | None], str], out: str | None
) -> str:
    """``Dot(a, b, n)`` (inputs 0 and 1 of the op, n >= 1) through ``matmul(a2, b2, out)`` of a 2-D (or
    1-D) product: MatMul's own ranks directly, any other as Reshape -> product -> Reshape."""
    sa, sb = ctx.types[0].shape, ctx.types[1].shape
    ra, rb = len(sa), len(sb)  # type: ignore[arg-type]
    if n == 1 and 1 <= ra <= 2 and 1 <= rb <= 2:
        return matmul(a, b, out)
    a_outer, k_dims, b_outer = sa[: ra - n], sa[ra - n :], sb[n:]  # type: ignore[index]
    out_shape = tuple(a_outer) + tuple(b_outer)
    if not all(isinstance(d, int) for d in k_dims) or not all(isinstance(d, int) for d in b_outer):
        raise ctx.error(
            f"{ctx.op.op} needs static contracted and arg1 dimensions here (arg0 shape: {shape_str(sa)}, arg1 shape: {shape_str(sb)})"  # noqa: E501  (nGraph's message, whole so it can be searched)
        )
    dyn = [i for i, d in enumerate(a_outer) if not isinstance(d, int)]
    if dyn and dyn != [0]:
        raise ctx.error(f"{ctx.op.op} supports an unknown dimension only as arg0's first (arg0 shape: {shape_str(sa)})")
    kk = numel(k_dims)  # type: ignore[arg-type]
    nb = numel(b_outer)  # type: ignore[arg-type]
    m = -1 if dyn else numel(a_outer)  # type: ignore[arg-type]
    a2 = _reshape0(ctx, a, [m, kk])
    b2 = _reshape0(ctx, b, [kk, nb])
    c = matmul(a2, b2, None)
    target = [(-1 if not isinstance(d, int) else d) for d in out_shape]
    return _reshape0(ctx, c, target, out)


def _reshape0(ctx: OpContext, x: str, shape: list[int], out: str | None = None) -> str:
    if 0 in shape:
        if ctx.b.opset < 14 or -1 in shape:
            raise ctx.error(f"{ctx.op.op} with a zero-sized dimension needs opset 14 or later and a static arg0 shape")
        return ctx.emit("Reshape", [x, ctx.int64s(shape)], out, allowzero=1)
    return ctx.emit("Reshape", [x, ctx.int64s(shape)], out)
