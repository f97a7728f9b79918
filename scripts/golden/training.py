"""Training ops: the backprop ops nGraph's autodiff writes, and the forward and backward graphs of an MLP and an
LSTM built from them (the gradients written out op by op, as nGraph's autodiff would emit them).

Max-pool backprop cases are full of ties (small integers, overlapping windows) and NaN: nGraph gives the whole
delta to the first largest valid element of each window. StopGradient, PartialSlice and PartialSliceBackprop do not
run on nGraph 0.26 (INTERPRETER lacks StopGradient; PartialSlice came after 0.26): their expected values come from
the ops' definitions (the identity; nGraph's decompositions into Slice / Reshape and ReplaceSlice into zeros).
"""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter, Ref

from . import GoldenCase, graph
from ._ops import run_ngraph

SUMS = "float sums: nGraph's INTERPRETER and ONNX Runtime accumulate in different orders"
MATH = "exp / erf / tanh: nGraph's std:: functions and ONNX Runtime's may differ in the last place"


def _rng(k: int) -> np.random.Generator:
    return np.random.default_rng([13, k])


def _elementwise() -> list[GoldenCase]:
    x = np.array([-0.0, 0.0, -1.5, 2.5, np.inf, -np.inf, np.nan, 1e-45, -3.0, 20.0, -20.0, 0.5], np.float32)
    d = _rng(1).standard_normal(x.shape).astype(np.float32)
    out = []
    for op in ("ReluBackprop", "SigmoidBackprop"):
        w = FunctionWriter()
        w.result(w.op(op, w.parameter("f32", [12]), w.parameter("f32", [12])))
        exact = op == "ReluBackprop"
        out.append(
            GoldenCase(
                f"{op.lower()}_f32_special",
                graph(w),
                {"Parameter_0": x, "Parameter_1": d},
                note=f"{op} on signed zeros, NaN, infinities",
                ulp=None if exact else 2,
                why="" if exact else MATH,
            )
        )
    w = FunctionWriter()
    w.result(w.op("GeluBackpropFactor", w.parameter("f32", [12])))
    out.append(GoldenCase("gelu_backprop_factor_f32", graph(w), {"Parameter_0": x}, ulp=4, why=MATH))

    w = FunctionWriter()
    p = w.parameter("f32", [12])
    r = w.result(w.op("StopGradient", p))
    out.append(
        GoldenCase(
            "stop_gradient",
            graph(w),
            {"Parameter_0": x},
            note="definition: StopGradient is the identity (nGraph 0.26's INTERPRETER has no kernel for it)",
            expected={r: x.copy()},
        )
    )

    data = _rng(2).standard_normal((3, 4, 5))
    w = FunctionWriter()
    p = w.parameter("f64", [3, 4, 5])
    r1 = w.result(w.op("PartialSlice", p, axes=[1, 2], lower_bounds=[-3, 1], upper_bounds=[2, 100], decrease_axes=[1]))
    r2 = w.result(w.op("PartialSlice", p, axes=[0, 2], lower_bounds=[-100, 4], upper_bounds=[-1, 2], decrease_axes=[]))
    out.append(
        GoldenCase(
            "partial_slice",
            graph(w),
            {"Parameter_0": data},
            note="definition (after nGraph 0.26): negative bounds count from the end, clamped; decrease_axes dropped",
            expected={r1: data[:, 1:2, 1:5].reshape(3, 4), r2: data[0:2, :, 4:4]},
        )
    )
    delta = _rng(3).standard_normal((3, 1, 2))
    w = FunctionWriter()
    p, dp = w.parameter("f64", [3, 4, 5]), w.parameter("f64", [3, 1, 2])
    r = w.result(w.op("PartialSliceBackprop", p, dp, axes=[1, 2], lower_bounds=[1, -4], upper_bounds=[2, 3]))
    want = np.zeros((3, 4, 5))
    want[:, 1:2, 1:3] = delta
    out.append(
        GoldenCase(
            "partial_slice_backprop",
            graph(w),
            {"Parameter_0": data, "Parameter_1": delta},
            note="definition (after nGraph 0.26): the delta written into zeros of the data's shape",
            expected={r: want},
        )
    )
    return out


POOLS = [  # (name, data shape, window, strides, padding below, padding above)
    ("2d_pad_stride", (2, 2, 5, 5), [3, 3], [1, 2], [1, 0], [1, 2]),
    ("1d_stride", (1, 2, 6), [2], [2], [0], [0]),
    ("2d_overlap_pad", (1, 1, 4, 4), [2, 2], [1, 1], [1, 1], [1, 1]),
]


def _pool_out(shape, win, st, pb, pa) -> list[int]:
    return [(shape[2 + i] + pb[i] + pa[i] - win[i]) // st[i] + 1 for i in range(len(win))]


def _pools() -> list[GoldenCase]:
    out = []
    for k, (name, shape, win, st, pb, pa) in enumerate(POOLS):
        attrs = dict(window_shape=win, window_movement_strides=st, padding_below=pb, padding_above=pa)
        dshape = [shape[0], shape[1], *_pool_out(shape, win, st, pb, pa)]
        for et, dt in (("f32", np.float32), ("i32", np.int32)):
            rng = _rng(10 + k)
            x = rng.integers(-2, 2, shape).astype(dt)  # four values: ties in every window
            if et == "f32":
                x.ravel()[::7] = np.nan
                x.ravel()[3] = -np.inf
            d = rng.integers(1, 50, dshape).astype(dt)
            w = FunctionWriter()
            w.result(w.op("MaxPoolBackprop", w.parameter(et, list(shape)), w.parameter(et, dshape), **attrs))
            out.append(
                GoldenCase(
                    f"max_pool_backprop_{name}_{et}",
                    graph(w),
                    {"Parameter_0": x, "Parameter_1": d},
                    note="ties everywhere (values in -2..1)" + (", NaN and -inf" if et == "f32" else ""),
                )
            )
        w = FunctionWriter()
        p = w.parameter("f32", dshape)
        for inc in (False, True):
            w.result(
                w.op(
                    "AvgPoolBackprop", p, forward_arg_shape=list(shape), include_padding_in_avg_computation=inc, **attrs
                )
            )
        d = _rng(20 + k).standard_normal(dshape).astype(np.float32)
        out.append(
            GoldenCase(f"avg_pool_backprop_{name}", graph(w), {"Parameter_0": d}, note="padding excluded, included")
        )
    # a max-pool backprop whose delta values add up at one input element (overlapping windows, same argmax)
    w = FunctionWriter()
    w.result(
        w.op(
            "MaxPoolBackprop",
            w.parameter("f32", [1, 1, 3, 3]),
            w.parameter("f32", [1, 1, 2, 2]),
            window_shape=[2, 2],
            window_movement_strides=[1, 1],
            padding_below=[0, 0],
            padding_above=[0, 0],
        )
    )
    x = np.array([[[[1, 1, 1], [1, 1, 1], [1, 1, 1]]]], np.float32)
    d = np.array([[[[1, 2], [4, 8]]]], np.float32)
    out.append(
        GoldenCase("max_pool_backprop_all_equal", graph(w), {"Parameter_0": x, "Parameter_1": d}, note="all ties")
    )
    return out


CONVS = [  # (name, data shape, filters shape, strides, dilations, padding below, padding above)
    ("2d_stride_dilation", (2, 3, 7, 6), (4, 3, 3, 2), [2, 1], [1, 2], [1, 0], [0, 2]),
    ("1d_stride3", (1, 2, 9), (3, 2, 3), [3], [1], [0], [0]),
    ("2d_negative_padding", (1, 2, 8, 8), (2, 2, 3, 3), [2, 2], [1, 1], [-1, 1], [2, -2]),
]


def _convs() -> list[GoldenCase]:
    out = []
    for k, (name, xs, fs, st, dil, pb, pa) in enumerate(CONVS):
        n = len(st)
        eff = [(fs[2 + i] - 1) * dil[i] + 1 for i in range(n)]
        os_ = [(xs[2 + i] + pb[i] + pa[i] - eff[i]) // st[i] + 1 for i in range(n)]
        attrs = dict(
            window_movement_strides_forward=st,
            window_dilation_strides_forward=dil,
            padding_below_forward=pb,
            padding_above_forward=pa,
            data_dilation_strides_forward=[1] * n,
        )
        w = FunctionWriter()
        f = w.parameter("f32", list(fs))
        d = w.parameter("f32", [xs[0], fs[0], *os_])
        x = w.parameter("f32", list(xs))
        w.result(w.op("ConvolutionBackpropData", f, d, data_batch_shape=list(xs), **attrs))
        w.result(w.op("ConvolutionBackpropFilters", x, d, filters_shape=list(fs), **attrs))
        rng = _rng(30 + k)
        feeds = {
            "Parameter_0": rng.standard_normal(fs).astype(np.float32),
            "Parameter_1": rng.standard_normal([xs[0], fs[0], *os_]).astype(np.float32),
            "Parameter_2": rng.standard_normal(xs).astype(np.float32),
        }
        out.append(
            GoldenCase(
                f"convolution_backprop_{name}", graph(w), feeds, note="data and filters gradients", ulp=64, why=SUMS
            )
        )
    return out


def _grouped() -> list[GoldenCase]:
    """GroupConvolutionBackpropData / -Filters (after nGraph 0.26): expected values from their definition, the
    decomposition into one ConvolutionBackpropData / -Filters per group (channels sliced, results concatenated),
    run by nGraph 0.26.0's INTERPRETER."""
    groups, n, cin, cout, size, k = 2, 2, 4, 6, (6, 5), (3, 2)
    st, dil, pb, pa = [1, 2], [2, 1], [1, 0], [0, 1]
    rng = _rng(90)
    xs, fs = [n, cin, *size], [cout, cin // groups, *k]
    osz = [(size[i] + pb[i] + pa[i] - ((k[i] - 1) * dil[i] + 1)) // st[i] + 1 for i in range(2)]
    ds = [n, cout, *osz]
    feeds = {
        "Parameter_0": rng.standard_normal(xs).astype(np.float32),
        "Parameter_1": rng.standard_normal(fs).astype(np.float32),
        "Parameter_2": rng.standard_normal(ds).astype(np.float32),
    }
    attrs = dict(window_movement_strides=st, window_dilation_strides=dil, padding_below=pb, padding_above=pa)
    w = FunctionWriter()
    x, f, d = w.parameter("f32", xs), w.parameter("f32", fs), w.parameter("f32", ds)
    w.result(w.op("GroupConvolutionBackpropData", x, f, d, groups=groups, **attrs))
    w.result(w.op("GroupConvolutionBackpropFilters", x, f, d, groups=groups, **attrs))
    # the definition, in ops nGraph 0.26 runs
    ref = FunctionWriter()
    rx, rf, rd = ref.parameter("f32", xs), ref.parameter("f32", fs), ref.parameter("f32", ds)
    fwd = {f"{key}_forward": v for key, v in attrs.items()} | {"data_dilation_strides_forward": [1, 1]}
    cg, og = cin // groups, cout // groups
    data, filt = [], []
    for g in range(groups):
        sf = ref.op("Slice", rf, lower_bounds=[g * og, 0, 0, 0], upper_bounds=[(g + 1) * og, *fs[1:]], strides=[1] * 4)
        sd = ref.op("Slice", rd, lower_bounds=[0, g * og, 0, 0], upper_bounds=[n, (g + 1) * og, *osz], strides=[1] * 4)
        sx = ref.op("Slice", rx, lower_bounds=[0, g * cg, 0, 0], upper_bounds=[n, (g + 1) * cg, *size], strides=[1] * 4)
        data.append(ref.op("ConvolutionBackpropData", sf, sd, data_batch_shape=[n, cg, *size], **fwd))
        filt.append(ref.op("ConvolutionBackpropFilters", sx, sd, filters_shape=[og, cg, *k], **fwd))
    ref.result(ref.op("Concat", *data, axis=1))
    ref.result(ref.op("Concat", *filt, axis=0))
    want = run_ngraph(ref, feeds)
    return [
        GoldenCase(
            "group_convolution_backprop",
            graph(w),
            feeds,
            note="definition (after nGraph 0.26): per-group ConvolutionBackpropData / -Filters run by nGraph 0.26.0",
            expected=dict(zip(w.results, want)),
            ulp=64,
            why=SUMS,
        )
    ]


# ---------------------------------------------------------------- normalization


def _norms() -> list[GoldenCase]:
    """BatchNormTraining's three outputs (mean and biased variance), its backprop, LayerNormBackprop's variants;
    multi-output ops read through GetOutputElement, as nGraph 0.26 requires."""
    out = []
    for k, shape in enumerate([(2, 3, 4, 5), (6, 3)]):
        rng = _rng(70 + k)
        c = shape[1]
        w = FunctionWriter()
        gamma, beta, x = w.parameter("f32", [c]), w.parameter("f32", [c]), w.parameter("f32", list(shape))
        bn = w.op("BatchNormTraining", gamma, beta, x, eps=1e-3)
        for i in range(3):
            w.result(w.op("GetOutputElement", bn, n=i))
        mean, var, delta = w.parameter("f32", [c]), w.parameter("f32", [c]), w.parameter("f32", list(shape))
        bp = w.op("BatchNormTrainingBackprop", gamma, beta, x, mean, var, delta, eps=1e-3)
        for i in range(3):
            w.result(w.op("GetOutputElement", bp, n=i))
        feeds = {
            str(gamma): rng.standard_normal(c).astype(np.float32),
            str(beta): rng.standard_normal(c).astype(np.float32),
            str(x): (rng.standard_normal(shape) * 2 + 1).astype(np.float32),
            str(mean): rng.standard_normal(c).astype(np.float32),
            str(var): np.abs(rng.standard_normal(c)).astype(np.float32),
            str(delta): rng.standard_normal(shape).astype(np.float32),
        }
        out.append(
            GoldenCase(
                f"batch_norm_training_rank{len(shape)}",
                graph(w),
                feeds,
                note="normalized, batch mean, biased batch variance; backprop's d input, d gamma, d beta",
                ulp=64,
                why=SUMS,
            )
        )
    shape = [2, 3, 4]
    for k, (stats, affine, begin, sshape) in enumerate(
        [
            (False, False, 1, None),
            (False, True, -1, [4]),
            (True, True, 1, [12]),
            (True, False, 2, None),
            (False, True, 1, [3, 4]),
        ]
    ):
        rng = _rng(80 + k)
        w = FunctionWriter()
        params = [w.parameter("f32", shape), w.parameter("f32", shape)]
        n = begin if begin >= 0 else len(shape) + begin
        if stats:
            params += [w.parameter("f32", shape[:n]), w.parameter("f32", shape[:n])]
        if affine:
            params.append(w.parameter("f32", sshape))
        op = w.op("LayerNormBackprop", *params, use_stats=stats, use_affine=affine, epsilon=1e-5, begin_norm_axis=begin)
        for i in range(3 if affine else 1):
            w.result(w.op("GetOutputElement", op, n=i))
        feeds = {
            str(p): rng.standard_normal(list(w.ops[int(str(p).split("_")[1])]["shape"])).astype(np.float32)
            for p in params
        }
        if stats:
            feeds[str(params[3])] = np.abs(feeds[str(params[3])])
        what = f"{'stats' if stats else 'no_stats'}_{'affine' if affine else 'plain'}_axis{begin}"
        out.append(
            GoldenCase(
                f"layer_norm_backprop_{what}" + ("_flat_scale" if sshape == [12] else ""),
                graph(w),
                feeds,
                note=f"use_stats {stats}, use_affine {affine}, begin_norm_axis {begin}, scale {sshape}",
                ulp=64,
                why=SUMS,
            )
        )
    return out


# ---------------------------------------------------------------- losses (after nGraph 0.26: from the definitions)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _one_hot(labels: np.ndarray, classes: int, dt: type) -> np.ndarray:
    return (labels.reshape(-1, 1) == np.arange(classes)).astype(dt)


def _losses() -> list[GoldenCase]:
    """SoftmaxCrossEntropy, CrossEntropy and their backprops, hard and soft labels, an ignored class; the
    expected values are NumPy transcriptions of nGraph's decompositions, in the input's type, op by op."""
    rows, classes = 4, 5
    rng = _rng(60)
    x = rng.standard_normal((rows, classes)).astype(np.float32)
    x[3, 0] = -120.0  # its softmax underflows to 0: 0 * log(0) is NaN in nGraph's decomposition
    hard = np.array([[1], [0], [4], [2]], np.int64)
    soft = _softmax(rng.standard_normal((rows, classes)).astype(np.float32))
    delta = rng.standard_normal((rows, 1)).astype(np.float32)
    sm = _softmax(x)
    probs = _softmax(rng.standard_normal((2, 2, classes)).astype(np.float32).reshape(4, classes)).reshape(2, 2, classes)
    out = []

    def case(name, op, args, shapes, want, note, **attrs):
        w = FunctionWriter()
        params = [w.parameter(et, list(a.shape)) for a, et in zip(args, shapes)]
        r = w.result(w.op(op, *params, **attrs))
        feeds = {str(p): a for p, a in zip(params, args)}
        out.append(
            GoldenCase(
                name,
                graph(w),
                feeds,
                note="definition (after nGraph 0.26): " + note,
                expected={r: want.astype(np.float32)},
                ulp=8,
                why=MATH + "; " + SUMS,
            )
        )

    ignore = 2
    oh = _one_hot(hard, classes, np.float32)
    mask = (hard != ignore).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        xe = -(oh * np.log(sm)).sum(axis=1, keepdims=True) * mask
        case(
            "softmax_cross_entropy_hard",
            "SoftmaxCrossEntropy",
            [x, hard],
            ["f32", "i64"],
            xe,
            "one-hot labels, class 2 ignored, one row whose softmax underflows",
            soft_label=False,
            ignore_index=ignore,
        )
        shifted = x - x.max(axis=1, keepdims=True)
        xe = -(soft * (shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)))).sum(axis=1, keepdims=True)
        case(
            "softmax_cross_entropy_soft",
            "SoftmaxCrossEntropy",
            [x, soft],
            ["f32", "f32"],
            xe,
            "soft labels",
            soft_label=True,
            ignore_index=-1,
        )
        m = delta * oh * mask
        case(
            "softmax_cross_entropy_backprop_hard",
            "SoftmaxCrossEntropyBackprop",
            [delta, sm, hard],
            ["f32", "f32", "i64"],
            m.sum(axis=1, keepdims=True) * sm - m,
            "one-hot labels, class 2 ignored",
            soft_label=False,
            ignore_index=ignore,
        )
        d2 = np.broadcast_to(delta, (rows, classes)).copy()
        m = d2 * soft
        case(
            "softmax_cross_entropy_backprop_soft",
            "SoftmaxCrossEntropyBackprop",
            [d2, sm, soft],
            ["f32", "f32", "f32"],
            m.sum(axis=1, keepdims=True) * sm - m,
            "soft labels",
            soft_label=True,
            ignore_index=-1,
        )
        hard3 = np.array([[[3], [1]], [[0], [2]]], np.int64)
        oh3 = _one_hot(hard3, classes, np.float32)
        p2 = probs.reshape(4, classes)
        xe = -(oh3 * np.log(p2)).sum(axis=1)
        case(
            "cross_entropy_hard_3d",
            "CrossEntropy",
            [probs, hard3],
            ["f32", "i64"],
            xe.reshape(2, 2, 1),
            "rank 3 probabilities, one-hot labels",
            soft_label=False,
            ignore_index=-100,
        )
        xe = -(oh3 * np.log(p2)).sum(axis=1, keepdims=True) * (hard3.reshape(-1, 1) != 1)
        case(
            "cross_entropy_hard_ignore",
            "CrossEntropy",
            [probs, hard3],
            ["f32", "i64"],
            xe,
            "ignore_index 1 > 0: masked, returned as (rows, 1)",
            soft_label=False,
            ignore_index=1,
        )
        xe = -(soft * np.log(sm)).sum(axis=1, keepdims=True)
        case(
            "cross_entropy_soft",
            "CrossEntropy",
            [sm, soft],
            ["f32", "f32"],
            xe,
            "soft labels",
            soft_label=True,
            ignore_index=-1,
        )
        g = (-oh * np.broadcast_to(delta, (rows, classes))) / sm * mask
        case(
            "cross_entropy_backprop_hard",
            "CrossEntropyBackprop",
            [sm, hard, delta],
            ["f32", "i64", "f32"],
            g,
            "one-hot labels, class 2 ignored",
            soft_label=False,
            ignore_index=ignore,
        )
        g = (-soft * np.broadcast_to(delta, (rows, classes))) / sm
        case(
            "cross_entropy_backprop_soft",
            "CrossEntropyBackprop",
            [sm, soft, delta],
            ["f32", "f32", "f32"],
            g,
            "soft labels",
            soft_label=True,
            ignore_index=-1,
        )
    return out


# ---------------------------------------------------------------- the MLP


def _t(w: FunctionWriter, x: Ref, shape: list[int]) -> Ref:
    """A 2-D transpose, as nGraph's autodiff writes it (Reshape with input_order)."""
    return w.op("Reshape", x, input_order=[1, 0], output_shape=[shape[1], shape[0]])


def _bias(w: FunctionWriter, b: Ref, shape: list[int]) -> Ref:
    return w.op("Broadcast", b, shape=shape, axes=[0])


def _mlp(backward: bool) -> FunctionWriter:
    """x (4, 6) -> Dot W1 (6, 8) + b1 -> Relu -> Dot W2 (8, 3) + b2 -> Sigmoid = p; loss = sum((p - t)^2).

    The backward function recomputes the forward pass and returns dW1, db1, dW2, db2."""
    nb, ni, nh, no = 4, 6, 8, 3
    w = FunctionWriter("Function_1" if backward else "Function_0")
    x, w1, b1 = w.parameter("f32", [nb, ni]), w.parameter("f32", [ni, nh]), w.parameter("f32", [nh])
    w2, b2, t = w.parameter("f32", [nh, no]), w.parameter("f32", [no]), w.parameter("f32", [nb, no])
    z1 = w.binary("Add", w.op("Dot", x, w1, reduction_axes_count=1), _bias(w, b1, [nb, nh]), "none")
    h = w.op("Relu", z1)
    y = w.binary("Add", w.op("Dot", h, w2, reduction_axes_count=1), _bias(w, b2, [nb, no]), "none")
    p = w.op("Sigmoid", y)
    e = w.binary("Subtract", p, t, "none")
    if not backward:
        w.result(p)
        w.result(w.op("Sum", w.binary("Multiply", e, e, "none"), reduction_axes=[0, 1]))
        return w
    dp = w.binary("Multiply", w.constant(np.full((nb, no), 2, np.float32)), e, "none")
    dy = w.op("SigmoidBackprop", y, dp)
    dh = w.op("Dot", dy, _t(w, w2, [nh, no]), reduction_axes_count=1)
    dz1 = w.op("ReluBackprop", z1, dh)
    w.result(w.op("Dot", _t(w, x, [nb, ni]), dz1, reduction_axes_count=1))
    w.result(w.op("Sum", dz1, reduction_axes=[0]))
    w.result(w.op("Dot", _t(w, h, [nb, nh]), dy, reduction_axes_count=1))
    w.result(w.op("Sum", dy, reduction_axes=[0]))
    return w


def _mlp_inputs() -> dict[str, np.ndarray]:
    rng = _rng(40)
    shapes = [(4, 6), (6, 8), (8,), (8, 3), (3,), (4, 3)]
    return {f"Parameter_{i}": (rng.standard_normal(s) * 0.7).astype(np.float32) for i, s in enumerate(shapes)}


# ---------------------------------------------------------------- the LSTM

STEPS, BATCH, INPUT, HIDDEN = 3, 2, 3, 4


def _slice(w: FunctionWriter, x: Ref, lower: list[int], upper: list[int]) -> Ref:
    return w.op("Slice", x, lower_bounds=lower, upper_bounds=upper, strides=[1] * len(lower))


def _lstm(backward: bool) -> FunctionWriter:
    """An LSTM over STEPS steps, unrolled: gates i, f, o (Sigmoid) and c~ (Tanh) from x_t W + h R + b;
    c = f c + i c~, h = o tanh(c); loss = sum(h_T * v). The backward function recomputes the forward
    pass and returns dW, dR, db and dh0, dc0 by backpropagation through time."""
    w = FunctionWriter("Function_1" if backward else "Function_0")
    xs, W, R = (
        w.parameter("f32", [STEPS, BATCH, INPUT]),
        w.parameter("f32", [INPUT, 4 * HIDDEN]),
        w.parameter("f32", [HIDDEN, 4 * HIDDEN]),
    )
    b, h0, c0, v = (
        w.parameter("f32", [4 * HIDDEN]),
        w.parameter("f32", [BATCH, HIDDEN]),
        w.parameter("f32", [BATCH, HIDDEN]),
        w.parameter("f32", [BATCH, HIDDEN]),
    )

    def mul(a, c):
        return w.binary("Multiply", a, c, "none")

    def add(a, c):
        return w.binary("Add", a, c, "none")

    def sub(a, c):
        return w.binary("Subtract", a, c, "none")

    one = w.constant(np.ones((BATCH, HIDDEN), np.float32))
    bb = _bias(w, b, [BATCH, 4 * HIDDEN])
    h, c = h0, c0
    steps = []
    for t in range(STEPS):
        x_t = w.op(
            "Reshape",
            _slice(w, xs, [t, 0, 0], [t + 1, BATCH, INPUT]),
            input_order=[0, 1, 2],
            output_shape=[BATCH, INPUT],
        )
        g = add(add(w.op("Dot", x_t, W, reduction_axes_count=1), w.op("Dot", h, R, reduction_axes_count=1)), bb)
        gi, gf, go, gc = (_slice(w, g, [0, k * HIDDEN], [BATCH, (k + 1) * HIDDEN]) for k in range(4))
        i, f, o, cc = w.op("Sigmoid", gi), w.op("Sigmoid", gf), w.op("Sigmoid", go), w.op("Tanh", gc)
        c_new = add(mul(f, c), mul(i, cc))
        tc = w.op("Tanh", c_new)
        h_new = mul(o, tc)
        steps.append((x_t, h, c, gi, gf, go, i, f, o, cc, tc))
        h, c = h_new, c_new
    if not backward:
        w.result(h)
        w.result(c)
        w.result(w.op("Sum", mul(h, v), reduction_axes=[0, 1]))
        return w
    dh, dc = v, None
    dW = dR = db = None
    for x_t, h_prev, c_prev, gi, gf, go, i, f, o, cc, tc in reversed(steps):
        do = mul(dh, tc)
        dct = mul(mul(dh, o), sub(one, mul(tc, tc)))
        dc = dct if dc is None else add(dc, dct)
        dgi = w.op("SigmoidBackprop", gi, mul(dc, cc))
        dgf = w.op("SigmoidBackprop", gf, mul(dc, c_prev))
        dgo = w.op("SigmoidBackprop", go, do)
        dgc = mul(mul(dc, i), sub(one, mul(cc, cc)))
        dg = w.op("Concat", dgi, dgf, dgo, dgc, axis=1)
        gw = w.op("Dot", _t(w, x_t, [BATCH, INPUT]), dg, reduction_axes_count=1)
        gr = w.op("Dot", _t(w, h_prev, [BATCH, HIDDEN]), dg, reduction_axes_count=1)
        gb = w.op("Sum", dg, reduction_axes=[0])
        dW, dR, db = (gw, gr, gb) if dW is None else (add(dW, gw), add(dR, gr), add(db, gb))
        dh = w.op("Dot", dg, _t(w, R, [HIDDEN, 4 * HIDDEN]), reduction_axes_count=1)
        dc = mul(dc, f)
    for r in (dW, dR, db, dh, dc):
        w.result(r)
    return w


def _lstm_inputs() -> dict[str, np.ndarray]:
    rng = _rng(50)
    shapes = [
        (STEPS, BATCH, INPUT),
        (INPUT, 4 * HIDDEN),
        (HIDDEN, 4 * HIDDEN),
        (4 * HIDDEN,),
        (BATCH, HIDDEN),
        (BATCH, HIDDEN),
        (BATCH, HIDDEN),
    ]
    return {f"Parameter_{i}": (rng.standard_normal(s) * 0.6).astype(np.float32) for i, s in enumerate(shapes)}


def _models() -> list[GoldenCase]:
    out = []
    for name, make, inputs in (("mlp", _mlp, _mlp_inputs), ("lstm", _lstm, _lstm_inputs)):
        for backward in (False, True):
            part = "backward" if backward else "forward"
            out.append(
                GoldenCase(
                    f"{name}_{part}",
                    graph(make(backward)),
                    inputs(),
                    note=f"the {part} pass of a small {name.upper()} (target of the training-graphs issue)",
                    ulp=64,
                    why=SUMS + "; " + MATH,
                )
            )
    return out


def cases() -> list[GoldenCase]:
    return _elementwise() + _pools() + _convs() + _grouped() + _norms() + _losses() + _models()
