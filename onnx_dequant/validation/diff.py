"""One output of one path against the reference: max abs error, max ULP, mismatch count, first mismatch,
pass or fail under its ``Tolerance``.

The arrays are compared in chunks of ``CHUNK`` elements, so comparing two 400 MB outputs allocates a
few megabytes; only chunks whose bits differ are measured in ULPs. A ``Tolerance`` with a ``unit``
counts ULPs of that (narrower) type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import compare, dtypes
from ..errors import DequantizeError
from .policy import Tolerance

__all__ = ["CHUNK", "OutputResult", "compare_output", "json_float"]

CHUNK = 1 << 20
"""Elements per comparison chunk."""


@dataclass
class OutputResult:
    """How one output of one path compares with the reference."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    allowed: str  # e.g. "0 ULP"
    why: str  # where the allowance comes from
    ok: bool
    size: int = 0
    mismatches: int = 0  # elements whose values differ at all (NaN equals NaN)
    failures: int = 0  # elements beyond the allowance
    max_ulp: float = 0.0
    max_abs: float = 0.0
    first_mismatch: dict[str, Any] | None = None  # {"index": [...], "reference": v, "got": v}
    first_failure: dict[str, Any] | None = None
    note: str = ""  # shape/type mismatch, missing output
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """This result as JSON-ready values (what ``to_json`` and the ``--json`` output hold)."""
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "allowed": self.allowed,
            "why": self.why,
            "ok": self.ok,
            "size": self.size,
            "mismatches": self.mismatches,
            "failures": self.failures,
            "max_ulp": json_float(self.max_ulp),
            "max_abs": json_float(self.max_abs),
            "first_mismatch": self.first_mismatch,
            "first_failure": self.first_failure,
            "note": self.note,
        }


def json_float(v: float) -> float | str:
    v = float(v)
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return int(v) if v.is_integer() and abs(v) < 2**53 else v


def _value(v: Any) -> Any:
    v = np.asarray(v)
    if v.dtype.kind == "b":
        return bool(v)
    if v.dtype.kind in "iu":
        return int(v)
    if v.dtype.kind in "fV" or v.dtype.itemsize == 2:
        try:
            return json_float(float(v.astype(np.float64)))
        except (TypeError, ValueError):
            pass
    return str(v)


def _kind(dt: np.dtype) -> str:
    try:
        return dtypes.parse(dt).kind
    except DequantizeError:
        return "other"


def _ulp_of(magnitude: float, dt: np.dtype) -> float:
    """The spacing of ``dt`` values at ``magnitude``."""
    return float(np.spacing(np.asarray(magnitude, dtype=np.float64).astype(dt)).astype(np.float64))


def _max_finite_abs(ref: np.ndarray) -> float:
    best = 0.0
    flat = ref.reshape(-1)
    for start in range(0, flat.size, CHUNK):
        c = np.abs(flat[start : start + CHUNK].astype(np.float64))
        c = c[np.isfinite(c)]
        if c.size:
            best = max(best, float(c.max()))
    return best


def compare_output(name: str, ref: np.ndarray, got: Any, tol: Tolerance) -> OutputResult:
    """Compare ``got`` with ``ref`` element by element under ``tol``."""
    ref = np.asarray(ref)
    res = OutputResult(name, str(ref.dtype), tuple(ref.shape), tol.describe(), tol.why, True, int(ref.size))
    if got is None:
        res.ok, res.note = False, "output missing"
        return res
    got = np.asarray(got)
    if got.dtype != ref.dtype:
        res.ok, res.note = False, f"element type {got.dtype}, reference {ref.dtype}"
        return res
    if got.shape != ref.shape:
        res.ok, res.note = False, f"shape {tuple(got.shape)}, reference {tuple(ref.shape)}"
        return res
    kind = _kind(ref.dtype)
    a = np.ascontiguousarray(ref).reshape(-1)
    b = np.ascontiguousarray(got).reshape(-1)
    if kind not in ("real", "quantized", "integer", "boolean"):  # strings, float8: equality only
        neq = np.asarray(a != b)
        res.mismatches = res.failures = int(neq.sum())
        if res.mismatches:
            res.ok = False
            i = int(np.argmax(neq))
            idx = [int(k) for k in np.unravel_index(i, ref.shape)]
            res.first_mismatch = res.first_failure = {"index": idx, "reference": _value(a[i]), "got": _value(b[i])}
        return res
    unit = dtypes.parse(tol.unit).numpy if tol.unit and kind == "real" else ref.dtype
    scaled_abs = None
    for start in range(0, a.size, CHUNK):
        ca, cb = a[start : start + CHUNK], b[start : start + CHUNK]
        if compare.same_bits(ca, cb):
            continue
        ulp = compare.ulp_distance(ca, cb)
        differ = ulp > 0
        n = int(differ.sum())
        if not n:
            continue
        if unit != ref.dtype:  # ULPs of the narrower type the values were computed in
            ulp = compare.ulp_distance(ca.astype(unit), cb.astype(unit))
        fa, fb = ca.astype(np.float64), cb.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.where(differ, np.abs(fa - fb), 0.0)
        err[differ & np.isnan(err)] = np.inf  # NaN against a number, inf against -inf
        failing = ulp > tol.ulp
        if tol.scaled and failing.any():
            if scaled_abs is None:
                scaled_abs = tol.ulp * _ulp_of(_max_finite_abs(ref), unit)
            failing &= ~(err <= scaled_abs)
        if res.mismatches == 0:
            i = int(np.argmax(differ))
            res.first_mismatch = _where(ref.shape, start + i, ca[i], cb[i])
        nf = int(failing.sum())
        if nf and res.failures == 0:
            i = int(np.argmax(failing))
            res.first_failure = _where(ref.shape, start + i, ca[i], cb[i])
        res.mismatches += n
        res.failures += nf
        res.max_ulp = max(res.max_ulp, float(ulp.max()))
        res.max_abs = max(res.max_abs, float(err.max()))
    res.ok = res.failures == 0
    if kind != "real":
        res.extra["integer"] = True
    return res


def _where(shape: tuple[int, ...], flat_index: int, ref_v: Any, got_v: Any) -> dict[str, Any]:
    idx = [int(k) for k in np.unravel_index(flat_index, shape)] if shape else []
    return {"index": idx, "reference": _value(ref_v), "got": _value(got_v)}
