"""Mod (opset 1, a fused op): ``sign(a) * (|a| - convert(convert_i64(|a| / |b|)) * |b|)``, nGraph's
decomposition; the remainder has the dividend's sign (C's ``fmod``), computed in the element type.
FloorMod (opset 1): the remainder with the divisor's sign. Selu (v0 fused, after 0.26): its decomposition."""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph

A = np.array([7, -7, 7, -7, 0, -0.0, 5.5, -5.5, 1e10, 3, 0.1, 2.5], np.float32)
B = np.array([3, 3, -3, -3, 2, 2, 2, -2, 3, 7, 0.03, -0.5], np.float32)
AI = np.array([7, -7, 7, -7, 0, 6, -6, 1, 100, -100], np.int32)
BI = np.array([3, 3, -3, -3, 5, 3, 4, 7, 7, -7], np.int32)


def ngraph_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """nGraph's decomposition step by step in the element type (Abs and Sign as nGraph's kernels)."""
    t = np.result_type(a, b)
    abs_a, abs_b = np.where(a < 0, -a, a), np.where(b < 0, -b, b)
    q = abs_a // abs_b if np.issubdtype(t, np.integer) else (abs_a / abs_b).astype(np.int64).astype(t)
    sign = np.where(a < 0, t.type(-1), np.where(a > 0, t.type(1), t.type(0)))
    return (sign * (abs_a - q * abs_b)).astype(t)


def floor_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """FloorMod's definition: ``fmod`` moved to the divisor's sign (Python's ``%`` on integers)."""
    if np.issubdtype(a.dtype, np.integer):
        return np.mod(a, b)
    r = np.fmod(a, b)
    return np.where((r != 0) & ((r < 0) != (b < 0)), r + b, r).astype(a.dtype)


def _case(name: str, a: np.ndarray, b: np.ndarray, note: str, op: str = "Mod") -> GoldenCase:
    w = FunctionWriter(era="v0.29")
    pa, pb = w.parameter(a.dtype, list(a.shape)), w.parameter(b.dtype, list(b.shape))
    r = w.result(w.binary(op, pa, pb))
    if op == "Mod":
        note += "; expected: nGraph's decomposition (nGraph 0.26 cannot deserialize Mod)"
        want = ngraph_mod(a, b)
    else:
        note += "; expected: the op's definition (nGraph has no FloorMod kernel; 0.26 cannot deserialize it)"
        want = floor_mod(a, b)
    case = GoldenCase(name, graph(w), {pa: a, pb: b}, note=note, expected={r: want})
    if op == "FloorMod" and a.dtype.kind == "f":
        case.ulp, case.why = 0, "r + b is one IEEE addition in the element type, in NumPy as in ONNX Runtime"
    return case


SELU_X = np.array([-3.0, -1.0, -0.5, -0.0, 0.0, 0.5, 2.0, np.nan, np.inf, -np.inf], np.float32)
SELU_ALPHA, SELU_LAMBDA = np.float32(1.6732632), np.float32(1.050701)


def selu_case() -> GoldenCase:
    """Selu (v0 fused; not in nGraph 0.26): alpha and lambda as Shape{1} inputs; expected: its decomposition."""
    x = SELU_X
    al, la = np.array([SELU_ALPHA], np.float32), np.array([SELU_LAMBDA], np.float32)
    w = FunctionWriter()
    ps = [w.parameter(v.dtype, list(v.shape)) for v in (x, al, la)]
    r = w.result(w.op("Selu", *ps))
    with np.errstate(invalid="ignore"):
        e = al * np.exp(np.where(x < 0, x, np.float32(0))) - al
        want = (la * (np.where(x > 0, x, np.float32(0)) + e)).astype(np.float32)
    note = "Selu: lambda * (max(x, 0) + (alpha * exp(min(x, 0)) - alpha)); expected: nGraph's decomposition"
    case = GoldenCase("selu_f32", graph(w), dict(zip(ps, (x, al, la))), note=note, expected={r: want})
    case.ulp, case.why = 2, "ONNX Runtime's vectorized exp and NumPy's round differently"
    return case


def cases():
    i64 = np.array([[9, -9, 4], [-4, 13, 0]], np.int64), np.array([4, -5, 3], np.int64)
    return [
        _case("mod_f32", A, B, "Mod: signs, -0, |a| / |b| rounded in f32 then truncated"),
        _case("mod_i32", AI, BI, "Mod on integers: the dividend's sign"),
        _case("mod_broadcast_i64", *i64, "Mod, numpy broadcast"),
        _case("floor_mod_f32", A, B, "FloorMod: the divisor's sign", "FloorMod"),
        _case("floor_mod_i32", AI, BI, "FloorMod on integers: Python's %", "FloorMod"),
        _case("floor_mod_broadcast_i64", *i64, "FloorMod, numpy broadcast", "FloorMod"),
        selu_case(),
    ]
