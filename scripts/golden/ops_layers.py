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


def cases() -> list[GoldenCase]:
    return _group_conv() + _layer_norm() + _mvn()
