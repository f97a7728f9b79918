"""Pad (every mode, negative padding), Reverse, ReplaceSlice, OneHot, Split with GetOutputElement."""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter, Ref

from . import GoldenCase, graph
from ._ops import one_op

RNG = np.random.default_rng(4)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def _pad(name: str, mode: int, below, above, x=X, value=7.5) -> GoldenCase:
    w = FunctionWriter()
    p = w.parameter(x.dtype, list(x.shape))
    v = w.constant(np.asarray(value, x.dtype))
    w.result(w.op("Pad", p, v, padding_below=below, padding_above=above, pad_mode=mode))
    return GoldenCase(name, graph(w), {p: x}, note=f"Pad mode {mode} below {below} above {above}")


def _split() -> GoldenCase:
    w = FunctionWriter()
    p = w.parameter("f32", [2, 12])
    s = w.op("Split", p, axis=1, splits=[3, 4, 5])
    g1 = w.op("GetOutputElement", Ref(s, 1), n=1)
    g2 = w.op("GetOutputElement", Ref(s, 2), n=2)
    g0 = w.op("GetOutputElement", Ref(s, 0), n=0)
    w.result(g2)
    w.result(w.op("Relu", g1))
    w.result(g0)
    x = np.arange(-12, 12, dtype=np.float32).reshape(2, 12)
    return GoldenCase("split_get_output_element", graph(w), {p: x}, note="Split's outputs through GetOutputElement")


def cases():
    out = [
        _pad("pad_constant", 0, [0, 1, 2], [1, 0, 1]),
        _pad("pad_constant_negative", 0, [0, -1, 1], [0, 1, -2]),
        _pad("pad_edge", 1, [0, 1, 2], [1, 0, 3]),
        _pad("pad_edge_negative", 1, [0, -1, 1], [0, 2, -2]),
        _pad("pad_reflect", 2, [0, 2, 3], [1, 1, 2]),
        _pad("pad_symmetric", 3, [0, 2, 3], [1, 1, 2]),
        _pad("pad_symmetric_above_only", 3, [0, 0, 0], [0, 2, 3]),
        _pad("pad_i8", 0, [1, 1], [2, 0], x=RNG.integers(-9, 9, (2, 3)).astype(np.int8), value=-3),
        _split(),
    ]
    for axes in ([0], [1, 2], [], [0, 1, 2]):
        out.append(one_op(f"reverse_{''.join(map(str, axes)) or 'none'}", "Reverse", [X], reversed_axes=axes))
    r = RNG.standard_normal((1, 2, 2)).astype(np.float32)
    out.append(
        one_op(
            "replace_slice_strided",
            "ReplaceSlice",
            [X, r],
            lower_bounds=[1, 0, 1],
            upper_bounds=[2, 3, 4],
            strides=[1, 2, 2],
        )
    )
    r2 = RNG.standard_normal((2, 1, 4)).astype(np.float32)
    out.append(
        one_op(
            "replace_slice", "ReplaceSlice", [X, r2], lower_bounds=[0, 2, 0], upper_bounds=[2, 3, 4], strides=[1, 1, 1]
        )
    )
    idx = np.array([[0, 2, 1], [-1, 3, 2]], np.int64)
    out.append(
        one_op("one_hot_i64_last_axis", "OneHot", [idx], shape=[2, 3, 3], one_hot_axis=2, note="-1 and 3: no hot")
    )
    out.append(one_op("one_hot_i32_axis0", "OneHot", [idx.astype(np.int32)], shape=[4, 2, 3], one_hot_axis=0))
    out.append(one_op("one_hot_u8", "OneHot", [np.array([0, 1, 255, 4], np.uint8)], shape=[4, 5], one_hot_axis=1))
    return out
