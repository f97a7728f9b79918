"""Detection ops of opset 1: NonMaxSuppression (v1, v3), PriorBox, PriorBoxClustered.

nGraph 0.26 cannot deserialize any of them (they came after it, or had no serializer entry) and nGraph has no
kernel for them: every expected value here comes from the op's definition, computed below in plain scalar
float32 loops written from the definition (the OpenVINO spec nGraph's ops mirror, and its reference kernels for
PriorBox / PriorBoxClustered), independently of the importer's vectorized code."""

from __future__ import annotations

import math

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph

F = np.float32
RNG = np.random.default_rng(12)
DEFINITION = "expected: the op's definition in NumPy (nGraph 0.26 cannot deserialize the op)"


# ---------------------------------------------------------------- NonMaxSuppression


def _iou(a: np.ndarray, b: np.ndarray, center: bool) -> F:
    def corners(x):
        if center:  # x_center, y_center, width, height
            return x[1] - x[3] / F(2), x[0] - x[2] / F(2), x[1] + x[3] / F(2), x[0] + x[2] / F(2)
        return min(x[0], x[2]), min(x[1], x[3]), max(x[0], x[2]), max(x[1], x[3])

    ya0, xa0, ya1, xa1 = corners(a)
    yb0, xb0, yb1, xb1 = corners(b)
    area_a, area_b = (ya1 - ya0) * (xa1 - xa0), (yb1 - yb0) * (xb1 - xb0)
    if area_a <= 0 or area_b <= 0:
        return F(0)
    inter = max(min(ya1, yb1) - max(ya0, yb0), F(0)) * max(min(xa1, xb1) - max(xa0, xb0), F(0))
    return F(inter / (area_a + area_b - inter))


def nms(boxes, scores, max_out: int, iou_t: float, score_t: float, center: bool, descending: bool) -> np.ndarray:
    """The definition: per batch and class, take the best remaining box while its score >= score_threshold,
    drop the boxes whose IOU with it is > iou_threshold; at most max_out per class. Triplets in batch, class,
    selection order, or sorted by score (ties: batch, class, box); then cut or padded with -1 to
    min(num_boxes, max_out * num_classes) rows."""
    nb, nc, n = scores.shape
    found = []
    for b in range(nb):
        for c in range(nc):
            cand = sorted((-float(scores[b, c, i]), i) for i in range(n) if scores[b, c, i] >= F(score_t))
            chosen: list[int] = []
            for neg, i in cand:
                if len(chosen) >= max_out:
                    break
                if all(_iou(boxes[b, i], boxes[b, j], center) <= F(iou_t) for j in chosen):
                    chosen.append(i)
                    found.append((neg, b, c, i))
    if descending:
        found.sort()
    rows = min(n, max_out * nc)
    out = [[b, c, i] for _, b, c, i in found][:rows]
    out += [[-1, -1, -1]] * (rows - len(out))
    return np.array(out, np.int64).reshape(rows, 3)


def _nms_case(name, boxes, scores, inputs, *, center=False, descending=True, version=1, out_type=None, note=""):
    w = FunctionWriter(era="v0.29")
    pb, ps = w.parameter("f32", list(boxes.shape)), w.parameter("f32", list(scores.shape))
    consts = [w.constant(np.asarray(v, dt)) for v, dt in zip(inputs, (np.int64, F, F))]
    attrs = {"box_encoding": "center" if center else "corner", "sort_result_descending": descending}
    if out_type is not None:
        attrs["output_type"] = out_type
    r = w.result(w.op("NonMaxSuppression", pb, ps, *consts, version=version, **attrs))
    defaults = [0, 0.0, 0.0]
    args = [*inputs, *defaults[len(inputs) :]]
    want = nms(boxes, scores, int(args[0]), args[1], args[2], center, descending)
    if out_type == "i32":
        want = want.astype(np.int32)
    return GoldenCase(name, graph(w), {pb: boxes, ps: scores}, note=f"{note}; {DEFINITION}", expected={r: want})


def _corner_boxes(nb: int, n: int) -> np.ndarray:
    lo = RNG.uniform(0, 8, (nb, n, 2)).astype(F)
    size = RNG.uniform(1, 4, (nb, n, 2)).astype(F)
    b = np.concatenate([lo, lo + size], -1)
    b[..., [0, 2]] = b[..., [2, 0]]  # any diagonal pair of corners
    return b


def nms_cases() -> list[GoldenCase]:
    b1 = _corner_boxes(2, 6)
    s1 = RNG.uniform(0, 1, (2, 2, 6)).astype(F)
    s1[0, 0, 3] = F(0.25)  # equal to score_threshold: kept
    s1[1, 1, 2] = s1[0, 1, 4]  # a tie across batches
    b2 = np.concatenate([RNG.uniform(2, 6, (1, 5, 2)), RNG.uniform(1, 3, (1, 5, 2))], -1).astype(F)
    s2 = np.array([[[0.5, 0.9, 0.5, 0.1, 0.7], [0.3, 0.3, 0.3, 0.3, 0.3], [0.2, 0.8, 0.6, 0.4, 0.95]]], F)
    # IOU exactly 0.5 with box 0 (2 of 4 units shared): kept at threshold 0.5; two disjoint copies of one box
    b3 = np.array([[[0, 0, 1, 3], [0, 1, 1, 4], [5, 5, 6, 6], [5, 5, 6, 6], [9, 9, 8, 8]]], F)
    s3 = np.array([[[0.9, 0.8, 0.7, 0.7, -0.5]]], F)
    return [
        _nms_case("nms_corner_sorted", b1, s1, [3, 0.4, 0.25], note="corner boxes, sorted across batches"),
        _nms_case(
            "nms_center_per_class", b2, s2, [2, 0.3, 0.0], center=True, descending=False, note="center boxes, ties"
        ),
        _nms_case("nms_padded", b3, s3, [10, 0.5, 0.7], note="IOU and score equal to their thresholds kept; -1 rows"),
        _nms_case("nms_v3_i32", b1, s1, [2, 0.5, 0.3], version=3, out_type="i32", note="v3, output_type i32"),
        _nms_case("nms_two_inputs", b3, s3, [], note="max_output_boxes_per_class absent: 0, no rows"),
    ]


# ---------------------------------------------------------------- PriorBox, PriorBoxClustered


def prior_box_loops(h: int, w: int, ih: int, iw: int, a: dict) -> np.ndarray:
    """The reference kernel, loop by loop, in float32 scalars."""
    g = a.get
    ratios = [F(1)]
    for r in map(F, g("aspect_ratio", [])):
        if not any(abs(float(r - e)) < 1e-6 for e in ratios):
            ratios.append(r)
            if g("flip", False):
                ratios.append(F(1) / r)
    var = [F(v) for v in g("variance", [])] or [F(0.1)]
    step, min_size, offset = F(g("step", 1.0)), [F(s) for s in g("min_size", [])], F(g("offset", 0.0))
    max_size, fixed_size, density = g("max_size", []), g("fixed_size", []), g("density", [])
    scale_all = g("scale_all_sizes", False)
    if not scale_all:
        step = F(ih) / F(h) if step == F(-1) else step * F(ih)
        min_size = [s * F(ih) for s in min_size]
    iwi, ihi = F(1) / F(iw), F(1) / F(ih)
    out: list[F] = []

    def calc(cx, cy, bw, bh, clip):
        vals = [(cx - bw) * iwi, (cy - bh) * ihi, (cx + bw) * iwi, (cy + bh) * ihi]
        if clip:
            vals = [v if v > 0 else F(0) for v in vals[:2]] + [v if v < 1 else F(1) for v in vals[2:]]
        out.extend(vals)

    for hh in range(h):
        for ww in range(w):
            if step == 0:
                cx, cy = (F(ww) + F(0.5)) * (F(iw) / F(w)), (F(hh) + F(0.5)) * (F(ih) / F(h))
            else:
                cx, cy = (offset + F(ww)) * step, (offset + F(hh)) * step
            for s, fs in enumerate(map(F, fixed_size)):
                d = int(density[s])
                shift = int(fs / F(d))

                def grid(bw, bh):
                    for r in range(d):
                        for c in range(d):
                            x = cx - F(int(fs) // 2) + F(shift) / F(2) + F(c * shift)
                            y = cy - F(int(fs) // 2) + F(shift) / F(2) + F(r * shift)
                            calc(x, y, bw, bh, True)

                if g("fixed_ratio"):
                    for ar in map(F, g("fixed_ratio")):
                        ar = np.sqrt(ar)
                        grid(fs * F(0.5) * ar, fs * F(0.5) / ar)
                    continue
                grid(F(int(fs)) * F(0.5), F(int(fs)) * F(0.5))
                for ar in ratios:
                    if abs(float(ar) - 1.0) >= 1e-6:
                        ar = np.sqrt(ar)
                        grid(fs * F(0.5) * ar, fs * F(0.5) / ar)
            for k, ms in enumerate(min_size):
                calc(cx, cy, ms * F(0.5), ms * F(0.5), False)
                if k < len(max_size):
                    half = np.sqrt(ms * F(max_size[k])) * F(0.5)
                    calc(cx, cy, half, half, False)
                if scale_all or k == len(min_size) - 1:
                    base = min_size[k if scale_all else 0]
                    for ar in ratios:
                        if abs(float(ar) - 1.0) >= 1e-6:
                            ar = np.sqrt(ar)
                            calc(cx, cy, base * F(0.5) * ar, base * F(0.5) / ar, False)
    if g("clip", False):
        out = [min(max(v, F(0)), F(1)) if not math.isnan(v) else v for v in out]
    row1 = [var[i % len(var)] for i in range(len(out))]
    return np.array([out, row1], F)


def prior_box_clustered_loops(h: int, w: int, ih: int, iw: int, a: dict) -> np.ndarray:
    g = a.get
    var = [F(v) for v in g("variances", [])] or [F(0.1)]
    sw, sh = F(g("step_widths", 1.0)), F(g("step_heights", 1.0))
    if sw == 0 and sh == 0:
        sw, sh = F(iw) / F(w), F(ih) / F(h)
    out: list[F] = []
    for hh in range(h):
        for ww in range(w):
            cx, cy = (F(ww) + F(g("offset", 0.0))) * sw, (F(hh) + F(g("offset", 0.0))) * sh
            for bw, bh in zip(map(F, g("widths")), map(F, g("heights"))):
                vals = [
                    (cx - bw / F(2)) / F(iw),
                    (cy - bh / F(2)) / F(ih),
                    (cx + bw / F(2)) / F(iw),
                    (cy + bh / F(2)) / F(ih),
                ]
                if g("clip", False):
                    vals = [min(max(v, F(0)), F(1)) for v in vals]
                out.extend(vals)
    row1 = [var[i % len(var)] for i in range(len(out))]
    return np.array([out, row1], F)


def _prior_case(name, op, layer, image, attrs, note, from_shapes=False):
    """``layer`` / ``image``: (height, width). ``from_shapes``: given as Gather(ShapeOf(parameter), [2, 3])."""
    w = FunctionWriter(era="v0.29")
    feeds = {}
    if from_shapes:
        ins = []
        for hw, c in ((layer, 8), (image, 3)):
            p = w.parameter("f32", [1, c, *hw])
            feeds[p] = RNG.standard_normal((1, c, *hw)).astype(F)
            idx, axis = w.constant(np.array([2, 3], np.int64)), w.constant(np.int64(0))
            ins.append(w.op("Gather", w.op("ShapeOf", p), idx, axis, version=1))
    else:
        ins = [w.constant(np.array(layer, np.int64)), w.constant(np.array(image, np.int32))]
    r = w.result(w.op(op, *ins, **{f"attrs.{k}": v for k, v in attrs.items()}))
    fn = prior_box_loops if op == "PriorBox" else prior_box_clustered_loops
    want = fn(*layer, *image, attrs)
    return GoldenCase(name, graph(w), feeds, note=f"{op}: {note}; {DEFINITION}", expected={r: want})


def prior_cases() -> list[GoldenCase]:
    ssd = {
        "min_size": [4.0],
        "max_size": [9.0],
        "aspect_ratio": [2.0, 3.0],
        "flip": True,
        "step": 8.0,
        "offset": 0.5,
        "variance": [0.1, 0.1, 0.2, 0.2],
        "scale_all_sizes": True,
    }
    mxnet = {"min_size": [0.2, 0.45], "aspect_ratio": [2.0, 0.5], "flip": True, "clip": True, "step": -1.0}
    return [
        _prior_case("prior_box_ssd", "PriorBox", (3, 4), (24, 32), ssd, "SSD style, from ShapeOf", True),
        _prior_case("prior_box_mxnet", "PriorBox", (2, 3), (30, 40), mxnet, "MXNet style (sizes scaled), clip"),
        _prior_case(
            "prior_box_step0",
            "PriorBox",
            (3, 2),
            (20, 10),
            {"min_size": [7.0, 3.0], "max_size": [12.0], "scale_all_sizes": True, "step": 0.0, "clip": True},
            "step 0 (image / layer), default variance",
        ),
        _prior_case(
            "prior_box_fixed_size",
            "PriorBox",
            (2, 2),
            (16, 16),
            {"fixed_size": [8.0], "density": [2.0], "aspect_ratio": [2.0], "step": 8.0, "offset": 0.5},
            "fixed_size with density",
        ),
        _prior_case(
            "prior_box_fixed_ratio",
            "PriorBox",
            (2, 1),
            (16, 8),
            {"fixed_size": [6.0], "density": [2.0], "fixed_ratio": [1.0, 4.0], "aspect_ratio": [2.0], "step": 8.0},
            "fixed_ratio with density",
        ),
        _prior_case(
            "prior_box_clustered",
            "PriorBoxClustered",
            (3, 2),
            (18, 16),
            {
                "widths": [4.0, 10.5],
                "heights": [6.0, 3.0],
                "step_widths": 8.0,
                "step_heights": 6.0,
                "offset": 0.5,
                "clip": True,
                "variances": [0.1, 0.1, 0.2, 0.2],
            },
            "clip, 4 variances",
            True,
        ),
        _prior_case(
            "prior_box_clustered_step0",
            "PriorBoxClustered",
            (2, 3),
            (10, 30),
            {"widths": [5.0, 2.0, 20.0], "heights": [5.0, 9.0, 1.5], "step_widths": 0.0, "step_heights": 0.0},
            "steps 0 (image / layer), no clip, default variance",
        ),
    ]


def cases():
    return nms_cases() + prior_cases()
