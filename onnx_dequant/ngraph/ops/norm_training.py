"""BatchNormTraining and BatchNormTrainingBackprop, as nGraph's reference kernels (``batch_norm.hpp``) compute them,
and LayerNormBackprop, as its decomposition does.

The serialized inputs keep nGraph's old order: BatchNormTraining ``(gamma, beta, input)``, BatchNormTrainingBackprop
``(gamma, beta, input, mean, variance, delta)``; channels are axis 1 of the input.

- BatchNormTraining has three outputs: the normalized input, the batch mean and the batch variance, both per
  channel, the variance *biased* (divided by the element count n, not n - 1), computed from the centered input:
  ``mean = sum(x) / n``, ``var = sum((x - mean)^2) / n``, ``y = (x - mean) * (gamma / sqrt(var + eps)) + beta``.
  ONNX BatchNormalization's training outputs are running statistics instead, so this is a decomposition.
- BatchNormTrainingBackprop has three outputs: d input, d gamma, d beta, from the given mean and variance, with
  nGraph's steps: ``var + eps`` in double (nGraph adds the double ``eps`` to the element-type variance), then
  ``inv = 1 / sqrt(.)``, ``d beta = sum(delta)``, ``g = sum((x - mean) * delta)``, ``d gamma = g * inv``,
  ``d var = (-(gamma * g) * inv) / (2 (var + eps))``, ``d x = (gamma inv delta + (-sum(gamma inv delta)) / n)
  + (x - mean) * (2 d var / n)``.

Sums run in ONNX Runtime's order (nGraph adds in order).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register
from .moments import mean as moments_mean
from .moments import moments, number


def _check(
    ctx: OpContext, data: int, channel_inputs: tuple[int, ...], same_type: tuple[int, ...] = ()
) -> tuple[int, list[int], int]:
    """nGraph's batch-norm checks; returns the channel count, the reduced axes and the elements per channel."""
    dt = ctx.elem(data)
    if not dt.is_real:
        raise ctx.error(f"Input element type must be a floating-point type (got {dt})")
    for i in channel_inputs + same_type:
        if ctx.elem(i) is not dt:
            raise ctx.error(f"Input element types do not match (input {data}: {dt}, input {i}: {ctx.elem(i)})")
    shape = ctx.static_shape(data, "input")
    if len(shape) < 2:
        raise ctx.error(f"Input argument must have rank of at least 2 (input argument shape: {shape_str(shape)})")
    channels = shape[1]
    if channels == 0:
        raise ctx.error(f"Input argument's channel dimension must be non-zero (shape {shape_str(shape)})")
    for i in channel_inputs:
        s = ctx.shape(i)
        if s is not None and (len(s) != 1 or (isinstance(s[0], int) and s[0] != channels)):
            raise ctx.error(
                f"Shape of input {i} {shape_str(s)} does not match the channel count {{{channels}}} "
                f"of the input {shape_str(shape)}"
            )
    axes = [a for a in range(len(shape)) if a != 1]
    return channels, axes, int(np.prod(shape)) // channels


def _eps(ctx: OpContext) -> float:
    return number(ctx, "eps")


def _per_channel(ctx: OpContext, x: str, rank: int) -> str:
    """A ``(C,)`` tensor as ``(1, C, 1, ...)``, to broadcast against the input."""
    return ctx.emit("Unsqueeze", [x, ctx.int64s([0, *range(2, rank)])])


def _channel_sum(ctx: OpContext, x: str, axes: list[int]) -> str:
    return ctx.emit("ReduceSum", [x, ctx.int64s(axes)], keepdims=0)


@register("BatchNormTraining")
def batch_norm_training(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3)
    channels, axes, n = _check(ctx, 2, (0, 1))
    dt = ctx.elem(2)
    rank = len(ctx.shape(2))  # type: ignore[arg-type]
    ctx.require_onnx(dt, "ReduceSum", "Div", "Sub", "Mul", "Add", "Sqrt", "Unsqueeze")
    gamma, beta, x = ctx.inputs
    count = ctx.scalar(n, dt)
    mean = ctx.emit("Div", [_channel_sum(ctx, x, axes), count], ctx.out(1))
    centered = ctx.emit("Sub", [x, _per_channel(ctx, mean, rank)])
    var = ctx.emit("Div", [_channel_sum(ctx, ctx.emit("Mul", [centered, centered]), axes), count], ctx.out(2))
    scale = ctx.emit("Div", [gamma, ctx.emit("Sqrt", [ctx.emit("Add", [var, ctx.scalar(_eps(ctx), dt)])])])
    scaled = ctx.emit("Mul", [centered, _per_channel(ctx, scale, rank)])
    ctx.emit("Add", [scaled, _per_channel(ctx, beta, rank)], ctx.out(0))
    t = ctx.types[2]
    moments = TensorType(dt, (channels,))
    return [t, moments, moments]


@register("BatchNormTrainingBackprop")
def batch_norm_training_backprop(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(6)
    channels, axes, n = _check(ctx, 2, (0, 1, 3, 4), (5,))
    ds = ctx.shape(5)
    if ds != ctx.shape(2):
        raise ctx.error(
            f"Shape of delta does not match the shape of the input data (input data shape: {shape_str(ctx.shape(2))}, delta shape: {shape_str(ds)})."  # noqa: E501  (nGraph's message, whole so it can be searched)
        )
    dt = ctx.elem(2)
    rank = len(ctx.shape(2))  # type: ignore[arg-type]
    ctx.require_onnx(dt, "ReduceSum", "Div", "Sub", "Mul", "Add", "Sqrt", "Neg", "Unsqueeze", "Cast")
    gamma, _beta, x, mean, var, delta = ctx.inputs
    eps = _eps(ctx)
    if dt.name == "f64":
        var_eps = ctx.emit("Add", [var, ctx.scalar(eps, dt)])
    else:  # nGraph's `T var_eps = var + eps` adds in double, then rounds to T
        wide = ctx.emit("Add", [ctx.emit("Cast", [var], to=dtypes.parse("f64").onnx), ctx.scalar(eps, "f64")])
        var_eps = ctx.emit("Cast", [wide], to=dt.onnx)
    one, two, count = ctx.scalar(1, dt), ctx.scalar(2, dt), ctx.scalar(n, dt)
    inv = ctx.emit("Div", [one, ctx.emit("Sqrt", [var_eps])])
    gammad = ctx.emit("Mul", [gamma, inv])
    centered = ctx.emit("Sub", [x, _per_channel(ctx, mean, rank)])
    ctx.emit("ReduceSum", [delta, ctx.int64s(axes)], ctx.out(2), keepdims=0)
    g = _channel_sum(ctx, ctx.emit("Mul", [centered, delta]), axes)
    ctx.emit("Mul", [g, inv], ctx.out(1))
    delta_centered = ctx.emit("Mul", [_per_channel(ctx, gammad, rank), delta])
    delta_mu = ctx.emit("Neg", [_channel_sum(ctx, delta_centered, axes)])
    delta_var = ctx.emit(
        "Div",
        [ctx.emit("Mul", [ctx.emit("Neg", [ctx.emit("Mul", [gamma, g])]), inv]), ctx.emit("Mul", [two, var_eps])],
    )
    two_var_sum = ctx.emit("Div", [ctx.emit("Mul", [two, delta_var]), count])
    mu_over_n = ctx.emit("Div", [delta_mu, count])
    val = ctx.emit("Add", [delta_centered, _per_channel(ctx, mu_over_n, rank)])
    ctx.emit("Add", [val, ctx.emit("Mul", [centered, _per_channel(ctx, two_var_sum, rank)])], ctx.out(0))
    moments = TensorType(dt, (channels,))
    return [ctx.types[2], moments, moments]


@register("LayerNormBackprop")
def layer_norm_backprop(ctx: OpContext) -> list[TensorType]:
    """nGraph's decomposition: inputs ``(data, delta[, mean, variance][, scale])`` as ``use_stats`` and
    ``use_affine`` say; outputs d data, and with ``use_affine`` d scale and d bias."""
    use_stats, use_affine = ctx.attr_bool("use_stats"), ctx.attr_bool("use_affine")
    ctx.expect_inputs(2 + 2 * use_stats + use_affine)
    dt = ctx.elem(0)
    if not dt.is_real:
        raise ctx.error(f"Argument element type must be f16, bf16, f32, f64 or dynamic (got {dt}).")
    for i in range(1, len(ctx.inputs)):
        if ctx.elem(i) is not dt:
            raise ctx.error(f"Argument element types are inconsistent ({dt} and {ctx.elem(i)} at input {i})")
    shape = ctx.static_shape(0, "data")
    rank = len(shape)
    begin = ctx.attr_int("begin_norm_axis", lo=-rank, hi=rank)
    n_axis = begin if begin >= 0 else rank + begin
    if not 0 <= n_axis < rank:
        raise ctx.error("begin_norm_axis is out of range")
    if ctx.static_shape(1, "delta") != shape:
        raise ctx.error(f"Delta shape {shape_str(ctx.shape(1))} must be the data's {shape_str(shape)}")
    eps = number(ctx, "epsilon")
    post = list(range(n_axis, rank))
    pre = list(range(n_axis))
    tail = list(shape[n_axis:])
    n = int(np.prod(tail))
    ctx.require_onnx(dt, "ReduceSum", "Div", "Sub", "Mul", "Add", "Sqrt", "Neg", "Reshape")
    data, delta = ctx.inputs[0], ctx.inputs[1]

    def mean(x: str) -> str:
        return moments_mean(ctx, x, post, n, dt)

    if use_stats:
        kept = list(shape[:n_axis]) + [1] * len(post)
        for i, what in ((2, "mean"), (3, "variance")):
            s = ctx.static_shape(i, what)
            if len(s) != n_axis or int(np.prod(s)) != int(np.prod(shape[:n_axis])):
                raise ctx.error("Mean and/or variance rank is incorrect")
        mu = ctx.emit("Reshape", [ctx.inputs[2], ctx.int64s(kept)])
        var = ctx.emit("Reshape", [ctx.inputs[3], ctx.int64s(kept)])
    else:
        mu, _, var = moments(ctx, data, post, n, dt)
    stddev = ctx.emit("Sqrt", [ctx.emit("Add", [var, ctx.scalar(eps, dt)])])
    norm = ctx.emit("Div", [ctx.emit("Sub", [data, mu]), stddev])
    d_data = ctx.emit("Div", [delta, stddev])
    flattened = False
    if use_affine:
        scale = ctx.inputs[4 if use_stats else 2]
        sshape = ctx.static_shape(4 if use_stats else 2, "scale")
        if len(sshape) not in (len(tail), 1) or int(np.prod(sshape)) != int(np.prod(tail)):
            raise ctx.error("Scale rank is incorrect")
        flattened = len(sshape) != len(tail)
        if flattened:
            scale = ctx.emit("Reshape", [scale, ctx.int64s(tail)])
        d_data = ctx.emit("Mul", [d_data, scale])
    neg = ctx.emit("Neg", [d_data])
    d_mean = mean(neg)
    d_stddev = ctx.emit("Mul", [norm, mean(ctx.emit("Mul", [neg, norm]))])
    ctx.emit("Add", [ctx.emit("Add", [d_data, d_mean]), d_stddev], ctx.out(0))
    t = ctx.types[0]
    if not use_affine:
        return [t]
    affine = (int(np.prod(tail)),) if flattened else tuple(tail)
    for i, x in ((1, ctx.emit("Mul", [delta, norm])), (2, delta)):
        if pre:
            x = ctx.emit("ReduceSum", [x, ctx.int64s(pre)], None if flattened else ctx.out(i), keepdims=0)
        if flattened or not pre:
            ctx.emit("Reshape", [x, ctx.int64s(list(affine))], ctx.out(i))
    return [t, TensorType(dt, affine), TensorType(dt, affine)]
