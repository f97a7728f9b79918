"""LayerNorm and MVN (op_version 0 fused ops): their decompositions, op for op, with nGraph's ``builder::mean``
(``sum(x) / n``) and ``builder::variance`` (``sum((x - mean)^2) / n``, from the centered data, biased).

- LayerNorm normalizes over the axes from ``begin_norm_axis`` (negative counts from the end) to the last:
  ``(x - mean) / sqrt(var + epsilon)``, then ``* scale + bias`` with ``use_affine`` (scale and bias of the
  normalized axes' shape, or flattened to one axis); ``keep_stats`` adds the mean and the variance (shape: the
  leading axes) as outputs 1 and 2.
- MVN normalizes over ``reduction_axes``: ``x - mean``, and with ``normalize_variance``
  ``(x - mean) / (sqrt(var) + eps)`` (epsilon added *after* the square root). Empty ``reduction_axes`` means
  every axis, as nGraph's ``across_channels`` constructor (its deserializer from v0.29 on; 0.26's read
  ``normalize_variance`` for ``across_channels`` and ignored the axes).

The constants (``n``, epsilon) are in the element type, as nGraph creates them. Sums are ONNX Runtime's
ReduceSum (nGraph's reference adds in order with Kahan compensation: budgets in the golden cases).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import MAX_DIM, OpContext, shape_str
from . import register


def mean(ctx: OpContext, x: str, axes: list[int], n: int, dt: dtypes.DType) -> str:
    """``builder::mean`` over ``axes`` (``n`` elements each), the reduced axes kept (size 1)."""
    return ctx.emit("Div", [ctx.emit("ReduceSum", [x, ctx.int64s(axes)], keepdims=1), ctx.scalar(n, dt)])


def moments(ctx: OpContext, x: str, axes: list[int], n: int, dt: dtypes.DType) -> tuple[str, str, str]:
    """(mean, x - mean, biased variance), the means with the reduced axes kept."""
    mu = mean(ctx, x, axes, n, dt)
    centered = ctx.emit("Sub", [x, mu])
    return mu, centered, mean(ctx, ctx.emit("Mul", [centered, centered]), axes, n, dt)


def number(ctx: OpContext, key: str) -> float:
    """A number attribute (nGraph reads it as a double)."""
    v = ctx.raw(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ctx.error(f"'{key}' must be a number, got {v!r:.40}")
    return float(v)


def _real(ctx: OpContext, dt: dtypes.DType) -> None:
    if not dt.is_real:
        raise ctx.error(f"Argument element type must be f16, bf16, f32, f64 or dynamic (got {dt}).")


@register("LayerNorm")
def layer_norm(ctx: OpContext) -> list[TensorType]:
    keep_stats, use_affine = ctx.attr_bool("keep_stats"), ctx.attr_bool("use_affine")
    ctx.expect_inputs(3 if use_affine else 1)
    dt = ctx.elem(0)
    _real(ctx, dt)
    shape = ctx.static_shape(0, "data")
    rank = len(shape)
    begin = ctx.attr_int("begin_norm_axis", lo=-MAX_DIM)
    n_axis = begin if begin >= 0 else rank + begin
    if not 0 <= n_axis < rank:
        raise ctx.error("begin_norm_axis is out of range")
    eps = number(ctx, "epsilon")
    post = list(range(n_axis, rank))
    tail = list(shape[n_axis:])
    n = int(np.prod(tail))
    ctx.require_onnx(dt, "ReduceSum", "Div", "Sub", "Mul", "Add", "Sqrt", "Reshape")
    x = ctx.inputs[0]
    mu, centered, var = moments(ctx, x, post, n, dt)
    stddev = ctx.emit("Sqrt", [ctx.emit("Add", [var, ctx.scalar(eps, dt)])])
    if use_affine:
        for i in (1, 2):
            if ctx.elem(i) is not dt:
                raise ctx.error(f"Argument element types are inconsistent ({dt} and {ctx.elem(i)} at input {i})")
        sshape, bshape = ctx.static_shape(1, "scale"), ctx.static_shape(2, "bias")
        if len(sshape) != len(bshape) or len(sshape) not in (len(tail), 1):
            raise ctx.error("Scale and/or bias rank is incorrect")
        for s, what in ((sshape, "Scale"), (bshape, "Bias")):
            if list(s) != tail and list(s) != [n]:
                raise ctx.error(
                    f"{what} shape {shape_str(s)} must be the normalized axes' {shape_str(tuple(tail))} "
                    f"or {{{n}}} (data shape {shape_str(shape)}, begin_norm_axis {begin})"
                )
        affine = [ctx.inputs[i] for i in (1, 2)]
        if len(sshape) != len(tail):
            affine = [ctx.emit("Reshape", [a, ctx.int64s(tail)]) for a in affine]
        norm = ctx.emit("Div", [centered, stddev])
        ctx.emit("Add", [ctx.emit("Mul", [norm, affine[0]]), affine[1]], ctx.out(0))
    else:
        ctx.emit("Div", [centered, stddev], ctx.out(0))
    if not keep_stats:
        return [ctx.types[0]]
    stats = list(shape[:n_axis])
    for i, v in ((1, mu), (2, var)):
        ctx.emit("Reshape", [v, ctx.int64s(stats)], ctx.out(i))
    st = TensorType(dt, tuple(stats))
    return [ctx.types[0], st, st]


@register("MVN")
def mvn(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    dt = ctx.elem(0)
    if not dt.is_real:
        raise ctx.error(f"MVN on {dt} is not supported (real types only)")
    shape = ctx.static_shape(0, "data")
    rank = len(shape)
    axes = list(ctx.attr_axes("reduction_axes", ()))
    if not axes:  # nGraph's across_channels constructor: axis 0 and every axis from 1 on
        axes = list(range(rank))
    if axes[-1] >= rank:
        raise ctx.error(f"Reduction axis ({axes[-1]}) is out of bounds (argument shape: {shape_str(shape)})")
    normalize = ctx.attr_bool("normalize_variance")
    eps = number(ctx, "eps")
    n = int(np.prod([shape[a] for a in axes]))
    ctx.require_onnx(dt, "ReduceSum", "Div", "Sub", "Mul", "Add", "Sqrt")
    if not normalize:
        ctx.emit("Sub", [ctx.inputs[0], mean(ctx, ctx.inputs[0], axes, n, dt)], ctx.out(0))
        return [ctx.types[0]]
    _, centered, var = moments(ctx, ctx.inputs[0], axes, n, dt)
    denom = ctx.emit("Add", [ctx.emit("Sqrt", [var]), ctx.scalar(eps, dt)])
    ctx.emit("Div", [centered, denom], ctx.out(0))
    return [ctx.types[0]]
