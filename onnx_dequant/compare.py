"""Comparing results: bit-for-bit equality and distance in units in the last place (ULP).

NaN equals NaN (any payload), +0 equals -0 in ULPs (distance 0) but not in bits.
"""

from __future__ import annotations

import numpy as np

from . import dtypes
from .errors import DequantizeError

__all__ = ["ulp_distance", "same_bits", "bit_mismatches"]

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def _check(a: np.ndarray, b: np.ndarray) -> None:
    if a.dtype != b.dtype:
        raise DequantizeError(f"Cannot compare {a.dtype} with {b.dtype}")
    if a.shape != b.shape:
        raise DequantizeError(f"Cannot compare shape {a.shape} with {b.shape}")


def _is_nan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a.astype(np.float32) if a.dtype.itemsize == 2 else a)


def bit_mismatches(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Boolean mask of elements whose bit patterns differ (all NaNs count as equal)."""
    a, b = np.asarray(a), np.asarray(b)
    _check(a, b)
    kind = dtypes.parse(a.dtype).kind
    if kind != "real":
        return a != b
    width = a.dtype.itemsize
    diff = a.view(_UINT[width]) != b.view(_UINT[width])
    if diff.any():
        diff &= ~(_is_nan(a) & _is_nan(b))
    return diff


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays hold the same bit patterns (all NaNs count as equal)."""
    return not bit_mismatches(a, b).any()


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element, how many representable values lie between ``a`` and ``b`` (float64 array).

    0 where both are NaN or both are zeros; ``inf`` where exactly one is NaN. Integer arrays give the
    absolute difference.
    """
    a, b = np.asarray(a), np.asarray(b)
    _check(a, b)
    if dtypes.parse(a.dtype).kind != "real":
        return np.abs(a.astype(np.float64) - b.astype(np.float64))
    width = a.dtype.itemsize
    sign = np.int64(1) << np.int64(8 * width - 1)

    def ordered(x: np.ndarray) -> np.ndarray:
        i = x.view(_INT[width]).astype(np.int64)
        mag = i & (sign - 1) if width < 8 else i & np.int64(0x7FFFFFFFFFFFFFFF)
        return np.asarray(np.where(i < 0, -mag, mag))  # int64: exact, even for f64 bit patterns

    oa, ob = ordered(a), ordered(b)
    hi, lo = np.asarray(np.maximum(oa, ob)), np.asarray(np.minimum(oa, ob))
    # hi - lo in uint64 cannot overflow (it wraps modulo 2**64 to the exact difference); the float64
    # result is exact up to 2**53 ULPs (float64 differences used to round at 2**53 of the ordered value)
    d = np.asarray((hi.view(np.uint64) - lo.view(np.uint64)).astype(np.float64))  # an array even for 0-d
    na, nb = _is_nan(a), _is_nan(b)
    d[na & nb] = 0.0
    d[na ^ nb] = np.inf
    return d
