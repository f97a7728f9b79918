"""Layout and indexing ops: Squeeze, Unsqueeze, ShapeOf, DepthToSpace, SpaceToDepth, ShuffleChannels,
Gather, GatherND, ArgMax / ArgMin (NaN never wins, first extreme), MatMul, BatchMatMul, Clamp (NaN and
-0 pass through). Transpose, Tile and Range: nGraph 0.26's INTERPRETER has no kernel for them
("Unsupported op"), so their expected values come from the ops' definitions (NumPy's transpose, tile,
``start + i * step``)."""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph
from ._ops import one_op, ulp

RNG = np.random.default_rng(6)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
X4 = RNG.standard_normal((1, 8, 2, 3)).astype(np.float32)
SUMS = "MatMul sums products in ONNX Runtime's order, nGraph in index order"


def _with_const(name: str, op: str, x: np.ndarray, const: np.ndarray, expected: np.ndarray, note: str) -> GoldenCase:
    w = FunctionWriter()
    p = w.parameter(x.dtype, list(x.shape))
    r = w.result(w.op(op, p, w.constant(const)))
    return GoldenCase(name, graph(w), {p: x}, note=note, expected={r: expected})


def _range(name: str, start, stop, step, dt) -> GoldenCase:
    w = FunctionWriter()
    values = (dt(start) + np.arange(len(np.arange(start, stop, step))).astype(dt) * dt(step)).astype(dt)
    p = w.parameter(dt, [len(values)])
    rng = w.op("Range", w.constant(dt(start)), w.constant(dt(stop)), w.constant(dt(step)))
    r = w.result(w.binary("Add", p, rng))
    zeros = np.zeros(len(values), dt)
    return GoldenCase(name, graph(w), {p: zeros}, note="Range + zeros: start + i * step", expected={r: values})


def cases():
    xa = X.copy()
    xa[0, 1, 2] = np.nan
    xa[1, 0, 0] = xa[1, 1, 0]
    out = [
        _with_const("transpose", "Transpose", X, np.array([2, 0, 1], np.int64), X.transpose(2, 0, 1), "Transpose"),
        _with_const("tile", "Tile", X, np.array([2, 1, 3], np.int64), np.tile(X, (2, 1, 3)), "Tile"),
        _range("range_f32", 0.5, 3.0, 0.5, np.float32),
        _range("range_i32_down", 10, 1, -3, np.int32),
        one_op("depth_to_space", "DepthToSpace", [X4], block_size=2),
        one_op("space_to_depth", "SpaceToDepth", [RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)], block_size=2),
        one_op("shuffle_channels", "ShuffleChannels", [X4], axis=1, groups=2),
        one_op("shape_of", "ShapeOf", [X]),
        one_op("clamp_f32", "Clamp", [np.array([-1, -0.5, 0.3, 2, np.nan, -0.0], np.float32)], min=-0.5, max=1.25),
        one_op("clamp_i32", "Clamp", [np.array([-5, -1, 0, 2, 3, 9], np.int32)], min=-1.5, max=2.7),
    ]
    w = FunctionWriter()
    p = w.parameter("f32", [2, 1, 4, 1])
    w.result(w.op("Squeeze", p, w.constant(np.array([1], np.int64))))
    w.result(w.op("Squeeze", p, w.constant(np.array([], np.int64))))
    w.result(w.op("Unsqueeze", p, w.constant(np.array([0, 5], np.int64))))
    out.append(GoldenCase("squeeze_unsqueeze", graph(w), {p: X[:, :1, :, None].copy()}, note="Squeeze, Unsqueeze"))
    for it in ("int32_t", "int64_t"):
        for op in ("ArgMax", "ArgMin"):
            out.append(one_op(f"{op.lower()}_{it[:5]}", op, [xa], axis=1, index_element_type=it, note="NaN, ties"))
    out.append(one_op("gather_axis1", "Gather", [X, np.array([[0, 2], [1, 1]], np.int32)], axis=1))
    out.append(one_op("gather_nd", "GatherND", [X, np.array([[0, 2], [1, 1], [1, 0]], np.int64)]))
    a = RNG.standard_normal((2, 4, 3)).astype(np.float32)
    b = RNG.standard_normal((5, 4)).astype(np.float32)
    out.append(ulp(one_op("matmul_transposed", "MatMul", [a, b], transpose_a=True, transpose_b=True), 4, SUMS))
    c = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    out.append(ulp(one_op("batch_matmul", "BatchMatMul", [X, c]), 4, SUMS))
    return out
