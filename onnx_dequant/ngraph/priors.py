"""PriorBox and PriorBoxClustered (nGraph opset 1, v0 ops) computed in NumPy, step by step in float32 as the
op's reference kernel (OpenVINO's ``runtime/reference/prior_box.hpp`` / ``prior_box_clustered.hpp``, which
implement the op nGraph defines; nGraph 0.26 itself has no kernel). The priors depend only on the layer's and
the image's height and width, so the importer writes them as an initializer.

Output ``[2, 4 * H * W * P]``: row 0 the boxes ``(xmin, ymin, xmax, ymax)`` normalized to the image, for each
cell ``(h, w)`` then each prior; row 1 the variances. Element-wise float32 arithmetic on arrays rounds as the
kernel's scalar ``float`` arithmetic does, in the same order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["PriorBoxAttrs", "PriorBoxClusteredAttrs", "prior_box", "prior_box_clustered", "number_of_priors"]

F = np.float32


@dataclass
class PriorBoxAttrs:
    """``op::PriorBoxAttrs`` (the values already rounded to float32)."""

    min_size: list[float] = field(default_factory=list)
    max_size: list[float] = field(default_factory=list)
    aspect_ratio: list[float] = field(default_factory=list)
    density: list[float] = field(default_factory=list)
    fixed_ratio: list[float] = field(default_factory=list)
    fixed_size: list[float] = field(default_factory=list)
    clip: bool = False
    flip: bool = False
    step: float = 1.0
    offset: float = 0.0
    variance: list[float] = field(default_factory=list)
    scale_all_sizes: bool = False


@dataclass
class PriorBoxClusteredAttrs:
    """``op::PriorBoxClusteredAttrs``."""

    widths: list[float] = field(default_factory=list)
    heights: list[float] = field(default_factory=list)
    clip: bool = False
    step_widths: float = 1.0
    step_heights: float = 1.0
    offset: float = 0.0
    variances: list[float] = field(default_factory=list)


def number_of_priors(a: PriorBoxAttrs) -> int:
    """``PriorBox::number_of_priors``: the count nGraph's shape inference uses (its own set of aspect ratios)."""
    ratios = {_micro(r) for r in a.aspect_ratio}
    if a.flip:
        ratios |= {_micro(float(F(1) / F(r))) for r in a.aspect_ratio}
    ratios.add(1.0)
    total = len(ratios)
    n = total * len(a.min_size) + len(a.max_size) if a.scale_all_sizes else total + len(a.min_size) - 1
    if a.fixed_size:
        n = total * len(a.fixed_size)
    for d in a.density:
        d2 = int(d) * int(d) - 1
        n += (len(a.fixed_ratio) if a.fixed_ratio else total) * d2
    return n


def _micro(r: float) -> float:
    """``float(std::round(r * 1e6) / 1e6)``: rounded half away from zero to a millionth, kept as float32."""
    x = r * 1e6
    if not math.isfinite(x):
        return float(F(r))
    return float(F(math.copysign(math.floor(abs(x) + 0.5), x) / 1e6))


def _kernel_ratios(a: PriorBoxAttrs) -> list[F]:
    """The kernel's aspect ratios: 1, then each new ratio (and its inverse with ``flip``), in order."""
    out = [F(1)]
    for r in map(F, a.aspect_ratio):
        if not any(abs(float(r - e)) < 1e-6 for e in out):
            out.append(r)
            if a.flip:
                out.append(F(1) / r)
    return out


def kernel_priors(a: PriorBoxAttrs) -> int:
    """How many priors per cell the kernel writes (the conversion refuses where this is not ``number_of_priors``)."""
    others = sum(abs(float(r) - 1.0) >= 1e-6 for r in _kernel_ratios(a))
    n = 0
    for s in range(len(a.fixed_size)):
        d2 = int(a.density[s]) ** 2
        n += len(a.fixed_ratio) * d2 if a.fixed_ratio else (d2 if a.density else 0) + others * d2
    for i in range(len(a.min_size)):
        n += 1 + (i < len(a.max_size)) + (others if a.scale_all_sizes or i == len(a.min_size) - 1 else 0)
    return n


def _variances(v: list[float], count: int) -> np.ndarray:
    """Row 1: one variance for every coordinate of the ``count`` priors, or four repeated per prior."""
    v = v or [0.1]
    return np.tile(np.array(v, F), count * 4 // len(v))


def prior_box(h: int, w: int, ih: int, iw: int, a: PriorBoxAttrs) -> np.ndarray:
    """PriorBox's output for a ``h x w`` layer on an ``ih x iw`` image."""
    with np.errstate(all="ignore"):
        ratios = _kernel_ratios(a)
        step, min_size = F(a.step), [F(s) for s in a.min_size]
        if not a.scale_all_sizes:  # mxnet-like PriorBox
            step = F(F(ih) / F(h)) if step == -1 else F(step * F(ih))
            min_size = [F(s * F(ih)) for s in min_size]
        iwi, ihi = F(1) / F(iw), F(1) / F(ih)
        ws, hs = np.arange(w, dtype=np.int64), np.arange(h, dtype=np.int64)
        if step == 0:
            cx = (ws.astype(F) + F(0.5)) * F(F(iw) / F(w))
            cy = (hs.astype(F) + F(0.5)) * F(F(ih) / F(h))
        else:
            cx = (F(a.offset) + ws.astype(F)) * step
            cy = (F(a.offset) + hs.astype(F)) * step
        cx, cy = np.broadcast_to(cx[None, :], (h, w)), np.broadcast_to(cy[:, None], (h, w))
        boxes: list[np.ndarray] = []

        def box(x: np.ndarray, y: np.ndarray, bw: F, bh: F, clip: bool) -> None:
            b = [(x - bw) * iwi, (y - bh) * ihi, (x + bw) * iwi, (y + bh) * ihi]
            if clip:  # x > 0 ? x : 0, then x < 1 ? x : 1
                b = [np.where(b[0] > 0, b[0], F(0)), np.where(b[1] > 0, b[1], F(0))] + [
                    np.where(v < 1, v, F(1)) for v in b[2:]
                ]
            boxes.append(np.stack(b, -1))

        def dense(fs: float, d: int, bw: F, bh: F) -> None:
            shift = int(F(fs) / F(d))
            half = F(int(fs) // 2)
            for r in range(d):
                for c in range(d):
                    x = cx - half + F(F(shift) / F(2)) + F(c * shift)
                    y = cy - half + F(F(shift) / F(2)) + F(r * shift)
                    box(x.astype(F), y.astype(F), bw, bh, True)

        for s, fs in enumerate(a.fixed_size):
            size = F(int(fs)) * F(0.5)
            if a.fixed_ratio:
                for ar in map(F, a.fixed_ratio):
                    ar = np.sqrt(ar)
                    dense(fs, int(a.density[s]), F(F(fs) * F(0.5) * ar), F(F(fs) * F(0.5) / ar))
                continue
            if a.density:
                dense(fs, int(a.density[s]), size, size)
            for ar in ratios:
                if abs(float(ar) - 1.0) < 1e-6:
                    continue
                ar = np.sqrt(ar)
                dense(fs, int(a.density[s]), F(F(fs) * F(0.5) * ar), F(F(fs) * F(0.5) / ar))
        for i, ms in enumerate(min_size):
            box(cx, cy, F(ms * F(0.5)), F(ms * F(0.5)), False)
            if i < len(a.max_size):
                half = F(np.sqrt(F(ms * F(a.max_size[i]))) * F(0.5))
                box(cx, cy, half, half, False)
            if a.scale_all_sizes or i == len(min_size) - 1:
                base = min_size[i if a.scale_all_sizes else 0]
                for ar in ratios:
                    if abs(float(ar) - 1.0) < 1e-6:
                        continue
                    ar = np.sqrt(ar)
                    box(cx, cy, F(base * F(0.5) * ar), F(base * F(0.5) / ar), False)
        count = h * w * len(boxes)
        flat = np.stack(boxes, 2).reshape(-1) if boxes else np.zeros(0, F)
        if a.clip:  # min(max(x, 0), 1): -0 and NaN pass max
            flat = np.where(flat < 0, F(0), flat)
            flat = np.where(F(1) < flat, F(1), flat)
        return np.stack([flat.astype(F), _variances(a.variance, count)])


def prior_box_clustered(h: int, w: int, ih: int, iw: int, a: PriorBoxClusteredAttrs) -> np.ndarray:
    """PriorBoxClustered's output for a ``h x w`` layer on an ``ih x iw`` image."""
    with np.errstate(all="ignore"):
        sw, sh = F(a.step_widths), F(a.step_heights)
        if sw == 0 and sh == 0:
            sw, sh = F(F(iw) / F(w)), F(F(ih) / F(h))
        cx = ((np.arange(w, dtype=np.int64).astype(F) + F(a.offset)) * sw)[None, :, None]
        cy = ((np.arange(h, dtype=np.int64).astype(F) + F(a.offset)) * sh)[:, None, None]
        bw, bh = np.array(a.widths, F)[None, None, :], np.array(a.heights, F)[None, None, :]
        two = F(2)
        b = [(cx - bw / two) / F(iw), (cy - bh / two) / F(ih), (cx + bw / two) / F(iw), (cy + bh / two) / F(ih)]
        b = [np.broadcast_to(v, (h, w, len(a.widths))) for v in b]
        if a.clip:
            b = [np.where(F(1) < m, F(1), m) for m in (np.where(v < 0, F(0), v) for v in b)]
        flat = np.stack(b, -1).astype(F).reshape(-1)
        return np.stack([flat, _variances(a.variances, h * w * len(a.widths))])


def size_ok(*dims: int) -> bool:
    """Whether an output of ``2 * prod(dims)`` floats is small enough to write as an initializer."""
    return all(d >= 0 for d in dims) and math.prod(dims) <= 1 << 26
