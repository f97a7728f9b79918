"""Output buffers reused from run to run, poisoned first so that an element a run leaves unwritten
cannot pass for a result."""

from __future__ import annotations

import numpy as np

__all__ = ["POISON_STRIDE", "poison"]

POISON_STRIDE = 1021
"""Every this many elements, ``poison`` writes a value that differs from any the path may write; a prime,
so rows of every length get hit at varying columns, and small enough that every 4 KiB page of a
4-byte type gets one."""


def poison(buf: np.ndarray, sample: np.ndarray) -> None:
    """Spoil a reused output buffer, so an element a run leaves unwritten cannot pass for a result:
    every ``POISON_STRIDE``-th element becomes the bitwise complement of the expected value there
    (``sample``, the expected values at those positions), which never compares equal to it (nor is NaN
    where it is NaN)."""
    flat = buf.reshape(-1)
    target = flat[::POISON_STRIDE]
    sample = np.asarray(sample).reshape(-1)
    if sample.shape != target.shape or sample.dtype != flat.dtype:
        return
    if flat.dtype == np.bool_:
        flat[::POISON_STRIDE] = ~sample
        return
    if flat.dtype.itemsize not in (1, 2, 4, 8):
        return
    kind = f"u{flat.dtype.itemsize}"
    np.invert(sample.view(kind), out=flat.view(kind)[::POISON_STRIDE])
