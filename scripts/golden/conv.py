"""Convolution (strides, dilation, negative padding), MaxPool and AvgPool (padding, both
include_padding_in_avg_computation settings), small enough for nGraph's naive INTERPRETER."""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph, importable


def cases() -> list[GoldenCase]:
    rng = np.random.default_rng(14)
    out = []
    w = FunctionWriter()
    x = w.parameter("f32", [2, 3, 9, 8])
    f = w.parameter("f32", [4, 3, 3, 2])
    conv = dict(window_movement_strides=[2, 1], window_dilation_strides=[1, 2], data_dilation_strides=[1, 1])
    w.result(w.op("Convolution", x, f, padding_below=[1, -1], padding_above=[2, 0], **conv))
    w.result(w.op("Convolution", x, f, padding_below=[0, 0], padding_above=[0, 0], **conv))
    inputs = {
        "Parameter_0": (rng.integers(-8, 8, (2, 3, 9, 8)) / 4).astype(np.float32),
        "Parameter_1": (rng.integers(-8, 8, (4, 3, 3, 2)) / 4).astype(np.float32),
    }
    out.append(
        GoldenCase(
            "convolution_f32",
            graph(w),
            inputs,
            note="Convolution with strides, dilation, negative padding",
            ulp=0,
            why="quarter-integer values: every partial sum exact in any order",
        )
    )
    w = FunctionWriter()
    x = w.parameter("f32", [2, 3, 7, 6])
    w.result(w.op("MaxPool", x, window_shape=[3, 2], window_movement_strides=[2, 2], padding_below=[1, 0],
                  padding_above=[1, 1]))  # fmt: skip
    w.result(w.op("MaxPool", x, window_shape=[2, 2], window_movement_strides=[1, 1]))
    for include in (True, False):
        w.result(w.op("AvgPool", x, window_shape=[3, 3], window_movement_strides=[2, 1], padding_below=[1, 1],
                      padding_above=[1, 1], include_padding_in_avg_computation=include))  # fmt: skip
    xv = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    xv[0, 0, 0, :3] = (-0.0, np.inf, -np.inf)
    out.append(
        GoldenCase(
            "pools_f32",
            graph(w),
            {"Parameter_0": xv},
            note="MaxPool and AvgPool with padding; infinities",
            ulp=2,
            why="AvgPool sums nine values and divides: summation order",
        )
    )
    return [c for c in out if importable(c.graph)]
