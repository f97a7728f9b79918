"""Comparisons (v0 names), logical ops and Select: NaN, signed zeros, infinities, broadcasting."""

from __future__ import annotations

import numpy as np

from ._ops import one_op

X = np.array([[1.5, -0.0, np.nan, 2.0], [3.0, -1.0, 0.0, np.inf]], np.float32)
Y = np.array([[1.5, 0.0, 1.0, np.nan], [2.0, -1.0, -0.0, np.inf]], np.float32)
XI = np.array([[1, 2, 3, 4], [5, 6, -7, 8]], np.int32)
YI = np.array([[1, 3, 2, 4], [8, 6, -5, 8]], np.int32)
BA = np.array([[True, False, True, False]] * 2)
BB = np.array([[True, True, False, False]] * 2)


def cases():
    out = []
    for op in ("Equal", "NotEqual", "Greater", "GreaterEq", "Less", "LessEq"):
        out.append(one_op(f"{op.lower()}_f32", op, [X, Y], binary="none", note=f"{op}: NaN, -0 against +0, inf"))
        out.append(one_op(f"{op.lower()}_i32", op, [XI, YI], binary="none"))
    out.append(one_op("greater_numpy_broadcast", "Greater", [X, Y[1]], binary="numpy"))
    out.append(one_op("equal_i8_broadcast", "Equal", [XI.astype(np.int8), YI[0].astype(np.int8)], binary="numpy"))
    for op in ("And", "Or", "Xor"):
        out.append(one_op(f"{op.lower()}_boolean", op, [BA, BB], binary="none"))
    out.append(one_op("not_boolean", "Not", [BA]))
    out.append(one_op("select_f32", "Select", [BA, X, Y], note="Select picks NaN, -0 and inf as they are"))
    out.append(one_op("select_i64", "Select", [BB, XI.astype(np.int64), YI.astype(np.int64)]))
    return out
