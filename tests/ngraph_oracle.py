"""An independent NumPy interpreter of nGraph serialized functions, transcribing nGraph's reference kernels.

Used by the importer's tests as the oracle: it shares no code with ``onnx_dequant.ngraph`` (only the
element-type table and the Dequantize reference, which has its own tests). Math functions and sums are
computed in float64 and rounded once, so results are at least as accurate as any runtime's.
"""

from __future__ import annotations

import itertools
from typing import Any

import ml_dtypes
import numpy as np

from onnx_dequant import dtypes
from onnx_dequant.reference import dequantize

__all__ = ["evaluate", "ngraph_quantize", "std_round"]


def _et(v: Any) -> np.dtype:
    if isinstance(v, dict):
        v = v["c_type_string"]
    return dtypes.parse(v).numpy


def _constant(js: dict) -> np.ndarray:
    holder = js if "element_type" in js else js["value_type"]
    dt = _et(holder["element_type"])
    shape = tuple(holder["shape"])
    vals = js["value"]
    if dt.kind == "f" or dt.name in ("bfloat16",):
        parsed = [float(s) for s in vals]
    elif dt == np.bool_:
        parsed = [s.strip().lower() in ("1", "true") for s in vals]
    else:
        parsed = [int(s) for s in vals]
    arr = np.array(parsed, dtype=np.float64 if dt.kind == "f" or dt.name == "bfloat16" else object)
    arr = arr.astype(dt)
    n = int(np.prod(shape, dtype=np.int64))
    if arr.size == 1 and n != 1:
        arr = np.full(n, arr[0], dtype=dt)
    return arr.reshape(shape)


def _autob(js: dict) -> tuple[str, int]:
    v = js.get("auto_broadcast", js.get("autob"))
    if v is None:
        return ("numpy" if js.get("op_version", 0) >= 1 else "none"), -1
    if isinstance(v, str):
        return {"NONE": "none", "NUMPY": "numpy", "PDPD": "pdpd"}[v.upper()], -1
    return {0: "none", 1: "numpy", 2: "pdpd"}[v["type"]], v.get("axis", -1)


def _binary(js: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    kind, axis = _autob(js)
    if kind == "none":
        assert a.shape == b.shape, (a.shape, b.shape)
        return a, b
    if kind == "pdpd":
        bs = list(b.shape)
        while bs and bs[-1] == 1:
            bs.pop()
        start = a.ndim - len(bs) if axis == -1 else axis
        b = b.reshape([1] * start + bs + [1] * (a.ndim - start - len(bs)))
    return a, b


def std_round(q: np.ndarray) -> np.ndarray:
    """C's round(): to nearest, ties away from zero (exact in the array's own type)."""
    t = np.trunc(q)
    tie = np.abs(q - t) == 0.5
    return np.where(tie, t + np.sign(q), np.rint(q)).astype(q.dtype)


def ngraph_quantize(
    x: np.ndarray, scale: np.ndarray, offset: np.ndarray, axes: list[int], out: np.dtype, mode: int
) -> np.ndarray:
    """nGraph's reference quantize, vectorized: the quotient, offset and clamp in x's real type T; the
    ``+ 0.5`` / ``- 0.5`` of modes 0-3 in double (C++'s ``0.5`` is a double literal), rounded back to T."""
    T = x.dtype
    shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    s = scale.reshape(shape)
    z = offset.reshape(shape).astype(T)
    q = (x / s).astype(T)
    wide = q.astype(np.float64)
    if mode == 0:  # floor(|q| + 0.5) with q's sign, in double (real nGraph: not std::round at 0.5 - 2^-54)
        m = np.floor(np.abs(wide) + 0.5).astype(T)
        r = np.where(q < 0, -m, m)
    elif mode == 1:
        m = np.ceil(np.abs(wide) - 0.5).astype(T)
        r = np.where(q < 0, -m, m)
    elif mode == 2:
        r = np.floor(wide + 0.5).astype(T)
    elif mode == 3:
        r = np.ceil(wide - 0.5).astype(T)
    elif mode == 4:
        r = np.rint(q)
    elif mode == 5:
        r = np.where(q < 0, -np.ceil(np.abs(q)), np.ceil(np.abs(q)))
    elif mode == 6:
        r = np.trunc(q)
    elif mode == 7:
        r = np.ceil(q)
    else:
        r = np.floor(q)
    v = (r.astype(T) + z).astype(T)
    info = ml_dtypes.iinfo(out)
    v = np.minimum(np.maximum(v, T.type(info.min)), T.type(info.max))
    return v.astype(out)


_ROUND_NAMES = [
    "ROUND_NEAREST_TOWARD_INFINITY",
    "ROUND_NEAREST_TOWARD_ZERO",
    "ROUND_NEAREST_UPWARD",
    "ROUND_NEAREST_DOWNWARD",
    "ROUND_NEAREST_TOWARD_EVEN",
    "ROUND_TOWARD_INFINITY",
    "ROUND_TOWARD_ZERO",
    "ROUND_UP",
    "ROUND_DOWN",
]


def _window_view(x: np.ndarray, window: list[int], strides: list[int], dil: list[int]) -> np.ndarray:
    """(N, C, out..., window...) view of already padded x."""
    n = len(window)
    out = [(x.shape[2 + i] - ((window[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(n)]
    res = np.empty(x.shape[:2] + tuple(out) + tuple(window), x.dtype)
    for o in itertools.product(*[range(k) for k in out]):
        for w in itertools.product(*[range(k) for k in window]):
            idx = tuple(o[i] * strides[i] + w[i] * dil[i] for i in range(n))
            res[(slice(None), slice(None)) + o + w] = x[(slice(None), slice(None)) + idx]
    return res


def _pad(x: np.ndarray, below: list[int], above: list[int], value: float) -> np.ndarray:
    for i, (b, a) in enumerate(zip(below, above)):
        ax = 2 + i
        if b < 0:
            x = np.take(x, range(-b, x.shape[ax]), axis=ax)
        if a < 0:
            x = np.take(x, range(x.shape[ax] + a), axis=ax)
        pads = [(0, 0)] * x.ndim
        pads[ax] = (max(b, 0), max(a, 0))
        x = np.pad(x, pads, constant_values=value)
    return x


def _run(js: dict, args: list[np.ndarray]) -> np.ndarray:
    op = js["op"]
    f64 = np.float64
    if op in ("Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum"):
        a, b = _binary(js, *args)
        dt = args[0].dtype
        with np.errstate(all="ignore"):
            if op == "Add":
                r = a + b
            elif op == "Subtract":
                r = a - b
            elif op == "Multiply":
                r = a * b
            elif op == "Maximum":
                r = np.where(a > b, a, b)
            elif op == "Minimum":
                r = np.where(a < b, a, b)
            elif dt.kind == "f" or dt.name == "bfloat16":
                r = a / b
            elif js.get("pythondiv", True):
                r = np.floor_divide(a, b)
            else:
                q = np.floor_divide(a, b)
                r = q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))
        return np.asarray(r).astype(dt)
    x = args[0] if args else None
    if op == "Negative":
        with np.errstate(all="ignore"):
            return (-x).astype(x.dtype)
    if op == "Abs":  # x < 0 ? -x : x: -0 stays -0 (real nGraph, tests/golden/elementwise)
        return np.abs(x) if x.dtype.kind in "iu" else np.where(x < 0, -x, x)
    if op == "Relu":
        return np.where(x > 0, x, x.dtype.type(0)).astype(x.dtype)
    if op in ("Sigmoid", "Tanh", "Exp", "Log", "Sqrt"):
        w = x.astype(f64)
        with np.errstate(all="ignore"):
            r = {
                "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
                "Tanh": np.tanh,
                "Exp": np.exp,
                "Log": np.log,
                "Sqrt": np.sqrt,
            }[op](w)
        return r.astype(x.dtype)
    if op == "Convert":
        to = _et(js.get("target_type", js.get("destination_type")))
        if to == np.bool_:
            return x != 0
        if (x.dtype.kind == "f" or x.dtype.name == "bfloat16") and to.kind in "iu":
            return np.trunc(x.astype(f64)).astype(np.int64).astype(to)
        return x.astype(to)
    if op == "Reshape":
        order = js.get("input_order", list(range(x.ndim)))
        return np.transpose(x, order).reshape(js["output_shape"])
    if op == "Broadcast":
        return np.broadcast_to(np.expand_dims(x, tuple(js["axes"])), js["shape"]).copy()
    if op == "Concat":
        return np.concatenate(args, axis=js["axis"])
    if op == "Slice":
        idx = tuple(
            slice(lo, hi, st)
            for lo, hi, st in zip(js["lower_bounds"], js["upper_bounds"], js.get("strides", [1] * x.ndim))
        )
        return x[idx].copy()
    if op == "Sum":
        axes = tuple(js["reduction_axes"])
        if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
            return (np.sum(x.astype(f64), axis=axes) + 0.0).astype(x.dtype)  # from +0: -0 becomes +0
        return np.sum(x.astype(np.int64), axis=axes).astype(x.dtype)
    if op == "Softmax":
        axes = tuple(js["softmax_axes"]) if "softmax_axes" in js else (js["axis"],)
        w = x.astype(f64)
        e = np.exp(w - np.max(w, axis=axes, keepdims=True))
        return (e / np.sum(e, axis=axes, keepdims=True)).astype(x.dtype)
    if op == "Dot":
        a, b = args
        n = js.get("reduction_axes_count", 0 if a.ndim == 0 or b.ndim == 0 else 1)
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            return (np.tensordot(a.astype(f64), b.astype(f64), axes=n) + 0.0).astype(a.dtype)  # sums from +0
        return np.tensordot(a.astype(np.int64), b.astype(np.int64), axes=n).astype(a.dtype)
    if op == "Dequantize":
        zp = args[2] if len(args) > 2 else None
        return dequantize(args[0], args[1], zp, axes=tuple(js["axes"]), dtype=_et(js["type"]))
    if op == "Quantize":
        mode = js["round_mode"]
        if isinstance(mode, str):
            mode = _ROUND_NAMES.index(mode.upper())
        return ngraph_quantize(args[0], args[1], args[2], list(js["axes"]), _et(js["type"]), mode)
    if op == "Convolution":
        data, filt = args
        n = data.ndim - 2
        strides = js.get("window_movement_strides", [1] * n)
        dil = js.get("window_dilation_strides", [1] * n)
        xp = _pad(data.astype(f64), js.get("padding_below", [0] * n), js.get("padding_above", [0] * n), 0.0)
        win = _window_view(xp, list(filt.shape[2:]), strides, dil)  # N, C, out..., k...
        letters = "defgh"[:n]
        ks = "pqrst"[:n]
        r = np.einsum(f"nc{letters}{ks},oc{ks}->no{letters}", win, filt.astype(f64))
        return r.astype(data.dtype)
    if op in ("MaxPool", "AvgPool"):
        n = x.ndim - 2
        window = js["window_shape"]
        strides = js.get("window_movement_strides", [1] * n)
        below = js.get("padding_below", [0] * n)
        above = js.get("padding_above", [0] * n)
        w = x.astype(f64)
        if op == "MaxPool":
            win = _window_view(_pad(w, below, above, -np.inf), window, strides, [1] * n)
            return win.max(axis=tuple(range(-n, 0))).astype(x.dtype)
        total = _window_view(_pad(w, below, above, 0.0), window, strides, [1] * n).sum(axis=tuple(range(-n, 0)))
        if js.get("include_padding_in_avg_computation", False):
            count = float(np.prod(window))
        else:
            ones = _pad(np.ones((1, 1) + x.shape[2:]), below, above, 0.0)
            count = _window_view(ones, window, strides, [1] * n).sum(axis=tuple(range(-n, 0)))
        return (total / count).astype(x.dtype)
    raise NotImplementedError(op)


def evaluate(
    functions: list[dict] | dict, feeds: dict[str, np.ndarray], function: str | None = None
) -> dict[str, np.ndarray]:
    """Run one function on ``feeds`` (by Parameter name); returns the results by Result (or op) name."""
    if isinstance(functions, dict):
        functions = [functions]
    fn = functions[-1] if function is None else next(f for f in functions if f["name"] == function)
    values: dict[str, np.ndarray] = {}
    for js in fn["ops"]:
        name, op = js["name"], js["op"]
        if op == "Parameter":
            values[name] = np.asarray(feeds[name])
            continue
        if op == "Constant":
            values[name] = _constant(js)
            continue
        args = [values[i] if isinstance(i, str) else values[i["node"]] for i in js.get("inputs", [])]
        values[name] = args[0] if op == "Result" else _run(js, args)
    return {r: values[r] for r in fn["result"]}
