"""ScatterND (v0 fused op after 0.26), DynBroadcast, DynPad.

nGraph 0.26 runs DynBroadcast through its dynamic backend (DynElimination makes it a Broadcast; an
unrelated Parameter of unknown length makes the function dynamic). It cannot read ScatterND, and no
nGraph backend has a DynPad kernel (INTERPRETER: "Unsupported op"): those cases' expected values come
from the ops' definitions (ScatterND's decomposition, Pad's kernel), computed here.
"""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph
from .ops_data import DYNAMIC, _dynamic

RNG = np.random.default_rng(13)


def ngraph_scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    """nGraph's ScatterND decomposition: indexed elements zeroed (a Select), then ScatterNDAdd in index order."""
    k = indices.shape[-1]
    idx = indices.reshape(-1, k)
    upd = updates.reshape((idx.shape[0],) + data.shape[k:])
    out = data.copy()
    for row in idx:
        out[tuple(row)] = 0
    for row, u in zip(idx, upd):
        out[tuple(row)] = out[tuple(row)] + u
    return out


def _scatter_nd(name: str, data: np.ndarray, indices: np.ndarray, updates: np.ndarray, note: str) -> GoldenCase:
    w = FunctionWriter()
    ps = [w.parameter(x.dtype, list(x.shape)) for x in (data, indices, updates)]
    r = w.result(w.op("ScatterND", *ps))
    note += "; nGraph 0.26 cannot deserialize ScatterND: expected from its decomposition (Select + ScatterNDAdd)"
    want = ngraph_scatter_nd(data, indices, updates)
    return GoldenCase(name, graph(w), dict(zip(ps, (data, indices, updates))), note=note, expected={r: want})


def _dyn_broadcast(name: str, x: np.ndarray, shape: list[int], axes: list[int]) -> GoldenCase:
    w = FunctionWriter()
    p = w.parameter(x.dtype, list(x.shape))
    w.result(w.op("DynBroadcast", p, w.constant(np.array(shape, np.int64)), w.constant(np.array(axes, np.int64))))
    inputs = {p: x}
    _dynamic(w, inputs)
    return GoldenCase(name, graph(w), inputs, note=f"DynBroadcast to {shape} along {axes}" + DYNAMIC)


def _dyn_pad(name: str, x: np.ndarray, below: list[int], above: list[int], value, mode: str | None = None):
    w = FunctionWriter()
    p = w.parameter(x.dtype, list(x.shape))
    pads = [w.constant(np.array(v, np.int64)) for v in (below, above)]
    attrs = {} if mode is None else {"pad_mode": mode}
    r = w.result(w.op("DynPad", p, *pads, w.constant(np.array(value, x.dtype)), **attrs))
    cropped = x[tuple(slice(max(-lo, 0), x.shape[i] - max(-hi, 0)) for i, (lo, hi) in enumerate(zip(below, above)))]
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in zip(below, above)]
    np_mode = (mode or "constant").lower()
    if np_mode == "constant":
        want = np.pad(cropped, widths, constant_values=value)
    else:
        want = np.pad(cropped, widths, mode=np_mode)
    note = f"DynPad {below} {above} {mode or 'CONSTANT'}; no nGraph backend has a DynPad kernel: expected from Pad's"
    return GoldenCase(name, graph(w), {p: x}, note=note, expected={r: want})


def cases():
    data = RNG.standard_normal((4, 3)).astype(np.float32)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    return [
        _scatter_nd(
            "scatter_nd_rows_repeated",
            data,
            np.array([[2], [0], [2]], np.int64),
            np.array([[1, 2, 3], [4, 5, 6], [0.5, -0.0, 10]], np.float32),
            "ScatterND of rows; row 2 twice: its updates add up",
        ),
        _scatter_nd(
            "scatter_nd_elements_i32",
            np.arange(24, dtype=np.int32).reshape(2, 3, 4),
            np.array([[[0, 1, 2], [1, 2, 3]], [[1, 0, 0], [0, 1, 2]]], np.int32),
            np.array([[100, -7], [9, 1000]], np.int32),
            "ScatterND of single elements, i32 indices; one element twice",
        ),
        _dyn_broadcast("dyn_broadcast_axes02", np.arange(3, dtype=np.float32), [2, 3, 4], [0, 2]),
        _dyn_broadcast("dyn_broadcast_i8_none", np.arange(6, dtype=np.int8).reshape(2, 3), [2, 3], []),
        _dyn_pad("dyn_pad_constant", x, [1, 0], [0, 2], -1.25),
        _dyn_pad("dyn_pad_negative", x, [-1, 2], [1, -2], 7.0),
        _dyn_pad("dyn_pad_edge", x, [2, 1], [1, 3], 0.0, "EDGE"),
        _dyn_pad("dyn_pad_reflect", x.astype(np.int32), [1, 2], [2, 3], 0, "REFLECT"),
    ]
