"""ConvolutionBias and ConvolutionBiasAdd (opset 0 fused ops): nGraph's decomposition, a Convolution plus the
bias broadcast over the channel axis (plus the sum input). nGraph 0.26.0 reads and runs both; its deserializer
does not read ``with_relu`` (the op is built without it), so the Relu is tested apart
(tests/test_ngraph_layers.py). BatchMatMulTranspose (a later nGraph's fused op): from its decomposition.
ConvolutionBiasBackpropFiltersBias: from nGraph 0.26.0."""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter, Ref

from . import GoldenCase, graph

CONV = dict(
    window_movement_strides=[1, 2],
    window_dilation_strides=[2, 1],
    padding_below=[1, -1],
    padding_above=[0, 2],
    data_dilation_strides=[1, 1],
)
EXACT = "quarter-integer values: every partial sum exact in any order"


def _quarters(rng: np.random.Generator, shape: list[int]) -> np.ndarray:
    return (rng.integers(-8, 8, shape) / 4).astype(np.float32)


def cases() -> list[GoldenCase]:
    rng = np.random.default_rng([12, 5])
    xs, fs = [2, 3, 7, 8], [4, 3, 3, 2]
    out = []
    w = FunctionWriter()
    x, f, b = w.parameter("f32", xs), w.parameter("f32", fs), w.parameter("f32", [4])
    w.result(w.op("ConvolutionBias", x, f, b, **CONV))
    feeds = {str(x): _quarters(rng, xs), str(f): _quarters(rng, fs), str(b): _quarters(rng, [4])}
    out.append(GoldenCase("convolution_bias", graph(w), feeds, note="ConvolutionBias, 2-D", ulp=0, why=EXACT))

    w = FunctionWriter()
    x, f, b = w.parameter("f32", xs), w.parameter("f32", fs), w.parameter("f32", [4])
    s = w.parameter("f32", [2, 4, 4, 4])
    w.result(w.op("ConvolutionBiasAdd", x, f, b, s, **CONV))
    feeds = {
        str(x): _quarters(rng, xs),
        str(f): _quarters(rng, fs),
        str(b): _quarters(rng, [4]),
        str(s): _quarters(rng, [2, 4, 4, 4]),
    }
    out.append(GoldenCase("convolution_bias_add", graph(w), feeds, note="ConvolutionBiasAdd, 2-D", ulp=0, why=EXACT))

    w = FunctionWriter()
    x, f, b = w.parameter("f32", [1, 2, 9]), w.parameter("f32", [3, 2, 3]), w.parameter("f32", [3])
    w.result(w.op("ConvolutionBias", x, f, b, **{k: v[:1] for k, v in CONV.items()}))
    feeds = {
        str(x): _quarters(rng, [1, 2, 9]),
        str(f): _quarters(rng, [3, 2, 3]),
        str(b): _quarters(rng, [3]),
    }
    out.append(GoldenCase("convolution_bias_1d", graph(w), feeds, note="ConvolutionBias, 1-D", ulp=0, why=EXACT))
    return out + _batch_matmul_transpose() + _backprop_filters_bias()


def _batch_matmul_transpose() -> list[GoldenCase]:
    """BatchMatMulTranspose (a later nGraph's fused op; 0.26 cannot read it): expected values are nGraph
    0.26.0 running its decomposition, each transposed side a Reshape with input_order [0, 2, 1], then
    BatchMatMul."""
    from ._ops import run_ngraph

    rng = np.random.default_rng([12, 6])
    out = []
    for t0, t1 in ((False, True), (True, False), (True, True)):
        sa = [3, 5, 4] if t0 else [3, 4, 5]
        sb = [3, 6, 5] if t1 else [3, 5, 6]
        feeds = {"Parameter_0": _quarters(rng, sa), "Parameter_1": _quarters(rng, sb)}
        ref = FunctionWriter()
        a, b = ref.parameter("f32", sa), ref.parameter("f32", sb)
        if t0:
            a = ref.op("Reshape", a, input_order=[0, 2, 1], output_shape=[3, 4, 5])
        if t1:
            b = ref.op("Reshape", b, input_order=[0, 2, 1], output_shape=[3, 5, 6])
        ref.result(ref.op("BatchMatMul", a, b))
        (want,) = run_ngraph(ref, feeds)
        w = FunctionWriter(era="v0.29")
        a, b = w.parameter("f32", sa), w.parameter("f32", sb)
        r = w.result(w.op("BatchMatMulTranspose", a, b, transpose_0=t0, transpose_1=t1))
        out.append(
            GoldenCase(
                f"batch_matmul_transpose_{int(t0)}{int(t1)}",
                graph(w),
                feeds,
                note="BatchMatMulTranspose; expected: nGraph 0.26.0 running its decomposition (Reshape, BatchMatMul)",
                expected={r: want},
                ulp=0,
                why=EXACT,
            )
        )
    return out


def _backprop_filters_bias() -> list[GoldenCase]:
    """ConvolutionBiasBackpropFiltersBias: the filters' and the bias's gradients, read through GetOutputElement."""
    rng = np.random.default_rng([12, 7])
    xs, fs, ds = [2, 3, 6, 5], [4, 3, 3, 2], [2, 4, 4, 4]
    fwd = dict(
        window_movement_strides_forward=[1, 1],
        window_dilation_strides_forward=[1, 1],
        padding_below_forward=[0, 0],
        padding_above_forward=[0, 0],
        data_dilation_strides_forward=[1, 1],
    )
    w = FunctionWriter()
    x, d = w.parameter("f32", xs), w.parameter("f32", ds)
    op = w.op("ConvolutionBiasBackpropFiltersBias", x, d, filters_shape=fs, bias_shape=[4], **fwd)
    w.result(w.op("GetOutputElement", Ref(op, 0), n=0))
    w.result(w.op("GetOutputElement", Ref(op, 1), n=1))
    feeds = {str(x): _quarters(rng, xs), str(d): _quarters(rng, ds)}
    return [
        GoldenCase(
            "convolution_bias_backprop_filters_bias",
            graph(w),
            feeds,
            note="ConvolutionBiasBackpropFiltersBias, 2-D, both outputs",
            ulp=0,
            why=EXACT,
        )
    ]
