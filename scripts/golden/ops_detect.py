"""Detection and sequence ops of opset 1: NonMaxSuppression (v1, v3), PriorBox, PriorBoxClustered, RegionYolo,
GatherTree, CTCGreedyDecoder.

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
    pb, ps = w.parameter(boxes.dtype, list(boxes.shape)), w.parameter(scores.dtype, list(scores.shape))
    consts = [w.constant(np.asarray(v, dt)) for v, dt in zip(inputs, (np.int64, F, F))]
    attrs = {"box_encoding": "center" if center else "corner", "sort_result_descending": descending}
    if out_type is not None:
        attrs["output_type"] = out_type
    r = w.result(w.op("NonMaxSuppression", pb, ps, *consts, version=version, **attrs))
    defaults = [0, 0.0, 0.0]
    args = [*inputs, *defaults[len(inputs) :]]
    want = nms(boxes.astype(F), scores.astype(F), int(args[0]), args[1], args[2], center, descending)
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
        _nms_case(
            "nms_f16",
            b1.astype(np.float16),
            s1.astype(np.float16),
            [3, 0.4, 0.25],
            note="f16 boxes and scores (IOU in float32, as the CPU kernel)",
        ),
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


# ---------------------------------------------------------------- RegionYolo


def _sigmoid(v: F) -> F:
    return F(F(1) / (F(1) + np.exp(-F(v))))


def region_yolo(x: np.ndarray, coords: int, classes: int, regions: int, softmax: bool, mask: list) -> np.ndarray:
    """Per batch, region and cell: sigmoid of x, y (float32); Yolo v3: sigmoid of entries coords.. (only the
    first len(mask) regions are output); Yolo v2: sigmoid of the objectness, softmax over the classes."""
    n, _, h, w = x.shape
    per = coords + classes + 1
    count = regions if softmax else len(mask)
    out = x[:, : count * per].reshape(n, count, per, h, w).copy()
    for b in range(n):
        for r in range(count):
            for i in range(h):
                for j in range(w):
                    v = out[b, r, :, i, j]
                    sig = [0, 1, coords] + ([] if softmax else list(range(coords + 1, per)))
                    for e in sig:
                        v[e] = x.dtype.type(_sigmoid(F(v[e])))
                    if softmax and classes:
                        c = x[b].reshape(count, per, h, w)[r, coords + 1 :, i, j]
                        m = c.max()
                        e = np.exp(c - m).astype(x.dtype)
                        v[coords + 1 :] = e / e.sum(dtype=x.dtype)
    return out.reshape(n, count * per, h, w)


def _yolo_case(name, x, note, *, ulp, why, **attrs):
    w = FunctionWriter(era="v0.29")
    p = w.parameter(x.dtype, list(x.shape))
    a = {"anchors": [10.0, 13.0, 16.0, 30.0], "axis": 1, "end_axis": 3, "mask": [], **attrs}
    r = w.result(w.op("RegionYolo", p, **a))
    want = region_yolo(x, a["coords"], a["classes"], a["num"], a["do_softmax"], a["mask"])
    if a["do_softmax"]:
        end = a["end_axis"] % 4
        want = want.reshape(*x.shape[: a["axis"]], -1, *x.shape[end + 1 :])
    case = GoldenCase(name, graph(w), {p: x}, note=f"RegionYolo: {note}; {DEFINITION}", expected={r: want})
    case.ulp, case.why = ulp, why
    return case


SIGMOID_WHY = "ONNX Runtime's vectorized Sigmoid and exp round differently from NumPy's float32 1 / (1 + exp(-x))"


def yolo_cases() -> list[GoldenCase]:
    v3 = (RNG.standard_normal((1, 2 * 7 + 3, 3, 4)) * 3).astype(F)  # 2 masked regions of 4 + 2 + 1, extra channels
    v2 = (RNG.standard_normal((2, 2 * 8, 2, 3)) * 3).astype(F)
    return [
        _yolo_case(
            "region_yolo_v3",
            v3,
            "Yolo v3 (mask of 2 regions, channels after them dropped)",
            coords=4,
            classes=2,
            num=6,
            do_softmax=False,
            mask=[3, 4],
            ulp=4,
            why=SIGMOID_WHY,
        ),
        _yolo_case(
            "region_yolo_v2",
            v2,
            "Yolo v2 (softmax over 3 classes, flattened from axis 1 to 3)",
            coords=4,
            classes=3,
            num=2,
            do_softmax=True,
            ulp=4,
            why=SIGMOID_WHY + "; the softmax too",
        ),
        _yolo_case(
            "region_yolo_v2_f16_end_axis",
            v2.astype(np.float16),
            "Yolo v2 on f16 (sigmoid in float32), end_axis -1 from axis 2",
            coords=4,
            classes=3,
            num=2,
            do_softmax=True,
            axis=2,
            end_axis=-1,
            ulp=2,
            why="the f16 softmax: ONNX Runtime computes it in float32",
        ),
    ]


# ---------------------------------------------------------------- GatherTree, CTCGreedyDecoder


def gather_tree(ids: np.ndarray, parents: np.ndarray, lengths: np.ndarray, end) -> np.ndarray:
    """The reference kernel, loop by loop (values compared and used as indices truncated)."""
    steps, batch, beams = ids.shape
    out = np.full_like(ids, end)
    for b in range(batch):
        for k in range(beams):
            as_index = int(lengths[b])  # truncated; a negative integer is a huge size_t
            n = min(steps, as_index) if as_index >= 0 else steps
            if n == 0:
                continue
            out[n - 1, b, k] = ids[n - 1, b, k]
            parent = int(parents[n - 1, b, k])
            for level in range(n - 2, -1, -1):
                out[level, b, k] = ids[level, b, parent]
                parent = int(parents[level, b, parent])
            finished = False
            for t in range(n):
                if finished:
                    out[t, b, k] = end
                elif int(out[t, b, k]) == int(end):
                    finished = True
    return out


def _tree_case(name, ids, parents, lengths, end, note):
    w = FunctionWriter(era="v0.29")
    arrays = [ids, parents, lengths, np.asarray(end, ids.dtype)]
    ps = [w.parameter(a.dtype, list(a.shape)) for a in arrays]
    r = w.result(w.op("GatherTree", *ps, version=1))
    want = gather_tree(ids, parents, lengths, arrays[3])
    case = GoldenCase(
        name, graph(w), dict(zip(ps, arrays)), note=f"GatherTree: {note}; {DEFINITION}", expected={r: want}
    )
    case.ulp, case.why = 0, "the Scan only selects values (GatherElements, Where): the policy cannot see into it"
    return case


def ctc_greedy(data: np.ndarray, mask: np.ndarray, merge: bool) -> np.ndarray:
    """The CPU kernel: step 0 always, then up to the next 0 of the mask; the first largest class from class 0;
    the blank (last class) dropped; with merge, a class equal to the previous step's dropped; -1 after."""
    steps, batch, classes = data.shape
    out = np.full((batch, steps), -1, data.dtype)
    for n in range(batch):
        prev, at = -1, 0
        for t in range(steps):
            probs = data[t, n]
            best, top = 0, probs[0]
            for c in range(1, classes):
                if probs[c] > top:
                    best, top = c, probs[c]
            if best < classes - 1 and not (merge and best == prev):
                out[n, at] = best
                at += 1
            prev = best
            if t + 1 == steps or mask[t + 1, n] == 0:
                break
    return out.reshape(batch, steps, 1, 1)


def _ctc_case(name, data, mask, merge, note):
    w = FunctionWriter(era="v0.29")
    pd, pm = w.parameter(data.dtype, list(data.shape)), w.parameter(mask.dtype, list(mask.shape))
    r = w.result(w.op("CTCGreedyDecoder", pd, pm, ctc_merge_repeated=merge))
    want = ctc_greedy(data, mask, merge)
    return GoldenCase(
        name, graph(w), {pd: data, pm: mask}, note=f"CTCGreedyDecoder: {note}; {DEFINITION}", expected={r: want}
    )


def sequence_cases() -> list[GoldenCase]:
    steps, batch, beams = 5, 3, 4
    ids = RNG.integers(0, 9, (steps, batch, beams)).astype(np.int32)
    parents = RNG.integers(0, beams, (steps, batch, beams)).astype(np.int32)
    ids[1, 0, :] = 2  # end token 2 at step 1 of batch 0
    lengths = np.array([5, 3, -1], np.int32)
    data = RNG.standard_normal((6, 3, 4)).astype(F)
    data[1, 0] = data[0, 0]  # a repeat
    data[2, 0, 3] = 9.0  # the blank, then the repeat again
    data[3, 0] = data[0, 0]
    data[4, 1, 1:] = np.nan  # NaN never wins after class 0
    data[5, 1, 0] = np.nan  # NaN at class 0 wins
    data[0, 2, :2] = 7.0  # a tie: the first
    mask = np.ones((6, 3), F)
    mask[4:, 0] = 0
    mask[0, 2], mask[3, 2] = 0, 0  # step 0 always counts; the sequence ends at step 3
    return [
        _tree_case(
            "gather_tree_i32", ids, parents, lengths, 2, "lengths 5, 3, -1 (a huge size_t: T); end token inside"
        ),
        _tree_case(
            "gather_tree_f32",
            ids.astype(F) + F(0.25),
            parents.astype(F),
            np.array([9, -1, 2], F) + F(0.5),  # -0.5 truncates to 0
            F(2.75),
            "f32: values truncated as indices; lengths beyond T, and 0",
        ),
        _ctc_case("ctc_greedy_merge", data, mask, True, "merge repeated, blank, NaN, ties, masks"),
        _ctc_case("ctc_greedy_no_merge", data, mask, False, "repeats kept"),
    ]


def cases():
    return nms_cases() + prior_cases() + yolo_cases() + sequence_cases()
