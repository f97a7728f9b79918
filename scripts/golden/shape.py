"""Data movement: Reshape (with input_order), Broadcast, Concat, Slice (strides), on several element types,
zero-size dimensions included."""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph, importable, specials


def _movement(et: str) -> tuple[list, dict[str, np.ndarray]]:
    w = FunctionWriter()
    x = w.parameter(et, [2, 3, 4])
    e = w.parameter(et, [2, 0, 4])
    w.result(w.op("Reshape", x, input_order=[0, 1, 2], output_shape=[6, 4]))
    w.result(w.op("Reshape", x, input_order=[2, 0, 1], output_shape=[4, 6]))
    w.result(w.op("Reshape", x, input_order=[1, 2, 0], output_shape=[3, 2, 4]))
    w.result(w.op("Reshape", e, input_order=[0, 1, 2], output_shape=[0, 8]))
    w.result(w.op("Broadcast", x, shape=[2, 5, 3, 4], axes=[1]))
    w.result(w.op("Broadcast", x, shape=[2, 3, 4, 2], axes=[3]))
    w.result(w.op("Concat", x, x, axis=1))
    w.result(w.op("Concat", x, e, x, axis=1))
    w.result(w.op("Slice", x, lower_bounds=[0, 1, 0], upper_bounds=[2, 3, 4], strides=[1, 1, 2]))
    w.result(w.op("Slice", x, lower_bounds=[1, 0, 1], upper_bounds=[2, 3, 4], strides=[1, 2, 3]))
    w.result(w.op("Slice", x, lower_bounds=[0, 2, 0], upper_bounds=[2, 2, 4], strides=[1, 1, 1]))
    v = specials(et)
    xv = np.resize(v, 24).reshape(2, 3, 4)
    return graph(w), {"Parameter_0": xv, "Parameter_1": np.zeros((2, 0, 4), xv.dtype)}


def cases() -> list[GoldenCase]:
    out = []
    for et in ("f32", "f64", "bf16", "i8", "u8", "i16", "u16", "i32", "i64", "u32", "u64", "boolean"):
        g, inputs = _movement(et)
        if importable(g):
            out.append(GoldenCase(f"movement_{et}", g, inputs, note=f"Reshape, Broadcast, Concat, Slice on {et}"))
    return out
