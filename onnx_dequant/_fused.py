"""The reference's fused loop, compiled with Numba when it is installed (``pip install onnx-dequant[fast]``).

One pass over a flat element range computes ``(x - z) * s`` in the work precision (``x`` and ``z`` in
their integer type, ``s`` converted to the work type), the same operations in the same order as the NumPy path,
so the bits are the same (no zero point: ``x * s``, the same bits as ``(x - 0) * s``). The loop order
comes from the layout (see ``reference._layout``): the input is seen as outer dims over a *tile*, the
innermost merged dims whose elements are contiguous.

- Wide rows (the tile is one row of ``width`` elements): a contiguous inner loop, the scale either one
  value for the row or a contiguous run beside it; an odometer over the outer dims gives each row's
  scale offset.
- Narrow rows: the tile is the last few merged dims (up to a few thousand elements) and ``pattern``
  holds each tile element's scale offset within the tile. The tile's scale (and zero point) values
  are gathered into a small buffer when the tile's scale offset changes (once for the whole input
  when the scale repeats, as a per-channel scale over narrow rows does), so the inner loop is
  contiguous over the whole tile and the odometer steps once per tile instead of once per row.

No index array of the input's size is ever materialized.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["kernel", "available", "narrow"]

_KERNELS: dict[str, Callable[..., None]] = {}
_NUMBA: Any = None


def available() -> bool:
    """Whether Numba can be imported."""
    global _NUMBA
    if _NUMBA is None:
        try:
            import numba

            _NUMBA = numba
        except ImportError:
            _NUMBA = False
    return bool(_NUMBA)


def _make(work: type) -> Callable[..., None]:
    numba = _NUMBA

    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def fused(x, z, s, out, e0, e1, tile, pattern, inner_varies, has_z, dims, strides):  # pragma: no cover
        """``out[0 : e1 - e0] = (x[e] - z[j]) * s[j]`` for the flat elements ``e0 <= e < e1``.

        ``tile``: elements per innermost unit; ``pattern`` (length ``tile``, or empty for one row)
        the scale offset of each tile element; otherwise ``inner_varies`` says whether the scale runs
        along the row. ``dims``/``strides``: the outer dims and their scale strides.
        """
        m = dims.shape[0]
        unit = e0 // tile
        col = e0 - unit * tile
        idx = np.zeros(max(m, 1), np.int64)
        rem = unit
        off = 0
        for k in range(m - 1, -1, -1):
            idx[k] = rem % dims[k]
            rem //= dims[k]
            off += idx[k] * strides[k]
        gathered = pattern.shape[0] > 0
        sb = np.empty(pattern.shape[0], work)
        zb = np.empty(pattern.shape[0] if has_z else 0, work)
        cached = -1
        e = e0
        while e < e1:
            n = min(tile - col, e1 - e)
            xr = x[e : e + n]  # slices from 0: the loops' indexes are known non-negative (no wraparound)
            orow = out[e - e0 : e - e0 + n]
            if gathered:
                if off != cached:  # the tile's scale (and zero point) values, in the work type
                    sr = s[off:]
                    if has_z:
                        zr = z[off:]
                        for i in range(tile):
                            j = pattern[i]  # unsigned offsets: no wraparound
                            sb[i] = work(sr[j])
                            zb[i] = work(zr[j])
                    else:
                        for i in range(tile):
                            sb[i] = work(sr[pattern[i]])
                    cached = off
                st = sb[col : col + n]
                if has_z:
                    zt = zb[col : col + n]
                    for i in range(n):
                        orow[i] = (work(xr[i]) - zt[i]) * st[i]
                else:
                    for i in range(n):
                        orow[i] = work(xr[i]) * st[i]
            elif inner_varies:
                sr = s[off + col : off + col + n]
                if has_z:
                    zr = z[off + col : off + col + n]
                    for i in range(n):
                        orow[i] = (work(xr[i]) - work(zr[i])) * work(sr[i])
                else:
                    for i in range(n):
                        orow[i] = work(xr[i]) * work(sr[i])
            else:
                sv = work(s[off])
                if has_z:
                    zv = work(z[off])
                    for i in range(n):
                        orow[i] = (work(xr[i]) - zv) * sv
                else:
                    for i in range(n):
                        orow[i] = work(xr[i]) * sv
            e += n
            col = 0
            k = m - 1
            while k >= 0:  # next unit: advance the odometer
                idx[k] += 1
                off += strides[k]
                if idx[k] < dims[k]:
                    break
                off -= idx[k] * strides[k]
                idx[k] = 0
                k -= 1

    return fused


def _make_narrow() -> tuple[Callable[..., None], Callable[..., None]]:
    numba = _NUMBA

    @numba.njit(nogil=True, cache=True, boundscheck=False, inline="always")
    def round_bits(u, to_bf16):  # pragma: no cover - compiled
        """float32 bits ``u`` rounded to nearest even in bf16 or f16, as bits (NaNs: a quiet NaN)."""
        sign = (u >> np.uint32(16)) & np.uint32(0x8000)
        a = u & np.uint32(0x7FFFFFFF)
        if to_bf16:
            if a > np.uint32(0x7F800000):
                return np.uint16(sign | np.uint32(0x7FC0))
            return np.uint16(sign | ((a + np.uint32(0x7FFF) + ((a >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)))
        if a >= np.uint32(0x7F800000):
            r = np.uint32(0x7C00) if a == np.uint32(0x7F800000) else np.uint32(0x7E00)
        elif a >= np.uint32(0x477FF000):  # 65520 and above round to infinity
            r = np.uint32(0x7C00)
        elif a >= np.uint32(0x38800000):  # normal in f16
            r = (a - np.uint32(0x38000000)) >> np.uint32(13)
            rem = a & np.uint32(0x1FFF)
            if rem > np.uint32(0x1000) or (rem == np.uint32(0x1000) and (r & np.uint32(1))):
                r += np.uint32(1)
        elif a < np.uint32(0x33000000):  # at most 2**-25: rounds to zero
            r = np.uint32(0)
        else:  # subnormal in f16: units of 2**-24
            e = a >> np.uint32(23)
            m = (a & np.uint32(0x7FFFFF)) | np.uint32(0x800000)
            shift = np.uint32(126) - e
            r = m >> shift
            rem = m & ((np.uint32(1) << shift) - np.uint32(1))
            half = np.uint32(1) << (shift - np.uint32(1))
            if rem > half or (rem == half and (r & np.uint32(1))):
                r += np.uint32(1)
        return np.uint16(sign | r)

    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def from_f32(bits, dst, to_bf16):  # pragma: no cover - compiled
        for i in range(bits.shape[0]):
            dst[i] = round_bits(bits[i], to_bf16)

    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def from_f64(src, dst, to_bf16):  # pragma: no cover - compiled
        """Through float32 rounded to odd (inexact results get the last bit set): the second rounding
        from there is the single correct rounding of the float64 value."""
        tmp = np.empty(src.shape[0], np.float32)
        for i in range(src.shape[0]):
            tmp[i] = np.float32(src[i])
        bits = tmp.view(np.uint32)
        for i in range(src.shape[0]):
            v = src[i]
            back = np.float64(tmp[i])
            u = bits[i]
            if back != v and v == v:
                if abs(back) > abs(v):
                    u -= np.uint32(1)
                u |= np.uint32(1)
            dst[i] = round_bits(u, to_bf16)

    return from_f32, from_f64


def narrow(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst`` (f16 or bf16) = ``src`` (float32 or float64, 1-D) rounded once to nearest even, at memory
    speed (NumPy converts to f16, and ml_dtypes to bf16, one element at a time through a generic loop)."""
    if "narrow" not in _KERNELS:
        _KERNELS["narrow32"], _KERNELS["narrow"] = _make_narrow()
    to_bf16 = dst.dtype != np.float16
    if src.dtype == np.float32:
        _KERNELS["narrow32"](src.view(np.uint32), dst.view(np.uint16), to_bf16)
    else:
        _KERNELS["narrow"](src, dst.view(np.uint16), to_bf16)


def kernel(work: np.dtype) -> Callable[..., None]:
    """The compiled loop for work precision ``work`` (float32 or float64); needs ``available()``."""
    key = np.dtype(work).name
    if key not in _KERNELS:
        _KERNELS[key] = _make(np.float32 if key == "float32" else np.float64)
    return _KERNELS[key]
