"""Atan2, Stack, BroadcastLike, ConvertLike, ScalarConstantLike, CumSum; DynSlice, DynReplaceSlice,
StridedSlice.

nGraph 0.26 runs BroadcastLike (of a scalar: for any other argument its constructor validates the base
Broadcast with an empty shape and fails), ScalarConstantLike (``value`` a number), DynSlice and
DynReplaceSlice (bounds as Constants: its DynElimination pass plans them as a Slice). It cannot read
Atan2, Stack, CumSum (v0 ops added later) nor ConvertLike and StridedSlice (v1): those cases' expected values come from
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
    why = "Cephes' atan in f64 against the C library's atan2 nGraph's kernel calls: measured within 1 ULP"
    return ulp(case, 1, why)


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
    ] + slice_cases()


# ---------------------------------------------------------------- the strided slices

X4 = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) - 60.5
# Only plans nGraph 0.26 runs: for some mask combinations (an upper-bound mask with a lower-bound one on
# the same axis, an ellipsis before a new axis) its shape inference (infer_slice_shape) disagrees with
# its plan and the call fails; the importer follows the plan (NumPy's reading)
SLICES = [  # name, begins, ends, strides, masks (lower, upper, new, shrink, ellipsis as slice indices)
    ("basic", [0, 1, 1, 0], [2, 3, 4, 5], [1, 1, 2, 2], {}),
    ("negative_bounds", [-1, -2, -3, -4], [-3, 3, -1, 5], [-1, 1, 1, 3], {}),
    ("reverse_stride", [10, 2, 3, 4], [-10, 0, -10, 0], [-1, -1, -2, -3], {}),
    ("masks", [1, 2, 3, 4], [2, 3, 1, 0], [1, 1, -1, 2], {"lower": {2}, "upper": {3}}),
    ("new_and_shrink", [0, 1, 0, -2, 0], [0, 2, 0, 0, 3], [1, 1, 1, 1, 1], {"new": {0, 2}, "shrink": {1, 3}}),
    ("ellipsis", [1, 0, -1], [2, 0, -4], [1, 1, -1], {"ellipsis": {1}, "new": {}, "shrink": {0}}),
    ("implicit_ellipsis", [1], [3], [1], {"new": set()}),
]


def numpy_slice(x: np.ndarray, begins, ends, strides, masks) -> np.ndarray:
    """The slice as NumPy's basic indexing reads it (independent of the importer's port of nGraph's plan)."""
    index: list = []
    for i, (b, e, s) in enumerate(zip(begins, ends, strides)):
        if i in masks.get("ellipsis", ()):
            index.append(Ellipsis)
        elif i in masks.get("new", ()):
            index.append(np.newaxis)
        elif i in masks.get("shrink", ()):
            index.append(b)
        else:
            lo = None if i in masks.get("lower", ()) else b
            hi = None if i in masks.get("upper", ()) else e
            index.append(slice(lo, hi, s))
    return np.ascontiguousarray(x[tuple(index)])


def _dyn_masks(masks) -> dict:
    keys = {"lower": "lower_bounds_mask", "upper": "upper_bounds_mask", "new": "new_axis", "shrink": "shrink_axis"}
    keys["ellipsis"] = "ellipsis_mask"
    return {key: sorted(masks.get(k, ())) for k, key in keys.items()}


def _flag_masks(masks, n: int) -> dict:
    keys = {"lower": "begin_mask", "upper": "end_mask", "new": "new_axis_mask", "shrink": "shrink_axis_mask"}
    keys["ellipsis"] = "ellipsis_mask"
    return {key: [int(i in masks.get(k, ())) for i in range(n)] for k, key in keys.items()}


DYNAMIC = (
    "; an unrelated Parameter of unknown length (-> Abs) makes nGraph run the function through its dynamic "
    "backend, whose DynElimination plans the op (INTERPRETER has no kernel for it)"
)


def _dynamic(w: FunctionWriter, inputs: dict) -> None:
    q = w.parameter("f32", [None])
    w.result(w.op("Abs", q))
    inputs[q] = np.array([-1.5, 0.0], np.float32)


def _dyn_slice(name, begins, ends, strides, masks, x=X4) -> GoldenCase:
    w = FunctionWriter()
    p = w.parameter(x.dtype, list(x.shape))
    bounds = [w.constant(np.array(v, np.int64)) for v in (begins, ends, strides)]
    w.result(w.op("DynSlice", p, *bounds, **_dyn_masks(masks)))
    inputs = {p: x}
    _dynamic(w, inputs)
    note = f"DynSlice {begins}:{ends}:{strides} {masks}" + DYNAMIC
    return GoldenCase(f"dyn_slice_{name}", graph(w), inputs, note=note)


def _dyn_replace_slice(name, begins, ends, strides, masks, x=X4) -> GoldenCase:
    r = -np.ascontiguousarray(numpy_slice(x, begins, ends, strides, masks)) * 10 - 0.25
    w = FunctionWriter()
    p, pr = w.parameter(x.dtype, list(x.shape)), w.parameter(r.dtype, list(r.shape))
    bounds = [w.constant(np.array(v, np.int64)) for v in (begins, ends, strides)]
    w.result(w.op("DynReplaceSlice", p, pr, *bounds, **_dyn_masks(masks)))
    inputs = {p: x, pr: r}
    _dynamic(w, inputs)
    note = f"DynReplaceSlice {begins}:{ends}:{strides} {masks}" + DYNAMIC
    return GoldenCase(f"dyn_replace_slice_{name}", graph(w), inputs, note=note)


def _strided_slice(name, begins, ends, strides, masks, x=X4, with_strides=True) -> GoldenCase:
    w = FunctionWriter(era="v0.29")
    p = w.parameter(x.dtype, list(x.shape))
    bounds = [w.constant(np.array(v, np.int64)) for v in (begins, ends, strides)]
    attrs = _flag_masks(masks, len(begins))
    r = w.result(w.op("StridedSlice", p, *(bounds if with_strides else bounds[:2]), version=1, **attrs))
    want = numpy_slice(x, begins, ends, strides, masks)
    note = f"StridedSlice {begins}:{ends}:{strides} {masks}; " + LATER.format(
        op="StridedSlice (v1)", how="make_slice_plan, the same plan as DynSlice's, read here as NumPy indexing"
    )
    return GoldenCase(f"strided_slice_{name}", graph(w), {p: x}, note=note, expected={r: want})


def slice_cases() -> list[GoldenCase]:
    out = []
    for name, b, e, s, m in SLICES:
        out += [_dyn_slice(name, b, e, s, m), _strided_slice(name, b, e, s, m)]
    x5 = np.arange(5, dtype=np.float32)  # nGraph clips a negative stride's begin before the start to 0: [0]
    out.append(_dyn_slice("reverse_from_before", [-7, -6], [0, -9], [-1, -2], {"upper": {0}}, x=np.stack([x5, -x5])))
    ints = np.arange(24, dtype=np.int16).reshape(4, 6)
    out.append(_strided_slice("i16_default_strides", [1, -5], [3, 100], [1, 1], {}, x=ints, with_strides=False))
    for name, b, e, s, m in SLICES[1:3] + SLICES[4:6]:
        out.append(_dyn_replace_slice(name, b, e, s, m))
    return out
