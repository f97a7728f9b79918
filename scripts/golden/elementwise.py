"""Elementwise unary and binary ops: every element type they take, signed zeros, NaN, infinities."""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph


def _unary(op: str, et: str, x: np.ndarray, **attrs) -> list:
    w = FunctionWriter()
    p = w.parameter(et, list(x.shape))
    w.result(w.op(op, p, **attrs))
    return graph(w)


SPECIAL_F32 = np.array([-0.0, 0.0, -1.5, 2.5, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38], np.float32)


def cases() -> list[GoldenCase]:
    out = []
    for op in ("Abs", "Negative", "Relu"):
        out.append(
            GoldenCase(
                f"{op.lower()}_f32_special",
                _unary(op, "f32", SPECIAL_F32),
                {"Parameter_0": SPECIAL_F32},
                note=f"{op} on signed zeros, NaN, infinities, subnormals",
            )
        )
    return out
