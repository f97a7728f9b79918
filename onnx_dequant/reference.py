"""The exact NumPy reference: ``output = (input - zero_point[j]) * scale[j]``, rounded once.

Exact means: the integer difference never wraps (even for i32), the product is taken in float64 and
rounded once to the output type. Where a narrower computation gives the same bits (8/16-bit inputs
with f32 output: the float32 difference is exact and the float32 product rounds the exact product
once) the reference uses it; everything else goes through float64. The work runs in cache-sized
blocks, so the peak memory is the output plus a few hundred kilobytes.

``DequantizeOp`` runs the node under ``onnx.reference.ReferenceEvaluator``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
from onnx.reference.op_run import OpRun

from . import dtypes
from .contract import TensorType, infer, normalize_axes
from .errors import DequantizeError
from .schema import DOMAIN, OP_TYPE

__all__ = ["dequantize", "DequantizeOp", "round_f64_to_bf16"]

BLOCK_ELEMENTS = 1 << 16
"""Elements per block: the block's f32/f64 temporaries stay in the L2 cache."""

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BF16 = np.dtype(ml_dtypes.bfloat16)


def _work_dtype(x: dtypes.DType, out: dtypes.DType) -> np.dtype:
    """The narrowest float type in which ``(x - zp) * scale`` rounds exactly once to ``out``."""
    diff_bits = x.bits + 1  # the difference of two values of x's type
    mantissa = {"bf16": 8, "f16": 11, "f32": 24, "f64": 53}[out.name]
    if out.name == "f64":
        return _F64
    # f32 holds the difference exactly and the exact product of difference and scale fits in 24 bits,
    # or (f32 output) the f32 product is itself the single rounding.
    if diff_bits <= 24 and (out.name == "f32" or diff_bits + mantissa <= 24):
        return _F32
    return _F64


def round_f64_to_bf16(src: np.ndarray, dst: np.ndarray) -> None:
    """Round float64 values to bfloat16, once, to nearest even (ml_dtypes rounds twice, via float32)."""
    t = src.astype(np.float32)
    back = t.astype(np.float64)
    inexact = (back != src) & ~np.isnan(src)
    if inexact.any():
        # round to odd in float32: truncate toward zero, then set the last bit of inexact results
        bits = t.view(np.uint32)
        bits[inexact & (np.abs(back) > np.abs(src))] -= 1
        bits[inexact] |= 1
    dst[...] = t.astype(ml_dtypes.bfloat16)


def _blocks(shape: tuple[int, ...]) -> Iterator[tuple[Any, ...]]:
    """Index tuples that cut an array of ``shape`` into blocks of about ``BLOCK_ELEMENTS`` elements."""
    size = int(np.prod(shape, dtype=np.int64))
    if size <= BLOCK_ELEMENTS:
        if size:
            yield (Ellipsis,)
        return
    inner = size
    k = 0
    while inner > BLOCK_ELEMENTS:  # smallest k whose trailing dims fit in a block
        inner //= shape[k]
        k += 1
    k -= 1
    inner_after_k = inner  # elements in shape[k+1:]
    step = max(1, BLOCK_ELEMENTS // max(1, inner_after_k))
    for outer in np.ndindex(*shape[:k]):
        for start in range(0, shape[k], step):
            yield (*outer, slice(start, min(start + step, shape[k])))


def _sub_index(index: tuple[Any, ...], bshape: tuple[int, ...]) -> tuple[Any, ...]:
    """The block of a broadcastable (keepdims) array that matches block ``index`` of the full array."""
    if index == (Ellipsis,):
        return index
    return tuple(
        (0 if isinstance(i, int) else slice(None)) if n == 1 else i for i, n in zip(index, bshape)
    )


def _array(value: Any, what: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    raise DequantizeError(f"{what} must be a NumPy array, got {type(value).__name__}")


def dequantize(
    x: np.ndarray,
    scale: np.ndarray,
    zero_point: np.ndarray | None = None,
    *,
    axes: Any = (),
    dtype: Any = None,
) -> np.ndarray:
    """``(x - zero_point[j]) * scale[j]`` exactly, ``j`` the output coordinate projected onto ``axes``.

    ``scale`` and ``zero_point`` are shaped as ``x``'s shape projected onto the sorted axes;
    ``zero_point=None`` means zero; ``dtype`` (any element type spelling) must equal the scale's type.
    Raises ``DequantizeError`` when the arguments break the contract.
    """
    x = _array(x, "Input")
    scale = _array(scale, "Scale")
    zp = None if zero_point is None else _array(zero_point, "Zero point")
    axes_t = normalize_axes(axes)
    out_t = infer(TensorType.of(x), TensorType.of(scale), None if zp is None else TensorType.of(zp), axes=axes_t, dtype=dtype)
    in_t = dtypes.parse(x.dtype)
    out_dtype: dtypes.DType = out_t.elem_type
    work = _work_dtype(in_t, out_dtype)

    bshape = tuple(x.shape[i] if i in axes_t else 1 for i in range(x.ndim))
    s = scale.astype(work, copy=False).reshape(bshape)
    z = None
    if zp is not None and zp.any():
        z = (zp if in_t.bits >= 8 else zp.astype(np.int16)).reshape(bshape)
    out = np.empty(x.shape, out_dtype.numpy)
    direct = out.dtype == work
    tmp = None if direct else np.empty(BLOCK_ELEMENTS, work)
    small_x = in_t.bits < 8  # 4-bit types have no arithmetic loops: widen per block

    for index in _blocks(x.shape):
        xb = x[index]
        if small_x:
            xb = xb.astype(np.int16)
        ob = out[index]
        wb = ob if direct else tmp[: ob.size].reshape(ob.shape)
        sb = s[_sub_index(index, bshape)]
        if z is None:
            np.multiply(xb, sb, out=wb, dtype=work)
        else:
            np.subtract(xb, z[_sub_index(index, bshape)], out=wb, dtype=work)
            np.multiply(wb, sb, out=wb)
        if not direct:
            if out.dtype == _BF16 and work == _F64:
                round_f64_to_bf16(wb, ob)
            else:
                ob[...] = wb
    return out


class DequantizeOp(OpRun):
    """The op for ``onnx.reference.ReferenceEvaluator(model, new_ops=[DequantizeOp])``."""

    op_domain = DOMAIN

    def _run(self, x, scale, zero_point=None, axes=None, type=None):  # noqa: A002 - the attribute's name
        return (dequantize(x, scale, zero_point, axes=tuple(axes or ()), dtype=type or None),)


DequantizeOp.__name__ = OP_TYPE
