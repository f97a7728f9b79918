"""Dot: matrix products, tensor contractions over 0, 1 and 2 axes, scalars, integer types (wrap)."""

from __future__ import annotations

import numpy as np

from onnx_dequant import dtypes
from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph, importable

FORMS = [((3, 4), (4, 5), 1), ((2, 3, 4), (4, 5), 1), ((2, 3, 4), (3, 4, 2), 2), ((3,), (3,), 1), ((2, 3), (4,), 0),
         ((), (2, 3), 0), ((4,), (4, 3), 1), ((2, 3, 4), (4, 2, 2), 1)]  # fmt: skip


def _dots(et: str, rng: np.random.Generator) -> tuple[list, dict[str, np.ndarray]]:
    w = FunctionWriter()
    inputs = {}
    dt = dtypes.parse(et).numpy
    for sa, sb, n in FORMS:
        a, b = w.parameter(et, list(sa)), w.parameter(et, list(sb))
        if dt.kind == "f":
            inputs[a] = (rng.integers(-8, 8, sa) / 4).astype(dt)  # sums exact in any order
            inputs[b] = (rng.integers(-8, 8, sb) / 4).astype(dt)
        else:
            info = np.iinfo(dt)
            inputs[a] = rng.integers(int(info.min), int(info.max), sa, endpoint=True, dtype=dt)
            inputs[b] = rng.integers(int(info.min), int(info.max), sb, endpoint=True, dtype=dt)
        w.result(w.op("Dot", a, b, reduction_axes_count=n))
    return graph(w), {str(k): v for k, v in inputs.items()}


def cases() -> list[GoldenCase]:
    out = []
    rng = np.random.default_rng(13)
    for et in ("f32", "f64", "i8", "u8", "i16", "u16", "i32", "i64", "u32", "u64"):
        g, inputs = _dots(et, rng)
        if importable(g):
            exact = dict(ulp=0, why="quarter-integer values: every partial sum exact in any order") if "f" in et else {}
            note = f"Dot on {et}: products, contractions, scalars"
            out.append(GoldenCase(f"dot_{et}", g, inputs, note=note, **exact))
    w = FunctionWriter()
    w.result(w.op("Dot", w.parameter("f32", [5, 64]), w.parameter("f32", [64, 7]), reduction_axes_count=1))
    out.append(
        GoldenCase(
            "dot_f32_random",
            graph(w),
            {
                "Parameter_0": rng.standard_normal((5, 64)).astype(np.float32),
                "Parameter_1": rng.standard_normal((64, 7)).astype(np.float32),
            },
            note="a float matrix product whose sums round",
            ulp=16,
            why="f32 sums of 64 products: nGraph and ONNX Runtime add in different orders",
        )
    )
    return out
