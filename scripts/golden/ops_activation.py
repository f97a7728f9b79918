"""Activations nGraph 0.26 defines by decomposition: Elu, HardSigmoid, PRelu (1-D slope along the axis of its
length, or NumPy broadcasting), Gelu, ScaleShift, Gemm."""

from __future__ import annotations

import numpy as np

from ._ops import one_op, ulp

RNG = np.random.default_rng(8)
Z = np.array([-2.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.7, np.nan, np.inf, -np.inf, 0.3], np.float32)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
X[0, 0, 0] = -0.0
X[0, 0, 1] = np.nan
LIBM = "ONNX Runtime's Exp / Erf and the C library's round differently"
CANCEL = "1 + erf(x) cancels for negative x: one ULP of Erf becomes many of the result"
SUMS = "the product's sums in ONNX Runtime's order, nGraph's Dot in index order"


def cases():
    return [
        ulp(one_op("elu", "Elu", [Z], alpha=0.7), 2, LIBM),
        one_op("hard_sigmoid", "HardSigmoid", [Z], alpha=0.2, beta=0.5),
        ulp(one_op("gelu", "Gelu", [Z]), 128, CANCEL),
        one_op("prelu_channel_slope", "PRelu", [X, np.array([0.1, -2, 0.5], np.float32)]),
        one_op("prelu_numpy_slope", "PRelu", [X, RNG.standard_normal((3, 4)).astype(np.float32)]),
        one_op(
            "scale_shift",
            "ScaleShift",
            [X, RNG.standard_normal(4).astype(np.float32), RNG.standard_normal((3, 1)).astype(np.float32)],
        ),
        ulp(
            one_op(
                "gemm_transposed",
                "Gemm",
                [
                    RNG.standard_normal((4, 3)).astype(np.float32),
                    RNG.standard_normal((5, 4)).astype(np.float32),
                    RNG.standard_normal(5).astype(np.float32),
                ],
                alpha=0.5,
                beta=2.0,
                transA=True,
                transB=True,
            ),
            4,
            SUMS,
        ),
    ]
