"""Element-wise math: trigonometric and hyperbolic functions, Erf, Ceiling, Floor, Sign, Power,
SquaredDifference; integer inputs computed in double and truncated, as nGraph's kernels."""

from __future__ import annotations

import numpy as np

from ._ops import one_op, ulp

Z = np.array([-2.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.7, np.nan, np.inf, -np.inf, 0.3], np.float32)
UNIT = np.array([-1.0, -0.75, -0.5, -0.0, 0.0, 0.25, 0.5, 0.999, 1.0, np.nan, 0.3, -0.3], np.float32)
ZI = np.array([-3, -1, 0, 1, 2, 5], np.int32)
TRUNCATED = "the double results lie far from the integers they truncate to: no rounding can flip them"
LIBM = "ONNX Runtime's vectorized math functions and the C library round differently"


def cases():
    out = []
    for op in ("Sin", "Cos", "Tan", "Sinh", "Cosh", "Atan", "Erf"):
        out.append(ulp(one_op(f"{op.lower()}_f32", op, [Z]), 2, LIBM))
    for op in ("Asin", "Acos"):
        out.append(ulp(one_op(f"{op.lower()}_f32", op, [UNIT]), 2, LIBM))
    for op in ("Ceiling", "Floor", "Sign"):
        out.append(one_op(f"{op.lower()}_f32", op, [Z], note=f"{op}: signed zeros, NaN, infinities"))
        out.append(one_op(f"{op.lower()}_i32", op, [ZI]))
    for op in ("Sin", "Cos"):
        c = one_op(f"{op.lower()}_i32", op, [ZI], note=f"{op} of an integer: computed in double, truncated")
        out.append(ulp(c, 0, TRUNCATED))
    base = np.array([2, -2, 0, 1.5, 4, -8, 0, -0.0], np.float32)
    expo = np.array([3, 2, 0, 2, 0.5, 1 / 3, -1, 3], np.float32)
    out.append(ulp(one_op("power_f32", "Power", [base, expo], binary="none"), 1, LIBM))
    out.append(
        one_op(
            "power_i32",
            "Power",
            [np.array([2, -2, 0, 3, 4, -8], np.int32), np.array([3, 2, 0, 2, 1, 0], np.int32)],
            binary="none",
        )
    )
    x = np.array([[1.5, -0.0, np.nan, 2.0], [3.0, -1.0, 0.0, np.inf]], np.float32)
    y = np.array([2.0, -1.0, -0.0, np.inf], np.float32)
    out.append(
        one_op("squared_difference_broadcast", "SquaredDifference", [x, y], auto_broadcast={"axis": -1, "type": 1})
    )
    return out
