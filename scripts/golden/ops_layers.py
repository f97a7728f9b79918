"""GroupConvolution, LayerNorm and MVN.

nGraph 0.26 reads GroupConvolution op_version 0 with ``groups`` only: the filters-with-groups layout (op_version 0
without ``groups``, and op_version 1) came later, so those cases' expected values come from the definition, the
op_version 0 form with ``groups`` on the reshaped filters, run by nGraph 0.26.0. nGraph 0.26's deserializer reads
MVN's ``normalize_variance`` as ``across_channels`` too and ignores ``reduction_axes`` (fixed in v0.29): the cases
whose axes it would misread take their expected values from the definition, MVN's decomposition into
Sum / Divide / Broadcast / Subtract / Multiply / Sqrt / Add run by nGraph 0.26.0.
"""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph
from ._ops import run_ngraph

SUMS = (
    "sums of up to 120 values: nGraph adds in order with Kahan compensation, ONNX Runtime in its own order; measured "
    "at most 2 ULP (of the largest output) after the divisions"
)


def _rng(k: int) -> np.random.Generator:
    return np.random.default_rng([12, 2, k])


def _quarters(rng: np.random.Generator, shape) -> np.ndarray:
    """Quarter integers in [-2, 2): every partial sum of a small convolution is exact in any order."""
    return (rng.integers(-8, 8, shape) / 4).astype(np.float32)


# ---------------------------------------------------------------- GroupConvolution

V0 = dict(window_movement_strides=[1, 2], window_dilation_strides=[2, 1], data_dilation_strides=[1, 1])


def _group_conv() -> list[GoldenCase]:
    out = []
    rng = _rng(1)
    groups, xs = 3, [2, 6, 7, 8]
    fs = [6, 2, 3, 2]  # C_out 6 (2 per group), C_in / groups 2
    w = FunctionWriter()
    x, f = w.parameter("f32", xs), w.parameter("f32", fs)
    w.result(w.op("GroupConvolution", x, f, groups=groups, padding_below=[1, -1], padding_above=[0, 2], **V0))
    w.result(
        w.op("GroupConvolution", x, f, groups=groups, padding_below=[0, 0], padding_above=[0, 0], pad_type=1, **V0)
    )
    feeds = {str(x): _quarters(rng, xs), str(f): _quarters(rng, fs)}
    out.append(
        GoldenCase(
            "group_convolution_v0",
            graph(w),
            feeds,
            note="GroupConvolution op_version 0 with groups: strides, dilation, negative padding, SAME_LOWER",
            ulp=0,
            why="quarter-integer values: every partial sum exact in any order",
        )
    )
    # the filters-with-groups layout: (groups, C_out / groups, C_in / groups, spatial...)
    gs = [groups, 2, 2, 3, 2]
    feeds = {"Parameter_0": _quarters(rng, xs), "Parameter_1": _quarters(rng, gs)}
    ref = FunctionWriter()
    rx, rf = ref.parameter("f32", xs), ref.parameter("f32", gs)
    flat = ref.op("Reshape", rf, input_order=[0, 1, 2, 3, 4], output_shape=fs)
    ref.result(ref.op("GroupConvolution", rx, flat, groups=groups, padding_below=[1, 0], padding_above=[0, 1], **V0))
    ref.result(
        ref.op(
            "GroupConvolution", rx, flat, groups=groups, padding_below=[0, 0], padding_above=[0, 0], pad_type=2, **V0
        )
    )
    want = run_ngraph(ref, feeds)
    for version, w in ((0, FunctionWriter()), (1, FunctionWriter(era="v0.29"))):
        x, f = w.parameter("f32", xs), w.parameter("f32", gs)
        if version == 0:
            w.result(w.op("GroupConvolution", x, f, padding_below=[1, 0], padding_above=[0, 1], **V0))
            w.result(w.op("GroupConvolution", x, f, padding_below=[0, 0], padding_above=[0, 0], pad_type=2, **V0))
        else:
            v1 = dict(strides=[1, 2], dilations=[2, 1], attribute_visitor=True)
            w.result(
                w.op("GroupConvolution", x, f, version=1, pads_begin=[1, 0], pads_end=[0, 1], auto_pad="EXPLICIT", **v1)
            )
            w.result(
                w.op(
                    "GroupConvolution", x, f, version=1, pads_begin=[0, 0], pads_end=[0, 0], auto_pad="SAME_UPPER", **v1
                )
            )
        out.append(
            GoldenCase(
                f"group_convolution_v{version}_groups_in_filters",
                graph(w),
                feeds,
                note=f"definition (after nGraph 0.26): op_version {version}, filters (groups, C_out / groups, "
                "C_in / groups, spatial...), SAME_UPPER; nGraph 0.26.0 ran the op_version 0 form with groups",
                expected=dict(zip(w.results, want)),
                ulp=0,
                why="quarter-integer values: every partial sum exact in any order",
            )
        )
    return out


# ---------------------------------------------------------------- LayerNorm


def _layer_norm() -> list[GoldenCase]:
    out = []
    for k, (shape, begin, affine_shape, keep, dt) in enumerate(
        [
            ((2, 3, 4), 1, (3, 4), True, np.float32),
            ((2, 3, 4), -1, (4,), False, np.float32),
            ((3, 2, 5), 1, (10,), True, np.float32),
            ((2, 6), 0, None, True, np.float64),
        ]
    ):
        rng = _rng(10 + k)
        w = FunctionWriter()
        x = w.parameter(dt, list(shape))
        feeds = {str(x): (rng.standard_normal(shape) * 3 + 1).astype(dt)}
        args = [x]
        if affine_shape is not None:
            for _ in range(2):
                p = w.parameter(dt, list(affine_shape))
                feeds[str(p)] = rng.standard_normal(affine_shape).astype(dt)
                args.append(p)
        ln = w.op(
            "LayerNorm",
            *args,
            keep_stats=keep,
            use_affine=affine_shape is not None,
            epsilon=1e-5,
            begin_norm_axis=begin,
        )
        if keep:
            for i in range(3):
                w.result(w.op("GetOutputElement", ln, n=i))
        else:
            w.result(ln)
        name = f"layer_norm_{'x'.join(map(str, shape))}_axis{begin}".replace("-", "m")
        out.append(
            GoldenCase(
                name,
                graph(w),
                feeds,
                note=f"LayerNorm begin_norm_axis {begin}, affine {affine_shape}, keep_stats {keep}, {np.dtype(dt)}",
                ulp=4,
                why=SUMS,
            )
        )
    return out


# ---------------------------------------------------------------- MVN


def _mvn_definition(shape, axes, normalize: bool, eps: float) -> FunctionWriter:
    """MVN's decomposition (nGraph's builder::mean and builder::variance) in ops nGraph 0.26 runs."""
    ref = FunctionWriter()
    x = ref.parameter("f32", list(shape))
    n = int(np.prod([shape[a] for a in axes]))
    kept = [d for i, d in enumerate(shape) if i not in axes]
    count = ref.constant(np.full(kept, n, np.float32))

    def mean(v):
        m = ref.binary("Divide", ref.op("Sum", v, reduction_axes=list(axes)), count)
        return ref.op("Broadcast", m, shape=list(shape), axes=list(axes))

    centered = ref.binary("Subtract", x, mean(x))
    if normalize:
        var = ref.binary(
            "Divide", ref.op("Sum", ref.binary("Multiply", centered, centered), reduction_axes=list(axes)), count
        )
        denom = ref.binary("Add", ref.op("Sqrt", var), ref.constant(np.full(kept, eps, np.float32)))
        centered = ref.binary("Divide", centered, ref.op("Broadcast", denom, shape=list(shape), axes=list(axes)))
    ref.result(centered)
    return ref


def _mvn() -> list[GoldenCase]:
    out = []
    shape = (2, 3, 4, 5)
    for k, (axes, normalize, by_ngraph) in enumerate(
        [
            ([0, 1, 2, 3], True, True),
            ([0, 2, 3], False, True),
            ([0, 2, 3], True, False),
            ([1, 2], True, False),
            ([], True, False),
        ]
    ):
        rng = _rng(20 + k)
        w = FunctionWriter()
        x = w.parameter("f32", list(shape))
        w.result(w.op("MVN", x, reduction_axes=axes, normalize_variance=normalize, eps=1e-3))
        feeds = {str(x): (rng.standard_normal(shape) * 2 - 1).astype(np.float32)}
        name = f"mvn_axes{''.join(map(str, axes)) or '_empty'}_{'var' if normalize else 'mean'}"
        note = f"MVN reduction_axes {axes}, normalize_variance {normalize}"
        expected = None
        if not by_ngraph:
            want = run_ngraph(
                _mvn_definition(shape, axes or [0, 1, 2, 3], normalize, 1e-3), {"Parameter_0": feeds[str(x)]}
            )
            expected = dict(zip(w.results, want))
            note = f"definition (nGraph 0.26 ignores reduction_axes): {note}; the decomposition run by nGraph 0.26.0"
        out.append(GoldenCase(name, graph(w), feeds, note=note, expected=expected, ulp=4, why=SUMS))
    return out


# ---------------------------------------------------------------- Interpolate


def _keys(t: np.ndarray, a: float = -0.75) -> np.ndarray:
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _resize_axis(x: np.ndarray, axis: int, m: int, mode: str, align: bool) -> np.ndarray:
    """ONNX Resize-10's definition along one axis (x_in = x_out / scale, or align_corners), in float64 from the
    float32 coordinates; nearest rounds down when the axis grows or keeps its size, up when it shrinks."""
    n = x.shape[axis]
    xo = np.arange(m, dtype=np.float32)
    if m == n:
        orig = xo
    elif align:
        orig = np.zeros(m, np.float32) if m == 1 else xo * np.float32(n - 1) / np.float32(m - 1)
    else:
        orig = xo / (np.float32(m) / np.float32(n))
    orig = orig.astype(np.float64)
    w = np.zeros((m, n))
    for i, c in enumerate(orig):
        if mode == "nearest":
            w[i, int(np.clip(np.floor(c) if m >= n else np.ceil(c), 0, n - 1))] = 1
        elif mode == "linear":
            c = min(max(c, 0.0), n - 1)
            lo = int(c)
            hi = min(lo + 1, n - 1)
            w[i, lo] += 1 - (c - lo) if hi != lo else 0.5
            w[i, hi] += c - lo if hi != lo else 0.5
        else:
            base = np.floor(c)
            for k in (-1, 0, 1, 2):
                w[i, int(np.clip(base + k, 0, n - 1))] += _keys(np.array(c - (base + k)))
    moved = np.moveaxis(x.astype(np.float64), axis, -1) @ w.T
    return np.moveaxis(moved, -1, axis)


def _interpolate() -> list[GoldenCase]:
    out = []
    specs = [  # name, shape, axes, sizes, mode, align_corners, pads_begin, pads_end, dtype, exact
        ("nearest_up_down", (1, 2, 4, 5), [2, 3], [7, 3], "nearest", False, None, None, np.float32, True),
        ("nearest_align_i32", (2, 3, 5), [1, 2], [2, 8], "nearest", True, None, None, np.int32, True),
        ("nearest_pads", (1, 1, 3, 3), [2, 3], [8, 4], "nearest", False, [0, 0, 1, 0], [0, 0, 1, 1], np.float32, True),
        ("linear_x2", (1, 2, 3, 4), [2, 3], [6, 8], "linear", False, None, None, np.float32, True),
        ("linear_align", (1, 1, 4, 5), [2, 3], [7, 3], "linear", True, None, None, np.float32, False),
        ("linear_5d_axis", (1, 2, 3, 2, 2), [2], [6], "linear", False, None, None, np.float32, True),
        ("cubic_x2", (1, 1, 4, 4), [2, 3], [8, 8], "cubic", False, None, None, np.float32, True),
        ("linear_folded", (2, 3, 4, 2), [0, 3], [4, 4], "linear", False, None, None, np.float32, True),
        ("cubic_3_axes", (2, 3, 2, 3), [1, 2, 3], [6, 4, 6], "cubic", False, None, None, np.float32, True),
        ("cubic_align", (1, 2, 5), [2], [9], "cubic", True, None, None, np.float32, True),
    ]
    for k, (name, shape, axes, sizes, mode, align, pb, pe, dt, exact) in enumerate(specs):
        rng = _rng(40 + k)
        x = (rng.integers(-8, 8, shape) / (4 if dt == np.float32 else 1)).astype(dt)
        w = FunctionWriter(era="v0.29")
        p = w.parameter(dt, list(shape))
        size = w.constant(np.array(sizes, np.int64))
        attrs = {"attrs.axes": axes, "attrs.mode": mode, "attrs.align_corners": align, "attrs.antialias": False}
        attrs |= {"attrs.pads_begin": pb or [], "attrs.pads_end": pe or []}
        r = w.result(w.op("Interpolate", p, size, attribute_visitor=True, **attrs))
        y = np.pad(x, list(zip(pb, pe))) if pb else x
        for a, m in zip(axes, sizes):
            y = _resize_axis(y, a, m, mode, align)
        out.append(
            GoldenCase(
                f"interpolate_{name}",
                graph(w),
                {str(p): x},
                note=f"definition (no nGraph kernel; its ONNX importer maps Resize-10 to it): {mode}, axes {axes}, "
                f"sizes {sizes}, align_corners {align}, pads {pb} {pe}; NumPy, axis by axis in float64",
                expected={r: y.astype(dt)},
                ulp=0 if exact else 2,
                why="quarter-integer data, dyadic weights: exact in any order"
                if exact
                else "weights rounded to float32: ONNX Runtime's order of the weighted sum differs",
            )
        )
    return out


# ---------------------------------------------------------------- BinaryConvolution


def _binary_conv_definition(x, bits, strides, dilations, pb, pe, pad_value) -> np.ndarray:
    """OpenVINO's reference loop (the op's definition): 2 * [x == bit] - 1 summed over each window."""
    n, c = x.shape[:2]
    sp = x.shape[2:]
    k = bits.shape[2:]
    padded = np.full((n, c, *(d + b + e for d, b, e in zip(sp, pb, pe))), np.float32(pad_value), x.dtype)
    padded[(slice(None), slice(None), *(slice(b, b + d) for b, d in zip(pb, sp)))] = x
    eff = [(kk - 1) * dd + 1 for kk, dd in zip(k, dilations)]
    out_sp = [(p - e) // s + 1 for p, e, s in zip(padded.shape[2:], eff, strides)]
    y = np.zeros((n, bits.shape[0], *out_sp), x.dtype)
    for o in np.ndindex(*out_sp):
        win = padded[
            (slice(None), slice(None), *(slice(i * s, i * s + e, d) for i, s, e, d in zip(o, strides, eff, dilations)))
        ]
        match = (win[:, None] == bits[None].astype(x.dtype)).reshape(n, bits.shape[0], -1)
        y[(slice(None), slice(None), *o)] = 2 * match.sum(-1) - match.shape[-1]
    return y


def _binary_conv() -> list[GoldenCase]:
    out = []
    for k, (xs, fs, strides, dil, pb, pe, auto, pad_value, fdt) in enumerate(
        [
            ((2, 3, 5, 6), (4, 3, 3, 2), [1, 2], [1, 1], [1, 0], [1, 1], "EXPLICIT", 1.0, np.float32),
            ((1, 2, 6, 6), (3, 2, 2, 2), [2, 1], [2, 1], [0, 0], [0, 0], "SAME_UPPER", 0.0, np.bool_),
            ((1, 2, 7), (2, 2, 3), [1], [1], [2], [-1], "EXPLICIT", -1.0, np.int32),
        ]
    ):
        rng = _rng(60 + k)
        x = rng.integers(0, 2, xs).astype(np.float32)
        x.ravel()[::11] = 0.5  # matches neither bit
        f = rng.integers(0, 2, fs).astype(fdt)
        w = FunctionWriter(era="v0.29")
        p = w.parameter("f32", list(xs))
        c = w.constant(f)
        attrs = dict(strides=strides, dilations=dil, pads_begin=pb, pads_end=pe, auto_pad=auto, pad_value=pad_value)
        r = w.result(w.op("BinaryConvolution", p, c, version=1, mode="xnor-popcount", attribute_visitor=True, **attrs))
        if auto == "SAME_UPPER":
            eff = [(kk - 1) * dd + 1 for kk, dd in zip(fs[2:], dil)]
            total = [max((-(-d // s) - 1) * s + e - d, 0) for d, s, e in zip(xs[2:], strides, eff)]
            pb, pe = [t // 2 for t in total], [t - t // 2 for t in total]
        lo = [max(0, -b) for b in pb]
        hi = [d - max(0, -e) for d, e in zip(xs[2:], pe)]
        cropped = x[(slice(None), slice(None), *(slice(a, b) for a, b in zip(lo, hi)))]
        want = _binary_conv_definition(
            cropped, f, strides, dil, [max(0, b) for b in pb], [max(0, e) for e in pe], pad_value
        )
        out.append(
            GoldenCase(
                f"binary_convolution_{k}",
                graph(w),
                {str(p): x},
                note=f"definition (no nGraph kernel; OpenVINO's reference loop in NumPy): {auto} pads {pb} {pe}, "
                f"pad_value {pad_value}, {np.dtype(fdt)} filter bits, data 0 / 1 / 0.5",
                expected={r: want},
                ulp=0,
                why="sums of 0 / 1 indicators: small integers, exact in any order",
            )
        )
    return out


# ---------------------------------------------------------------- DeformableConvolution


def _bilinear(img: np.ndarray, y: np.float32, x: np.float32) -> np.float32:
    """OpenVINO's bilinear_interpolation (no padding mode), in float32."""
    hh, ww = img.shape
    y1, x1 = max(int(np.floor(y)), 0), max(int(np.floor(x)), 0)
    y2, x2 = min(int(np.ceil(y)), hh - 1), min(int(np.ceil(x)), ww - 1)
    dx, dy = np.float32(x - np.float32(x1)), np.float32(y - np.float32(y1))
    one = np.float32(1)
    v11, v21, v12, v22 = img[y1, x1], img[y1, x2], img[y2, x1], img[y2, x2]
    return (one - dx) * (one - dy) * v11 + (one - dx) * dy * v12 + dx * (one - dy) * v21 + dx * dy * v22


def _deformable_definition(x, off, f, strides, dil, pb, pe, group, dgroup) -> np.ndarray:
    """OpenVINO's DeformableConvolution-1 reference loop (the op's definition), float32 throughout."""
    n, c, hh, ww = x.shape
    o, cg, kh, kw = f.shape
    oh = (hh + pb[0] + pe[0] - ((kh - 1) * dil[0] + 1)) // strides[0] + 1
    ow = (ww + pb[1] + pe[1] - ((kw - 1) * dil[1] + 1)) // strides[1] + 1
    y = np.zeros((n, o, oh, ow), np.float32)
    per_dg = c // dgroup
    for b, oc, i, j in np.ndindex(n, o, oh, ow):
        g = oc // (o // group)
        acc = np.float32(0)
        for fc in range(cg):
            ch = g * cg + fc
            dg = ch // per_dg
            for ky, kx in np.ndindex(kh, kw):
                t = ky * kw + kx
                py = np.float32(i * strides[0] - pb[0] + ky * dil[0]) + off[b, dg * 2 * kh * kw + 2 * t, i, j]
                px = np.float32(j * strides[1] - pb[1] + kx * dil[1]) + off[b, dg * 2 * kh * kw + 2 * t + 1, i, j]
                if not (0 <= px < ww and 0 <= py < hh):
                    continue
                acc = np.float32(acc + _bilinear(x[b, ch], py, px) * f[oc, fc, ky, kx])
        y[b, oc, i, j] = acc
    return y


def _deformable() -> list[GoldenCase]:
    out = []
    for k, (xs, fs, strides, dil, pb, pe, group, dgroup) in enumerate(
        [
            ((1, 2, 5, 5), (3, 2, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], 1, 1),
            ((2, 4, 6, 5), (4, 2, 2, 2), [2, 1], [1, 2], [0, 1], [1, 0], 2, 2),
        ]
    ):
        rng = _rng(70 + k)
        kh, kw = fs[2:]
        oh = (xs[2] + pb[0] + pe[0] - ((kh - 1) * dil[0] + 1)) // strides[0] + 1
        ow = (xs[3] + pb[1] + pe[1] - ((kw - 1) * dil[1] + 1)) // strides[1] + 1
        offs = (xs[0], dgroup * 2 * kh * kw, oh, ow)
        x = rng.standard_normal(xs).astype(np.float32)
        f = rng.standard_normal(fs).astype(np.float32)
        off = (rng.standard_normal(offs) * 1.5).astype(np.float32)
        off.ravel()[::7] = np.round(off.ravel()[::7])  # whole offsets: taps exactly on the border rows and columns
        w = FunctionWriter(era="v0.29")
        px, po, pf = w.parameter("f32", list(xs)), w.parameter("f32", list(offs)), w.parameter("f32", list(fs))
        attrs = dict(strides=strides, dilations=dil, pads_begin=pb, pads_end=pe, auto_pad="EXPLICIT")
        r = w.result(
            w.op("DeformableConvolution", px, po, pf, version=1, group=group, deformable_group=dgroup,
                 attribute_visitor=True, **attrs)
        )  # fmt: skip
        want = _deformable_definition(x, off, f, strides, dil, pb, pe, group, dgroup)
        out.append(
            GoldenCase(
                f"deformable_convolution_{k}",
                graph(w),
                {str(px): x, str(po): off, str(pf): f},
                note=f"definition (no nGraph kernel; OpenVINO's reference loop in NumPy, float32): group {group}, "
                f"deformable_group {dgroup}, pads {pb} {pe}; offsets reaching past every border",
                expected={r: want},
                ulp=4,
                why="bilinear weights and the sums of products in another order, offsets rounded once more: "
                "measured 1 ULP (of the largest output)",
            )
        )
    return out


# ---------------------------------------------------------------- CropAndResize


def _crop_and_resize_definition(image, boxes, box_ind, ch, cw, method, extrapolation) -> np.ndarray:
    """TensorFlow's CropAndResize kernel (the op's definition), float32 step by step."""
    f = np.float32
    _, hh, ww, c = image.shape
    out = np.zeros((len(boxes), ch, cw, c), np.float32)
    for b, (y1, x1, y2, x2) in enumerate(boxes.astype(np.float32)):
        img = image[box_ind[b]].astype(np.float32)
        hs = f(f(f(y2 - y1) * f(hh - 1)) / f(ch - 1)) if ch > 1 else f(0)
        ws = f(f(f(x2 - x1) * f(ww - 1)) / f(cw - 1)) if cw > 1 else f(0)
        for y in range(ch):
            in_y = f(f(y1 * f(hh - 1)) + f(f(y) * hs)) if ch > 1 else f(f(f(0.5) * f(y1 + y2)) * f(hh - 1))
            for x in range(cw):
                in_x = f(f(x1 * f(ww - 1)) + f(f(x) * ws)) if cw > 1 else f(f(f(0.5) * f(x1 + x2)) * f(ww - 1))
                if not (0 <= in_y <= hh - 1 and 0 <= in_x <= ww - 1):
                    out[b, y, x] = f(extrapolation)
                    continue
                if method == "nearest":
                    out[b, y, x] = img[int(np.floor(in_y + f(0.5))) if in_y % 1 != 0.5 else int(in_y) + 1,
                                       int(np.floor(in_x + f(0.5))) if in_x % 1 != 0.5 else int(in_x) + 1]  # fmt: skip
                    continue
                ty, by, lx, rx = int(np.floor(in_y)), int(np.ceil(in_y)), int(np.floor(in_x)), int(np.ceil(in_x))
                yl, xl = f(in_y - f(ty)), f(in_x - f(lx))
                top = img[ty, lx] + (img[ty, rx] - img[ty, lx]) * xl
                bottom = img[by, lx] + (img[by, rx] - img[by, lx]) * xl
                out[b, y, x] = top + (bottom - top) * yl
    return out


def _crop_and_resize() -> list[GoldenCase]:
    out = []
    boxes = np.array(
        [
            [0.0, 0.0, 1.0, 1.0],
            [0.1, 0.25, 0.7, 0.9],
            [-0.2, 0.5, 0.6, 1.3],
            [0.8, 0.9, 0.2, 0.1],
            [0.5, 0.5, 0.5, 0.5],
        ],
        np.float32,
    )
    box_ind = np.array([0, 1, 0, 1, 1], np.int32)
    for k, (method, ch, cw, extrapolation) in enumerate(
        [("bilinear", 4, 3, 0.0), ("nearest", 5, 4, -1.5), ("bilinear", 1, 6, 7.0)]
    ):
        rng = _rng(80 + k)
        image = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
        w = FunctionWriter(era="v0.29")
        pi, pb, pn = w.parameter("f32", [2, 5, 6, 3]), w.parameter("f32", [5, 4]), w.parameter("i32", [5])
        size = w.constant(np.array([ch, cw], np.int32))
        r = w.result(w.op("CropAndResize", pi, pb, pn, size, resize_method=method, extrapolation_value=extrapolation))
        want = _crop_and_resize_definition(image, boxes, box_ind, ch, cw, method, extrapolation)
        out.append(
            GoldenCase(
                f"crop_and_resize_{method}_{ch}x{cw}",
                graph(w),
                {str(pi): image, str(pb): boxes, str(pn): box_ind},
                note=f"definition (no nGraph kernel; TensorFlow's CropAndResize kernel in NumPy, float32): {method}, "
                f"crop {ch}x{cw}, extrapolation {extrapolation}; boxes flipped, partly outside, one point",
                expected={r: want},
            )
        )
    return out


def cases() -> list[GoldenCase]:
    return _group_conv() + _layer_norm() + _mvn() + _interpolate() + _binary_conv() + _deformable() + _crop_and_resize()
