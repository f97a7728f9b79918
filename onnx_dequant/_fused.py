"""The reference's fused loop, compiled with Numba when it is installed (``pip install onnx-dequant[fast]``).

One pass over a flat element range computes ``(x - z) * s`` in the work precision (``x`` and ``z`` in
their integer type, ``s`` in the work type), the same operations
in the same order as the NumPy path, so the bits are the same. The input is seen as rows of ``W``
contiguous elements (the innermost merged run of dims); the scale offset of each row comes from an
odometer over the outer merged dims, so no index array is ever materialized.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["kernel", "available"]

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
    def fused(x, z, s, out, e0, e1, width, inner_varies, dims, strides):  # pragma: no cover - compiled
        m = dims.shape[0]
        row = e0 // width
        col = e0 - row * width
        idx = np.zeros(max(m, 1), np.int64)
        rem = row
        off = 0
        for k in range(m - 1, -1, -1):
            idx[k] = rem % dims[k]
            rem //= dims[k]
            off += idx[k] * strides[k]
        e = e0
        o = 0
        while e < e1:
            n = min(width - col, e1 - e)
            xr = x[e : e + n]
            orow = out[o : o + n]
            if inner_varies:
                zr = z[off + col : off + col + n]
                sr = s[off + col : off + col + n]
                for i in range(n):
                    orow[i] = (work(xr[i]) - work(zr[i])) * sr[i]
            else:
                zv = work(z[off])
                sv = s[off]
                for i in range(n):
                    orow[i] = (work(xr[i]) - zv) * sv
            e += n
            o += n
            col = 0
            k = m - 1
            while k >= 0:  # next row: advance the odometer
                idx[k] += 1
                off += strides[k]
                if idx[k] < dims[k]:
                    break
                off -= idx[k] * strides[k]
                idx[k] = 0
                k -= 1

    return fused


def kernel(work: np.dtype) -> Callable[..., None]:
    """The compiled loop for work precision ``work`` (float32 or float64); needs ``available()``."""
    key = np.dtype(work).name
    if key not in _KERNELS:
        _KERNELS[key] = _make(np.float32 if key == "float32" else np.float64)
    return _KERNELS[key]
