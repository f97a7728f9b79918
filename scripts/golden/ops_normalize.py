"""NormalizeL2 (eps ADD and MAX, leading and all axes), GRN (rank 2, 3, 4: axis 1 of the 4-D view), LRN."""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph
from ._ops import one_op, ulp

RNG = np.random.default_rng(9)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
SUMS = "sums of squares in ONNX Runtime's order (nGraph's in index order), then sqrt / pow"


def _l2(name: str, axes, eps: float, mode: int) -> GoldenCase:
    w = FunctionWriter()
    p = w.parameter("f32", [2, 3, 4])
    w.result(w.op("NormalizeL2", p, w.constant(np.array(axes, np.int64)), eps=eps, eps_mode=mode))
    return ulp(GoldenCase(name, graph(w), {p: X}, note=f"NormalizeL2 axes {axes} eps_mode {mode}"), 4, SUMS)


def _lrn() -> GoldenCase:
    w = FunctionWriter()
    p = w.parameter("f32", [2, 5, 3, 3])
    w.result(w.op("LRN", p, w.constant(np.array([1], np.int64)), alpha=0.1, beta=0.75, bias=1.0, nsize=3))
    x = RNG.standard_normal((2, 5, 3, 3)).astype(np.float32)
    return ulp(GoldenCase("lrn_channels", graph(w), {p: x}, note="LRN across channels, size 3"), 4, SUMS)


def cases():
    out = [
        _l2("normalize_l2_add_axis0", [0], 1e-3, 0),
        _l2("normalize_l2_max_all", [0, 1, 2], 5.0, 1),
        _l2("normalize_l2_add_all", [0, 1, 2], 1e-3, 0),
        _lrn(),
    ]
    for shape in ((2, 3, 4, 5), (3, 4), (2, 3, 4)):
        x = RNG.standard_normal(shape).astype(np.float32)
        out.append(ulp(one_op(f"grn_rank{len(shape)}", "GRN", [x], bias=0.5), 4, SUMS))
    return out
