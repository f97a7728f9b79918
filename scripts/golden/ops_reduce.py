"""Reductions (v0): Sum, Product, Max, Min over several axis sets, NaN (never wins in Max / Min), no axes,
empty inputs, wrapping integer products and sums, Any / All."""

from __future__ import annotations

import numpy as np

from ._ops import one_op, ulp

RNG = np.random.default_rng(3)
R = RNG.standard_normal((3, 4, 5)).astype(np.float32)
R[0, 1, 2] = np.nan
R[2, 3, 4] = -0.0
RI = RNG.integers(-100, 100, (3, 4, 5)).astype(np.int8)
RB = RNG.integers(0, 2, (3, 4, 5)).astype(bool)
EXACT = "integer sums and products in 64 bits are exact (the policy counts every ReduceSum as inexact)"
ORDER = "nGraph adds (multiplies) in order with Kahan compensation, ONNX Runtime in its own order"


def cases():
    out = []
    for op in ("Sum", "Product", "Max", "Min"):
        for axes in ([1], [0, 2], [0, 1, 2], []):
            name = f"{op.lower()}_f32_axes_{''.join(map(str, axes)) or 'none'}"
            c = one_op(name, op, [R], reduction_axes=axes, note=f"{op} over {axes}: NaN at [0,1,2], -0 at [2,3,4]")
            out.append(ulp(c, 8, ORDER) if op in ("Sum", "Product") and axes else c)
        c = one_op(f"{op.lower()}_i8", op, [RI], reduction_axes=[1, 2], note=f"{op} on i8: wraps in i8")
        out.append(ulp(c, 0, EXACT) if op in ("Sum", "Product") else c)
    out.append(one_op("max_empty_axis", "Max", [np.zeros((3, 0, 2), np.float32)], reduction_axes=[1]))
    out.append(one_op("min_i32_empty_axis", "Min", [np.zeros((2, 0), np.int32)], reduction_axes=[1]))
    out.append(ulp(one_op("sum_i16_wraps", "Sum", [np.full((4, 300), 300, np.int16)], reduction_axes=[1]), 0, EXACT))
    for op in ("Any", "All"):
        out.append(ulp(one_op(f"{op.lower()}_boolean", op, [RB], reduction_axes=[1]), 0, EXACT))
        out.append(ulp(one_op(f"{op.lower()}_empty", op, [np.zeros((2, 0), bool)], reduction_axes=[1]), 0, EXACT))
    return out
