"""The detection ops of opset 1: NonMaxSuppression (v1, v3), PriorBox, PriorBoxClustered and RegionYolo (v0)
converted; PSROIPooling, DeformablePSROIPooling, DetectionOutput and Proposal refused (``DETECTION_REFUSED``).

- NonMaxSuppression: ONNX NonMaxSuppression, which selects as nGraph's op defines it (greedy per batch and
  class, a box dropped when its IOU with a selected one is greater than ``iou_threshold``; ``center`` is ONNX's
  ``center_point_box``; f16 / bf16 boxes and scores widened to float32), with three differences made good
  around it: nGraph keeps a score equal to ``score_threshold`` (ONNX: strictly greater; the threshold is moved
  one float32 step down); with ``sort_result_descending`` the triplets are sorted by score across batches and
  classes (a stable TopK on the scores gathered back: ties keep batch, class, box order); and nGraph's output
  has a fixed number of rows, ``min(num_boxes, max_output_boxes_per_class * num_classes)``, the triplets first
  and ``-1`` after them (cut to that many if more were selected). v3's ``output_type`` i32 is a Cast.
- PriorBox / PriorBoxClustered: the priors depend only on the layer's and image's height and width; where those
  are known when converting (Constants, or the shapes of statically shaped tensors) the output is an
  initializer computed by ``priors.py``.
- RegionYolo: Slice / Sigmoid / Softmax / Concat on the input viewed as (N, regions, entries, H, W).
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from ...contract import TensorType
from .. import priors
from ..context import MAX_DIM, OpContext, shape_str
from ..folding import static_value
from . import register

_I64, _F32 = dtypes.parse("i64"), dtypes.parse("f32")


def _scalar_input(ctx: OpContext, i: int, what: str) -> None:
    s = ctx.shape(i)
    if s is not None and len(s) != 0:
        raise ctx.error(f"Expected a scalar for the '{what}' input. Got: {shape_str(s)}")


def _one(ctx: OpContext, value: float) -> str:
    """A threshold for ONNX's NonMaxSuppression: one float32 in a 1-D tensor, as ONNX's own test data give
    it (ONNX Runtime takes a 0-D one too; onnx's reference evaluator reads element [0] and refuses it)."""
    return ctx.b.const(np.array([value], np.float32), _F32, "threshold")


@register("NonMaxSuppression", versions=(1, 3))
def non_max_suppression(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2, 3, 4, 5)
    encoding = ctx.raw("box_encoding", "corner")
    if encoding not in ("corner", "center"):
        raise ctx.error(f'\'box_encoding\' must be "corner" or "center", got {encoding!r:.40}')
    descending = ctx.attr_bool("sort_result_descending", True)
    out_type = ctx.attr_type("output_type", _I64) if ctx.op.version >= 3 else _I64
    if out_type.name not in ("i32", "i64"):
        raise ctx.error("Output type must be i32 or i64")
    bs, ss = ctx.shape(0), ctx.shape(1)
    if bs is None or len(bs) != 3:
        raise ctx.error(f"Expected a 3D tensor for the 'boxes' input. Got: {shape_str(bs)}")
    if ss is None or len(ss) != 3:
        raise ctx.error(f"Expected a 3D tensor for the 'scores' input. Got: {shape_str(ss)}")
    for i, what in enumerate(("max_output_boxes_per_class", "iou_threshold", "score_threshold"), 2):
        if i < len(ctx.inputs):
            _scalar_input(ctx, i, what)
    if not _same(bs[0], ss[0]):
        raise ctx.error(
            f"The first dimension of both 'boxes' and 'scores' must match. Boxes: {_dim(bs[0])}; Scores: {_dim(ss[0])}"
        )
    if not _same(bs[1], ss[2]):
        raise ctx.error(
            "'boxes' and 'scores' input shapes must match at the second and third dimension respectively. "
            f"Boxes: {_dim(bs[1])}; Scores: {_dim(ss[2])}"
        )
    if bs[2] != 4:
        raise ctx.error(f"The last dimension of the 'boxes' input must be equal to 4. Got:{_dim(bs[2])}")
    data = []
    for i in (0, 1):  # f16 and bf16 widen exactly (IOU then in float32, as the op's CPU kernel computes it)
        dt = ctx.elem(i)
        if dt.name not in ("f32", "f16", "bf16"):
            raise ctx.error(
                f"NonMaxSuppression on {dt} has no ONNX counterpart (ONNX's takes float32: only f16 and bf16 "
                "widen to it exactly)"
            )
        data.append(ctx.inputs[i] if dt is _F32 else ctx.emit("Cast", [ctx.inputs[i]], to=_F32.onnx))
    for i, kinds in ((2, ("integer", "quantized")), (3, ("real",)), (4, ("real",))):
        if i < len(ctx.inputs) and ctx.elem(i).kind not in kinds:
            raise ctx.error(f"NonMaxSuppression's input {i} must be {kinds[0]}, got {ctx.elem(i)}")

    # max_output_boxes_per_class: 0 (select nothing) when absent
    max_out: int | None = 0
    max_name = ctx.int64s([0])
    if len(ctx.inputs) > 2:
        v = ctx.value(2)
        if v is None:
            max_out = None
            max_name = ctx.inputs[2] if ctx.elem(2) is _I64 else ctx.emit("Cast", [ctx.inputs[2]], to=_I64.onnx)
            max_name = ctx.emit("Reshape", [max_name, ctx.int64s([1])])
        else:
            max_out = int(v.reshape(-1)[0])
            if max_out < 0:
                raise ctx.error(f"max_output_boxes_per_class must not be negative, got {max_out}")
            max_name = ctx.int64s([max_out])
    iou = None
    if len(ctx.inputs) > 3:
        v = ctx.value(3)
        if v is None:
            iou = ctx.inputs[3] if ctx.elem(3) is _F32 else ctx.emit("Cast", [ctx.inputs[3]], to=_F32.onnx)
        else:
            t = float(np.float32(v.reshape(-1)[0]))
            if not 0 <= t <= 1:
                raise ctx.error(f"NonMaxSuppression with iou_threshold {t} has no ONNX counterpart (ONNX's: [0, 1])")
            iou = _one(ctx, t)
    score_t = 0.0
    if len(ctx.inputs) > 4:
        v = ctx.value(4)
        if v is None:
            raise ctx.error(
                "NonMaxSuppression needs its score_threshold (input 4) as a Constant (nGraph keeps a "
                "score equal to it, ONNX's NonMaxSuppression drops it: the threshold is moved one step)"
            )
        score_t = float(np.float32(v.reshape(-1)[0]))
    nms_inputs = [*data, max_name, iou or _one(ctx, 0.0)]
    # -inf or NaN: no score is below it, every box is a candidate (NaN scores too): ONNX without a threshold;
    # else score >= t is score > (t one float32 step down)
    if not (score_t == -math.inf or math.isnan(score_t)):
        below = np.nextafter(np.float32(score_t), np.float32(-np.inf))
        nms_inputs.append(_one(ctx, below))
    center = int(encoding == "center")
    sel = ctx.emit("NonMaxSuppression", nms_inputs, center_point_box=center)
    if descending:
        picked = ctx.emit("GatherND", [data[1], sel])
        k = ctx.emit("Shape", [picked])
        order = ctx.b.reserve(f"{ctx.name}/order")
        ctx.emit_multi("TopK", [picked, k], [ctx.b.reserve(f"{ctx.name}/sorted"), order], axis=0, largest=1, sorted=1)
        sel = ctx.emit("Gather", [sel, order], axis=0)
    rows = _rows(ctx, bs[1], ss[1], max_out, max_name)
    fill = ctx.emit("Expand", [ctx.scalar(np.int64(-1), _I64), ctx.emit("Concat", [rows[1], ctx.int64s([3])], axis=0)])
    padded = ctx.emit("Concat", [sel, fill], axis=0)
    if out_type is _I64:
        ctx.emit("Slice", [padded, ctx.int64s([0]), rows[1], ctx.int64s([0])], ctx.out())
    else:
        cut = ctx.emit("Slice", [padded, ctx.int64s([0]), rows[1], ctx.int64s([0])])
        ctx.emit("Cast", [cut], ctx.out(), to=out_type.onnx)
    return [TensorType(out_type, (rows[0], 3))]


def _same(a: object, b: object) -> bool:
    return not (isinstance(a, int) and isinstance(b, int) and a != b)


def _dim(d: object) -> str:
    return str(d) if isinstance(d, int) else "?"


def _rows(ctx: OpContext, boxes: object, classes: object, max_out: int | None, max_name: str) -> tuple[int | None, str]:
    """The output's row count, ``min(num_boxes, max_output_boxes_per_class * num_classes)``: static where
    nGraph's shape inference knows it, and as a 1-element int64 tensor."""
    if isinstance(boxes, int) and isinstance(classes, int) and max_out is not None:
        n = min(boxes, max_out * classes)
        return n, ctx.int64s([n])
    shape = ctx.emit("Shape", [ctx.inputs[1]])
    num_boxes = ctx.emit("Gather", [shape, ctx.int64s([2])], axis=0)
    num_classes = ctx.emit("Gather", [shape, ctx.int64s([1])], axis=0)
    return None, ctx.emit("Min", [num_boxes, ctx.emit("Mul", [max_name, num_classes])])


# ---------------------------------------------------------------- PriorBox, PriorBoxClustered


def _hw(ctx: OpContext, i: int, what: str) -> tuple[int, int]:
    dt = ctx.elem(i)
    if dt.kind not in ("integer", "quantized"):
        raise ctx.error(f"{what} shape input must be an integral number, but is: {dt}")
    v = static_value(ctx.b, ctx.inputs[i])
    if v is None:
        raise ctx.error(
            f"{ctx.op.op} needs its {what} shape (input {i}) known when converting: a Constant, or the shape of "
            "a tensor whose shape is static (the priors are then an initializer; ONNX has no PriorBox op)"
        )
    ctx.value(i)  # folded: the initializer goes if no node uses it
    flat = [int(x) for x in v.reshape(-1).tolist()]
    if i == 0 and len(flat) != 2:
        raise ctx.error(f"Layer shape must have rank 2 (got {len(flat)} values)")
    if len(flat) < 2 or min(flat[:2]) < 0:
        raise ctx.error(f"the {what} shape must hold a height and a width >= 0, got {flat[:4]}")
    return flat[0], flat[1]


def _shapes(ctx: OpContext) -> tuple[int, int, int, int]:
    ctx.expect_inputs(2)
    r0, r1 = ctx.shape(0), ctx.shape(1)
    if r0 is not None and r1 is not None and len(r0) != len(r1):
        raise ctx.error(f"layer shape input rank {len(r0)} must match image shape input rank {len(r1)}")
    return (*_hw(ctx, 0, "layer"), *_hw(ctx, 1, "image"))


def _variances(ctx: OpContext, key: str) -> list[float]:
    v = ctx.attr_floats(key, [])
    if len(v) not in (0, 1, 4):
        raise ctx.error(f"'{key}' must hold 0, 1 or 4 values, got {len(v)}")
    return v


def _emit_priors(ctx: OpContext, h: int, w: int, per_cell: int, compute) -> list[TensorType]:
    if not priors.size_ok(4, h, w, per_cell):
        raise ctx.error(f"{ctx.op.op}: {h} x {w} cells of {per_cell} priors is too large to write out")
    ctx.b.initializer(ctx.out(), compute(), _F32)
    return [TensorType(_F32, (2, 4 * h * w * per_cell))]


@register("PriorBox")
def prior_box(ctx: OpContext) -> list[TensorType]:
    a = priors.PriorBoxAttrs(
        **{k: ctx.attr_floats(f"attrs.{k}", []) for k in ("min_size", "max_size", "aspect_ratio", "density")},
        fixed_ratio=ctx.attr_floats("attrs.fixed_ratio", []),
        fixed_size=ctx.attr_floats("attrs.fixed_size", []),
        clip=ctx.attr_bool("attrs.clip", False),
        flip=ctx.attr_bool("attrs.flip", False),
        step=ctx.attr_float("attrs.step", 1.0),
        offset=ctx.attr_float("attrs.offset", 0.0),
        variance=_variances(ctx, "attrs.variance"),
        scale_all_sizes=ctx.attr_bool("attrs.scale_all_sizes", False),
    )
    if not all(math.isfinite(r) and r > 0 for r in a.aspect_ratio + a.fixed_ratio):
        raise ctx.error(f"aspect and fixed ratios must be positive numbers, got {a.aspect_ratio + a.fixed_ratio}")
    if a.fixed_size and (len(a.density) < len(a.fixed_size) or min(a.density) < 1 or min(a.fixed_size) < 0):
        raise ctx.error(
            "PriorBox with fixed_size needs a density >= 1 for each fixed size and sizes >= 0 "
            f"(fixed_size {a.fixed_size}, density {a.density}; the kernel reads density[s])"
        )
    if not all(math.isfinite(x) and abs(x) < 1 << 24 for x in a.fixed_size + a.density):
        raise ctx.error("fixed_size and density must be finite and below 2^24")
    h, w, ih, iw = _shapes(ctx)
    n = priors.number_of_priors(a)
    if n != priors.kernel_priors(a):
        raise ctx.error(
            f"PriorBox's attributes give {n} priors per cell to the output shape but {priors.kernel_priors(a)} "
            "to the kernel (nGraph's number_of_priors and its kernel disagree): no defined output"
        )
    return _emit_priors(ctx, h, w, n, lambda: priors.prior_box(h, w, ih, iw, a))


@register("PriorBoxClustered")
def prior_box_clustered(ctx: OpContext) -> list[TensorType]:
    a = priors.PriorBoxClusteredAttrs(
        widths=ctx.attr_floats("attrs.widths", []),
        heights=ctx.attr_floats("attrs.heights", []),
        clip=ctx.attr_bool("attrs.clip", False),
        step_widths=ctx.attr_float("attrs.step_widths", 1.0),
        step_heights=ctx.attr_float("attrs.step_heights", 1.0),
        offset=ctx.attr_float("attrs.offset", 0.0),
        variances=_variances(ctx, "attrs.variances"),
    )
    if len(a.widths) != len(a.heights):
        raise ctx.error(f"Size of heights vector {len(a.heights)} doesn't match size of widths vector {len(a.widths)}")
    h, w, ih, iw = _shapes(ctx)
    return _emit_priors(ctx, h, w, len(a.widths), lambda: priors.prior_box_clustered(h, w, ih, iw, a))


# ---------------------------------------------------------------- RegionYolo


@register("RegionYolo")
def region_yolo(ctx: OpContext) -> list[TensorType]:
    """Per batch and region of ``coords + classes + 1`` channels: sigmoid of x and y; Yolo v3 (``do_softmax``
    false, the first ``len(mask)`` regions): sigmoid of the objectness and the class scores; Yolo v2: sigmoid
    of the objectness and a softmax over the classes, the output flattened from ``axis`` to ``end_axis``.
    The sigmoids are computed in float32 (the kernel's ``1.f / (1.f + exp(-x))``), the softmax in the type."""
    ctx.expect_inputs(1)
    t = ctx.types[0]
    dt = t.elem_type
    shape = ctx.static_shape(0)
    if len(shape) != 4 or 0 in shape:
        raise ctx.error(f"RegionYolo needs a non-empty 4-D input (N, C, H, W), got {shape_str(shape)}")
    coords, classes = ctx.attr_int("coords", hi=1 << 20), ctx.attr_int("classes", hi=1 << 20)
    regions = ctx.attr_int("num", hi=1 << 20)
    softmax = ctx.attr_bool("do_softmax", True)
    mask = ctx.attr_ints("mask", [], lo=-MAX_DIM)
    ctx.attr_floats("anchors", [])  # read for its type only: the boxes are decoded later, not here
    if dt.kind != "real":
        raise ctx.error(f"RegionYolo on {dt} is not supported (floating-point types only)")
    ctx.require_onnx(dt, "Softmax", "Cast")
    n, c, h, w = shape
    per = coords + classes + 1
    count = regions if softmax else len(mask)
    if coords < 2 or (c != count * per if softmax else c < count * per):
        raise ctx.error(
            f"RegionYolo: {c} channels do not hold {count} regions of coords + classes + 1 = {per} "
            f"(coords must be >= 2 for x and y)"
        )
    if softmax:
        axis = ctx.attr_int("axis", hi=3)
        end = ctx.attr_int("end_axis", lo=-4, hi=3)
        end += 4 if end < 0 else 0
        if end < axis:
            raise ctx.error(f"RegionYolo: end_axis ({end}) must not come before axis ({axis})")
        out_shape = (*shape[:axis], math.prod(shape[axis : end + 1]), *shape[end + 1 :])
    else:
        out_shape = (n, count * per, h, w)
    x = ctx.inputs[0]
    if c != count * per:
        x = ctx.emit("Slice", [x, ctx.int64s([0]), ctx.int64s([count * per]), ctx.int64s([1])])
    x = ctx.emit("Reshape", [x, ctx.int64s([n, count, per, h, w])])

    def part(lo: int, hi: int) -> str:
        return ctx.emit("Slice", [x, ctx.int64s([lo]), ctx.int64s([hi]), ctx.int64s([2])])

    def sigmoid(v: str) -> str:
        if dt is _F32:
            return ctx.emit("Sigmoid", [v])
        return ctx.emit("Cast", [ctx.emit("Sigmoid", [ctx.emit("Cast", [v], to=_F32.onnx)])], to=dt.onnx)

    pieces = [sigmoid(part(0, 2))]
    if coords > 2:
        pieces.append(part(2, coords))
    if softmax:
        pieces += [sigmoid(part(coords, coords + 1))]
        if classes:
            pieces.append(ctx.emit("Softmax", [part(coords + 1, per)], axis=2))
    else:
        pieces.append(sigmoid(part(coords, per)))
    joined = ctx.emit("Concat", pieces, axis=2) if len(pieces) > 1 else pieces[0]
    ctx.emit("Reshape", [joined, ctx.int64s(list(out_shape))], ctx.out())
    return [TensorType(dt, out_shape)]


# ---------------------------------------------------------------- refused (catalog.REFUSED)

_OUTSIDE = "make the op's inputs the function's Results (the rest converts) and run this step in application code"
DETECTION_REFUSED = {
    "PSROIPooling": (
        "position-sensitive ROI pooling: each output bin pools its own channel group, over whole-pixel windows "
        "('average') or the op's own sub-bin sampling ('bilinear'); ONNX's MaxRoiPool and RoiAlign pool every "
        f"bin from all channels and sample differently, so no ONNX op or short subgraph gives its values: {_OUTSIDE}"
    ),
    "DeformablePSROIPooling": (
        "deformable position-sensitive ROI pooling: bins moved by learned offsets (trans_std, part_size) and "
        f"sampled bilinearly per channel group; ONNX has no deformable or position-sensitive ROI pooling: {_OUTSIDE}"
    ),
    "DetectionOutput": (
        "SSD's whole post-processing: boxes decoded against the priors (code_type, variances), a per-class "
        "top_k before NMS, NMS over +1-pixel areas for unnormalized boxes, keep_top_k across classes, rows "
        "padded with image id -1; ONNX NonMaxSuppression has no +1 areas and no pre-NMS top_k, so only a long "
        f"per-image composite re-implementing the op could match it: {_OUTSIDE} (PriorBox converts)"
    ),
    "Proposal": (
        "Faster R-CNN's region proposals: anchors, deltas decoded with +1 widths, clipping, the min_size filter, "
        "pre_nms_topn, NMS over +1-pixel areas (unless framework is tensorflow), post_nms_topn rows padded; ONNX "
        "NonMaxSuppression computes areas without the +1 and has no pre-NMS top-n, so its selection differs: "
        f"{_OUTSIDE}"
    ),
}
"""Detection ops with no exact standalone ONNX form, and why (the catalog's and the importer's reason)."""
