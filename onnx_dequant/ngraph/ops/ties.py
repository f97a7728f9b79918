"""The f32 scale that makes ONNX's requantization give nGraph's bits, with its proof.

nGraph rounds ``v = float(acc) * M`` (f32) half away from zero; QLinearConv and QLinearMatMul round
``float(acc) * M'`` half to even, then add the zero point and saturate. The two differ only where some
reachable ``v`` is exactly ``k + 0.5``, and with realistic scales and filters of hundreds of taps some
``v`` always is. A slightly larger ``M'`` moves those ties past the half, but it also moves every other
value: ``qlinear_scales`` finds an ``M'`` that moves no other value across a rounding boundary, or proves
that none exists.

The proof is exact and cheap because both results are non-decreasing step functions of ``acc`` (for
``M, M' > 0``; f32 rounding is monotonic): two such functions agree on ``[acc_lo, acc_hi]`` exactly when
they step at the same accumulators. So only the first accumulator of each output level matters (at most
255 per channel, whatever the range). For each one, ``M'`` must make the step happen there and not one
accumulator earlier: each such condition holds on a half-line of f32 values (found by testing the few f32
values around ``(k + 0.5) / acc`` in f32 arithmetic), and the channel's scale is any f32 in the
intersection of its half-lines, the one nearest ``M`` preferred. ``tests/test_ngraph_ties.py`` checks the
result against enumeration of every accumulator.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes

__all__ = ["qlinear_scales"]

_WINDOW = 4
"""f32 neighbours tried on each side of an estimated threshold: the real one is within two."""
_EXACT_ACC = (1 << 24) - 2 * _WINDOW
"""Largest accumulator near which the steps are located (beyond, ``float(acc)`` itself rounds)."""
_NONE = np.iinfo(np.int64).max


def qlinear_scales(
    scale: np.ndarray, acc_lo: np.ndarray, acc_hi: np.ndarray, zero: int, out_t: dtypes.DType
) -> np.ndarray:
    """Per channel (the broadcast shape of the arguments, flattened), an f32 ``M'`` with
    ``saturate(round_half_even(float(acc) * M') + zero)`` equal to ``saturate(round_half_away(float(acc) * M)
    + zero)`` (``M = scale``, the result in ``out_t``) for every integer ``acc`` in ``[acc_lo, acc_hi]``;
    NaN for a channel that has none (or whose ``M`` is not positive and finite). Where one value serves
    every channel, every channel gets it."""
    m = np.asarray(scale, np.float32).reshape(-1)
    lo, hi = np.asarray(acc_lo, np.int64).reshape(-1), np.asarray(acc_hi, np.int64).reshape(-1)
    m, lo, hi = (np.ascontiguousarray(a) for a in np.broadcast_arrays(m, lo, hi))
    out = np.full(m.shape, np.nan, np.float32)
    good = np.isfinite(m) & (m > 0)
    if not np.any(good):
        return out
    ks = np.arange(int(out_t.min) - zero, int(out_t.max) - zero, dtype=np.int64)  # steps from k to k + 1
    with np.errstate(over="ignore"):  # huge or subnormal scales: infinities and far steps, handled as such
        first, lost = _first_steps(np.where(good, m, np.float32(1)), ks, lo, hi)
        low, high = _feasible_bits(ks, first, lo, hi)
    ok = good & ~lost & (low <= high)
    mb = m.view(np.int32).astype(np.int64)
    lo_all, hi_all = low.max(), high.min()
    if ok.all() and lo_all <= hi_all:  # one scale for every channel: the feasible value nearest their median
        out[:] = np.array([np.clip(int(np.median(mb)), lo_all, hi_all)], np.int32).view(np.float32)
        return out
    out[ok] = np.clip(mb, low, high)[ok].astype(np.int32).view(np.float32)
    return out


def _first_steps(m: np.ndarray, ks: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(channels, steps): the first ``acc`` whose nGraph result reaches ``k + 1`` (rounding half away:
    ``v >= k + 0.5`` for a positive ``k + 1``, ``v > k + 0.5`` otherwise); and per channel whether a step
    within its range could not be located (among accumulators that f32 cannot hold exactly)."""
    h = ks.astype(np.float64) + 0.5
    cf = np.ceil(h[None, :] / m[:, None].astype(np.float64))  # a subnormal scale: steps beyond every accumulator
    near = (cf >= lo[:, None] - 2 * _WINDOW) & (cf <= hi[:, None] + 2 * _WINDOW)
    lost = np.any(near & (np.abs(cf) > _EXACT_ACC), 1)
    c = np.clip(cf, -_EXACT_ACC - 4 * _WINDOW, _EXACT_ACC + 4 * _WINDOW).astype(np.int64)  # in int64, far ones too
    cand = c[:, :, None] + np.arange(-_WINDOW, _WINDOW + 1)
    v = (cand.astype(np.float32) * m[:, None, None]).astype(np.float64)
    reached = np.where((ks + 1 >= 1)[None, :, None], v >= h[None, :, None], v > h[None, :, None])
    lost |= np.any(near & ~(~reached[..., 0] & reached[..., -1]), 1)
    return cand[..., 0] + (~reached).sum(-1), lost


def _feasible_bits(ks: np.ndarray, first: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per channel, the f32 bit patterns (as int64) of the ``M'`` for which ONNX's result steps at every
    ``first`` accumulator (clipped to the range) and not before: ``(low, high)``, empty when low > high."""
    k = np.broadcast_to(ks, first.shape)
    lo2, hi2 = lo[:, None], hi[:, None]
    # the step to k + 1 must have happened at max(first, lo) and not yet at min(first - 1, hi)
    at = np.concatenate([np.maximum(first, lo2), np.minimum(first - 1, hi2)], 1)
    want = np.concatenate([first <= hi2, first > lo2], 1)  # whether that constraint applies
    reach = np.concatenate([np.ones_like(first, bool), np.zeros_like(first, bool)], 1)
    k = np.concatenate([k, k], 1)
    n = first.shape[0]
    low = np.full(n, 1, np.int64)  # the smallest positive f32
    high = np.full(n, 0x7F7FFFFF, np.int64)  # the largest finite one
    ch, idx = np.nonzero(want)
    a, k, reach = at[ch, idx], k[ch, idx], reach[ch, idx]
    h = k.astype(np.float64) + 0.5
    even_up = (k + 1) % 2 == 0  # a tie k + 0.5 rounds to even: up exactly when k + 1 is even
    # v = float(a) * M' has a's sign whatever M' > 0: where that decides it, ONNX's result reaches k + 1
    # exactly when k + 0.5 < 0
    fixed = (a == 0) | ((a > 0) != (h > 0))
    np.maximum.at(low, ch[fixed & ((h < 0) != reach)], _NONE)
    a, h, even_up, reach, ch = a[~fixed], h[~fixed], even_up[~fixed], reach[~fixed], ch[~fixed]
    af = a.astype(np.float32)
    t = (h / af.astype(np.float64)).astype(np.float32)  # M' near which float(a) * M' crosses k + 0.5
    bits = t.view(np.int32).astype(np.int64)[:, None] + np.arange(-_WINDOW, _WINDOW + 1)
    cand = np.clip(bits, 1, 0x7F7FFFFF).astype(np.int32).view(np.float32)
    v = (af[:, None] * cand).astype(np.float64)
    up = (v > h[:, None]) | ((v == h[:, None]) & even_up[:, None])  # ONNX's result reaches k + 1
    pos = a > 0
    rising = np.where(pos[:, None], up, up[:, ::-1])  # non-decreasing along the window either way
    ok = ~rising[:, 0] & rising[:, -1]
    np.maximum.at(low, ch[~ok], _NONE)
    j = (~rising).sum(1)  # index (in rising order) of the first candidate that reaches
    rows = np.arange(a.size)
    thr_pos = bits[rows, np.minimum(j, 2 * _WINDOW)]  # a > 0: reaches iff bits >= thr_pos
    thr_neg = bits[rows, np.maximum(2 * _WINDOW - j, 0)]  # a < 0: reaches iff bits <= thr_neg
    sel = ok & pos & reach
    np.maximum.at(low, ch[sel], thr_pos[sel])
    sel = ok & pos & ~reach
    np.minimum.at(high, ch[sel], thr_pos[sel] - 1)
    sel = ok & ~pos & reach
    np.minimum.at(high, ch[sel], thr_neg[sel])
    sel = ok & ~pos & ~reach
    np.maximum.at(low, ch[sel], thr_neg[sel] + 1)
    return low, high
