"""BatchNormInference (nGraph's input order: gamma, beta, input, mean, variance) on rank 2 and 4, f32 and f64."""

from __future__ import annotations

import numpy as np

from ._ops import one_op, ulp

RNG = np.random.default_rng(5)


def _bn(name: str, shape, dt, eps: float):
    c = shape[1]
    g, b, m = (RNG.standard_normal(c).astype(dt) for _ in range(3))
    v = RNG.uniform(0.1, 2, c).astype(dt)
    x = RNG.standard_normal(shape).astype(dt)
    return one_op(name, "BatchNormInference", [g, b, x, m, v], eps=eps)


def cases():
    return [
        _bn("batch_norm_inference_nchw", (2, 3, 4, 5), np.float32, 1e-3),
        _bn("batch_norm_inference_nc", (4, 6), np.float32, 1e-5),
        ulp(
            _bn("batch_norm_inference_f64", (2, 3, 2, 2), np.float64, 1e-5),
            4,
            "nGraph's build fuses the last multiply-add; f64 has no wider type to reproduce it exactly",
        ),
    ]
