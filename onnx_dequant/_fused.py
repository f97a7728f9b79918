"""The reference's fused loop, compiled with Numba (a dependency; the NumPy loop runs where it cannot be imported).

One pass over a flat element range computes ``(x - z) * s`` in the work precision (``x`` and ``z`` in
their integer type, ``s`` read in its own type and converted to the work type in the loop), the same
operations in the same order as the NumPy path, so the bits are the same (no zero point: ``x * s``, the
same bits as ``(x - 0) * s``), and stores the result in the output type: f32/f64 by a cast, f16/bf16
rounded once in the loop (float64 products in float64's own bits, float32 ones of 16-bit inputs to f16
through rounding to odd), so no intermediate array is written.
f16/bf16 scales are read as their bits. The loop order comes from the layout (see ``reference._layout``):
the input is seen as outer dims over a *tile*, the innermost merged dims whose elements are contiguous.

The loop runs one of five layouts (``reference._loop_layout``), each compiled alone:

- Wide rows (the tile is one row of ``width`` elements), the scale one value for the row ("rows
  held": computed in fixed-size blocks, the last one overlapping, so that no scalar remainder runs) or
  a contiguous run beside it ("rows varying"); an odometer over the outer dims gives each row's scale
  offset.
- Narrow rows: the tile is the last few merged dims (up to a few thousand elements) and ``pattern``
  holds each of the tile's rows' scale offset within the tile; the odometer steps once per tile
  instead of once per row. When the tile's scale offset changes (once for the whole input when the
  scale repeats, as a per-channel scale over narrow rows does), the window of the scale the tile
  reads is converted to the work type, each value once (the zero point's is kept in its own type,
  int4's biased). Rows narrower than 64 elements, and tiles that all read one window, have the
  window spread over the tile's rows into a small buffer (rows wider than 8 in
  16-element blocks), so that the inner loop is contiguous over the whole tile ("tiles spread"), except
  rows of 2-8 elements of one value each whose values are consecutive and change every tile (a
  per-row scale over narrow rows, a tiny trailing dim under the axes): those are computed from the
  scale itself, the row's width a constant so that LLVM vectorizes across rows, or (rows of up to 63,
  where the CPU permutes 16 lanes: ``permutes``) 16 rows at a time in explicit vectors ("tiles narrow",
  in tiles of up to 16K elements), and other rows of 9 or more elements whose float32 products are exact
  (f16/bf16 outputs: rows whose blocks compute at most a third more than the row) where at most two
  consecutive tiles read one window (rows of runs of 64-127 joined too): those are computed from the
  scale itself, each row in 16-element vector blocks, the last one overlapping the one before, a row
  narrower than a block in one block that the rows after it overwrite past its end ("tiles blocks",
  in tiles of up to 16K elements).

No index array of the input's size is ever materialized.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from . import dtypes
from .exactness import f32_work_exact

__all__ = [
    "kernel",
    "compiled",
    "available",
    "period_vectors",
    "permutes",
    "blocks",
    "narrow",
    "bits_type",
    "call_type",
    "flat",
    "within",
]

_KERNELS: dict[Any, Callable[..., int]] = {}
_NUMBA: Any = None
_WITHIN: Any = None
_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_NIBBLE = (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4))


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


def bits_type(t: np.dtype) -> np.dtype | None:
    """The type the loop reads or writes arrays of type ``t`` as: f16/bf16 as their 16-bit patterns,
    int4/uint4 as the bytes ml_dtypes keeps them in (the loop reads their low 4 bits, and biases int4's:
    ``_jit.int4_biased``); None for the types it reads as they are."""
    if t in _HALF:
        return np.dtype(np.uint16)
    return np.dtype(np.uint8) if t in _NIBBLE else None


def call_type(t: np.dtype) -> np.dtype | None:
    """The type an array of type ``t`` is viewed as where it is passed to a loop ``compiled`` for its
    ``bits_type``: None (passed as it is) where the compiled code takes an array of another type of the
    same item size, as Numba's does (its unboxing checks the item size alone: a view costs about 0.13 us
    of a call, four of them a third of a call's fixed cost on inputs of tens of thousands of elements),
    else ``bits_type``'s. Needs ``available()``."""
    return None if _as_they_are() else bits_type(t)


_AS_THEY_ARE: bool | None = None


def _as_they_are() -> bool:
    """Whether compiled code takes an array of another type of its item size (found once a process)."""
    global _AS_THEY_ARE
    if _AS_THEY_ARE is None:
        from . import _jit

        probe = compiled(_jit.overlaps, (np.uint16, np.uint16))
        half = np.zeros(2, np.float16)
        try:
            _AS_THEY_ARE = bool(probe(half[:1], half[1:]) is False)
        except TypeError:
            _AS_THEY_ARE = False
    return _AS_THEY_ARE


def flat(a: np.ndarray, bits: np.dtype | None) -> np.ndarray:
    """``a`` as a 1-D C-order array (a copy only where ``a`` is not C-contiguous), viewed as ``bits``
    (``bits_type`` of its type)."""
    f = a.ravel()  # a view where ``a`` is C-contiguous, as ``reshape(-1)``, in a third of its time
    return f if bits is None else f.view(bits)


def _marker(out: np.dtype) -> Any:
    from . import _jit

    return _jit.MARKERS.get(np.dtype(out).name, _jit.PLAIN)


def narrow(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst`` (f16 or bf16) = ``src`` (float32 or float64, 1-D) rounded once to nearest even, by the fused
    loop's own rounding (NumPy converts to f16, and ml_dtypes to bf16, one element at a time)."""
    from . import _jit

    _jit.narrow(src, flat(dst, bits_type(dst.dtype)), _marker(dst.dtype))


def blocks(x: np.dtype, out: np.dtype) -> bool:
    """Whether the compiled loop computes rows of input type ``x`` and output ``out`` in vector blocks
    ("tiles blocks", ``_jit.block_run``): where the float32 product is exact (``f32_work_exact``), f16
    where the CPU converts it (``_jit.HARDWARE_F16``), and 16-bit inputs to f16 where it rounds their
    products to odd (``_jit.HARDWARE_ODD``). Needs ``available()``."""
    from . import _jit

    if np.dtype(out) == np.float16 and not _jit.HARDWARE_F16:
        return False
    odd = np.dtype(out) == np.float16 and np.dtype(x) in (np.int16, np.uint16) and _jit.HARDWARE_ODD
    return odd or f32_work_exact(dtypes.parse(np.dtype(x)), dtypes.parse(np.dtype(out)))


def permutes() -> bool:
    """Whether the compiled loop computes held rows of up to ``_jit.NARROW_WIDTH`` elements in groups of 16
    rows, each vector's values permuted from the group's (``_jit.narrow_run``: AVX-512), where it computes
    blocks for the types (``blocks``). Needs ``available()``."""
    from . import _jit

    return _jit.HARDWARE_AVX512


def period_vectors(period: int) -> int:
    """The vectors ``_jit.period_run`` holds a period of ``period`` elements in (its and a vector's least
    common multiple, in vectors), or 0 where that is more than it holds (``_jit.PERIOD_VECTORS``). Needs
    ``available()``."""
    from . import _jit

    vectors = math.lcm(period, _jit.BLOCK_RUN) // _jit.BLOCK_RUN
    return vectors if vectors <= _jit.PERIOD_VECTORS else 0


def kernel(work: np.dtype, out: np.dtype, x: np.dtype, has_z: bool, layout: str, guard: int = 0) -> Callable[..., int]:
    """The compiled loop for work precision ``work`` (float32 or float64) reading input type ``x`` (and a
    zero point where ``has_z``) and writing ``out`` in ``layout`` (``_jit.LAYOUTS``): the fused loop less
    its markers (``_jit.fused_for``: it returns the end of what it wrote, -1, nothing written, where
    ``out`` overlaps an input; with a ``guard``, ``exactness.f32_guard``'s, the start of the first chunk
    whose inputs lie beyond it; its last argument the blocks claimed among threads, or
    ``_split.NO_CLAIM``); every array is passed as ``bits_type`` says, 1-D and C-contiguous, the plan
    read-only. Compiled (or loaded from Numba's cache) at this call, for those types (``compiled``).
    Needs ``available()``."""
    key = (work, out, x, has_z, layout, guard)
    if key not in _KERNELS:
        from . import _jit

        loop = _jit.fused_for(
            _marker(out),
            {_NIBBLE[0]: _jit.INT4, _NIBBLE[1]: _jit.UINT4}.get(np.dtype(x), _jit.PLAIN),
            _jit.ZP if has_z else _jit.PLAIN,
            np.dtype(work).type(0),
            _jit.LAYOUTS[layout],
            guard,
        )
        xb, ob = (bits_type(np.dtype(t)) or np.dtype(t) for t in (x, out))
        _KERNELS[key] = compiled(loop, (xb, xb, ob, ob, int, int, (np.int64, False), np.int64))
    return _KERNELS[key]


def compiled(dispatcher: Any, args: tuple[Any, ...]) -> Callable[..., Any]:
    """``dispatcher``'s code compiled for these arguments (a NumPy type: a writeable 1-D C-contiguous array
    of it; a pair (type, False): a read-only one; ``int``: an int64), called without Numba's dispatch.
    The dispatcher compiles another copy for each combination of read-only arrays it is called with
    (5-10 s for the fused loop, then one more entry in the cache), and finds the copy by the
    arguments' types at every call (0.17 us); this code reads the caller's read-only arrays as well,
    and is compiled for arrays of any alignment (``np.frombuffer`` at an odd offset: no slower here).
    It checks only that each array argument is a NumPy array of the item size it was compiled for
    (``TypeError`` otherwise): the caller passes the base type's 1-D C-contiguous arrays of the native
    byte order it was compiled for (``reference.dequantize``: ``ravel`` of a base ``ndarray``, types the
    contract admits). Needs ``available()``."""
    from numba import from_dtype, types

    def numba_type(a: Any) -> Any:
        if a is int:
            return types.int64
        t, writeable = a if isinstance(a, tuple) else (a, True)
        return types.Array(from_dtype(np.dtype(t)), 1, "C", readonly=not writeable, aligned=False)

    return dispatcher.compile(tuple(numba_type(a) for a in args))


def within(a: np.ndarray, limit: int, start: int = 0, stop: int | None = None) -> bool:
    """Whether every element of the 1-D int32 array ``a`` (from ``start`` to ``stop``) lies within
    ``-limit..limit``. Needs ``available()``."""
    global _WITHIN
    if _WITHIN is None:
        from . import _jit

        _WITHIN = compiled(_jit.within, (np.int32, int, int, int))
    return bool(_WITHIN(a, start, a.shape[0] if stop is None else stop, limit))
