"""Atan2, Stack, BroadcastLike, ConvertLike, ScalarConstantLike, CumSum.

nGraph 0.26 runs BroadcastLike (of a scalar: for any other argument its constructor validates the base
Broadcast with an empty shape and fails) and ScalarConstantLike (``value`` a number). It cannot read
Atan2, Stack, CumSum (v0 ops added later) nor ConvertLike (v1): those cases' expected values come from
the op's definition in nGraph's reference code, computed here step by step.
"""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph
from ._ops import one_op, ulp

RNG = np.random.default_rng(12)
LATER = "nGraph 0.26 cannot deserialize {op}: expected from its definition ({how})"


def _defined(name: str, op: str, inputs: list[np.ndarray], want: np.ndarray, how: str, **attrs) -> GoldenCase:
    version = attrs.pop("version", 0)
    w = FunctionWriter(era="v0.29" if version else "v0.26")
    ps = [w.parameter(x.dtype, list(x.shape)) for x in inputs]
    consts = attrs.pop("consts", [])
    r = w.result(w.op(op, *ps, *[w.constant(c) for c in consts], version=version, **attrs))
    note = f"{op} {attrs or ''}".strip() + "; " + LATER.format(op=op, how=how)
    return GoldenCase(name, graph(w), dict(zip(ps, inputs)), note=note, expected={r: want})


# ---------------------------------------------------------------- Atan2

_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -3.0, np.inf, -np.inf, np.nan, 1e-40, -7e30])


def _atan2_case(name: str, dt, how_many: int = 64) -> GoldenCase:
    ys, xs = (g.ravel() for g in np.meshgrid(_SPECIAL, _SPECIAL))
    np.seterr(over="ignore")
    scale = 10.0 ** RNG.integers(-8, 8, (2, how_many))
    y = np.concatenate([ys, RNG.standard_normal(how_many) * scale[0]]).astype(dt)
    x = np.concatenate([xs, RNG.standard_normal(how_many) * scale[1]]).astype(dt)
    with np.errstate(all="ignore"):
        if dt == np.float16:  # std::atan2 on nGraph's float16 picks the float overload, then rounds to half
            want = np.arctan2(y.astype(np.float32), x.astype(np.float32)).astype(np.float16)
        else:
            want = np.arctan2(y, x)
    case = _defined(name, "Atan2", [y, x], want, "the C library's atan2, which its kernel calls")
    return ulp(case, 1, "atan2 is the C library's (within 1 ULP); ours is Cephes' atan in f64 (measured within 1 ULP)")


def _atan2_int() -> GoldenCase:
    y = np.array([[5, -5, 0, 7, -100, 2**30]], np.int32)
    x = np.array([[3], [-3], [0]], np.int32)
    want = np.trunc(np.arctan2(y.astype(np.float64), x.astype(np.float64))).astype(np.int32)
    w = FunctionWriter()
    py, px = w.parameter("i32", list(y.shape)), w.parameter("i32", list(x.shape))
    r = w.result(w.binary("Atan2", py, px, broadcast="numpy"))
    note = "Atan2 on i32, numpy broadcast: atan2 in double truncated; " + LATER.format(
        op="Atan2", how="std::atan2 on integers is the double overload, cast back"
    )
    return GoldenCase("atan2_i32_broadcast", graph(w), {py: y, px: x}, note=note, expected={r: want})


# ---------------------------------------------------------------- CumSum


def ngraph_cumsum(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """nGraph's kernel: a running sum in the element type along ``axis``, one element after another."""
    a = np.moveaxis(x, axis, -1)
    out = np.zeros_like(a)
    n = a.shape[-1]
    order = range(n - 1, -1, -1) if reverse else range(n)
    prev = np.zeros(a.shape[:-1], a.dtype)
    with np.errstate(over="ignore"):
        for i in order:
            if exclusive:
                out[..., i] = prev
                prev = (prev + a[..., i]).astype(a.dtype)
            else:
                prev = (prev + a[..., i]).astype(a.dtype)
                out[..., i] = prev
    return np.moveaxis(out, -1, axis)


def _cumsum(name: str, x: np.ndarray, axis: int, exclusive: bool, reverse: bool, at=np.int64) -> GoldenCase:
    want = ngraph_cumsum(x, axis, exclusive, reverse)
    case = _defined(
        name,
        "CumSum",
        [x],
        want,
        "its kernel's running sum in the element type",
        consts=[np.array(axis, at)],
        exclusive=exclusive,
        reverse=reverse,
    )
    if x.dtype.kind == "f":
        return ulp(case, 0, "the same additions in the same order: ONNX Runtime's CumSum adds along the axis in turn")
    return case


# ---------------------------------------------------------------- the *Like ops, Stack


def _scalar_constant_like(name: str, like: np.ndarray, value: float) -> GoldenCase:
    return one_op(name, "ScalarConstantLike", [like], value=value, note=f"ScalarConstantLike {value} as {like.dtype}")


def cases():
    f32 = RNG.standard_normal((3, 5)).astype(np.float32) * 100
    wrap = np.array([[100, 100, 100, -128], [1, -1, 127, 127]], np.int8)
    stack_in = [RNG.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    ints = np.array([[1.9, -1.9, 0.5], [-0.0, 1e6, -2.5e9 / 3]], np.float32)
    return [
        _atan2_case("atan2_f32", np.float32),
        _atan2_case("atan2_f64", np.float64),
        _atan2_case("atan2_f16", np.float16, 16),
        _atan2_int(),
        _defined("stack_axis0", "Stack", stack_in, np.stack(stack_in, 0), "Reshape + Concat", axis=0),
        _defined("stack_axis_neg1", "Stack", stack_in[:2], np.stack(stack_in[:2], -1), "Reshape + Concat", axis=-1),
        _defined(
            "stack_i8_axis1",
            "Stack",
            [wrap, -wrap],
            np.stack([wrap, -wrap], 1),
            "Reshape + Concat",
            axis=1,
        ),
        _defined(
            "convert_like_f32_i32",
            "ConvertLike",
            [ints, np.zeros((1,), np.int32)],
            ints.astype(np.int32),
            "Convert to like's element type: static_cast, truncation toward zero",
            version=1,
        ),
        _defined(
            "convert_like_i8_f16",
            "ConvertLike",
            [wrap, np.zeros((2, 2), np.float16)],
            wrap.astype(np.float16),
            "Convert to like's element type",
            version=1,
        ),
        _cumsum("cumsum_f32_axis1", f32, 1, False, False),
        _cumsum("cumsum_f32_exclusive", f32, 0, True, False, np.int32),
        _cumsum("cumsum_f32_reverse", f32, 1, False, True),
        _cumsum("cumsum_f32_exclusive_reverse", f32, -1, True, True),
        _cumsum("cumsum_i8_wraps", wrap, -1, False, False),
        _cumsum("cumsum_u16_reverse", np.array([[65535, 1, 2], [3, 65000, 600]], np.uint16), 1, True, True),
        _cumsum("cumsum_f16", RNG.standard_normal((2, 7)).astype(np.float16), 1, False, False),
        _cumsum("cumsum_i64_axis0", np.arange(12, dtype=np.int64).reshape(3, 4) - 5, 0, False, True),
        _scalar_constant_like("scalar_constant_like_f32", f32, 2.5),
        _scalar_constant_like("scalar_constant_like_i32", np.zeros((2,), np.int32), -3.75),
        _scalar_constant_like("scalar_constant_like_u8", np.zeros((2,), np.uint8), 200.9),
        _scalar_constant_like("scalar_constant_like_f64", np.zeros((1,), np.float64), 0.1),
        one_op(
            "broadcast_like_scalar",
            "BroadcastLike",
            [np.array(1.5, np.float32), f32],
            initial_axes=[],
            note="BroadcastLike of a scalar, axes inferred (all)",
        ),
        _defined(
            "broadcast_like_vector_axes",
            "BroadcastLike",
            [np.arange(5, dtype=np.float32), f32],
            np.broadcast_to(np.arange(5, dtype=np.float32), (3, 5)),
            "Broadcast to like's shape along initial_axes; 0.26's constructor refuses any non-scalar argument",
            initial_axes=[0],
        ),
        _defined(
            "broadcast_like_inferred",
            "BroadcastLike",
            [np.arange(3, dtype=np.int32), np.zeros((3, 2, 4), np.int32)],
            np.broadcast_to(np.arange(3, dtype=np.int32)[:, None, None], (3, 2, 4)),
            "Broadcast to like's shape along the axes past the argument's rank",
            initial_axes=[],
        ),
    ]
