"""The loss ops of nGraph's opset 0 (after 0.26): SoftmaxCrossEntropy, CrossEntropy and their backprops, each as
nGraph's decomposition computes it, op by op (so a zero probability gives the same ``0 * log(0) = NaN``).

Hard labels (``soft_label`` false) are class indices, one per row, one-hot encoded over the last axis; rows whose
label equals ``ignore_index`` are masked out (SoftmaxCrossEntropy always, CrossEntropy only for
``ignore_index > 0``, as nGraph's code does). A label outside ``[0, classes)`` gives a zero one-hot row (nGraph's
OneHot throws). Soft labels are probabilities of the input's shape (a single column is broadcast).

- SoftmaxCrossEntropy(x, labels) on ``(N, C)``: soft: ``-sum(labels * ((x - max) - log(sum(exp(x - max)))))``;
  hard: ``-sum(onehot * log(softmax(x))) * mask``; shape ``(N, 1)``.
- SoftmaxCrossEntropyBackprop(delta, softmax, labels): soft: ``sum(delta * labels) * softmax - delta * labels``;
  hard: with ``m = delta * onehot * mask``, ``sum(m) * softmax - m``.
- CrossEntropy(x, labels) (x probabilities, any rank, classes last): ``-sum(labels * log(x))`` over the last axis,
  the last axis kept as 1.
- CrossEntropyBackprop(x, labels, delta): ``(-labels * delta) / x`` (times the mask for hard labels).
"""

from __future__ import annotations

import math

import numpy as np

from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register


def _attrs(ctx: OpContext) -> tuple[bool, int]:
    return ctx.attr_bool("soft_label"), ctx.attr_int("ignore_index", lo=-(1 << 63), hi=(1 << 63) - 1)


def _real_input(ctx: OpContext, i: int) -> None:
    dt = ctx.elem(i)
    if not dt.is_real:
        raise ctx.error(f"Argument element type must be f16, bf16, f32, f64 or dynamic (got {dt}).")


def _rows(ctx: OpContext, i: int, what: str) -> tuple[tuple[int, ...], int, int]:
    """The static shape of input ``i``, its row count and its class count (the last axis)."""
    shape = ctx.static_shape(i, what)
    if len(shape) < 1:
        raise ctx.error(f"{ctx.op.op} needs a {what} of rank at least 1, got {shape_str(shape)}")
    classes = shape[-1]
    return shape, math.prod(shape) // classes if classes else 0, classes


def _labels_rows(ctx: OpContext, i: int, rows: int) -> str:
    """Hard labels as ``(rows, 1)``, checked: integers, one per row."""
    lt = ctx.types[i]
    if lt.elem_type.kind not in ("integer", "quantized"):
        raise ctx.error(f"hard labels (soft_label false) must be class indices of an integer type, got {lt.elem_type}")
    shape = ctx.static_shape(i, "labels")
    if math.prod(shape) != rows:
        raise ctx.error(f"hard labels {shape_str(shape)} must hold one class index per row ({rows} rows)")
    return ctx.emit("Reshape", [ctx.inputs[i], ctx.int64s([rows, 1])])


def _one_hot(ctx: OpContext, labels: str, label_index: int, classes: int, dt) -> str:
    lt = ctx.elem(label_index)
    ctx.require_onnx(lt, "Equal")
    hit = ctx.emit("Equal", [labels, ctx.const(np.arange(classes), lt, "classes")])
    return ctx.emit("Cast", [hit], to=dt.onnx)


def _mask(ctx: OpContext, labels: str, label_index: int, ignore: int, dt) -> str:
    lt = ctx.elem(label_index)
    value = np.array(ignore).astype(lt.numpy)  # nGraph's Constant::create converts (wraps) it to the labels' type
    same = ctx.emit("Equal", [labels, ctx.scalar(value, lt)])
    return ctx.emit("Cast", [ctx.emit("Not", [same])], to=dt.onnx)


def _soft_labels(ctx: OpContext, i: int, shape2: tuple[int, int], dt) -> str:
    """Soft labels as ``(rows, classes)`` of the input's type (one column broadcast over the classes)."""
    lt = ctx.types[i]
    lshape = ctx.static_shape(i, "labels")
    rows, classes = shape2
    labels = ctx.inputs[i]
    if lt.elem_type is not dt:
        ctx.require_onnx(lt.elem_type, "Cast")
        labels = ctx.emit("Cast", [labels], to=dt.onnx)
    if math.prod(lshape) == rows and (not lshape or lshape[-1] == 1) and classes != 1:
        labels = ctx.emit("Reshape", [labels, ctx.int64s([rows, 1])])
        return ctx.emit("Expand", [labels, ctx.int64s([rows, classes])])
    if math.prod(lshape) != rows * classes:
        raise ctx.error(f"soft labels {shape_str(lshape)} must match the input's {rows} x {classes} probabilities")
    return ctx.emit("Reshape", [labels, ctx.int64s([rows, classes])])


def _reduce_last(ctx: OpContext, x: str, keep: int = 1) -> str:
    return ctx.emit("ReduceSum", [x, ctx.int64s([1])], keepdims=keep)


@register("SoftmaxCrossEntropy")
def softmax_cross_entropy(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    _real_input(ctx, 0)
    soft, ignore = _attrs(ctx)
    shape, rows, classes = _rows(ctx, 0, "input")
    if len(shape) != 2:
        raise ctx.error(f"SoftmaxCrossEntropy takes a 2-D input (rows, classes), got {shape_str(shape)}")
    dt = ctx.elem(0)
    ctx.require_onnx(dt, "ReduceMax", "Sub", "Exp", "ReduceSum", "Log", "Mul", "Neg", "Softmax")
    x = ctx.inputs[0]
    if soft:
        labels = _soft_labels(ctx, 1, (rows, classes), dt)
        if ctx.b.opset >= 18:
            m = ctx.emit("ReduceMax", [x, ctx.int64s([1])], keepdims=1)
        else:
            m = ctx.emit("ReduceMax", [x], keepdims=1, axes=[1])
        shifted = ctx.emit("Sub", [x, m])
        log_sum = ctx.emit("Log", [_reduce_last(ctx, ctx.emit("Exp", [shifted]))])
        terms = ctx.emit("Mul", [labels, ctx.emit("Sub", [shifted, log_sum])])
        ctx.emit("Neg", [_reduce_last(ctx, terms)], ctx.out())
    else:
        labels = _labels_rows(ctx, 1, rows)
        one_hot = _one_hot(ctx, labels, 1, classes, dt)
        log_p = ctx.emit("Log", [ctx.emit("Softmax", [x], axis=1)])
        xe = ctx.emit("Neg", [_reduce_last(ctx, ctx.emit("Mul", [one_hot, log_p]))])
        ctx.emit("Mul", [xe, _mask(ctx, labels, 1, ignore, dt)], ctx.out())
    return [TensorType(dt, (rows, 1))]


@register("SoftmaxCrossEntropyBackprop")
def softmax_cross_entropy_backprop(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3)
    _real_input(ctx, 0)
    soft, ignore = _attrs(ctx)
    shape, rows, classes = _rows(ctx, 1, "softmax")
    if len(shape) != 2:
        raise ctx.error(f"SoftmaxCrossEntropyBackprop takes a 2-D softmax (rows, classes), got {shape_str(shape)}")
    dt = ctx.elem(0)
    if ctx.elem(1) is not dt:
        raise ctx.error(f"Argument element types are inconsistent ({dt} and {ctx.elem(1)})")
    ctx.require_onnx(dt, "Mul", "ReduceSum", "Sub", "Expand")
    dshape = ctx.static_shape(0, "delta")
    delta = ctx.inputs[0]
    if tuple(dshape) != tuple(shape):
        if math.prod(dshape) != rows:
            raise ctx.error(f"the delta {shape_str(dshape)} must be one value per row or the softmax's shape")
        delta = ctx.emit("Expand", [ctx.emit("Reshape", [delta, ctx.int64s([rows, 1])]), ctx.int64s([rows, classes])])
    if soft:
        if ctx.elem(2) is not dt or ctx.static_shape(2, "labels") != tuple(shape):
            raise ctx.error(f"soft labels must have the softmax's type and shape ({dt} {shape_str(shape)})")
        weighted = ctx.emit("Mul", [delta, ctx.inputs[2]])
    else:
        labels = _labels_rows(ctx, 2, rows)
        weighted = ctx.emit(
            "Mul", [ctx.emit("Mul", [delta, _one_hot(ctx, labels, 2, classes, dt)]), _mask(ctx, labels, 2, ignore, dt)]
        )
    total = _reduce_last(ctx, weighted)
    ctx.emit("Sub", [ctx.emit("Mul", [total, ctx.inputs[1]]), weighted], ctx.out())
    return [TensorType(dt, tuple(shape))]


def _keep_last(shape: tuple[int, ...]) -> tuple[int, ...]:
    """nGraph's expand_shape: the input's shape with its last axis 1 (a 2-D input gives ``(rows, 1)``)."""
    return (*shape[:-1], 1) if len(shape) >= 2 else (shape[0] if shape else 1, 1)


@register("CrossEntropy")
def cross_entropy(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    _real_input(ctx, 0)
    soft, ignore = _attrs(ctx)
    shape, rows, classes = _rows(ctx, 0, "input")
    dt = ctx.elem(0)
    ctx.require_onnx(dt, "Reshape", "Log", "Mul", "ReduceSum", "Neg")
    x = ctx.emit("Reshape", [ctx.inputs[0], ctx.int64s([rows, classes])])
    if soft:
        labels = _soft_labels(ctx, 1, (rows, classes), dt)
    else:
        label_rows = _labels_rows(ctx, 1, rows)
        labels = _one_hot(ctx, label_rows, 1, classes, dt)
    xe = ctx.emit("Neg", [_reduce_last(ctx, ctx.emit("Mul", [labels, ctx.emit("Log", [x])]))])  # (rows, 1)
    if not soft and ignore > 0:  # nGraph returns this (rows, 1) product without restoring the shape
        ctx.emit("Mul", [xe, _mask(ctx, label_rows, 1, ignore, dt)], ctx.out())
        return [TensorType(dt, (rows, 1))]
    out = _keep_last(shape)
    ctx.emit("Reshape", [xe, ctx.int64s(out)], ctx.out())
    return [TensorType(dt, out)]


@register("CrossEntropyBackprop")
def cross_entropy_backprop(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3)
    _real_input(ctx, 0)
    soft, ignore = _attrs(ctx)
    shape, rows, classes = _rows(ctx, 0, "input")
    dt = ctx.elem(0)
    if ctx.elem(2) is not dt:
        raise ctx.error(f"Argument element types are inconsistent ({dt} and {ctx.elem(2)})")
    ctx.require_onnx(dt, "Reshape", "Expand", "Neg", "Mul", "Div")
    x = ctx.emit("Reshape", [ctx.inputs[0], ctx.int64s([rows, classes])])
    dshape = ctx.static_shape(2, "delta")
    if math.prod(dshape) != rows:
        raise ctx.error(f"the delta {shape_str(dshape)} must hold one value per row ({rows} rows)")
    delta = ctx.emit(
        "Expand", [ctx.emit("Reshape", [ctx.inputs[2], ctx.int64s([rows, 1])]), ctx.int64s([rows, classes])]
    )
    mask = None
    if soft:
        if ctx.elem(1) is not dt:
            raise ctx.error(f"soft labels must have the input's element type ({dt}), got {ctx.elem(1)}")
        labels = _soft_labels(ctx, 1, (rows, classes), dt)
    else:
        label_rows = _labels_rows(ctx, 1, rows)
        labels = _one_hot(ctx, label_rows, 1, classes, dt)
        if ignore > 0:
            mask = _mask(ctx, label_rows, 1, ignore, dt)
    grad = ctx.emit("Div", [ctx.emit("Mul", [ctx.emit("Neg", [labels]), delta]), x])
    if mask is not None:
        grad = ctx.emit("Mul", [grad, mask])
    ctx.emit("Reshape", [grad, ctx.int64s(list(shape))], ctx.out())
    return [TensorType(dt, tuple(shape))]
