"""Sum (every axes set, integer wrap, signed zeros, nGraph's compensated float sum) and Softmax."""

from __future__ import annotations

import itertools

import numpy as np

from onnx_dequant import dtypes
from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph, importable

SHAPE = (2, 3, 4)
AXES = [c for r in range(4) for c in itertools.combinations(range(3), r)]


def _sum_all_axes(et: str, x: np.ndarray) -> list:
    w = FunctionWriter()
    p = w.parameter(et, list(x.shape))
    for axes in AXES:
        w.result(w.op("Sum", p, reduction_axes=list(axes)))
    return graph(w)


def cases() -> list[GoldenCase]:
    out: list[GoldenCase] = []

    def add(case: GoldenCase) -> None:
        if importable(case.graph):
            out.append(case)

    rng = np.random.default_rng(12)
    # random float sums that round: within a ULP of nGraph's compensated sum
    for et in ("f32",):
        x = rng.standard_normal((4, 300)).astype(np.float32) * np.float32(1e3)
        w = FunctionWriter()
        w.result(w.op("Sum", w.parameter(et, [4, 300]), reduction_axes=[1]))
        add(
            GoldenCase(
                "sum_f32_rounding",
                graph(w),
                {"Parameter_0": x},
                note="f32 rows of 300 terms",
                ulp=1,
                why="nGraph's compensated f32 sum and our f64 sum rounded once may differ in the last place",
            )
        )
    for et in ("i8", "u8", "i16", "u16", "i32", "i64", "u32", "u64"):
        dt = dtypes.parse(et).numpy
        info = np.iinfo(dt)
        x = rng.integers(int(info.min), int(info.max), SHAPE, endpoint=True, dtype=dt)
        add(
            GoldenCase(
                f"sum_{et}", _sum_all_axes(et, x), {"Parameter_0": x}, note=f"Sum over every axes set, {et} wraps"
            )
        )
    for et in ("f32", "f64"):
        dt = dtypes.parse(et).numpy
        x = rng.integers(-8, 8, SHAPE).astype(dt) / 4  # exact sums in any order
        x.flat[:3] = (-0.0, -0.0, -0.0)
        add(
            GoldenCase(
                f"sum_{et}_exact",
                _sum_all_axes(et, x),
                {"Parameter_0": x},
                note=f"Sum over every axes set, {et}, values whose sums are exact in any order; -0 terms",
                ulp=0,
                why="every partial sum is exact, so any order gives the same bits",
            )
        )
    # -0 alone: a Sum over no axes and over axes
    x = np.full(SHAPE, -0.0, np.float32)
    add(
        GoldenCase(
            "sum_f32_negative_zeros",
            _sum_all_axes("f32", x),
            {"Parameter_0": x},
            note="Sums of -0 only: nGraph starts from +0 (so no axes turns -0 into +0)",
            ulp=0,
            why="sums of zeros are exact",
        )
    )
    # compensated summation: 1e8, fourteen 1 and -1e8 sum to 16 in nGraph 0.26 (Kahan), 0 when added in order
    row = np.array([1e8] + [1.0] * 14 + [-1e8], np.float32)
    w = FunctionWriter()
    w.result(w.op("Sum", w.parameter("f32", [2, 16]), reduction_axes=[1]))
    add(
        GoldenCase(
            "sum_f32_kahan",
            graph(w),
            {"Parameter_0": np.stack([row, row[::-1]])},
            note="a float Sum whose terms cancel: nGraph 0.26 sums with compensation (Kahan) and gives 16; the exact "
            "sum, ours (f64), is 14",
            ulp=2**21,
            why="nGraph's compensated f32 sum is 2 (2^20 ULP) off the exact 14, which we give (docs/ngraph.md)",
        )
    )
    # Softmax on one and several axes, f32 and f64
    for et in ("f32", "f64"):
        dt = dtypes.parse(et).numpy
        x = rng.standard_normal(SHAPE).astype(dt) * 3
        w = FunctionWriter()
        p = w.parameter(et, list(SHAPE))
        for axes in AXES[1:]:
            w.result(w.op("Softmax", p, softmax_axes=list(axes)))
        add(
            GoldenCase(
                f"softmax_{et}",
                graph(w),
                {"Parameter_0": x},
                note=f"Softmax over every non-empty axes set, {et}",
                ulp=8,
                why="exp and a float sum: libm and summation order differ",
            )
        )
    return out
