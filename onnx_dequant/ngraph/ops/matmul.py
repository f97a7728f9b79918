"""MatMul (``transpose_a`` / ``transpose_b``, NumPy's batched rules), BatchMatMul (rank 3) and
BatchMatMulTranspose (rank 3, each side optionally transposed): ONNX MatMul.

Float products are summed in ONNX Runtime's order (nGraph sums in index order): they agree up to
rounding. 8/16-bit integers multiply in 64 bits and are cast back (the wrapped result nGraph computes
in the element type), as Dot.
"""

from __future__ import annotations

from ...contract import TensorType
from ..context import OpContext, accumulator, shape_str
from . import register
from .elementwise import broadcast_shapes


def _matmul(ctx: OpContext, a: str, b: str, ta: tuple, tb: tuple) -> list[TensorType]:
    dt = ctx.elem(0)
    if ctx.elem(1) is not dt:
        raise ctx.error(f"Arguments do not have the same element type ({dt} and {ctx.elem(1)})")
    if dt.kind == "boolean":
        raise ctx.error("MatMul on boolean is not supported")
    ka = ta[-1] if len(ta) >= 1 else None
    kb = tb[-2] if len(tb) >= 2 else tb[0]
    if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
        raise ctx.error(f"Incompatible matrix dimensions ({shape_str(ta)} and {shape_str(tb)})")
    batch = broadcast_shapes(tuple(ta[:-2]), tuple(tb[:-2]))
    if batch is False:
        raise ctx.error(f"Batch dimensions do not broadcast ({shape_str(ta)} and {shape_str(tb)})")
    shape = tuple(batch or ()) + ((ta[-2],) if len(ta) >= 2 else ()) + ((tb[-1],) if len(tb) >= 2 else ())
    wide = accumulator(dt)
    ctx.require_onnx(wide or dt, "MatMul")
    if wide is None:
        ctx.emit("MatMul", [a, b], ctx.out())
    else:
        y = ctx.emit("MatMul", [ctx.emit("Cast", [a], to=wide.onnx), ctx.emit("Cast", [b], to=wide.onnx)])
        ctx.emit("Cast", [y], ctx.out(), to=dt.onnx)
    return [TensorType(dt, shape)]


def _transposed(ctx: OpContext, i: int, flag: str) -> tuple[str, tuple]:
    x, s = ctx.inputs[i], tuple(ctx.types[i].shape)  # type: ignore[arg-type]
    if ctx.attr_bool(flag, False) and len(s) >= 2:
        perm = list(range(len(s) - 2)) + [len(s) - 1, len(s) - 2]
        return ctx.emit("Transpose", [x], perm=perm), s[:-2] + (s[-1], s[-2])
    return x, s


@register("MatMul")
def matmul(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    ctx.rank(0)
    ctx.rank(1)
    a, ta = _transposed(ctx, 0, "transpose_a")
    b, tb = _transposed(ctx, 1, "transpose_b")
    if not ta or not tb:
        raise ctx.error("MatMul of a scalar is not supported")
    return _matmul(ctx, a, b, ta, tb)


@register("BatchMatMul")
def batch_matmul(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    for i in (0, 1):
        if ctx.rank(i) != 3:
            raise ctx.error(f"Input {i} must have rank 3 (got shape {shape_str(ctx.shape(i))})")
    return _matmul(ctx, ctx.inputs[0], ctx.inputs[1], tuple(ctx.shape(0)), tuple(ctx.shape(1)))  # type: ignore[arg-type]


@register("BatchMatMulTranspose")
def batch_matmul_transpose(ctx: OpContext) -> list[TensorType]:
    """A later nGraph's fused op (``op/batch_mat_mul_transpose.cpp``): each batch's matrices transposed
    as ``transpose_0`` / ``transpose_1`` say, then multiplied, batch by batch (rank 3, equal batches)."""
    ctx.expect_inputs(2)
    if ctx.elem(0) is not ctx.elem(1):
        raise ctx.error("Inputs arg0 and arg1 must have compatible element type.")
    for i in (0, 1):
        if ctx.rank(i) != 3:
            raise ctx.error(f"Input arg{i} shape must have rank 3, got {shape_str(ctx.shape(i))}.")
    a, ta = _transposed(ctx, 0, "transpose_0")
    b, tb = _transposed(ctx, 1, "transpose_1")
    if isinstance(ta[0], int) and isinstance(tb[0], int) and ta[0] != tb[0]:
        raise ctx.error("Batch size dimensions are not equal while creating BatchMatMulTranspose.")
    if isinstance(ta[2], int) and isinstance(tb[1], int) and ta[2] != tb[1]:
        raise ctx.error("Product dimensions are not equal while creating BatchMatMulTranspose.")
    return _matmul(ctx, a, b, ta, tb)
