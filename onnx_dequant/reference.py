"""The exact NumPy reference: ``output = (input - zero_point[j]) * scale[j]``, rounded once.

Exact means: the integer difference never wraps (even for i32), the product is taken in float64 and
rounded once to the output type. Where a narrower computation gives the same bits (8/16-bit inputs
with f32 output: the float32 difference is exact and the float32 product rounds the exact product
once; 8-bit inputs with f16/bf16 output and 16-bit ones with bf16, whose float32 products are exact; in
the compiled loop also 16-bit inputs with f16 output, the float32 product rounded to odd first:
``exactness.fused_work_type``) the reference uses it;
everything else goes through float64. The work runs in cache-sized blocks, so the peak memory is the
output plus a few hundred kilobytes.

``DequantizeOp`` runs the node under ``onnx.reference.ReferenceEvaluator``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
from onnx.reference.op_run import OpRun

from . import _fused, _split, dtypes
from .contract import TensorType, infer, normalize_axes
from .errors import DequantizeError
from .exactness import f32_guard, fused_work_type, work_type
from .schema import DOMAIN, OP_TYPE

__all__ = ["dequantize", "DequantizeOp", "round_f64_to_bf16"]

BLOCK_ELEMENTS = 1 << 18
"""Elements per block: a block of f32 results (1 MiB) stays in the L2 cache while it is finished."""

_F64 = np.dtype(np.float64)
_BF16 = np.dtype(ml_dtypes.bfloat16)
_NDARRAY = np.ndarray  # a module global: ``np.ndarray`` is two lookups (about 20 ns each) in a call's checks


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


def _bf16_from_products(src: np.ndarray, dst: np.ndarray) -> None:
    """float64 products of an integer and a bf16 scale rounded once to bf16, as the compiled loop rounds
    them (``_jit.bf16_from_f64_product``): to 8 significant bits in float64's own bits, which float32
    then holds exactly; such a product below 2**-126 is a multiple of 2**-133 that bf16 holds as it is.
    ``round_f64_to_bf16`` rounds any float64, about 12x slower."""
    b = src.view(np.uint64)
    r = b >> np.uint64(45)
    r &= np.uint64(1)
    r += np.uint64(0xFFFFFFFFFFF)  # below half of the last kept bit, plus that bit: ties to even
    r += b
    r &= np.uint64(0xFFFFE00000000000)
    dst.view(np.uint16)[...] = r.view(np.float64).astype(np.float32).view(np.uint32) >> np.uint32(16)


def _blocks(shape: tuple[int, ...]) -> Iterator[tuple[Any, ...]]:
    """Index tuples that cut an array of ``shape`` into blocks of about ``BLOCK_ELEMENTS`` elements."""
    size = math.prod(shape)
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
    return tuple((0 if isinstance(i, int) else slice(None)) if n == 1 else i for i, n in zip(index, bshape))


def _array(value: Any, what: str) -> np.ndarray:
    """``value`` as a NumPy array of the base type (a subclass's, ``np.matrix``'s say, ``ravel`` keeps its
    dims; a NumPy scalar as a 0-d array), or ``DequantizeError``."""
    if isinstance(value, np.ndarray):
        return value.view(_NDARRAY)
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
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``(x - zero_point[j]) * scale[j]`` exactly, ``j`` the output coordinate projected onto ``axes``.

    ``scale`` and ``zero_point`` are shaped as ``x``'s shape projected onto the sorted axes;
    ``zero_point=None`` means zero; ``dtype`` (any element type spelling) must equal the scale's type.
    ``out``, when given, is a C-contiguous array of the output's shape and type to write into (it
    saves the page faults of a fresh array) and is returned; it may be one of the inputs (or overlap
    one): the result is then computed apart and copied in. Raises ``DequantizeError`` when the
    arguments break the contract.
    """
    # a call's fixed cost is most of it on inputs of tens of thousands of elements: arrays' types tested
    # before any call is made, the call's derived values kept (``_checked``)
    x = x if type(x) is _NDARRAY else _array(x, "Input")
    scale = scale if type(scale) is _NDARRAY else _array(scale, "Scale")
    zp = zero_point if zero_point is None or type(zero_point) is _NDARRAY else _array(zero_point, "Zero point")
    # one flat key (a nested one costs 0.06 us of a call's 2.1 outside the loop); each attribute read once
    # (about 35 ns each: ``x.size`` is a product of the shape's)
    shape, size = x.shape, x.size
    z_dtype, z_shape = (None, None) if zp is None else (zp.dtype, zp.shape)
    if type(axes) is not tuple:
        axes = _axes_key(axes)
    fused = size >= FUSED_MIN_ELEMENTS
    try:
        try:  # the key's parts as arguments, not a tuple unpacked (0.1-0.2 us of a call's 1.8 outside the loop)
            checked = _checked(x.dtype, shape, scale.dtype, scale.shape, z_dtype, z_shape, axes, dtype, fused)
        except TypeError:  # axes or dtype that cannot be a cache key (a float array, say): checked afresh
            checked = _checked.__wrapped__(
                x.dtype, shape, scale.dtype, scale.shape, z_dtype, z_shape, axes, dtype, fused
            )
    except DequantizeError:  # an input in the other byte order: its element type is looked up native
        if all(a is None or a.dtype.isnative for a in (x, scale, zp)):
            raise
        checked = None
    if checked is None:  # outside the handler: an error of the native call is not shown as this one's
        return dequantize(*(_native(a) for a in (x, scale, zp)), axes=axes, dtype=dtype, out=out)
    out_t, axes_t, work, bshape, setup, out_np, kept_axes, kept_dtype = checked
    # a kept entry's key may equal this call's with parts of types the contract refuses (``True == 1``,
    # ``1.0 == 1``): those are checked afresh (and raise), unless the caller passes the very objects kept
    if (kept_axes is not axes and not _integers(axes)) or (
        kept_dtype is not dtype and isinstance(kept_dtype, _INTEGERS) and not _integers(dtype)
    ):
        checked = _checked.__wrapped__(x.dtype, shape, scale.dtype, scale.shape, z_dtype, z_shape, axes, dtype, fused)
        out_t, axes_t, work, bshape, setup, out_np = checked[:6]
    fresh = out is None  # a fresh array overlaps no input
    if fresh:
        out = np.empty(shape, out_np)
    elif not (
        type(out) is _NDARRAY
        and out.shape == shape
        and ((o_dtype := out.dtype) is out_np or o_dtype == out_np)
        and (flags := out.flags).c_contiguous
        and flags.writeable
    ):
        if isinstance(out, _NDARRAY) and type(out) is not _NDARRAY:  # a subclass: written through a base view
            dequantize(x, scale, zp, axes=axes_t, dtype=dtype, out=out.view(_NDARRAY))
            return out
        wrong = _out_problem(out, shape, out_np)
        if wrong is None:  # the output's type in the other byte order: computed, then copied in swapped
            np.copyto(out, dequantize(x, scale, zp, axes=axes_t, dtype=dtype))
            return out
        raise DequantizeError(
            f"out must be a writeable C-contiguous {out_t.elem_type} array of shape {shape}, got {wrong}"
        )
    if size == 0:
        return out
    if setup is not None:
        # a zero point of zeros costs the loop one exact subtraction, less than looking for one
        has_z = zp is not None
        kernel, plan, cost, x_bits, out_bits, no_z, guard = setup
        # the loop reads every array in its own type (f16/bf16 and 4-bit types as their bits, passed as
        # they are where the compiled code takes them: ``_fused.call_type``; the scale has the output's
        # type, the zero point the input's) and converts it; no copy is made of a C-contiguous array (a
        # copy never overlaps ``out``): ``_fused.flat``, written out (four calls cost 0.12 us more, of a
        # call's 1.7 us outside the loop)
        x_flat = x.ravel() if x_bits is None else x.ravel().view(x_bits)
        z_flat = no_z if not has_z else zp.ravel() if x_bits is None else zp.ravel().view(x_bits)
        s_flat = scale.ravel() if out_bits is None else scale.ravel().view(out_bits)
        out_flat = out.ravel() if out_bits is None else out.ravel().view(out_bits)
        if guard is not None:  # i32 in float32 where it may; the kernels are thunks (``_fused_setup``)
            # a zero point as large as the input pairs with it element by element: the guarded kernel
            # checks it a chunk at a time, among the threads, not all before the call (a pass of 100 us
            # at 2.3M elements)
            guarded = not has_z or z_flat.shape[0] == size or _fused.within(z_flat, guard[1])
            kernel = functools.partial(_guarded, guard, kernel) if guarded else kernel()
        # compiled code raises no floating-point warnings: no errstate; it checks the overlap itself
        if size < _split.MIN_ELEMENTS or _split.untimed(size, cost):
            if kernel(x_flat, z_flat, s_flat, out_flat, 0, size, plan, _split.NO_CLAIM) >= 0:
                return out
        elif _split.run(
            lambda a, b, claim: kernel(x_flat, z_flat, s_flat, out_flat[a:b], a, b, plan, claim) >= 0,
            size,
            cost,
            lambda: not _overlaps(out_flat, x_flat, s_flat, z_flat),
        ):
            return out
    elif fresh or not _overlaps(out, x, scale, zp):
        has_z = zp is not None and bool(zp.any())
        if scale.dtype == work:
            s = scale.reshape(bshape)
        else:
            with np.errstate(invalid="ignore"):  # ml_dtypes warns on some bf16 NaN payloads; NaN stays NaN
                s = scale.astype(work).reshape(bshape)
        z = zp.astype(work).reshape(bshape) if has_z else None
        if size <= BLOCK_ELEMENTS:  # one block (a small call's fixed cost: no pool, no block list)
            _run_blocks([(Ellipsis,)], x, s, z, out, work, bshape)
        else:
            _parallel(_run_blocks, list(_blocks(shape)), x, s, z, out, work, bshape)
        return out
    # ``out`` overlaps an input, and nothing was written: every input read before out is written
    np.copyto(out, dequantize(x, scale, zp, axes=axes_t, dtype=dtype))
    return out


def _axes_key(axes: Any) -> Any:
    """``axes`` spelled as a cache key of the same meaning: a set (nGraph's AxisSet, the natural spelling),
    a list or another iterable as a tuple; an integer array as a tuple of ints, an empty one as ``()``; an
    int or None as it is; what else (a float array, an array subclass) as it is, checked afresh each call."""
    t = type(axes)
    if t is set or t is list or t is frozenset:
        return tuple(axes)
    if axes is None or isinstance(axes, (int, np.integer, str, bytes)):
        return axes
    if isinstance(axes, np.ndarray):  # a subclass's items may not be its values (a masked array's)
        if t is _NDARRAY and axes.dtype.kind in "iu" and axes.ndim <= 1:
            return tuple(axes.reshape(-1).tolist())
        return () if t is _NDARRAY and axes.ndim == 1 and axes.size == 0 else axes
    return tuple(axes) if isinstance(axes, Iterable) else axes


_INTEGERS = (int, np.integer)


def _integers(value: Any) -> bool:
    """Whether ``value`` (an int, or a tuple of them) is made of integers of the types the contract takes
    (not bools, which equal 0 and 1, nor floats): a kept entry's axes and ONNX type number are."""
    if type(value) is tuple:
        return all(isinstance(v, _INTEGERS) and type(v) is not bool for v in value)
    return value is None or (isinstance(value, _INTEGERS) and type(value) is not bool)


def _native(a: np.ndarray | None) -> np.ndarray | None:
    """``a`` in the machine's byte order (a copy where it is not)."""
    return a if a is None or a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def _out_problem(out: Any, shape: tuple[int, ...], out_np: np.dtype) -> str | None:
    """What makes ``out`` unusable as the output, for the error: its type and shape, then whether it is
    not C-contiguous or read-only; None when it differs from a usable one only in byte order."""
    if not isinstance(out, np.ndarray):
        return type(out).__name__
    flags = [
        w
        for w, bad in (("not C-contiguous", not out.flags.c_contiguous), ("read-only", not out.flags.writeable))
        if bad
    ]
    if not flags and out.shape == shape and not out.dtype.isnative and out.dtype.newbyteorder("=") == out_np:
        return None
    return ", ".join([f"{out.dtype} {out.shape}", *flags])


def _overlaps(out: np.ndarray, *inputs: np.ndarray | None) -> bool:
    """Whether ``out``'s memory may overlap an input's (as ``_jit.overlaps``, which the fused loop asks)."""
    return any(a is not None and np.may_share_memory(out, a) for a in inputs)


@functools.lru_cache(maxsize=1024)
def _checked(
    x_dtype: np.dtype,
    x_shape: tuple[int, ...],
    s_dtype: np.dtype,
    s_shape: tuple[int, ...],
    z_dtype: np.dtype | None,
    z_shape: tuple[int, ...] | None,
    axes: Any,
    dtype: Any,
    fused: bool,
) -> tuple[TensorType, tuple[int, ...], type, tuple[int, ...], FusedSetup | None, np.dtype, Any, Any]:
    """The contract's checks of a call with these argument types (``infer``), and what the call derives from them:
    (output type, sorted axes, the NumPy loop's work type, the scale's broadcast shape, the fused loop's
    ``_fused_setup`` where ``fused`` (the input has ``FUSED_MIN_ELEMENTS`` or more) and Numba can be imported,
    else None: Numba is not imported for smaller inputs; the output's NumPy type; ``axes`` and ``dtype``
    themselves, which a later call's may equal with other types). Kept for the next call with
    the same types: a call's fixed cost is most of it on inputs of tens of thousands of elements (one kept
    lookup, not two: 10.5 -> 9.5 us a call, ``(65536,)`` ``{0}`` u8 -> f16). A call that breaks the contract
    raises, and is not kept."""
    axes_t = normalize_axes(axes)
    xt = TensorType(dtypes.parse(x_dtype), x_shape)
    zt = None if z_dtype is None else TensorType(dtypes.parse(z_dtype), z_shape)
    out_t = infer(xt, TensorType(dtypes.parse(s_dtype), s_shape), zt, axes=axes_t, dtype=dtype)
    work = work_type(xt.elem_type, out_t.elem_type).numpy
    bshape = tuple(x_shape[i] if i in axes_t else 1 for i in range(len(x_shape)))
    setup = None
    if fused and all(x_shape) and _fused.available():  # empty inputs run no loop; a kernel compiles at its first call
        fused_work = fused_work_type(xt.elem_type, out_t.elem_type).numpy
        setup = _fused_setup(x_shape, axes_t, fused_work, out_t.elem_type.numpy, x_dtype, z_dtype is not None)
    return out_t, axes_t, work, bshape, setup, np.dtype(out_t.elem_type.numpy), axes, dtype


def _parallel(run: Any, items: list[Any], *args: Any) -> None:
    """``run(items, *args)``, the items cut into contiguous runs over the thread pool when it pays."""
    groups = min(_threads(len(items) * BLOCK_ELEMENTS), len(items))
    if groups <= 1:
        run(items, *args)
        return
    cut = [len(items) * i // groups for i in range(groups + 1)]
    futures = [_split.pool().submit(run, items[a:b], *args) for a, b in zip(cut, cut[1:]) if a < b]
    for f in futures:
        f.result()


def _layout(shape: tuple[int, ...], axes: tuple[int, ...]) -> Layout:
    """The input as rows for the fused loop: (outer dims, their scale strides, row width, row varies).

    Size-1 dims are dropped and neighbouring dims of one kind (axis or not) merged; the last merged dim
    is the row; the scale (contiguous, in axis order) has stride 0 along non-axis dims.
    """
    merged: list[list[Any]] = []  # [size, is_axis]
    for i, n in enumerate(shape):
        if n == 1:
            continue
        if merged and merged[-1][1] == (i in axes):
            merged[-1][0] *= n
        else:
            merged.append([n, i in axes])
    if not merged:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 1, False
    strides = []
    run = 1
    for n, is_axis in reversed(merged):
        strides.append(run if is_axis else 0)
        run *= n if is_axis else 1
    strides.reverse()
    width, inner_varies = merged[-1]
    dims = np.array([n for n, _ in merged[:-1]], np.int64)
    return dims, np.array(strides[:-1], np.int64), int(width), bool(inner_varies)


ROW_MIN = 128
"""Rows at least this wide run as contiguous rows; narrower ones are gathered in tiles (``_tile``), those
of ``HELD_MIN`` or more only where every tile reads the same run of the scale (spread once a call)."""
TILE_MAX = 2048
"""The most elements in a gathered tile (its spread scale and zero point stay in the L1 cache: 4096
measured up to 1.5x slower on a 32 KB one), or twice that where no divisor of a dim gives half of it."""
TILE_WHOLE = 1 << 16
"""The most elements in a tile that takes the whole of an inner dim with no divisor below ``TILE_MAX``
(a prime, say): a larger pattern beats a tile of a few elements."""

TILE_ONCE = 1 << 18
"""The same where every tile reads one scale window (the dims outside the tile are not axes), which is
spread once a call."""

Layout = tuple[np.ndarray, np.ndarray, int, bool]
Plan = tuple[np.ndarray, np.ndarray, int, np.ndarray, bool]
"""(outer dims, their scale strides, tile elements, the scale offset of each of the tile's rows or empty,
the scale runs along rows)."""


def _divisor(d: int, limit: int) -> int:
    """The largest divisor of ``d`` that is at most ``limit``."""
    return next(k for k in range(min(limit, d), 0, -1) if d % k == 0)


def _tile(layout: Layout, tile_max: int | None = None, blocks: float = 0.0) -> Plan:
    """The loop order for ``layout``: wide rows as they are; narrow rows joined with the innermost outer
    dims (split where one is too large) into a tile of about ``TILE_MAX`` elements, each row's scale
    offset in the tile's pattern (a row's elements follow it: one value, or a contiguous run).

    A row costs the loop a fixed overhead (advancing the odometer), so narrow rows (per-row scales
    over 8 columns, a per-channel scale on 3 channels, a tiny axis under a huge one) would otherwise
    run at a few elements per overhead. Rows of ``HELD_MIN`` or more run as they are too, unless every
    tile would read one run of the scale (spread once a call), or the loop computes runs in blocks
    (``blocks``: ``_loop_layout``'s "tiles blocks").
    """
    dims, strides, width, inner_varies = layout
    none = np.zeros(0, np.uint32)
    rows = width >= HELD_MIN and not (inner_varies and (blocks or not strides.any()))
    if width >= ROW_MIN or not len(dims) or rows:
        return dims, strides, width, none, inner_varies
    dims, strides = list(dims), list(strides)
    pattern = np.zeros(1, np.int64)  # per row of ``width`` elements
    limit = TILE_MAX if tile_max is None else tile_max
    while dims and len(pattern) * width < limit:
        d, st = int(dims[-1]), int(strides[-1])
        room = limit // (len(pattern) * width)
        f = d if d <= room else _divisor(d, room)
        if f < d and 2 * f <= room and len(dims) == 1:
            # the outermost dim (a prime number of rows, say) need not be divided: its last tile runs
            # past the input's end, where the loop stops
            f = room
        elif f == 1 and room > 1 and d * len(pattern) * width <= (TILE_ONCE if not any(strides[:-1]) else TILE_WHOLE):
            f = d  # an inner dim, no divisor: all of it
        elif f < d and 2 * f <= room:
            f = _divisor(d, 2 * room)  # a tile of up to twice the limit rather than one of a few rows
        if f == 1:
            break
        pattern = (np.arange(f, dtype=np.int64)[:, None] * st + pattern[None, :]).reshape(-1)
        if f == d:
            dims.pop()
            strides.pop()
        else:
            dims[-1], strides[-1] = -(-d // f), st * f
    if len(pattern) == 1:  # no dim joined (an inner dim too large and with no divisor): rows as they are
        return layout[0], layout[1], width, none, inner_varies
    dims_a, strides_a = np.array(dims, np.int64), np.array(strides, np.int64)
    tile = len(pattern) * width
    return dims_a, strides_a, tile, pattern.astype(np.uint32), inner_varies


HELD_MIN = 64
"""Rows at least this wide run as they are (``_tile``); narrower ones, and rows of runs that every tile
reads alike, have the tile's window spread over it."""


def _plan(layout: Layout, blocks: float = 0.0) -> Plan:
    """``_tile``'s plan (``blocks``: where the loop can compute rows in vector blocks, ``_loop_layout``'s;
    rows of runs up to ``ROW_MIN`` joined where that gives "tiles blocks"), in tiles of up to
    ``TILE_NARROW`` elements where it runs "tiles narrow" or "tiles blocks" so too (nothing is spread
    there, so no buffer needs to stay in the L1 cache), or where rows beside runs would be spread only
    because the smaller tile holds no group of narrow vectors (``_lane_group``)."""
    plan = _tile(layout)
    kind = _loop_layout(plan, blocks)
    if blocks and kind != "tiles blocks":
        joined = _tile(layout, blocks=blocks)
        if _loop_layout(joined, blocks) == "tiles blocks":
            plan, kind = joined, "tiles blocks"
    # rows beside runs whose groups of vectors a spread tile cannot hold may fill a wider one
    if kind in ("tiles narrow", "tiles blocks") or (kind == "tiles spread" and plan[4]):
        wide = _tile(layout, TILE_NARROW, blocks)
        wide_kind = _loop_layout(wide, blocks)
        if wide_kind == kind != "tiles spread" or (wide_kind == "tiles narrow" and plan[4]):
            kind = wide_kind
            if kind == "tiles narrow" and wide[2] < TILE_MAX:
                # a dim with no divisor near the limit (twice a prime, say): all of it where that is at
                # most ``TILE_ONCE``, not tiles of a few rows, each a step of the odometer and a call
                # (``(2,2,3517,7,8)`` ``{1,2}`` u8 -> f32: tiles of 2 rows of 56, 4.2x a casting copy; 0.9x)
                whole = _tile(layout, TILE_ONCE, blocks)
                if _loop_layout(whole, blocks) == kind and whole[2] > wide[2]:
                    return whole
            return wide
    return plan


TILE_NARROW = 1 << 14
"""The most elements in a "tiles narrow" tile: fewer steps of the odometer (``(165870,6)`` ``{0}`` i8 ->
f32 with a zero point: 108 us in tiles of 1746, 85 us of 11058, 83 us of 55290)."""

NARROW_MAX = 8
"""Rows of 2 to this many elements of one value each, consecutive values, a new window every tile, run
in tiles computed from the scale itself ("tiles narrow"): the width a constant in the loop, LLVM
vectorizes across rows (rows of 12 and 16 so ran 8x slower than of 8, measured; those run in blocks, or
are spread), or up to ``NARROW_VECTORS_MAX`` where the loop computes them in explicit vectors."""

NARROW_VECTORS_MAX = HELD_MIN - 1
"""``NARROW_MAX`` where the loop computes blocks (``_blocks_for``) and the CPU permutes 16 lanes
(``_fused.permutes``): groups of 16 rows in ``_jit.narrow_run``'s vectors, each row's value taken from
the group's 16 by a permutation, compute no element twice, where blocks compute a row's last one
again (rows of 9-15: a whole block) and call a block a row. Single-threaded, over a casting copy,
``(N, w)`` ``{0}`` with a zero point, in blocks and so: i8 w = 9 to f32 3.37x -> 1.17x, to bf16 12.8x ->
3.1x; w = 16 to f32 2.0x -> 1.4x; w = 20 to bf16 6.7x -> 2.9x; i16 w = 48 to bf16 2.7x -> 1.8x."""


def _consecutive(pattern: np.ndarray) -> bool:
    """Whether the tile's rows read consecutive scale values (row r's at offset r)."""
    return bool(np.array_equal(pattern, np.arange(len(pattern), dtype=pattern.dtype)))


def _lane_runs(width: int, group: int) -> int:
    """The runs of ``width`` values, each beside ``group`` consecutive rows of ``width`` elements, that one
    group of ``_jit.narrow_run``'s vectors reads: the most whose values fit one vector of ``BLOCK_MIN`` and
    whose elements fill whole vectors, ``NARROW_VECTORS_MAX`` of them at most; else, for runs of up to
    ``WINDOW_MAX`` values, the fewest whose elements fill whole vectors, each vector then reading its own
    window of ``WINDOW_MAX`` values (whose least it reads first); 0 where none do. The plan gives it to the
    loop (``_kernel_plan``)."""
    period = width * group
    for runs in range(BLOCK_MIN // width, 0, -1):
        elements = runs * period
        if elements % BLOCK_MIN == 0 and elements // BLOCK_MIN <= NARROW_VECTORS_MAX:
            return runs
    runs = BLOCK_MIN // math.gcd(period, BLOCK_MIN)
    return runs if width <= WINDOW_MAX and runs * period // BLOCK_MIN <= NARROW_VECTORS_MAX else 0


def _lane_group(pattern: np.ndarray, width: int) -> int:
    """Where the tile's rows of ``width`` elements each lie beside a run of the scale, in groups of
    ``group`` consecutive rows reading one run, consecutive runs (row r's at ``r // group * width``), and
    ``_jit.narrow_run``'s vectors compute them (``_lane_runs``), the tile holding a whole group of them:
    ``group``; else 0. Such tiles run "tiles narrow", read from the scale where it is, not spread. A tile
    smaller than a group of vectors (a dim with no divisor near the tile's limit, rows that all read one
    run) would run a run at a time: ``(4,5,93418,3,1)`` ``{1,3,4}`` u8 -> f32, tiles of 26 rows of 3 that
    all read one run, 13.4x a casting copy so, 0.8x spread once a call."""
    rows = len(pattern)
    change = np.flatnonzero(np.diff(pattern.astype(np.int64)))
    group = int(change[0]) + 1 if len(change) else rows
    runs = _lane_runs(width, group)
    if not runs or runs * group > rows:  # no whole group of vectors in the tile
        return 0
    expected = np.arange(rows, dtype=np.int64) // group * width
    return group if np.array_equal(pattern, expected) else 0


BLOCK_MIN = 16
"""The elements of one vector block (``_jit.BLOCK_RUN``): a row's blocks compute a multiple of it (the
last one overlapping the one before, or, in a row narrower than a block, running past its end into the
rows after it, which overwrite it). Rows wider than ``NARROW_MAX`` run in "tiles blocks" where the loop
can compute blocks and they compute little more than the row (``_loop_layout``): rows of 9-15 of one
value each, ``(2097152, w)`` ``{0}`` i8 -> f32 with a zero point, 4.85 -> 2.35 a casting copy at w = 9 and
2.38 -> 1.44 at 15, spread and so (``scripts/bench_ab.py``); such rows of consecutive values now run
narrow where the CPU permutes lanes (``NARROW_VECTORS_MAX``)."""


WINDOW_MAX = 2 * BLOCK_MIN
"""The widest runs that groups of rows read in ``_jit.narrow_run``'s windowed vectors (``_lane_runs``): a
vector's 16 elements then read at most this many consecutive values, from the least of them, which two
vectors of the scale hold (``vpermt2ps``)."""


def _loop_layout(plan: Plan, blocks: float = 0.0) -> str:
    """Which of the fused loop's layouts (``_jit.LAYOUTS``) runs ``plan``; ``blocks``: the most elements a
    row's vector blocks may compute per element of the row (``_blocks_for``; 0: the loop has no blocks
    for the call's types)."""
    dims, strides, tile, pattern, inner_varies = plan
    if not len(pattern):
        return "rows varying" if inner_varies else "rows held"
    width = tile // len(pattern)
    vectors = blocks and _fused.permutes()
    widest = NARROW_VECTORS_MAX if vectors else NARROW_MAX
    # in vectors, also where every tile reads one window: computed from the scale, not spread once a call
    # (``(2,2,3517,7,3)`` ``{1,2}`` u8 -> bf16, two tiles of 7034 rows, 0.44x the time)
    if not inner_varies and 2 <= width <= widest and (strides.any() or vectors) and _consecutive(pattern):
        return "tiles narrow"
    if inner_varies and vectors and strides.any() and _lane_group(pattern, width):
        # runs read by groups of rows, in vectors: no block computes an element twice, nothing is spread
        return "tiles narrow"
    computed = -(-width // BLOCK_MIN) * BLOCK_MIN  # the last block overlaps the one before
    if width > NARROW_MAX and computed <= blocks * width and strides.any() and _tiles_a_window(plan) <= BLOCKS_SHARED:
        # rows read beside the scale where it is: spreading it costs more than the product where tiles
        # read new windows
        return "tiles blocks"
    # rows of HELD_MIN or more are tiled only where every tile reads one window, spread once (``_tile``)
    return "tiles spread"


BLOCKS_SHARED = 2
"""Tiles that read one window at most for "tiles blocks" (``_loop_layout``): where more consecutive tiles
read it, spreading it once for them all costs less than computing runs in blocks (``(300,200,37)``
``{0,2}`` u8 -> f32, 4 tiles a window: 1.11x a casting copy spread, 1.63x in blocks; ``(3000,60,37)`` i16,
2 tiles: 1.96x spread, 1.30x in blocks)."""


def _tiles_a_window(plan: Plan) -> int:
    """How many consecutive tiles read one window of the scale: the innermost outer dims along which it
    does not move."""
    dims, strides = plan[0], plan[1]
    shared = 1
    for d, st in zip(dims[::-1], strides[::-1]):
        if st:
            break
        shared *= int(d)
    return shared


def _blocks_for(x: np.dtype, out: np.dtype, has_z: bool = False) -> float:
    """``_loop_layout``'s ``blocks`` for these types, with a zero point or not: where the loop computes rows
    in blocks (``_fused.blocks``), any width for float32 outputs (bound by memory), ``BLOCK_WASTE`` for
    f16/bf16 (``BLOCK_WASTE_ZP`` with a zero point)."""
    if not _fused.blocks(x, out):
        return 0.0
    if np.dtype(out) == np.float32:
        return math.inf
    return BLOCK_WASTE_ZP if has_z else BLOCK_WASTE


BLOCK_WASTE = 4 / 3
"""The most elements a row's blocks compute per element of it for "tiles blocks" where the loop is bound
by its arithmetic (f16/bf16 outputs): rows of 12-16, 24-32 and 36 or more elements (``(300,500,16)`` ``{0,1}``
u8 -> f16 6.7x a casting copy spread, 4.9x in blocks; ``(13457,5,37)`` ``{0,2}`` 6.2x -> 4.8x; but
``(300,500,20)`` i8 -> f16, its blocks computing 32 elements a row of 20, 6.8x -> 10.3x)."""

BLOCK_WASTE_ZP = 16 / 9
"""``BLOCK_WASTE`` where a zero point is given, which a spread tile spreads too: rows of 9-16 and 18 or
more elements. Single-threaded, over a casting copy into int16, spread and in blocks:
``(1212,746,10)`` ``{0,1}`` u16 -> f16 6.48 -> 3.61, ``(300,500,18)`` u8 -> f16 7.46 -> 5.85,
``(300,500,20)`` i8 -> f16 6.74 -> 6.47; without a zero point the same rows ran 2.98 -> 3.09, 5.00 ->
5.15 and 4.32 -> 8.17 in blocks."""


def _kernel_plan(plan: Plan, blocks: float = 0.0, period: np.ndarray | None = None) -> np.ndarray:
    """``plan`` as the fused loop takes it, one int64 array (``_jit.fused_for``'s ``plan``): tile,
    whether the scale runs along rows, the pattern's and the outer dims' lengths, the rows of a spread
    group (``_spread_group``; of a group reading one run where narrow rows vary, ``_lane_group``), the
    vectors of the flat index's ``period`` (``_period``; 0: none), the runs a group of narrow vectors reads
    (``_lane_runs``; 0: none), then the pattern, the outer dims, their scale strides and the period's scale
    offsets. One argument, not five: the loop's call types each argument (about 45 ns each)."""
    dims, strides, tile, pattern, inner_varies = plan
    width, layout = tile // max(len(pattern), 1), _loop_layout(plan, blocks)
    group = (
        _spread_group(pattern, width, inner_varies)
        if layout == "tiles spread"
        else _lane_group(pattern, width)
        if layout == "tiles narrow" and inner_varies
        else 1
    )
    period = np.zeros(0, np.int64) if period is None else period
    vectors = _fused.period_vectors(len(period)) if len(period) else 0
    runs = _lane_runs(width, group) if layout == "tiles narrow" and inner_varies else 0
    head = [tile, int(inner_varies), len(pattern), len(dims), group, vectors, runs]
    return np.concatenate([np.array(head, np.int64), pattern, dims, strides, period]).astype(np.int64)


def _period(shape: tuple[int, ...], axes: tuple[int, ...]) -> np.ndarray | None:
    """The scale offsets of flat elements ``0 .. P - 1``, where ``P`` (the elements from the first axis
    inward; 1 per tensor) is the period of the flat index's scale offset and the compiled loop can hold it
    in registers (``_fused.period_vectors``); else None."""
    if not axes:
        return np.zeros(1, np.int64)
    inner = shape[axes[0] :]
    size = math.prod(inner)
    if not size or not _fused.period_vectors(size):
        return None
    index = np.indices(inner).reshape(len(inner), -1)
    first = axes[0]
    return np.ravel_multi_index([index[a - first] for a in axes], [shape[a] for a in axes]).astype(np.int64)


GROUP_WIDTHS = (2, 3, 4, 5, 8)
"""Widths of the rows ``_jit._spread_groups`` spreads a group at a time (``_spread_group``), each a loop of
its own, compiled with every "tiles spread" loop (``scripts/bench_compile.py``: within the noise).
Rows of 3 and 5 only in groups of ``GROUP_MIN`` rows or more. Single-threaded against a row at a time
(``scripts/bench_ab.py``): groups of 30 rows of 3 0.55-0.67x the time, of 8 0.69-0.79x, of 3 0.94-1.11x;
of 30 rows of 5 0.73-0.83x, of 7 0.97-1.03x, of 3 0.95-1.09x. Rows of 6 and 7 gained at most 0.89x in
groups of 30 and took 1.09-1.20x in groups of 3 (two 16-element stores for three rows): they are spread a
row at a time."""

GROUP_MIN = 8
"""The fewest rows in a group that ``_jit._spread_groups`` spreads where their width does not divide a
block of ``BLOCK_MIN`` elements (3 and 5 of ``GROUP_WIDTHS``)."""


def _spread_group(pattern: np.ndarray, width: int, varies: bool) -> int:
    """How many consecutive rows of ``pattern`` read each run of the scale, where every run is read by
    that many and the rows are ``GROUP_WIDTHS`` elements along the scale, in groups of ``GROUP_MIN`` or more
    where the width does not divide a block (``_jit._spread_groups`` then spreads a group a vector store
    at a time), else 1 (a row at a time). Found once a plan, not in the loop (a pass over a pattern of
    thousands of rows is a call's whole fixed cost)."""
    rows = len(pattern)
    if not varies or width not in GROUP_WIDTHS or rows < 2:
        return 1
    change = np.flatnonzero(np.diff(pattern.astype(np.int64)))
    group = int(change[0]) + 1 if len(change) else rows
    if group < (GROUP_MIN if BLOCK_MIN % width else 2) or rows % group:
        return 1
    runs = pattern.reshape(rows // group, group)
    return group if bool((runs == runs[:, :1]).all()) else 1


FusedSetup = tuple[Any, np.ndarray, _split.Cost, np.dtype | None, np.dtype | None, np.ndarray, Any]
"""``_fused_setup``'s: (kernel, plan, the calls' measured cost, the types the input's and the output's
arrays are viewed as for a call (None: as they are), the zero point passed where there is none, the guarded
float32 kernel and its bound or None; where there is a guard, each kernel is a thunk that compiles it at its
first call)."""


def _fused_setup(
    shape: tuple[int, ...], axes: tuple[int, ...], work: type, out: np.dtype, x: np.dtype, has_z: bool
) -> FusedSetup:
    """The fused loop's compiled kernel and its plan for ``shape`` and ``axes`` (``_plan(_layout(...))``),
    the measured cost of its calls (which ``_split.run`` learns, to cut them among threads where that
    pays), the types the input's and the output's arrays are viewed as for a call (``_fused.call_type``:
    None, as they are, where the compiled code takes them) and the zero point passed when there is
    none (one zero, which the loop compiled for ``has_z`` false never reads); ``_checked`` keeps it for
    the next call of the same types: its arrays are read-only. Where float32 work is exact for values
    within a bound (``exactness.f32_guard``: i32 inputs), it also gives the float32 kernel that checks
    them (``_jit.fused_for``'s ``guard``), with the bound; ``work`` is then float64, the kernel that
    computes what lies beyond. Only to f16/bf16: there float64 work costs 2x float32's (it rounds in
    float64's bits), and to f32 the check's pass over the input costs about what float32 work saves
    (``(3,84,2085,1)`` ``{1,2,3}`` i32 -> f32 with a zero point: 133 us a call guarded, 135 in float64)."""
    blocks = _blocks_for(x, out, has_z)
    plan = _plan(_layout(shape, axes), blocks)
    x_bits = _fused.call_type(x)
    no_z = _fused.flat(np.zeros(1, x), x_bits)
    packed = _kernel_plan(plan, blocks, _period(shape, axes))
    for a in (packed, no_z):
        a.flags.writeable = False
    layout = _loop_layout(plan, blocks)
    out_t = dtypes.parse(out)
    limit = f32_guard(dtypes.parse(x), out_t, has_z) if out_t.name != "f32" else 0
    kernel: Any = functools.partial(_fused.kernel, work, out, x, has_z, layout)
    guard = None
    if limit:  # each kernel compiled at its first call, which a call's data may never make (``_guarded``)
        f32_kernel = functools.partial(_fused.kernel, np.dtype(np.float32), out, x, has_z, layout, limit)
        guard, kernel = (functools.cache(f32_kernel), limit), functools.cache(kernel)
    else:
        kernel = kernel()
    return kernel, packed, _split.Cost(), x_bits, _fused.call_type(out), no_z, guard


def _guarded(
    guard: Any,
    rest: Any,
    x: np.ndarray,
    z: np.ndarray,
    s: np.ndarray,
    out: np.ndarray,
    e0: int,
    e1: int,
    plan: Any,
    claim: np.ndarray,
) -> int:
    """A guarded float32 kernel's call (``guard``: the kernel and its bound; ``_jit.fused_for``'s
    arguments) finished by ``rest`` (float64) from the first chunk whose inputs it left (beyond the
    bound): to its range's end, or to its claimed block's (``_split.schedule``), then claiming the blocks
    left (data beyond the bound in one block are likely in others: no return to float32, which would
    cost each block a round trip through Python). Each kernel is a thunk that compiles it at its first
    call. A call whose first ``GUARD_PROBE`` elements (or those of a zero point as large as the input,
    which the guarded kernel checks beside them) lie beyond the bound goes to ``rest`` at once: it
    never compiles the guarded kernel (5-10 s) for nothing, nor do data within it compile ``rest``."""
    kernel, limit = guard
    probe = min(e1, e0 + GUARD_PROBE)
    if not _fused.within(x, limit, e0, probe) or (z.shape[0] == x.shape[0] and not _fused.within(z, limit, e0, probe)):
        return rest()(x, z, s, out, e0, e1, plan, claim)
    done = kernel()(x, z, s, out, e0, e1, plan, claim)
    if not e0 <= done < e1:
        return done
    if not claim.shape[0]:
        return rest()(x, z, s, out[done - e0 :], done, e1, plan, claim)
    end = _split.block_end(claim, done)
    rest()(x, z, s, out[done - e0 : end - e0], done, end, plan, _split.NO_CLAIM)
    return rest()(x, z, s, out, e0, e1, plan, claim)


def _run_blocks(
    blocks: list[tuple[Any, ...]],
    x: np.ndarray,
    s: np.ndarray,
    z: np.ndarray | None,
    out: np.ndarray,
    work: np.dtype,
    bshape: tuple[int, ...],
) -> None:
    """Compute ``out[b] = (x[b] - z[b]) * s[b]`` for each block ``b``, in ``work`` precision."""
    direct = out.dtype == work
    tmp = None if direct else np.empty(BLOCK_ELEMENTS, work)
    with np.errstate(all="ignore"):  # inf and NaN are legal results
        for index in blocks:
            ob = out[index]
            wb = ob if direct else tmp[: ob.size].reshape(ob.shape)
            np.copyto(wb, x[index], casting="unsafe")  # exact: work holds every value of x's type
            sub = _sub_index(index, bshape)
            if z is not None:
                np.subtract(wb, z[sub], out=wb)  # exact: work holds every difference
            np.multiply(wb, s[sub], out=wb)  # the one rounding (or exact, then rounded below)
            if not direct:
                if out.dtype == _BF16 and work == _F64:
                    _bf16_from_products(wb, ob)
                else:
                    ob[...] = wb


GUARD_PROBE = 256
"""The elements of a guarded call (``_guarded``) checked before its float32 kernel is called: values
beyond the bound there (full-range i32 data) send it to float64 at once (about 0.1 us)."""

FUSED_MIN_ELEMENTS = 1 << 12
"""Inputs at least this large take the compiled fused loop when Numba can be imported. At 4096 elements
it takes 2.7-3.9 us a call against the NumPy loop's 10.7-23 us; on smaller inputs it saves at most
about 11 us a call (the NumPy loop's fixed cost), less than the one-off compilation of a loop for a new
combination of types and layout (5-8 s, then kept in Numba's on-disk cache), which small inputs alone
then never pay (``docs/reference.md``)."""

PARALLEL_MIN_ELEMENTS = 1 << 22
"""Inputs at least this large are cut among threads in the NumPy loop (NumPy releases the GIL in its
loops; the fused loop's calls are cut where their measured cost says it pays: ``_split``)."""


def _threads(size: int) -> int:
    if size < PARALLEL_MIN_ELEMENTS:
        return 1
    return min(_split.cpu_count(), max(1, size // PARALLEL_MIN_ELEMENTS))


class DequantizeOp(OpRun):
    """The op for ``onnx.reference.ReferenceEvaluator(model, new_ops=[DequantizeOp])``."""

    op_domain = DOMAIN

    def _run(self, x, scale, zero_point=None, axes=None, type=None):  # noqa: A002 - the attribute's name
        return (dequantize(x, scale, zero_point, axes=tuple(axes or ()), dtype=type or None),)


DequantizeOp.__name__ = OP_TYPE
