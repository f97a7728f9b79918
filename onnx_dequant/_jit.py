"""The compiled half of ``_fused`` (imported only when Numba is installed): the fused loop and the
scalar conversions it inlines, all module-level so that Numba's on-disk cache can key them (a closure
over a compiled function is keyed by a per-process id and would be compiled again in every process).

The conversions are branch-free, so that the loops calling them vectorize (Numba widens integer
arithmetic to 64 bits: every intermediate is cast back to uint32, so the lanes stay 32 bits wide):
f16/bf16 bits -> f32 (exact), f32 -> f16/bf16 bits (round to nearest even), f64 -> f16/bf16 bits
rounded once (through float32 rounded to odd), and a float32 product rounded to odd from its exact
error (a fused multiply-add), so that 16-bit inputs reach f16/bf16 in float32 work. The output type
reaches the loop as a marker argument (``MARKERS``) whose Numba type selects the conversions at
compile time (``load``, ``store``).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

__all__ = ["MARKERS", "PLAIN", "make_fused", "narrow"]

PLAIN = np.uint8(0)
"""The marker of f32/f64 outputs (the array's own cast on assignment)."""
MARKERS = {"float16": np.uint16(0), "bfloat16": np.int16(0)}
"""The marker of f16 and bf16 outputs (and scales), which the loop reads and writes as 16-bit patterns."""

_u32 = np.uint32
_jit = numba.njit(nogil=True, cache=True)


@intrinsic
def f32_bits(typingctx, v):  # pragma: no cover - compiled
    """A float32's bits as uint32."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def bits_f32(typingctx, u):  # pragma: no cover - compiled
    """uint32 bits as a float32."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@intrinsic
def fma32(typingctx, a, b, c):  # pragma: no cover - compiled
    """``a * b + c`` rounded once (LLVM's fma: the instruction, or the C library's ``fmaf``)."""

    def codegen(context, builder, sig, args):
        f32 = ir.FloatType()
        fma = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32, f32, f32]))
        return builder.call(fma, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


@_jit
def f16_from_f32(u):  # pragma: no cover - compiled
    """float32 bits ``u`` rounded to nearest even in f16, as bits (NaNs: a quiet NaN, sign kept)."""
    f = abs(bits_f32(u))
    a = _u32(u & _u32(0x7FFFFFFF))
    t = _u32(_u32(a - _u32(0x38000000)) + _u32(_u32(0xFFF) + _u32(_u32(a >> _u32(13)) & _u32(1))))
    normal = min(_u32(t >> _u32(13)), _u32(0x7C00))  # 65520 and above: infinity
    # below 2**-14, in units of 2**-24: adding 0.5 (whose float32 quantum is 2**-24) rounds there
    sub = _u32(f32_bits(f + np.float32(0.5)) - _u32(0x3F000000))
    r = normal if f >= np.float32(2.0**-14) else sub
    r = r if f == f else _u32(0x7E00)
    return np.uint16(_u32(_u32(_u32(u >> _u32(16)) & _u32(0x8000)) | r))


@_jit
def bf16_from_f32(u):  # pragma: no cover - compiled
    """float32 bits ``u`` rounded to nearest even in bf16, as bits (NaNs: a quiet NaN, sign kept)."""
    f = bits_f32(u)
    r = _u32(_u32(u + _u32(0x7FFF)) + _u32(_u32(u >> _u32(16)) & _u32(1)))
    nan = _u32(_u32(_u32(u >> _u32(16)) & _u32(0x8000)) | _u32(0x7FC0))
    return np.uint16(_u32(r >> _u32(16)) if f == f else nan)


@_jit
def odd_f32(v):  # pragma: no cover - compiled
    """float64 ``v`` in float32 rounded to odd, as bits: a second rounding to 8 or 11 significant bits
    from there is the single correct rounding of ``v``."""
    t = np.float32(v)
    back = np.float64(t)
    inexact = (back != v) & (v == v)
    down = inexact & (abs(back) > abs(v))
    return _u32(_u32(f32_bits(t) - _u32(down)) | _u32(inexact))


@_jit
def odd_product_f32(d, s):  # pragma: no cover - compiled
    """The exact product of float32 ``d`` and ``s`` rounded to odd in float32, as bits: the fused
    multiply-add gives the rounding error ``d * s - p`` exactly (no underflow: ``d`` is an integer and
    ``s`` a multiple of 2**-149), and it says whether and which way ``p`` was rounded. An infinite error
    is an overflow, left infinite; a NaN error (an infinite or NaN factor) leaves ``p`` as it is."""
    p = d * s
    err = fma32(d, s, -p)
    inexact = (err != np.float32(0)) & (abs(err) < np.float32(np.inf))
    down = inexact & ((err < np.float32(0)) != (p < np.float32(0)))
    return _u32(_u32(f32_bits(p) - _u32(down)) | _u32(inexact))


@_jit
def f32_from_f16(h):  # pragma: no cover - compiled
    """f16 bits ``h`` as float32 (exact)."""
    h = _u32(h)
    em = _u32(h & _u32(0x7FFF))
    normal = _u32(_u32(em << _u32(13)) + _u32(0x38000000))
    normal = _u32(normal + _u32(0x38000000)) if em >= _u32(0x7C00) else normal  # infinities and NaNs
    sub = f32_bits(np.float32(em) * np.float32(2.0**-24))  # subnormals and zero: exact
    return bits_f32(_u32(_u32(_u32(h & _u32(0x8000)) << _u32(16)) | (sub if em < _u32(0x400) else normal)))


@_jit
def f32_from_bf16(h):  # pragma: no cover - compiled
    """bf16 bits ``h`` as float32 (exact)."""
    return bits_f32(_u32(_u32(h) << _u32(16)))


def load(kind, v):  # pragma: no cover - compiled by its overload
    """A scale element: f16/bf16 bits as float32; other types as they are."""


def store(kind, d, s):  # pragma: no cover - compiled by its overload
    """The product of a difference and a scale in the work type, as an output element: f16/bf16 bits
    rounded once; other types as they are (the output array casts)."""


@overload(load, jit_options={"nogil": True})
def _load(kind, v):  # pragma: no cover - compiled
    if kind == types.uint16:
        return lambda kind, v: f32_from_f16(v)
    if kind == types.int16:
        return lambda kind, v: f32_from_bf16(v)
    return lambda kind, v: v


@overload(store, jit_options={"nogil": True})
def _store(kind, d, s):  # pragma: no cover - compiled
    if kind in (types.uint16, types.int16):
        to_bits = f16_from_f32 if kind == types.uint16 else bf16_from_f32
        if d == types.float32:  # float32 holds the difference: its product rounded to odd
            return lambda kind, d, s: to_bits(odd_product_f32(d, s))
        return lambda kind, d, s: to_bits(odd_f32(d * s))  # float64: the product is exact
    return lambda kind, d, s: d * s


def make_fused(work: type) -> Callable[..., None]:
    """The fused loop in work precision ``work`` (np.float32 or np.float64)."""

    @numba.njit(nogil=True, cache=True, boundscheck=False)
    def fused(x, z, s, out, e0, e1, tile, pattern, inner_varies, has_z, dims, strides, kind):  # pragma: no cover
        """``out[0 : e1 - e0] = (x[e] - z[j]) * s[j]`` for the flat elements ``e0 <= e < e1``.

        ``tile``: elements per innermost unit; ``pattern`` (length ``tile``, or empty for one row)
        the scale offset of each tile element; otherwise ``inner_varies`` says whether the scale runs
        along the row. ``dims``/``strides``: the outer dims and their scale strides. ``kind``: the
        output's marker (``MARKERS``).
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
                    # the outermost dim's last tile may run past the input's end (``reference._tile``):
                    # its offsets past the scale's end are never used, and not read
                    lim = sr.shape[0]
                    if has_z:
                        zr = z[off:]
                        for i in range(tile):
                            j = pattern[i]  # unsigned offsets: no wraparound
                            if j < lim:
                                sb[i] = work(load(kind, sr[j]))
                                zb[i] = work(zr[j])
                    else:
                        for i in range(tile):
                            j = pattern[i]
                            if j < lim:
                                sb[i] = work(load(kind, sr[j]))
                    cached = off
                st = sb[col : col + n]
                if has_z:
                    zt = zb[col : col + n]
                    for i in range(n):
                        orow[i] = store(kind, work(xr[i]) - zt[i], st[i])
                else:
                    for i in range(n):
                        orow[i] = store(kind, work(xr[i]), st[i])
            elif inner_varies:
                sr = s[off + col : off + col + n]
                if has_z:
                    zr = z[off + col : off + col + n]
                    for i in range(n):
                        orow[i] = store(kind, work(xr[i]) - work(zr[i]), work(load(kind, sr[i])))
                else:
                    for i in range(n):
                        orow[i] = store(kind, work(xr[i]), work(load(kind, sr[i])))
            else:
                sv = work(load(kind, s[off]))
                if has_z:
                    zv = work(z[off])
                    for i in range(n):
                        orow[i] = store(kind, work(xr[i]) - zv, sv)
                else:
                    for i in range(n):
                        orow[i] = store(kind, work(xr[i]), sv)
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


@numba.njit(nogil=True, cache=True, boundscheck=False)
def narrow(src, dst, kind):  # pragma: no cover - compiled
    """``dst[i] = store(kind, src[i], 1)``: the fused loop's rounding alone."""
    one = np.ones(1, src.dtype)[0]
    for i in range(src.shape[0]):
        dst[i] = store(kind, src[i], one)
