"""The reference against an independent per-element implementation, bit for bit."""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import multiprocessing
import os
import subprocess
import sys
import threading
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import onnx_dequant as odq
from onnx_dequant import _fused, _split, dtypes, exactness, reference
from onnx_dequant.compare import same_bits

# ---- the independent implementation: Python ints and floats, one element at a time ----

_FORMAT = {  # significant bits, smallest quantum exponent, largest finite value
    "bf16": (8, -133, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
    "f16": (11, -24, 65504.0),
    "f32": (24, -149, float(np.finfo(np.float32).max)),
    "f64": (53, -1074, float(np.finfo(np.float64).max)),
}


def round_to(value: float, fmt: str) -> float:
    """Round a float64 to the nearest value of ``fmt`` (ties to even), from first principles."""
    if math.isnan(value) or math.isinf(value) or value == 0.0 or fmt == "f64":
        return value
    bits, min_exp, largest = _FORMAT[fmt]
    _, e = math.frexp(value)
    q = max(e - bits, min_exp)
    r = round(math.ldexp(value, -q))  # exact scaling; round() is ties-to-even
    result = math.ldexp(float(r), q) if r else math.copysign(0.0, value)
    if abs(result) > largest:
        return math.copysign(math.inf, value)
    return result


def loop_dequantize(x, scale, zp, axes, out: dtypes.DType) -> np.ndarray:
    y = np.empty(x.shape, out.numpy)
    for idx in np.ndindex(*x.shape):
        j = tuple(idx[a] for a in axes)
        diff = int(x[idx]) - (int(zp[j]) if zp is not None else 0)
        prod = float(diff) * float(scale[j])  # |diff| < 2**33: exact in float64; one rounding here
        y[idx] = np.float64(round_to(prod, out.name)).astype(out.numpy)
    return y


# ---- strategies ----

SPECIAL_SCALES = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -2.5e-3, 1e-45, 5e-324, 1e-40, 1e38, 6e4, np.inf, -np.inf, np.nan]


@st.composite
def cases(draw, max_elems: int = 96, in_types: tuple[dtypes.DType, ...] = dtypes.QUANTIZED):
    rank = draw(st.integers(0, 6))
    shape = []
    for _ in range(rank):
        shape.append(draw(st.integers(0, 3) if draw(st.booleans()) else st.integers(1, 3)))
    while int(np.prod(shape)) > max_elems:
        shape[shape.index(max(shape))] -= 1
    axes = sorted(draw(st.sets(st.integers(0, rank - 1), max_size=rank))) if rank else []
    in_t = draw(st.sampled_from(in_types))
    out_t = draw(st.sampled_from(dtypes.REAL))
    sshape = tuple(shape[a] for a in axes)
    lo, hi = int(in_t.min), int(in_t.max)
    extreme = st.sampled_from([lo, hi, 0, lo + 1, hi - 1])
    ints = st.one_of(extreme, st.integers(lo, hi))
    n = int(np.prod(shape))
    x = np.array(draw(st.lists(ints, min_size=n, max_size=n)), dtype=np.int64).reshape(shape).astype(in_t.numpy)
    m = int(np.prod(sshape))
    zp = None
    if draw(st.booleans()):
        zp = np.array(draw(st.lists(ints, min_size=m, max_size=m)), dtype=np.int64).reshape(sshape).astype(in_t.numpy)
    reals = st.one_of(st.sampled_from(SPECIAL_SCALES), st.floats(-1e4, 1e4, allow_nan=False, width=64))
    scale = np.array(draw(st.lists(reals, min_size=m, max_size=m)), dtype=np.float64).reshape(sshape)
    with np.errstate(over="ignore"):
        scale = scale.astype(out_t.numpy)
    return x, scale, zp, tuple(axes), out_t


@contextlib.contextmanager
def loop_kind(kind: str):
    """Force the NumPy blocked loop or the compiled fused loop, whatever the input's size."""
    saved = reference.FUSED_MIN_ELEMENTS
    reference.FUSED_MIN_ELEMENTS = 0 if kind == "fused" else 1 << 62
    try:
        yield
    finally:
        reference.FUSED_MIN_ELEMENTS = saved


@pytest.fixture
def fresh_plans():
    """The fused loop's kept plans (``_checked``'s) dropped before and after a test that changes the
    constants they are derived from."""
    reference._checked.cache_clear()
    yield
    reference._checked.cache_clear()


@pytest.fixture
def cut_calls(monkeypatch, fresh_plans):
    """Every fused call's blocks claimed among five threads (``_split``), in blocks of 64 elements or more
    cut on any element."""
    cut_on_any_element(monkeypatch, threads=5, block=64)


KINDS = ["numpy", pytest.param("fused", marks=pytest.mark.skipif(not _fused.available(), reason="no numba"))]


IN_GROUPS = [("i8", "u8", "i4"), ("i16", "u16"), ("i32", "u4")]
"""The input types in three groups, a test each: the fused loop's kernels each group draws compile in a
worker of their own (one test drawing from all seven compiled for two minutes, in one worker)."""


@pytest.mark.parametrize("group", IN_GROUPS, ids="/".join)
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_reference_matches_the_per_element_loop(kind, group, data):
    assert sorted(n for g in IN_GROUPS for n in g) == sorted(t.name for t in dtypes.QUANTIZED)
    x, scale, zp, axes, out_t = data.draw(cases(in_types=tuple(dtypes.parse(n) for n in group)))
    with loop_kind(kind):
        got = odq.dequantize(x, scale, zp, axes=axes, dtype=out_t.name if zp is not None else None)
    want = loop_dequantize(x, scale, zp, axes, out_t)
    assert got.dtype == out_t.numpy and got.shape == x.shape
    assert same_bits(got, want), (got, want)


@pytest.mark.parametrize("in_t", dtypes.QUANTIZED, ids=str)
@pytest.mark.parametrize("out_t", dtypes.REAL, ids=str)
def test_every_type_pair_at_the_extremes(in_t, out_t):
    """Type minimum and maximum with the zero point at the opposite extreme: the widest differences."""
    x = np.array([[in_t.min, in_t.max, 0], [in_t.max, in_t.min, 1]], dtype=np.int64).astype(in_t.numpy)
    zp = np.array([in_t.max, in_t.min], dtype=np.int64).astype(in_t.numpy)
    scale = np.array([0.3, -1.7], dtype=np.float64).astype(out_t.numpy)
    got = odq.dequantize(x, scale, zp, axes=[0])
    assert same_bits(got, loop_dequantize(x, scale, zp, (0,), out_t))


def test_i32_difference_never_wraps():
    x = np.array([2**31 - 1, -(2**31)], dtype=np.int32)
    zp = np.array(-(2**31), dtype=np.int32)
    got = odq.dequantize(x, np.array(1.0, np.float64), zp)
    assert got.tolist() == [2.0**32 - 1, 0.0]  # int32 arithmetic would give -1.0 first
    got32 = odq.dequantize(x, np.array(1.0, np.float32), zp)
    assert got32[0] == np.float32(2.0**32)  # one rounding of 2**32 - 1


def test_bf16_rounds_once_from_float64(record_property):
    """The reference rounds float64 -> bf16 once, whichever way the installed ml_dtypes casts float64 -> bf16
    (up to 0.6 through float32, twice; from 0.7 once): the reference casts only float32 -> bf16 itself."""
    # 2**25 + 2**17 + 1 lies just above a bf16 tie; float32 rounds it onto the tie, which then goes even
    x = np.array([2**25 + 2**17 + 1], dtype=np.int32)
    got = odq.dequantize(x, np.array(1.0, ml_dtypes.bfloat16))
    assert float(got[0]) == 2.0**25 + 2.0**18
    direct = float(x.astype(np.float64).astype(ml_dtypes.bfloat16)[0])
    assert direct in (2.0**25, 2.0**25 + 2.0**18)  # either way, our result above does not depend on it
    record_property("ml_dtypes_f64_to_bf16", "rounds twice" if direct == 2.0**25 else "rounds once")
    value = 2.0**15 + 2.0**7 + 2.0**-20  # just above a tie; a double rounding lands on the tie and goes even
    dst = np.empty(1, ml_dtypes.bfloat16)
    reference.round_f64_to_bf16(np.array([value]), dst)
    assert float(dst[0]) == round_to(value, "bf16") == 2.0**15 + 2.0**8


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "shape,axes",
    [
        ((7, 300, 5), (0, 2)),
        ((5, 1, 9, 1, 4), (0, 3, 4)),
        ((2, 600, 3), (2,)),
        ((6, 10, 4), (0, 2)),
        ((997, 3), (1,)),
        ((2, 3, 1, 5), (0, 1, 2, 3)),
        ((40, 50), ()),
        ((3, 5, 7, 11, 13), (1, 3)),
        ((64, 3, 48, 64), (0, 1)),
        ((1000, 777), (1,)),
        ((2**17 + 3,), ()),
    ],
)
def test_blocked_and_threaded_paths(monkeypatch, cut_calls, kind, shape, axes):
    """Odd shapes cut into many small blocks (the NumPy loop) or blocks claimed among threads (the fused
    loop) and spread over threads give the same bits."""
    monkeypatch.setattr(reference, "FUSED_MIN_ELEMENTS", 0 if kind == "fused" else 1 << 62)
    monkeypatch.setattr(reference, "BLOCK_ELEMENTS", 1000)
    monkeypatch.setattr(reference, "PARALLEL_MIN_ELEMENTS", 5000)
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    sshape = tuple(shape[a] for a in axes)
    scale = rng.standard_normal(sshape).astype(np.float32)
    zp = rng.integers(-128, 128, sshape, dtype=np.int8)
    b = tuple(shape[i] if i in axes else 1 for i in range(len(shape)))
    want = ((x.astype(np.float64) - zp.reshape(b)) * scale.reshape(b).astype(np.float64)).astype(np.float32)
    assert same_bits(odq.dequantize(x, scale, zp, axes=axes), want)
    for out in (np.float16, ml_dtypes.bfloat16):
        s2 = scale.astype(out)
        want2 = ((x.astype(np.float64) - zp.reshape(b)) * s2.reshape(b).astype(np.float64)).astype(out)
        assert same_bits(odq.dequantize(x, s2, zp, axes=axes), want2)
    x16 = x.astype(np.int16) * 255  # 16-bit input, bf16 output: float64 work, rounded once per block
    s16 = scale.astype(ml_dtypes.bfloat16)
    got = odq.dequantize(x16, s16, zp.astype(np.int16), axes=axes).reshape(-1)
    for flat in rng.integers(0, x.size, 200):
        idx = np.unravel_index(flat, shape)
        j = tuple(idx[a] for a in axes)
        exact = (float(x16[idx]) - float(zp[j])) * float(s16[j])
        assert same_bits(got[flat], np.float64(round_to(exact, "bf16")).astype(ml_dtypes.bfloat16))


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("tile_max", [64, 2048])
@pytest.mark.parametrize(
    "shape,axes",
    [
        ((4096, 4, 4), (0, 2)),  # a tiny axis under a huge one: a new scale run every tile
        ((2048, 8), (0,)),  # per-row scales over narrow rows (a split outer dim)
        ((1031, 3), (1,)),  # a prime outer dim: its last tile runs past the end (with tile_max 64)
        ((1031, 3), (0,)),  # the same with per-row scales: offsets past the scale's end are not read
        ((1031, 5, 3), (1,)),  # a prime outermost dim over joined inner dims
        ((1031, 5, 3), (0, 2)),
        ((3, 4, 1031, 2), (1, 2)),  # an inner prime dim with per-row scales: the whole dim in one tile
        ((512, 4), (1,)),  # per-channel on a narrow last axis: the scale repeats across tiles
        ((6, 16, 24, 40), (1, 3)),
        ((3, 100, 130), (0, 1)),  # wide rows (no tile)
        ((64, 64), (0, 1)),  # a scale as large as the input
        ((5, 7, 9, 11), (0, 2)),
        ((1031, 2, 20), (0, 2)),  # rows of 20 gathered row by row, the last tile past the end
        ((1031, 20), (0,)),  # the same, one value a row
        ((129, 2), (0,)),  # rows of 2-7 (a constant width in the loop that spreads the scale): one value
        ((90, 5), (0,)),
        ((257, 3, 7), (1,)),
        ((700, 6), (0,)),
        ((300, 7, 5), (0, 2)),  # runs of 5-7
        ((64, 9, 6), (0, 2)),
        ((50, 4, 7), (0, 2)),
        ((3, 4099, 17), (1,)),  # an inner prime dim joined whole (every tile reads one window)
        ((3, 2, 4099, 17), (0, 2)),  # the same under an axis: too large to join, rows of 17 as they are
        ((1031, 100), (0,)),  # rows of 64-127 of one value a row (int4's in tiles, held): a last block overlapping
        ((101, 3, 64), (0, 1)),  # rows of exactly one block
        ((9, 3, 191), (0,)),  # wide rows, one value each: whole blocks and an overlapping last one
        ((7, 191), (0, 1)),  # wide rows beside runs of the scale
        ((50, 191), (1,)),
        ((1031, 3, 100), (0, 2)),  # rows of runs (int4's in tiles, a new window every tile: read a row at a time)
        ((300, 100), (1,)),  # rows of 64-127 of runs that every tile reads alike: in tiles, spread once
        ((1500, 2, 97), (0, 2)),  # a range (and a thread's share) starting in the middle of a row
        ((300, 3, 8), (0, 2)),  # runs of 8 (a constant width, as 2-7)
        ((40, 59, 4), (0, 2)),  # groups of rows reading one run of 2, 3, 4, 5 or 8 (``_spread_groups``):
        ((61, 5, 2), (0, 2)),  # 59, 5, 3, 9 and 8 rows a group, a group's last block into the next group,
        ((23, 3, 8), (0, 2)),  # blocks of 15 elements (a whole number of runs of 3 and 5)
        ((61, 9, 3), (0, 2)),
        ((37, 8, 5), (0, 2)),
        ((2, 9, 4, 7, 4), (0, 2, 4)),  # runs of rows of 4 under two axes
        ((300, 3, 16), (0, 2)),  # spread in blocks: runs of exactly one block, and values
        ((300, 16), (0,)),
        ((101, 3, 63), (0, 2)),  # runs of 63 and 12, the last block into the next row (and the spare)
        ((129, 5, 12), (0, 2)),
        ((257, 3, 9), (0, 1)),  # values in rows of 9 under a prime dim
        ((211, 5, 37), (0, 2)),  # f32: rows of runs in vector blocks (a new window every tile), the last
        ((97, 2, 3, 16), (0, 3)),  # block of a row overlapping the one before; rows of exactly one block
        ((400, 2, 127), (0, 2)),  # rows of 64-127 in tiles too
        ((30, 3, 1000, 3, 17), (1, 2, 4)),  # two tiles a window
        ((1031, 37), (0,)),  # rows of one value each in blocks
        ((7, 150, 16), (0, 1)),
        ((2049, 9), (0,)),  # rows of 9-15 in blocks (f32), each block past its row, the last rows as they are
        ((1031, 12), (0,)),  # rows of 12-15 in blocks for f16 and bf16 too
        ((300, 3, 13), (0, 2)),  # runs of 13: each block reads past its run, the last one within the scale
        ((3, 2, 4099, 11), (0, 2)),
    ],
)
@pytest.mark.parametrize("zero_point", [True, False])
def test_fused_tiles(monkeypatch, cut_calls, tile_max, shape, axes, zero_point):
    """Every loop order the fused loop picks from the layout gives the NumPy loop's bits, for f32 work
    (i8 -> f32), f64 work with an f32 scale read as it is (i32 -> f32), f64 output, and f16/bf16 scales
    gathered as bits (8-bit inputs: the exact product rounded once; 16-bit: rounded to odd first; i32:
    the float64 product rounded to odd in float32), and 4-bit inputs read as their bytes."""
    monkeypatch.setattr(reference, "TILE_MAX", tile_max)
    monkeypatch.setattr(reference, "TILE_NARROW", 4 * tile_max)  # "tiles narrow": many tiles too
    # ``cut_calls``: blocks start in the middle of tiles
    rng = np.random.default_rng(1)
    sshape = tuple(shape[a] for a in axes)
    pairs = ((np.int8, np.float32), (np.uint16, np.float32), (np.int32, np.float32), (np.uint16, np.float64))
    bf16 = ml_dtypes.bfloat16
    pairs += ((np.uint8, np.float16), (np.int16, np.float16), (np.int8, bf16), (np.uint16, bf16))
    pairs += ((np.int32, np.float16), (np.int32, bf16))  # float64 work, rounded to odd through float32
    pairs += ((ml_dtypes.int4, np.float32), (ml_dtypes.uint4, bf16))  # read as bytes, int4's sign-extended
    for in_t, out_t in pairs:
        info = ml_dtypes.iinfo(in_t)
        x = rng.integers(info.min, info.max, shape, dtype=np.int64).astype(in_t)
        scale = rng.standard_normal(sshape).astype(out_t)
        zp = rng.integers(info.min, info.max, sshape, dtype=np.int64).astype(in_t) if zero_point else None
        with loop_kind("numpy"):
            want = odq.dequantize(x, scale, zp, axes=axes)
        with loop_kind("fused"):
            got = odq.dequantize(x, scale, zp, axes=axes)
        assert same_bits(got, want), (in_t, out_t)


def cut_on_any_element(monkeypatch, threads: int = 3, block: int = 16) -> None:
    """Every fused call's blocks claimed among ``threads`` threads, in blocks of ``block`` elements or
    more, cut on any element."""
    monkeypatch.setattr(_split, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(_split, "UNMEASURED", 1.0)
    monkeypatch.setattr(_split, "LATENCY", [0.0])
    monkeypatch.setattr(_split, "_ALIGN", 1)
    monkeypatch.setattr(_split, "BLOCK_MIN", block)
    monkeypatch.setattr(_split, "cpu_count", lambda: threads)


def sprinkle_bf16_specials(scale: np.ndarray, rng: np.random.Generator) -> None:
    """A bf16 scale given a subnormal value every 23 (the CPU's bf16 conversion takes a subnormal for a
    zero: a vector group holding one is rounded in software), infinities, a NaN and a zero, in place."""
    flat = scale.reshape(-1)
    flat[::23] = np.array([0x0001, 0x007F, 0x8040], np.uint16).view(scale.dtype)[rng.integers(0, 3)]
    flat[[3, 5, 7, 8]] = np.array([np.inf, -np.inf, np.nan, 0.0], np.float32).astype(scale.dtype)


NARROW_PAIRS = [
    pytest.param(np.int8, np.float32, True, id="i8-f32"),
    pytest.param(np.int16, np.float16, True, id="i16-f16"),  # the product rounded to odd first
    pytest.param(np.int8, ml_dtypes.bfloat16, False, id="i8-bf16-nozp"),
    pytest.param(np.uint16, ml_dtypes.bfloat16, True, id="u16-bf16"),
    pytest.param(ml_dtypes.uint4, ml_dtypes.bfloat16, True, id="u4-bf16"),
    pytest.param(ml_dtypes.int4, np.float32, False, id="i4-f32-nozp"),
]
"""(input, output, zero point) pairs of the narrow vector tests: ``test_fused_tiles``'s, whose loops are
compiled once."""


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("in_t, out_t, zero_point", NARROW_PAIRS)
@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut"])
def test_fused_narrow_rows_in_vector_groups(monkeypatch, fresh_plans, in_t, out_t, zero_point, cut):
    """Rows of 2-8 elements of one value each ("tiles narrow"; where the CPU permutes 16 lanes, of up to
    63) computed a group of rows at a time in explicit vectors (``_jit.narrow_run``: the group's values
    permuted into each vector), the rows left
    over as rows, give the NumPy loop's bits: for every width, tiles of whole groups and of groups and
    rows, calls (and, ``cut``, their blocks) starting inside a row; bf16 scales with subnormal values in
    some groups and not in others (the CPU's bf16 conversion takes a subnormal for a zero: such groups
    are rounded in software), infinities, a NaN and zeros. The pairs are ``test_fused_tiles``'s: their
    loops are compiled once."""
    if cut:
        cut_on_any_element(monkeypatch)
    rng = np.random.default_rng(12)
    info = ml_dtypes.iinfo(in_t)
    blocks = reference._blocks_for(in_t, out_t, zero_point)
    wide = [9, 12, 15, 16, 17, 31, 40, 63] if blocks and _fused.permutes() else []
    for width in [*range(2, 9), *wide]:
        # tiles of 256 elements or fewer (many of them), or of two groups of rows and a part of one
        monkeypatch.setattr(reference, "TILE_MAX", max(64, 4 * width))
        monkeypatch.setattr(reference, "TILE_NARROW", max(256, 40 * width))
        for rows in (16 * 7 + 3, 301):
            shape, axes = (3, rows, width), (0, 1)
            plan = reference._plan(reference._layout(shape, axes), blocks)
            assert reference._loop_layout(plan, blocks) == "tiles narrow"
            x = rng.integers(info.min, int(info.max) + 1, shape).astype(in_t)
            scale = rng.standard_normal((3, rows)).astype(out_t)
            if out_t is ml_dtypes.bfloat16:
                sprinkle_bf16_specials(scale, rng)
            zp = rng.integers(info.min, int(info.max) + 1, (3, rows)).astype(in_t) if zero_point else None
            with loop_kind("numpy"):
                want = odq.dequantize(x, scale, zp, axes=axes)
            with loop_kind("fused"):
                got = odq.dequantize(x, scale, zp, axes=axes)
            assert same_bits(got, want), (width, rows)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize(
    "in_t, out_t, zero_point", [*NARROW_PAIRS, pytest.param(np.int32, np.float16, True, id="i32-f16")]
)
@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut"])
def test_fused_held_rows_by_width(monkeypatch, fresh_plans, in_t, out_t, zero_point, cut):
    """Rows of 64 or more elements of one value each ("rows held") give the NumPy loop's bits at every
    width about the explicit vectors' bounds: their vectors read and write the chunk's arrays at the row's
    offset (a call's blocks, ``cut``, starting inside a row), f32 rows of up to 96 elements in such vectors
    (``_jit.f32_run``) and wider ones in ``HELD_BLOCK``'s loop; bf16 scales with subnormal values, zeros,
    infinities and a NaN (rows under those run other vectors or none), i32 values within the guarded
    float32 loop's bound. The pairs are ``test_fused_tiles``'s: their loops are compiled once."""
    if cut:
        cut_on_any_element(monkeypatch)
    rng = np.random.default_rng(13)
    info = ml_dtypes.iinfo(in_t)
    lo, hi = max(int(info.min), -(1 << 20)), min(int(info.max), 1 << 20)
    blocks = reference._blocks_for(in_t, out_t, zero_point)
    for width in (64, 80, 95, 96, 97, 99, 112, 127, 130):
        shape, axes = (3, 41, width), (0, 1)
        assert reference._loop_layout(reference._plan(reference._layout(shape, axes), blocks), blocks) == "rows held"
        x = rng.integers(lo, hi + 1, shape).astype(in_t)
        scale = rng.standard_normal((3, 41)).astype(out_t)
        if out_t is ml_dtypes.bfloat16:
            sprinkle_bf16_specials(scale, rng)
        zp = rng.integers(lo, hi + 1, (3, 41)).astype(in_t) if zero_point else None
        with loop_kind("numpy"):
            want = odq.dequantize(x, scale, zp, axes=axes)
        with loop_kind("fused"):
            got = odq.dequantize(x, scale, zp, axes=axes)
        assert same_bits(got, want), width


GROUPED = [(2, 3), (2, 19), (3, 4), (3, 16), (4, 4), (4, 5), (4, 59), (5, 8), (6, 4), (7, 16), (8, 3), (12, 12)] + [
    (16, 7),
    (2, 64),  # 7 runs a group in 56 vectors: 8 runs would need 64
]
"""(width, group): rows of ``width`` elements beside a run of the scale, ``group`` consecutive rows a run, that
``_jit.narrow_run``'s vectors compute (``reference._lane_runs``): 1-59 vectors a group of 16 values, runs of
2-16, periods that fill a vector or several, the most runs whose vectors fit (fewer than fill 16 values)."""

WINDOWED = [(3, 3), (5, 7), (7, 3), (9, 10), (10, 2), (17, 2), (20, 3), (25, 4), (32, 2)]
"""(width, group) as ``GROUPED``'s whose runs fill whole vectors only beyond 16 values: each vector reads its own
window of 32 (``reference.WINDOW_MAX``) from the least of its values; runs of 3-32, 4-45 vectors a group."""


@pytest.mark.skipif(not _fused.available() or not _fused.permutes(), reason="no numba, or no 16-lane permutation")
@pytest.mark.parametrize(
    "in_t, out_t, zero_point", [p for p in NARROW_PAIRS if p.id in ("i8-f32", "i16-f16", "i8-bf16-nozp", "u4-bf16")]
)
@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut"])
def test_fused_grouped_rows_in_vector_groups(monkeypatch, fresh_plans, in_t, out_t, zero_point, cut):
    """Rows beside runs of the scale, each run read by a group of consecutive rows ("tiles narrow",
    ``_jit.grouped_narrow``): periods computed in ``narrow_run``'s vectors, each element's value permuted
    from its group's 16 by the lane map, the parts of periods and vectors the range or the scale's end
    leaves as runs, give the NumPy loop's bits: for each ``GROUPED`` shape, tiles of whole groups of vectors
    and of parts of them, calls (and, ``cut``, their blocks) starting inside a row; for each ``WINDOWED`` one
    the same, each vector's values permuted from its own window; bf16 scales with subnormal values in
    some groups and not in others, infinities, a NaN and zeros. The pairs are
    ``test_fused_tiles``'s: their loops are compiled once."""
    if cut:
        cut_on_any_element(monkeypatch)
    rng = np.random.default_rng(13)
    info = ml_dtypes.iinfo(in_t)
    blocks = reference._blocks_for(in_t, out_t, zero_point)
    for width, group in GROUPED + WINDOWED:
        runs = reference._lane_runs(width, group)
        vectors = runs * width * group // 16
        for tile in (2 * 16 * vectors + width * group, 5 * 16 * vectors):
            monkeypatch.setattr(reference, "TILE_MAX", 64)
            monkeypatch.setattr(reference, "TILE_NARROW", tile)
            outer = max(37, 6 * runs + 1)  # more elements than the larger tile
            shape, axes = (outer, group, width), (0, 2)
            plan = reference._plan(reference._layout(shape, axes), blocks)
            assert reference._loop_layout(plan, blocks) == "tiles narrow", (width, group)
            packed = reference._kernel_plan(plan, blocks)
            assert packed[4] == group and packed[6] == runs > 0 and packed[0] >= 16 * vectors, (width, group)
            x = rng.integers(info.min, int(info.max) + 1, shape).astype(in_t)
            scale = rng.standard_normal((outer, width)).astype(out_t)
            if out_t is ml_dtypes.bfloat16:
                sprinkle_bf16_specials(scale, rng)
            zp = rng.integers(info.min, int(info.max) + 1, (outer, width)).astype(in_t) if zero_point else None
            with loop_kind("numpy"):
                want = odq.dequantize(x, scale, zp, axes=axes)
            with loop_kind("fused"):
                got = odq.dequantize(x, scale, zp, axes=axes)
            assert same_bits(got, want), (width, group, tile)


def at_page_end(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` whose last byte lies just before a page the process may not read (Linux): a loop that
    reads past the array's end stops the process."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    pages = -(-a.nbytes // page) + 1
    region = mmap.mmap(-1, pages * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    assert libc.mprotect(base + (pages - 1) * page, page, 0) == 0  # PROT_NONE
    start = (pages - 1) * page - a.nbytes
    out = np.frombuffer(region, np.uint8, a.nbytes, start).view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.skipif(
    not _fused.available() or not _fused.permutes() or not sys.platform.startswith("linux"),
    reason="no numba, no 16-lane permutation, or not Linux",
)
@pytest.mark.parametrize(
    "in_t, out_t, zero_point", [p for p in NARROW_PAIRS if p.id in ("i8-f32", "i16-f16", "i8-bf16-nozp", "u4-bf16")]
)
def test_windowed_vectors_read_nothing_past_the_scale(monkeypatch, fresh_plans, in_t, out_t, zero_point):
    """The windowed vectors of ``WINDOWED``'s runs (32 values from each vector's least) read no scale value or
    zero point past the arrays' ends: with both ending just before a page the process may not read, the
    NumPy loop's bits, for tiles that end at the scale's last run, whole calls and calls cut anywhere."""
    rng = np.random.default_rng(14)
    info = ml_dtypes.iinfo(in_t)
    for width, group in WINDOWED:
        outer = 41
        shape, axes = (outer, group, width), (0, 2)
        x = rng.integers(info.min, int(info.max) + 1, shape).astype(in_t)
        scale = at_page_end(rng.standard_normal((outer, width)).astype(out_t))
        zp = rng.integers(info.min, int(info.max) + 1, (outer, width)).astype(in_t) if zero_point else None
        zp = None if zp is None else at_page_end(zp)
        with loop_kind("numpy"):
            want = odq.dequantize(x, scale, zp, axes=axes)
        with loop_kind("fused"):
            assert same_bits(odq.dequantize(x, scale, zp, axes=axes), want), (width, group)
            with monkeypatch.context() as m:
                cut_on_any_element(m)
                assert same_bits(odq.dequantize(x, scale, zp, axes=axes), want), (width, group)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_narrow_rows_wider_than_the_loops_constant_widths(monkeypatch, fresh_plans):
    """Rows wider than 8 planned "tiles narrow" for a loop without ``_jit.narrow_run`` (i32 inputs, float64
    work; the plan does not choose it, a monkeypatched ``NARROW_MAX`` here) run at their own width, not
    at the widest constant one: the NumPy loop's bits."""
    monkeypatch.setattr(reference, "NARROW_MAX", 16)
    rng = np.random.default_rng(3)
    for width in (9, 12, 16):
        shape, axes = (4099, width), (0,)
        assert reference._loop_layout(reference._plan(reference._layout(shape, axes))) == "tiles narrow"
        x = rng.integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32)
        s = rng.standard_normal(shape[0]).astype(np.float32)
        z = rng.integers(-(2**31), 2**31, shape[0], dtype=np.int64).astype(np.int32)
        with loop_kind("numpy"):
            want = odq.dequantize(x, s, z, axes=axes)
        with loop_kind("fused"):
            assert same_bits(odq.dequantize(x, s, z, axes=axes), want), width


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("out", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_compiled_narrowing_rounds_once(out):
    """The fused loop's f32/f64 -> f16/bf16 rounding gives NumPy's (f16) and ``round_f64_to_bf16``'s / ml_dtypes'
    (bf16) bits: random bit patterns, the rounding boundaries (f16 subnormals, overflow) and specials."""
    rng = np.random.default_rng(3)
    edges = [0x33000000, 0x38800000, 0x477FF000, 0x7F7FF000, 0x00800000]
    bits = np.concatenate(
        [rng.integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)]
        + [np.arange(e - 300, e + 300, dtype=np.uint32) for e in edges]
        + [np.array([0, 0x7F800000, 0x7FC00000, 0x7F800001], np.uint32)]
    )
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    f32 = bits.view(np.float32)
    with np.errstate(all="ignore"):  # NaN payloads, overflow to infinity: expected
        wide = f32.astype(np.float64)
        f64 = np.concatenate([wide, np.nextafter(wide, np.inf), np.nextafter(wide, -np.inf)])
        for src in (f32, f64):
            got = np.empty(src.shape, out)
            _fused.narrow(src, got)
            if out is np.float16:
                want = src.astype(np.float16)
            else:
                want = np.empty(src.shape, out)
                reference.round_f64_to_bf16(src.astype(np.float64), want)
            assert same_bits(got, want)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_hardware_f16_follows_numbas_target(monkeypatch):
    """The F16C conversions (and AVX512-BF16's) are used only where Numba compiles for a CPU that has
    them: a named target (a portable cache's ``generic``) or explicit features without ``+f16c``
    (``+avx512bf16``) get the software ones."""
    import numba

    from onnx_dequant import _jit

    monkeypatch.setattr(numba.config, "CPU_FEATURES", "")
    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert not _jit._hardware_f16()
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "+avx2,-f16c")
    assert not _jit._hardware_f16()
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "+avx2,+f16c")
    assert _jit._hardware_f16()
    assert not _jit._hardware_bf16()
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "+avx512f,+avx512bf16")
    assert _jit._hardware_bf16()
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "")
    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert not _jit._hardware_bf16()


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_wide_vectors_only_where_the_loop_writes_f16():
    """The loops that write f16 carry LLVM's ``prefer-vector-width=512`` attribute
    (``_jit.wide_vectors``); those writing bf16 or f32/f64 are compiled as Numba compiles any function."""
    import numba

    from onnx_dequant import _jit

    @numba.njit
    def loop(x, kind):  # pragma: no cover - compiled
        _jit.wide_vectors(kind)
        t = 0.0
        for v in x:
            t += v
        return t

    x = np.arange(8.0)
    for name, marker, wide in [
        ("f16", _jit.MARKERS["float16"], True),
        ("bf16", _jit.MARKERS["bfloat16"], False),
        ("f32", _jit.PLAIN, False),
    ]:
        assert loop(x, marker) == 28.0
        ir = loop.inspect_llvm(loop.signatures[-1])
        assert ('"prefer-vector-width"="512"' in ir) == wide, name


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_software_f16_conversions_match_numpy():
    """The branch-free f16 conversions a CPU without F16C uses (``_jit.HARDWARE_F16`` false) give
    NumPy's values: every f16 bit pattern to float32, and float32 patterns (random, every rounding
    boundary around the f16 range, specials) to f16."""
    import numba

    from onnx_dequant import _jit

    @numba.njit
    def both(h, u, f32_out, f16_out):  # pragma: no cover - compiled
        for i in range(h.shape[0]):
            f32_out[i] = _jit.f32_from_f16_sw(h[i])
        for i in range(u.shape[0]):
            f16_out[i] = _jit.f16_from_f32_sw(u[i])

    h = np.arange(1 << 16, dtype=np.int64).astype(np.uint16)
    rng = np.random.default_rng(4)
    u = np.concatenate(
        [rng.integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)]
        + [np.arange(e - 4096, e + 4096, dtype=np.uint32) for e in (0x33000000, 0x38800000, 0x477FF000)]
        + [np.array([0, 0x7F800000, 0x7FC00000, 0x7F800001, 0x00000001], np.uint32)]
    )
    u = np.concatenate([u, u | np.uint32(0x80000000)])
    f32_out, f16_out = np.empty(h.shape, np.float32), np.empty(u.shape, np.uint16)
    both(h, u, f32_out, f16_out)
    with np.errstate(all="ignore"):
        assert same_bits(f32_out, h.view(np.float16).astype(np.float32))
        assert same_bits(f16_out.view(np.float16), u.view(np.float32).astype(np.float16))


def rounded_once(d: np.ndarray, s: np.ndarray, out: type) -> np.ndarray:
    """The float64 product of ``d`` and the scale ``s`` (exact where the test says so) rounded once to f16
    (NumPy's cast) or bf16 (``round_f64_to_bf16``)."""
    with np.errstate(all="ignore"):  # infinity times zero, NaN payloads, overflow: expected
        exact = d * s.astype(np.float64)
        if out is np.float16:
            return exact.astype(np.float16)
        want = np.empty(exact.shape, out)
        reference.round_f64_to_bf16(exact, want)
        return want


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("in_t", [np.int8, np.uint8, ml_dtypes.int4, ml_dtypes.uint4, np.int16, np.int32], ids=str)
@pytest.mark.parametrize("zero_point", [False, True], ids=["no zp", "zp"])
@pytest.mark.parametrize("out", [ml_dtypes.bfloat16, np.float16], ids=["bf16", "f16"])
def test_held_half_rows_with_every_scale(in_t, zero_point, out):
    """Rows held under one f16/bf16 scale value each (bf16 where the CPU has AVX512-BF16 rounded by it,
    ``_jit.bf16_run``, except under subnormal scales; f16 of 8-bit and 4-bit inputs by F16C,
    ``_jit.f16_run``; 16-bit inputs to f16 rounded to odd first, as i32 ones within the guarded loop's
    bound are to both, ``_jit.odd_run`` and ``_jit.odd_bf16_run``): every bit pattern as a row's scale,
    each row's 67 inputs spread over the type's range (i32's: the bound), give the exact product rounded
    once."""
    info = ml_dtypes.iinfo(in_t) if in_t in (ml_dtypes.int4, ml_dtypes.uint4) else np.iinfo(in_t)
    lo, hi = int(info.min), int(info.max)
    if in_t is np.int32:  # float32 work where every value lies within the bound
        hi = exactness.f32_guard(dtypes.parse(in_t), dtypes.parse(out), zero_point)
        lo = -hi
    rng = np.random.default_rng(7)
    x = rng.integers(lo, hi + 1, (1 << 16, 67)).astype(in_t)
    x[:, :2] = [lo, hi]
    s = np.arange(1 << 16, dtype=np.int64).astype(np.uint16).view(out)
    z = rng.integers(lo, hi + 1, 1 << 16).astype(in_t) if zero_point else None
    d = x.astype(np.float64) - (0.0 if z is None else z.astype(np.float64)[:, None])
    want = rounded_once(d, s[:, None], out)  # exact: 25 + 11 bits at most
    with loop_kind("fused"):
        assert same_bits(odq.dequantize(x, s, z, axes=(0,)), want)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("in_t", [np.int16, np.uint16], ids=["i16", "u16"])
@pytest.mark.parametrize("out", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_fused_16bit_to_half_rounds_once(in_t, out):
    """16-bit inputs to f16/bf16 run in float32 in the fused loop (to f16 the product rounded to odd from
    its fused-multiply-add error; to bf16 the product is exact): every input value against scales from
    every part of the type's range (subnormal, near overflow, specials) gives the float64 product rounded
    once, in both loops."""
    rng = np.random.default_rng(5)
    x = np.arange(1 << 16, dtype=np.int64).astype(in_t).reshape(256, 256)
    zp = rng.integers(np.iinfo(in_t).min, np.iinfo(in_t).max, 256, dtype=np.int64).astype(in_t)
    bits = rng.integers(0, 1 << 16, 256, dtype=np.int64).astype(np.uint16)
    bits[:8] = [0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0x7E00, 0x8001, 0x0000]  # f16: subnormal..NaN
    if out is ml_dtypes.bfloat16:
        bits[8:12] = [0x0001, 0x7F7F, 0x0080, 0x3F80]  # bf16: subnormal, largest, smallest normal, one
    scale = bits.view(out)
    narrow = x.reshape(4096, 16)  # rows of 16: in vector blocks (AVX-512), else spread over tiles
    rows20 = x.reshape(-1)[:65520].reshape(3276, 20)  # rows of 20: spread (a window a tile)
    for x_, axes, s, z in (
        (x, (0,), scale, zp),  # rows held
        (x, (1,), scale, None),  # rows varying
        (x, (1,), scale, zp),
        (narrow, (0,), np.tile(scale, 16), np.tile(zp, 16)),  # tiles blocks, or spread
        (narrow, (1,), scale[:16], zp[:16]),  # tiles spread, one window
        (rows20, (0,), np.resize(scale, 3276), np.resize(zp, 3276)),
        (rows20, (0,), np.resize(scale, 3276), None),
        (narrow.reshape(-1, 4), (0,), np.resize(scale, 16384), np.resize(zp, 16384)),  # tiles narrow
    ):
        b = (-1, 1) if axes == (0,) else (1, -1)
        d = x_.astype(np.float64) - (0.0 if z is None else z.astype(np.float64).reshape(b))
        want = rounded_once(d, s.reshape(b), out)  # exact: 17 + 11 bits
        for kind in ("numpy", "fused"):
            with loop_kind(kind):
                got = odq.dequantize(x_, s, z, axes=axes)
                assert same_bits(got, want), (x_.shape, axes, z is None, kind)


def near_tie_products(rng: np.random.Generator, scales: int) -> tuple[np.ndarray, np.ndarray]:
    """The 16-bit differences and f16 scales (as bits; six fixed, the rest positive finite at random) whose
    products float32 rounded toward zero, or to nearest, would put on an f16 rounding tie: a second
    rounding would go the wrong way (the few that rounding to odd exists for)."""
    d = np.arange(-65535, 65536, dtype=np.int64)  # every difference of two 16-bit values
    bits = np.concatenate([[0x3E55, 0x03FF, 0x3C03, 0x3C01, 0x3FFF, 0x0401], rng.integers(1, 0x7BFF, scales - 6)])
    dd, sb = [], []
    for b in bits.astype(np.uint16):
        p = d * np.float64(b.view(np.float16))
        with np.errstate(over="ignore"):  # past f16's largest value: infinite, as expected
            near = p.astype(np.float32)
            toward = np.where(np.abs(near.astype(np.float64)) > np.abs(p), np.nextafter(near, np.float32(0)), near)
            once = p.astype(np.float16)
            hard = (near.astype(np.float16) != once) | (toward.astype(np.float16) != once)
        dd.append(d[hard])
        sb.append(np.full(int(hard.sum()), b, np.uint16))
    return np.concatenate(dd), np.concatenate(sb)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("in_t", [np.int16, np.uint16], ids=["i16", "u16"])
def test_fused_16bit_to_f16_products_near_ties(in_t):
    """The products of 16-bit differences and f16 scales that float32 rounded toward zero, or to nearest,
    would put on an f16 rounding tie (so that a second rounding goes the wrong way: the few that rounding
    to odd exists for) come out rounded once in every layout of the fused loop: rows held, rows varying,
    tiles spread, tiles narrow and tiles blocks (each row's one value, or runs)."""
    dd, sb = near_tie_products(np.random.default_rng(11), 64)
    assert len(dd) > 100
    lo, hi = np.iinfo(in_t).min, np.iinfo(in_t).max
    zz = np.where(dd >= 0, lo, hi)  # a zero point that keeps x = d + z in the type
    xx = (dd + zz).astype(in_t)
    zz = zz.astype(in_t)
    # repeated to 8192 rows, so that rows of 6 fill several tiles
    dd, xx, sb, zz = (np.resize(a, 8192) for a in (dd, xx, sb, zz))

    def check(x, s, z, axes):
        b = [1] * x.ndim
        for a in axes:
            b[a] = x.shape[a]
        want = rounded_once(
            x.astype(np.float64) - z.astype(np.float64).reshape(b), s.view(np.float16).reshape(b), np.float16
        )
        with loop_kind("fused"):
            got = odq.dequantize(x, s.view(np.float16), z, axes=axes)
        return [] if same_bits(got, want) else [(x.shape, axes)]

    n = len(dd) - len(dd) % 16
    bad: list = []
    bad += check(xx, sb, zz, (0,))  # rows varying: a full-size scale
    x2, s2, z2 = xx[:n].reshape(-1, 16), sb[:n].reshape(-1, 16), zz[:n].reshape(-1, 16)
    bad += check(np.repeat(x2[:, None, :], 2, axis=1), s2, z2, (0, 2))  # rows of 16 beside runs: tiles blocks
    bad += check(np.repeat(xx[:, None], 17, axis=1), sb, zz, (0,))  # rows of 17 under one value each: narrow
    bad += check(np.repeat(xx[:, None], 16, axis=1), sb, zz, (0,))  # rows of 16: narrow (AVX-512) or blocks
    # rows of 17 under one value each, each window read twice (a tile's values not consecutive): spread
    x4 = np.repeat(np.repeat(xx[:n].reshape(-1, 1, 2, 1), 2, axis=1), 17, axis=3)
    bad += check(x4, sb[:n].reshape(-1, 2), zz[:n].reshape(-1, 2), (0, 2))
    bad += check(np.repeat(xx[:, None], 6, axis=1), sb, zz, (0,))  # tiles narrow
    bad += check(np.repeat(xx[:, None], 300, axis=1), sb, zz, (0,))  # rows held
    assert not bad
    layouts = {
        reference._loop_layout(plan, blocks)
        for shape, axes in [(x4.shape, (0, 2)), ((len(dd), 6), (0,)), ((len(dd), 300), (0,))]
        for blocks in [reference._blocks_for(in_t, np.float16, True)]
        for plan in [reference._plan(reference._layout(shape, axes), blocks)]
    }
    assert {"tiles spread", "tiles narrow", "rows held"} <= layouts


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_fused_16bit_to_f16_pieces():
    """Pieces of a call (the element ranges a cut call's threads compute; here 1-40 elements from
    anywhere, most of them shorter than a vector block, whose rows' remainders the scalar code rounds)
    give the whole call's bits in each layout that computes 16-bit inputs to f16 in vectors."""
    rng = np.random.default_rng(12)
    layouts = set()
    for shape, axes, zp in [
        ((1024, 17), (0,), True),  # tiles narrow (AVX-512), rows cut anywhere
        ((256, 2, 2, 17), (0, 2), True),  # tiles spread: the zero point spread in float32 where vectors run
        ((1024, 20), (0,), False),
        ((1024, 16), (0,), True),  # tiles blocks, one value a row
        ((256, 2, 16), (0, 2), True),  # tiles blocks, runs
        ((64, 300), (0,), True),  # rows held
        ((8192,), (0,), True),  # rows varying
    ]:
        sshape = tuple(shape[a] for a in axes)
        x = rng.integers(-32768, 32768, shape).astype(np.int16)
        s = rng.integers(0x0001, 0x7BFF, sshape).astype(np.uint16).view(np.float16)
        z = rng.integers(-32768, 32768, sshape).astype(np.int16) if zp else None
        with loop_kind("fused"):
            whole = odq.dequantize(x, s, z, axes=axes).reshape(-1).view(np.uint16)
        key = (x.dtype, x.shape, s.dtype, s.shape, *((None, None) if z is None else (z.dtype, z.shape)))
        kernel, plan, _, _, bits, no_z, _ = reference._checked(*key, axes, None, True)[4]
        blocks = reference._blocks_for(np.int16, np.float16, zp)
        layouts.add(reference._loop_layout(reference._plan(reference._layout(shape, axes), blocks), blocks))
        xf, zf, sf = x.reshape(-1), no_z if z is None else z.reshape(-1), _fused.flat(s, bits)
        got = np.zeros(x.size, np.uint16)
        for _ in range(300):
            a = int(rng.integers(0, x.size - 1))
            b = min(x.size, a + int(rng.integers(1, 41)))
            assert kernel(xf, zf, sf, got[a:b], a, b, plan, _split.NO_CLAIM) == b
            assert np.array_equal(got[a:b], whole[a:b]), (shape, axes, zp, a, b)
    assert {"tiles spread", "rows held", "rows varying"} <= layouts


PERIODS = [
    ((4096,), (), 1),  # per tensor
    ((2048, 2), (1,), 2),
    ((1365, 3), (1,), 3),
    ((819, 5), (1,), 5),
    ((682, 6), (1,), 6),
    ((585, 7), (1,), 7),
    ((341, 2, 6), (1, 2), 12),  # two axes
    ((341, 6, 2), (1,), 12),  # runs of 2 under one value each
    ((256, 16), (1,), 16),
    ((85, 48), (1,), 48),
    ((51, 80), (1,), 80),
    ((42, 3, 32), (1,), 96),  # runs of 32
    ((36, 112), (1,), 112),
    ((32, 2, 8, 8), (1, 3), 128),
]


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("in_t", [np.int16, np.uint16], ids=["i16", "u16"])
@pytest.mark.parametrize("shape, axes, period", PERIODS, ids=[f"period {p[2]}" for p in PERIODS])
def test_fused_16bit_to_f16_periods(in_t, shape, axes, period):
    """Where the flat index's scale offset repeats within 8 vectors of 16 (``reference._period``), 16-bit
    inputs to f16 run from the period's values held in registers (``_jit.period_run``): the differences
    whose products sit next to an f16 rounding tie, every input value, and a call's pieces from any
    phase (a cut call's, 1-150 elements, most ending inside a vector) come out rounded once, with and
    without a zero point; a period with a zero, negative, infinite or NaN scale (which the registers'
    rounding does not take: ``_jit.odd_fma_ir``) as the other vector loops compute it (a negative zero
    where the difference is zero)."""
    rng = np.random.default_rng(period)
    p = reference._period(shape, axes)
    assert p is not None and len(p) == period
    n = math.prod(shape)
    sshape = tuple(shape[a] for a in axes)
    bshape = tuple(shape[i] if i in axes else 1 for i in range(len(shape)))
    size = math.prod(sshape)
    lo, hi = np.iinfo(in_t).min, np.iinfo(in_t).max
    dd, sb = near_tie_products(rng, 12)
    ties = rng.permutation(len(dd))[: n // 2]
    # element e's difference and scale: a near-tie pair where e's scale offset reads that scale
    offsets = np.resize(p, n)
    scale_bits = rng.integers(1, 0x7BFF, size).astype(np.uint16)
    d = rng.integers(-65535, 65536, n)
    for k in ties:
        e = int(rng.integers(0, n))
        scale_bits[offsets[e]], d[e] = sb[k], dd[k]
    zero = rng.integers(lo, hi + 1, size)
    # a zero point that keeps each near-tie difference's input in the type; elsewhere any
    x = np.clip(d + zero[offsets], lo, hi)
    x[: 1 << 16 if n >= 1 << 16 else n] = np.arange(lo, hi + 1)[:n]  # every input value (past 65536: random)
    specials = scale_bits.copy()
    specials[rng.integers(0, size)] = rng.choice([0x0000, 0x8000, 0xBC00, 0x7C00, 0x7E00])
    for bits in (scale_bits, specials):
        s = bits.view(np.float16).reshape(sshape)
        for z in (zero.astype(in_t).reshape(sshape), None):
            xt = x.astype(in_t).reshape(shape)
            diff = xt.astype(np.float64) - (0.0 if z is None else z.astype(np.float64).reshape(bshape))
            want = rounded_once(diff, s.reshape(bshape), np.float16)
            with loop_kind("fused"):
                got = odq.dequantize(xt, s, z, axes=axes)
            assert same_bits(got, want), (z is None, bits is specials)
            key = (xt.dtype, xt.shape, s.dtype, s.shape, *((None, None) if z is None else (z.dtype, z.shape)))
            kernel, plan, _, _, u16, no_z, _ = reference._checked(*key, axes, None, True)[4]
            assert plan[5] == math.lcm(period, 16) // 16
            xf, zf, sf = xt.reshape(-1), no_z if z is None else z.reshape(-1), _fused.flat(s, u16)
            flat = want.reshape(-1).view(np.uint16)
            for _ in range(40):
                a = int(rng.integers(0, n - 1))
                b = min(n, a + int(rng.integers(1, 151)))
                piece = np.zeros(b - a, np.uint16)
                assert kernel(xf, zf, sf, piece, a, b, plan, _split.NO_CLAIM) == b
                assert np.array_equal(piece, flat[a:b]), (z is None, bits is specials, a, b)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("out", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_fused_i32_to_half_rounds_once(out):
    """i32 inputs to f16/bf16 run in float64 (the product of a 33-bit difference and an 11-bit scale is
    exact) and the fused loop rounds that product once in float64's own bits: products exactly on a
    rounding tie and one unit either side of it, differences across the whole int32 range, and scales
    from every part of the type's range (subnormal: products below the smallest normal; near overflow:
    products rounded up to infinity; specials) give the exact product rounded once, in both loops."""
    rng = np.random.default_rng(7)
    keep = 11 if out is np.float16 else 8  # significant bits
    ties = [(1 << j) + (1 << (j - keep)) + e for j in range(keep, 31) for e in (-1, 0, 1)]
    ties += [(3 << (j - 1)) + (1 << (j - keep)) for j in range(keep + 1, 31)]  # odd last bit: ties go up
    x = np.array(ties + [-t for t in ties], np.int64)
    x = np.concatenate([x, rng.integers(-(1 << 31), 1 << 31, 256 - x.size % 256 + 512, dtype=np.int64)])
    x = x[: x.size - x.size % 256].astype(np.int32).reshape(-1, 256)
    bits = rng.integers(0, 1 << 16, 256, dtype=np.int64).astype(np.uint16)
    if out is np.float16:  # subnormal, largest subnormal, smallest normal, largest, inf, NaN, -subnormal, 1
        bits[:10] = [0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0x7E00, 0x8001, 0x3C00, 0x0000, 0x1400]
    else:  # subnormal, largest subnormal, smallest normal, largest, inf, NaN, -subnormal, 1, 0, 2**-100
        bits[:10] = [0x0001, 0x007F, 0x0080, 0x7F7F, 0x7F80, 0x7FC0, 0x8001, 0x3F80, 0x0000, 0x0D80]
    scale = bits.view(out)
    zp = rng.integers(-(1 << 31), 1 << 31, 256, dtype=np.int64).astype(np.int32)
    for z in (None, zp):
        d = x.astype(np.float64) - (0.0 if z is None else z.astype(np.float64))
        want = rounded_once(d, scale, out)  # exact: 33 + 11 bits
        for kind in ("numpy", "fused"):
            with loop_kind(kind):
                assert same_bits(odq.dequantize(x, scale, z, axes=[1]), want), (z is None, kind)


def i32_near_ties(rng: np.random.Generator, out: type, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """i32 differences of magnitude ``lo..hi`` and scales of ``out`` (f16/bf16) whose products float32
    rounds (to nearest, or toward zero) onto a rounding tie of ``out``: a float32 product rounded again
    goes the wrong way. Built from the tie: ``(2m + 1) * 2**k`` over an odd significand ``S`` of the
    scale, the difference its nearest multiple's quotient, kept where the two roundings differ."""
    keep = 11 if out is np.float16 else 8  # significant bits
    n = 1 << 16
    S = rng.integers(1 << (keep - 2), 1 << (keep - 1), n) * 2 + 1  # odd, keep bits
    m = rng.integers(1 << (keep - 1), 1 << keep, n)
    target = rng.integers(lo, hi + 1, n).astype(np.float64)
    k = np.floor(np.log2(target * S / (2 * m + 1))).astype(np.int64)
    d = np.rint((2 * m + 1) * np.exp2(k) / S).astype(np.int64)
    d = np.where(rng.integers(0, 2, n) == 1, -d, d)
    s = (S * np.exp2(-keep - 10 if out is np.float16 else -keep - 9)).astype(out)  # exact: keep bits, normal
    p = d * s.astype(np.float64)  # exact: 26 + 11 bits
    near = p.astype(np.float32)
    toward = np.where(np.abs(near.astype(np.float64)) > np.abs(p), np.nextafter(near, np.float32(0)), near)
    once = rounded_once(d.astype(np.float64), s, out)
    hard = (np.abs(d) >= lo) & (np.abs(d) <= hi)
    hard &= (near.astype(out).view(np.uint16) != once.view(np.uint16)) | (
        toward.astype(out).view(np.uint16) != once.view(np.uint16)
    )
    return d[hard], s[hard]


I32_LAYOUTS = [((0,), 1, True), ((0,), 300, False), ((0,), 6, True)]
"""Rows of the i32 tests' differences, (axes, row width, with a zero point): a full-size scale (rows
varying: the difference taken in int32, as spread tiles take it), rows held (bf16 runs by the CPU where
products are exact), tiles narrow (the input and the zero point converted apart). Each kernel compiles
for 5-10 s: one each."""


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("out", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_fused_i32_to_half_in_float32_near_ties(out, cut_calls):
    """i32 inputs to f16/bf16 run in float32 where every input (and zero point) lies within
    ``exactness.f32_guard``'s bound (2**24 alone, 2**23 beside a zero point), and the product is rounded
    to odd there: differences up to 2**24 whose float32 products, rounded again, would go the wrong way
    come out rounded once in every layout, cut calls' blocks included; and differences up to 2**25 (where
    float32 rounds the difference itself: the bound is tight) too, computed in float64 from the chunk
    (``_jit.GUARD_CHUNK``) where they start. The guarded kernel returns that chunk's start."""
    from onnx_dequant import _jit

    chunk = _jit.GUARD_CHUNK
    rng = np.random.default_rng(23)
    assert exactness.f32_guard(dtypes.parse("i32"), dtypes.parse(np.dtype(out).name), False) == 1 << 24
    inside, s_in = i32_near_ties(rng, out, 1 << 22, 1 << 24)
    beyond, s_out = i32_near_ties(rng, out, (1 << 24) + 1, 1 << 25)
    assert len(inside) > 200 and len(beyond) > 100
    for axes, width, zp in I32_LAYOUTS:
        rows = 2 * chunk // width + 200  # three chunks
        late = 2 * chunk // width + 50  # a row in the third
        # values beyond the bound in one layout (its float64 kernel compiled too), without a zero point:
        # with one, they would take the zero point beyond it, and the whole call to float64
        for beyond_too in (False, True) if width == 300 else (False,):
            d, s = np.resize(inside, rows), np.resize(s_in, rows)
            if beyond_too:
                k = min(100, len(beyond))
                d[late : late + k], s[late : late + k] = beyond[:k], s_out[:k]
            want = rounded_once(np.repeat(d[:, None], width, axis=1).astype(np.float64), s.reshape(-1, 1), out)
            z = np.where(d >= 0, -(np.abs(d) // 2), np.abs(d) // 2) if zp else None  # |x|, |z| <= 2**23
            x = d if z is None else d + z
            xs = np.repeat(x[:, None], width, axis=1).astype(np.int32)
            zs = None if z is None else z.astype(np.int32)
            with loop_kind("fused"):
                got = odq.dequantize(xs, s, zs, axes=axes)
            assert same_bits(got, want), (beyond_too, zp, width)
            key = (xs.dtype, xs.shape, s.dtype, s.shape, *((None, None) if z is None else (zs.dtype, zs.shape)))
            setup = reference._checked(*key, axes, None, True)[4]
            guarded, _ = setup[6]
            zf = setup[5] if z is None else zs.reshape(-1)
            o = np.zeros(xs.size, np.uint16)
            args = (xs.reshape(-1), zf, s.view(np.uint16), o, 0, xs.size, setup[1])
            first = late * width // chunk * chunk if beyond_too else xs.size
            assert guarded()(*args, _split.NO_CLAIM) == first, (zp, width)
            # claimed blocks of a chunk each, from the front: the first beyond the bound's start, the
            # blocks claimed so far
            claim = _split.claim_of([*range(0, xs.size, chunk), xs.size])
            assert guarded()(*args, claim) == first
            assert claim[0] & 0xFFFFFFFF == -(-first // chunk) + (first < xs.size)
    layouts = {
        reference._loop_layout(plan, 0)
        for axes, width, _ in I32_LAYOUTS
        for plan in [reference._plan(reference._layout((2 * chunk // width + 200, width), axes), 0)]
    }
    assert layouts == {"rows varying", "rows held", "tiles narrow"}


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_compiled_code_reads_read_only_arrays_as_it_is():
    """``_fused.compiled`` gives the code compiled for writeable arrays, which reads read-only ones as
    they are (Numba's dispatcher would compile another copy for them: 5-10 s for the fused loop) and
    refuses an array of another item size."""
    import numba

    dispatcher = numba.njit(lambda a, plan, k: a[k] + plan[0])
    code = _fused.compiled(dispatcher, (np.int16, (np.int64, False), int))
    a = np.arange(5, dtype=np.int16)
    plan = np.array([100], np.int64)
    plan.flags.writeable = False
    assert code(a, plan, 3) == 103
    a.flags.writeable = False
    assert code(a, plan, 4) == 104
    assert len(dispatcher.overloads) == 1
    with pytest.raises(TypeError):
        code(a.astype(np.int32), plan, 0)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_half_and_4bit_arrays_passed_as_they_are_or_viewed(monkeypatch, fresh_plans):
    """Where compiled code takes an array of another type of its item size, as Numba's does, f16, bf16 and
    4-bit arrays reach the loop without a view (``_fused.call_type`` None), else viewed as their bits; the
    loop's bits are the same either way, and the NumPy loop's."""
    import numba

    code = _fused.compiled(numba.njit(lambda a, k: a[k]), (np.uint16, int))
    half = np.array([1.0, -2.0], np.float16)
    try:
        taken = code(half, 1) == half.view(np.uint16)[1]
    except TypeError:
        taken = False
    assert _fused.call_type(np.dtype(np.float16)) is (None if taken else _fused.bits_type(np.dtype(np.float16)))
    rng = np.random.default_rng(15)
    # ``NARROW_PAIRS``' types and a ``GROUPED`` layout: loops other tests compile
    for in_t, out_t in [(ml_dtypes.uint4, ml_dtypes.bfloat16), (np.int16, np.float16)]:
        info = ml_dtypes.iinfo(in_t)
        x = rng.integers(info.min, int(info.max) + 1, (1031, 4, 4)).astype(in_t)
        scale = rng.standard_normal((1031, 4)).astype(out_t)
        zp = rng.integers(info.min, int(info.max) + 1, (1031, 4)).astype(in_t)
        with loop_kind("numpy"):
            want = odq.dequantize(x, scale, zp, axes=(0, 2))
        for as_they_are in (True, False):
            monkeypatch.setattr(_fused, "_AS_THEY_ARE", as_they_are and taken)
            reference._checked.cache_clear()
            with loop_kind("fused"):
                assert same_bits(odq.dequantize(x, scale, zp, axes=(0, 2)), want), (in_t, out_t, as_they_are)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize(
    "in_t, out_t, shape, axes",
    [
        (np.int16, np.float16, (8, 93, 15, 6), (3,)),  # a period held in registers
        (np.uint8, ml_dtypes.bfloat16, (300, 40), (0,)),
        (np.int32, np.float16, (64, 70), (1,)),  # guarded: float32, then float64 where the data leave it
    ],
)
def test_fused_reads_read_only_and_unaligned_inputs(in_t, out_t, shape, axes):
    """Read-only input, scale and zero point arrays (a memory map, ``np.frombuffer``), and unaligned ones
    (``np.frombuffer`` at an odd offset), give the bits that writeable aligned ones give, through the
    compiled loop; so does an unaligned ``out``."""
    rng = np.random.default_rng(7)
    info = np.iinfo(in_t)
    x = rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(in_t)
    x.reshape(-1)[-100] = info.max  # i32: beyond float32's bound, so float64 finishes the call
    sshape = tuple(shape[a] for a in axes)
    s = rng.uniform(0.001, 0.1, sshape).astype(out_t)
    z = rng.integers(0, 10, sshape).astype(in_t)

    def unaligned(a: np.ndarray) -> np.ndarray:
        u = np.zeros(a.nbytes + 1, np.uint8)[1:].view(a.dtype).reshape(a.shape)
        u[...] = a
        return u

    with loop_kind("fused"):
        want = odq.dequantize(x, s, z, axes=axes)
        odd = [unaligned(a) for a in (x, s, z, want)]
        assert not odd[3].flags.aligned and (odd[0].itemsize == 1 or not odd[0].flags.aligned)
        assert same_bits(odq.dequantize(*odd[:3], axes=axes, out=odd[3]), want)
        for a in (x, s, z):
            a.flags.writeable = False
        got = odq.dequantize(x, s, z, axes=axes)
    assert same_bits(got, want)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # NumPy's, at every np.matrix
@pytest.mark.parametrize("kind", KINDS)
def test_array_subclasses_are_read_and_written_as_arrays(kind):
    """An ``np.matrix`` input (whose ``ravel`` keeps two dims) gives the bits a plain array gives, and an
    ``np.matrix`` ``out`` is written and returned."""
    rng = np.random.default_rng(11)
    x = rng.integers(-128, 128, (64, 300)).astype(np.int8)
    s = rng.uniform(0.01, 0.1, 300).astype(np.float32)
    z = rng.integers(-5, 5, 300).astype(np.int8)
    with loop_kind(kind):
        want = odq.dequantize(x, s, z, axes=(1,))
        got = odq.dequantize(np.asmatrix(x), s, z, axes=(1,))
        out = np.asmatrix(np.zeros(x.shape, np.float32))
        assert odq.dequantize(x, s, z, axes=(1,), out=out) is out
    assert type(got) is np.ndarray and same_bits(got, want)
    assert same_bits(np.asarray(out), want)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_compiled_loop_claims_the_blocks_it_is_given():
    """The compiled loop computes the blocks it claims from a shared counter (``_jit.claim_block``) until
    none is left to it: given the whole array (the caller), from the front; given all but its last
    element (a helper), from the back, leaving the last block unclaimed for the caller. The blocks give
    the whole call's bits."""
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (300, 70)).astype(np.int8)
    s = rng.uniform(0.01, 0.1, 70).astype(np.float32)
    z = rng.integers(-5, 5, 70).astype(np.int8)
    with loop_kind("fused"):
        want = odq.dequantize(x, s, z, axes=(1,))
    kernel, plan = reference._checked(x.dtype, x.shape, s.dtype, s.shape, z.dtype, z.shape, (1,), None, True)[4][:2]
    claim = _split.claim_of([0, 5000, 9000, 12000, 15000, 21000])
    got = np.zeros(x.size, np.float32)
    args = (x.reshape(-1), z, s, got, 0, x.size, plan)
    assert kernel(*args, claim[:-1]) == x.size  # a helper: blocks 4, 3, 2, 1; block 0 left
    assert claim[0] == 1 << 32 and not got[:5000].any()
    assert np.array_equal(got[5000:].view(np.uint32), want.reshape(-1)[5000:].view(np.uint32))
    assert kernel(*args, claim) == x.size and claim[0] == (1 << 32) + 1
    assert same_bits(got.reshape(x.shape), want)
    assert kernel(*args, claim) == x.size and claim[0] == (1 << 32) + 1  # none left: nothing claimed


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_compiled_loop_claims_each_block_once_among_threads():
    """Four threads in the compiled loop at once (it runs without the GIL), three of them helpers (from
    the back), claim 4096 blocks of 64 elements from one counter: every element written, as the whole
    call writes it, every block claimed."""
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (4096, 64)).astype(np.int8)
    s = rng.uniform(0.01, 0.1, 64).astype(np.float32)
    with loop_kind("fused"):
        want = odq.dequantize(x, s, axes=(1,))
    setup = reference._checked(x.dtype, x.shape, s.dtype, s.shape, None, None, (1,), None, True)[4]
    kernel, plan, no_z = setup[0], setup[1], setup[5]
    blocks = _split.claim_of(list(range(0, x.size + 1, 64)))
    for _ in range(5):
        claim = blocks.copy()
        got = np.full(x.size, np.nan, np.float32)
        args = (x.reshape(-1), no_z, s, got, 0, x.size, plan)
        threads = [threading.Thread(target=kernel, args=(*args, claim[:-1])) for _ in range(3)]
        for t in threads:
            t.start()
        kernel(*args, claim)
        for t in threads:
            t.join()
        front, back = claim[0] & 0xFFFFFFFF, claim[0] >> 32
        assert front == back  # every block claimed, by the front or the back
        assert same_bits(got.reshape(x.shape), want)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("out", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_guarded_held_rows_checked_in_every_piece(out):
    """The guarded float32 loop's held rows of i32 (checked as their vectors are computed, where the CPU
    computes them so; a piece of fewer than 16 elements, or a row under a subnormal scale to bf16, in a
    pass first) find a value beyond the bound in any piece of a row a call's range holds: the call
    returns its range's start; a range without one gives the NumPy loop's bits, a value at the bound
    included."""
    rng = np.random.default_rng(16)
    rows, width = 64, 100
    x = rng.integers(-1000, 1000, (rows, width)).astype(np.int32)
    s = rng.uniform(0.5, 2.0, rows).astype(out)
    s[11] = np.array([0x0003], np.uint16).view(out)[0]  # subnormal: bf16 rows under it are not in vectors
    beyond = [7 * width + 37, 11 * width + 3, 30 * width + 90, 50 * width + 15]
    x.reshape(-1)[beyond] = [(1 << 24) + 5, -(1 << 24) - 3, (1 << 24) + 1, -(1 << 24) - 1]
    x.reshape(-1)[[20 * width + 50, 40 * width + 99]] = [1 << 24, -(1 << 24)]  # the bound itself: within
    with loop_kind("numpy"):
        want = odq.dequantize(x, s, axes=(0,)).reshape(-1).view(np.uint16)
    assert reference._loop_layout(reference._plan(reference._layout(x.shape, (0,)))) == "rows held"
    setup = reference._checked(x.dtype, x.shape, s.dtype, s.shape, None, None, (0,), None, True)[4]
    guarded, limit = setup[6]
    assert limit == 1 << 24
    xf, sf = x.reshape(-1), s.view(np.uint16)
    for _ in range(400):
        a = int(rng.integers(0, x.size - 1))
        b = min(x.size, a + int(rng.integers(1, 150)))
        o = np.zeros(b - a, np.uint16)
        inside = any(a <= k < b for k in beyond)
        assert guarded()(xf, setup[5], sf, o, a, b, setup[1], _split.NO_CLAIM) == (a if inside else b), (a, b)
        if not inside:
            assert (o == want[a:b]).all(), (a, b)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_guarded_call_probes_before_the_float32_kernel():
    """A guarded call whose first ``GUARD_PROBE`` elements lie beyond the bound goes to the float64
    kernel at once (the float32 one's thunk is never called, so it is never compiled); one whose probe is
    within it calls the float32 kernel, and the float64 one from where that stopped: to the end of the
    call, or of the block it claimed, after which float64 claims the blocks left. A zero point as large
    as the input is probed beside it."""
    calls = []
    thunks = []

    def thunk(name, fn):
        def get():
            thunks.append(name)
            return fn

        return get

    def kernel(x, z, s, out, e0, e1, plan, claim):
        if claim.shape[0]:  # two blocks claimed from the front, the second beyond the bound
            calls.append(("f32 claims", int(claim[0] & 0xFFFFFFFF)))
            claim[0] += 2
            return claim[2 + 1]
        calls.append(("f32", e0, e1))
        return e0 + 5000 if e1 - e0 > 5000 else e1

    def rest(x, z, s, out, e0, e1, plan, claim):
        calls.append(("f64", e0, e1, out.shape[0], claim.shape[0]))
        return e1

    x = np.zeros(10000, np.int32)
    out = np.zeros(10000, np.float32)
    x[reference.GUARD_PROBE - 1] = 1 << 24
    guard = (thunk("f32", kernel), 1 << 23)
    whole = _split.NO_CLAIM
    assert reference._guarded(guard, thunk("f64", rest), x, x, out, out, 0, 10000, None, whole) == 10000
    assert calls == [("f64", 0, 10000, 10000, 0)] and thunks == ["f64"]
    calls.clear()
    thunks.clear()
    assert reference._guarded(guard, thunk("f64", rest), x, x, out, out[256:], 256, 10000, None, whole) == 10000
    assert calls == [("f32", 256, 10000), ("f64", 5256, 10000, 4744, 0)] and thunks == ["f32", "f64"]
    calls.clear()
    claim = _split.claim_of([0, 2000, 5000, 9000, 10000])  # four blocks
    x[reference.GUARD_PROBE - 1] = 0
    assert reference._guarded(guard, thunk("f64", rest), x, x, out, out, 0, 10000, None, claim) == 10000
    # the kernel claims two blocks, stops in the second, which float64 computes; then claims the rest
    assert calls == [("f32 claims", 0), ("f64", 2000, 5000, 3000, 0), ("f64", 0, 10000, 10000, 8)]
    calls.clear()
    thunks.clear()
    z = np.zeros(10000, np.int32)
    z[3] = -(1 << 24)  # a zero point of the input's elements, beyond the bound in the probe
    assert reference._guarded(guard, thunk("f64", rest), x, z, out, out, 0, 10000, None, whole) == 10000
    assert calls == [("f64", 0, 10000, 10000, 0)] and thunks == ["f64"]


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_fused_i32_zero_point_beyond_the_bound():
    """A zero point beyond 2**23 sends the whole call to float64, even where every input is within the
    bound: the rows that convert the input and the zero point to float32 apart (held rows here; narrow
    tiles too) would round a zero point of 2**24 + 2**13 + 1 and put the difference on an f16 tie."""
    width = 300
    x = np.zeros((4096, width), np.int32)
    z = np.full(4096, -5, np.int32)
    z[100] = -((1 << 24) + (1 << 13) + 1)
    s = np.full(4096, 2.0**-10, np.float16)
    want = rounded_once(x.astype(np.float64) - z.astype(np.float64)[:, None], s.reshape(-1, 1), np.float16)
    with np.errstate(all="ignore"):
        float32 = ((x.astype(np.float32) - z.astype(np.float32)[:, None]) * np.float32(2.0**-10)).astype(np.float16)
    assert not same_bits(float32, want)  # the data tell the two apart
    with loop_kind("fused"):
        got = odq.dequantize(x, s, z, axes=[0])
    assert same_bits(got, want)


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("cut", [False, True])
def test_fused_i32_zero_point_as_large_as_the_input(request, cut):
    """A zero point of the input's elements is checked with it, a chunk (or claimed block) at a time, by
    the float32 kernel: those whose zero point lies within the bound run in float32, the one holding
    2**24 + 2**13 + 1 in float64, every bit as float64 gives it (float32 work would put that difference
    on an f16 tie)."""
    if cut:
        request.getfixturevalue("cut_calls")
    n = 3 * 4096
    x = np.zeros(n, np.int32)
    z = np.full(n, -5, np.int32)
    z[2 * 4096 + 7] = -((1 << 24) + (1 << 13) + 1)
    s = np.full(n, 2.0**-10, np.float16)
    want = rounded_once(x.astype(np.float64) - z.astype(np.float64), s, np.float16)
    with np.errstate(all="ignore"):
        float32 = ((x.astype(np.float32) - z.astype(np.float32)) * np.float32(2.0**-10)).astype(np.float16)
    assert not same_bits(float32, want)  # the data tell the two apart
    with loop_kind("fused"):
        got = odq.dequantize(x, s, z, axes=[0])
    assert same_bits(got, want)


FOUR_BIT_LAYOUTS = [
    ((64, 256), (0,), "rows held"),
    ((4, 16, 256), (0, 2), "rows varying"),
    ((256, 3, 5), (0, 2), "grouped rows"),  # runs of 5 read by 3 rows: whole vectors in windows of 32 values
    ((256, 23, 3), (0, 2), "tiles spread"),  # runs of 3 read by 23 rows: whole vectors only in 69
    ((256, 4, 6), (0, 2), "grouped rows"),  # runs read by groups of rows: narrow where the CPU permutes lanes
    ((256, 4, 12), (0, 2), "grouped blocks"),  # runs narrower than a block: narrow, else a block each
    ((256, 2, 20), (0, 2), "grouped blocks"),  # runs wider than a vector's 16 values: in windows of 32
    ((256, 2, 40), (0, 2), "tiles blocks"),  # runs wider than a window
    ((64, 4, 16, 15), (0, 2), "tiles blocks"),  # rows narrower than a block, of one value each
    ((1024, 15), (0,), "held rows"),  # consecutive values: narrow where the CPU permutes lanes, else blocks
    ((2048, 8), (0,), "tiles narrow"),
    ((256, 4, 16), (0, 2), "grouped blocks"),
    ((1024, 16), (0,), "held rows"),
    ((512, 40), (0,), "held rows"),
]

PERMUTED = {
    "held rows": ("tiles narrow", "tiles blocks"),
    "grouped rows": ("tiles narrow", "tiles spread"),
    "grouped blocks": ("tiles narrow", "tiles blocks"),
}
"""Layouts the tests name that depend on the CPU: (where it permutes 16 lanes, where not)."""


def on_this_cpu(layout: str) -> str:
    """``layout`` (one of ``PERMUTED``'s names, or a layout) as this CPU's loop runs it."""
    return PERMUTED[layout][0 if _fused.permutes() else 1] if layout in PERMUTED else layout


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize(
    "shape, axes, layout, out",
    [(*c, np.float32) for c in FOUR_BIT_LAYOUTS]
    # bf16 where its rows have vectors of their own (held bf16 runs, blocks); elsewhere the bytes are read
    # as for f32
    + [(*c, ml_dtypes.bfloat16) for c in FOUR_BIT_LAYOUTS if c[2] in ("rows held", "tiles blocks", *PERMUTED)],
)
@pytest.mark.parametrize("in_t", [ml_dtypes.int4, ml_dtypes.uint4], ids=["i4", "u4"])
def test_fused_4bit_differences_in_every_layout(shape, axes, layout, in_t, out):
    """The fused loop reads 4-bit bytes by their low 4 bits and subtracts int4's biased
    (``_jit.int4_biased``): every byte as an input (a raw view sets the high 4 bits, which ml_dtypes
    ignores) against every byte as a zero point, and without a zero point, in each layout and both loops,
    gives ml_dtypes' values' exact product rounded once."""
    if out is np.float32:
        blocks = reference._blocks_for(in_t, out)
        layout = on_this_cpu(layout)
        assert reference._loop_layout(reference._plan(reference._layout(shape, axes), blocks), blocks) == layout
    sshape = tuple(shape[a] for a in axes)
    n = int(np.prod(shape))
    x = np.resize(np.arange(256), n).astype(np.uint8).reshape(shape).view(in_t)
    zp = np.resize(np.arange(256)[::-1], int(np.prod(sshape))).astype(np.uint8).reshape(sshape).view(in_t)
    scale = np.random.default_rng(8).standard_normal(sshape).astype(np.float32).astype(out)
    bshape = tuple(shape[i] if i in axes else 1 for i in range(len(shape)))
    for z in (None, zp):
        d = x.astype(np.float64) - (0.0 if z is None else z.astype(np.float64).reshape(bshape))
        want = rounded_once(d, scale.reshape(bshape), out) if out is not np.float32 else None
        if want is None:  # exact, rounded once
            want = (d * scale.astype(np.float64).reshape(bshape)).astype(np.float32)
        for kind in ("numpy", "fused"):
            with loop_kind(kind):
                assert same_bits(odq.dequantize(x, scale, z, axes=axes), want), (z is None, kind)


def test_f32_work_exactness_rule():
    """f32 work is exact where the rule says: the f32 product of every 16-bit difference and every bf16
    significand (normal, and each subnormal scale) is the exact (float64) one; with f16 significands it
    is not; and the rule's table for the types it decides."""
    d = np.arange(-65535, 65536, dtype=np.float64)
    mant = np.arange(0x3F80, 0x4000, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    sub = np.arange(1, 0x80, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    for s in (mant, sub, mant * 2.0**100):
        for v in s:
            assert np.array_equal((d.astype(np.float32) * np.float32(v)).astype(np.float64), d * v), v
    f16 = np.float64(np.float16(1 + 2.0**-10))  # 11 significant bits
    assert not np.array_equal((d.astype(np.float32) * np.float32(f16)).astype(np.float64), d * f16)
    rule = {
        (q, r): exactness.f32_work_exact(dtypes.parse(q), dtypes.parse(r))
        for q in ("i4", "u8", "i16", "u16", "i32")
        for r in ("f32", "f16", "bf16", "f64")
    }
    assert {k for k, v in rule.items() if v} == {
        (q, r)
        for q in ("i4", "u8", "i16", "u16")
        for r in ("f32", "f16", "bf16")
        if not (q in ("i16", "u16") and r == "f16")
    }


@pytest.mark.skipif(not _fused.available(), reason="no numba")
@pytest.mark.parametrize("out", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_fused_reads_every_half_scale_exactly(out):
    """The fused loop reads f16/bf16 scales as bits: 1 times every bit pattern is that pattern, NaNs
    (every payload) a NaN, in float32 work and in float64 (i32 inputs); and infinity times zero is a
    NaN (the loop's bf16 rounding has no NaN test of its own: ``_jit.bf16_from_product``)."""
    scale = np.arange(1 << 16, dtype=np.int64).astype(np.uint16).view(out)
    with loop_kind("fused"):
        for x in (np.ones(1 << 16, np.uint8), np.ones(1 << 16, np.int32)):
            assert same_bits(odq.dequantize(x, scale, axes=[0]), scale), x.dtype
        # in vector blocks ("tiles blocks"): rows of 16 beside runs of the scale, and of one value each
        runs = scale.reshape(4096, 16)
        got = odq.dequantize(np.ones((4096, 2, 16), np.uint8), runs, axes=[0, 2])
        assert same_bits(got, np.broadcast_to(runs[:, None, :], got.shape))
        got = odq.dequantize(np.ones((1 << 16, 16), np.int8), scale, axes=[0])
        assert same_bits(got, np.broadcast_to(scale[:, None], got.shape))
        x = np.tile(np.array([1, 0, -1, 2], np.int32), 1 << 14)
        inf = np.array([np.inf, -np.inf], out)
        for xt in (np.int8, np.int16, np.int32):
            got = odq.dequantize(x.astype(xt).reshape(2, -1), inf, axes=[0])
            with np.errstate(invalid="ignore"):  # infinity times zero: the NaN expected
                want = (x.astype(np.float64).reshape(2, -1) * inf.astype(np.float64)[:, None]).astype(out)
            assert same_bits(got, want), xt


def test_narrow_held_rows_are_computed_from_the_scale():
    """Rows of 2-8 elements of one value each, consecutive values, a new window every tile: "tiles
    narrow", in tiles of up to ``TILE_NARROW``; rows of 9 or more, a repeated window, or rows whose values
    are not consecutive are spread."""
    layout, plan = reference._loop_layout, reference._plan
    for shape, axes, want in [
        ((165870, 6), (0,), "tiles narrow"),
        ((19, 2910, 3, 6), (0, 1, 2), "tiles narrow"),  # the axes merged: consecutive values
        ((1 << 20, 2), (0,), "tiles narrow"),
        ((1 << 20, 8), (0,), "tiles narrow"),
        ((1 << 20, 9), (0,), "tiles spread"),  # wider than NARROW_MAX
        ((165870, 6), (1,), "tiles spread"),  # runs of the scale, the same window every tile
        ((4096, 3, 5), (0, 2), "tiles spread"),  # rows of 5 varying along the last axis
        ((4096, 5, 3), (0,), "tiles spread"),  # the non-axis dims merged: rows of 15
    ]:
        got = plan(reference._layout(shape, axes))
        assert layout(got) == want, (shape, axes)
        if want == "tiles narrow":
            assert reference.TILE_MAX < got[2] <= 2 * reference.TILE_NARROW
    # joined rows whose values are not consecutive (an axis dim under a broadcast one) stay spread
    lay = reference._layout((4096, 3, 7, 4), (0, 2))
    assert layout(plan(lay)) == "tiles spread"


def test_rows_in_blocks_where_tiles_read_new_windows():
    """Rows of 9 or more elements beside runs of the scale or of one value each, where every tile (or
    every other) reads a new window, are computed in vector blocks from the scale itself ("tiles
    blocks", rows of runs of 64-127 joined too; a row narrower than a block in one block) where the loop
    can (exact float32 products: f16 where the CPU converts it); where more tiles read one window, or the
    rows are narrower, or the types are others, the layouts are as they were."""
    if _fused.available():
        from onnx_dequant import _jit

        assert reference.BLOCK_MIN == _jit.BLOCK_RUN
        bf16 = ml_dtypes.bfloat16
        for x, out in [(np.int8, np.float32), (np.uint16, np.float32), (ml_dtypes.int4, np.float32)]:
            assert _fused.blocks(x, out)
        for x, out in [(np.uint8, bf16), (np.int16, bf16), (ml_dtypes.uint4, bf16)]:
            assert _fused.blocks(x, out)
        for x, out in [(np.int32, np.float32), (np.int32, np.float16), (np.int32, bf16), (np.int8, np.float64)]:
            assert not _fused.blocks(x, out)  # float64 work
        assert _fused.blocks(np.int8, np.float16) == _jit.HARDWARE_F16
        # products rounded to odd first: where the CPU rounds toward zero in a vector (AVX-512)
        for x in (np.int16, np.uint16):
            assert _fused.blocks(x, np.float16) == _jit.HARDWARE_ODD
        assert reference._blocks_for(np.int8, np.float32) == math.inf
        assert reference._blocks_for(np.uint8, bf16) == reference.BLOCK_WASTE
        assert reference._blocks_for(np.uint8, bf16, True) == reference.BLOCK_WASTE_ZP > reference.BLOCK_WASTE
        assert reference._blocks_for(np.int8, np.float32, True) == math.inf
        assert reference._blocks_for(np.int32, np.float32) == 0
    layout, plan = reference._loop_layout, reference._plan
    for shape, axes, want in [
        ((13457, 5, 37), (0, 2), "tiles blocks"),  # five rows a window
        ((3000, 60, 37), (0, 2), "tiles blocks"),  # two tiles a window
        ((400, 8, 100), (0, 2), "tiles blocks"),  # rows of 64-127, which ran as rows
        ((1031, 2, 16), (0, 2), "grouped blocks"),  # runs of 16 read by 2 rows: narrow where the CPU permutes
        ((65536, 37), (0,), "held rows"),  # one value a row: narrow where the CPU permutes lanes
        ((20000, 5, 37), (0, 1), "held rows"),
        ((2048, 2, 4, 37), (0, 2), "tiles blocks"),  # one value a row, two tiles a window
        ((300, 200, 37), (0, 2), "tiles spread"),  # four tiles a window: spread once for them
        ((1031, 2, 15), (0, 2), "grouped blocks"),  # runs narrower than a block: narrow in windows, else a block each
        ((1031, 2, 40), (0, 2), "tiles blocks"),  # runs wider than a window
        ((65536, 9), (0,), "held rows"),  # rows of 9-15 of one value
        ((65536, 8), (0,), "tiles narrow"),  # rows of 2-8 of one value: as NARROW_MAX says
        ((1031, 2, 8), (0, 2), "grouped rows"),  # runs of 2-8
        ((1031, 3, 6), (0, 2), "grouped rows"),  # runs of 6 in groups of 3: whole vectors in windows
        ((1031, 23, 3), (0, 2), "tiles spread"),  # runs of 3 in groups of 23 fill whole vectors only in 69
        ((4, 5, 93418, 3, 1), (1, 3, 4), "tiles spread"),  # tiles of 26 rows, all one run: no group of vectors
        ((54, 9623, 4, 7), (0, 3), "tiles spread"),  # tiles of 4 rows (9623 is prime), all one run
        ((1031, 100), (0,), "rows held"),  # rows of 64 or more of one value: as they are
        ((300, 100), (1,), "tiles spread"),  # every tile reads one window
        ((4, 16, 256), (0, 2), "rows varying"),  # wide rows
    ]:
        got = plan(reference._layout(shape, axes), math.inf)
        want = on_this_cpu(want)
        assert layout(got, math.inf) == want, (shape, axes)
        if want == "tiles blocks":
            assert reference.TILE_MAX < got[2] <= 2 * reference.TILE_NARROW
            assert layout(plan(reference._layout(shape, axes))) != want  # not for other types
    # f16/bf16 outputs (bound by their arithmetic): only rows whose blocks compute little more than the row
    # (runs beside the scale: held rows of consecutive values run narrow where the CPU permutes lanes)
    half = reference.BLOCK_WASTE
    for shape, axes, want in [
        ((300, 2, 16), (0, 2), "grouped blocks"),
        ((300, 2, 24), (0, 2), "grouped blocks"),  # 32 elements for 24 in blocks
        ((300, 2, 40), (0, 2), "tiles blocks"),  # 48 for 40: runs wider than a window
        ((13457, 5, 37), (0, 2), "tiles blocks"),  # 48 for 37
        ((300, 2, 20), (0, 2), "grouped rows"),  # 32 for 20 in blocks
        ((3000, 5, 17), (0, 2), "tiles spread"),  # 85 vectors to fill: no windows
        ((300, 2, 12), (0, 2), "grouped blocks"),  # 16 for 12
        ((300, 2, 11), (0, 2), "grouped rows"),  # 16 for 11
    ]:
        assert layout(plan(reference._layout(shape, axes), half), half) == on_this_cpu(want), (shape, axes)
    # with a zero point, which a spread tile spreads too: rows of 9-16 and 18 or more
    half = reference.BLOCK_WASTE_ZP
    for shape, axes, want in [
        ((1212, 2, 10), (0, 2), "grouped blocks"),  # 16 for 10
        ((300, 2, 9), (0, 2), "grouped blocks"),
        ((300, 2, 17), (0, 2), "grouped rows"),  # 32 for 17
        ((300, 2, 20), (0, 2), "grouped blocks"),  # 32 for 20
        ((3000, 5, 17), (0, 2), "tiles spread"),
    ]:
        assert layout(plan(reference._layout(shape, axes), half), half) == on_this_cpu(want), (shape, axes)


def test_narrow_tiles_of_a_prime_dim_and_of_one_shared_window():
    """Held rows of consecutive values ("tiles narrow"): where ``TILE_NARROW`` would give tiles of a few rows
    (a dim twice a prime), the tile takes all of the dim; and where the CPU permutes lanes and the loop
    computes blocks, a tile whose window every tile reads runs narrow too, not spread once a call; the
    NumPy loop's bits either way."""
    layout, plan = reference._loop_layout, reference._plan
    got = plan(reference._layout((2, 2, 3517, 7, 8), (1, 2)), math.inf)  # 7034 rows of 56: divisors 2, 3517
    assert layout(got, math.inf) == "tiles narrow"
    assert got[2] == 3517 * 56 and got[0].tolist() == [2, 2]
    bf16 = ml_dtypes.bfloat16
    blocks = reference._blocks_for(np.int8, bf16)
    shared = plan(reference._layout((2, 2, 3517, 7, 3), (1, 2)), blocks)  # all 7034 rows: one window
    assert not shared[1].any()
    assert layout(shared, blocks) == ("tiles narrow" if blocks and _fused.permutes() else "tiles spread")
    if not _fused.available():
        return
    rng = np.random.default_rng(21)
    # ``NARROW_PAIRS``' types (i8 -> f32 with a zero point, i8 -> bf16 without): their loops compiled once
    for shape, out, has_z in (((2, 2, 3517, 7, 8), np.float32, True), ((2, 2, 3517, 7, 3), bf16, False)):
        x = rng.integers(-128, 128, shape).astype(np.int8)
        s = rng.standard_normal((2, 3517)).astype(out)
        z = rng.integers(-128, 128, (2, 3517)).astype(np.int8) if has_z else None
        with loop_kind("numpy"):
            want = odq.dequantize(x, s, z, axes=(1, 2))
        with loop_kind("fused"):
            assert same_bits(odq.dequantize(x, s, z, axes=(1, 2)), want), shape


def test_tile_plans():
    """Narrow rows are joined into tiles (outer dims split where one is too large); wide rows are not."""
    # rows of 64-127: as they are, unless every tile reads one run of the scale
    layout = reference._loop_layout
    for shape, axes, rows in [
        ((1031, 100), (0,), "rows held"),
        ((1031, 3, 100), (0, 2), "rows varying"),
        ((300, 100), (1,), "tiles spread"),
        ((4, 50, 80), (0, 2), "rows varying"),
    ]:
        assert layout(reference._tile(reference._layout(shape, axes))) == rows
    lay = reference._layout((1 << 20, 8), (0,))
    dims, strides, tile, pattern, varies = reference._tile(lay)
    assert tile == reference.TILE_MAX and not varies
    assert dims.tolist() == [(1 << 20) * 8 // tile] and strides.tolist() == [tile // 8]
    assert len(pattern) == tile // 8 and pattern.tolist()[:3] == [0, 1, 2]  # rows of 8: each row's offset
    dims, strides, tile, pattern, varies = reference._tile(reference._layout((1 << 20, 4), (1,)))
    # a per-channel scale over rows of 4: every row's run starts at the scale's start
    assert strides.tolist() == [0] and pattern.tolist()[:3] == [0, 0, 0] and len(pattern) == tile // 4 and varies
    dims, strides, tile, pattern, varies = reference._tile(reference._layout((1 << 14, 3, 16), (0, 2)))
    assert tile == 1536 and len(pattern) == 96 and varies  # 32 x 3 rows of 16, each run at its row's offset
    assert pattern.tolist()[:7] == [0, 0, 0, 16, 16, 16, 32] and strides.tolist() == [32 * 16]
    dims, strides, tile, pattern, _ = reference._tile(reference._layout((4099, 3), (1,)))
    assert tile == 2046 and dims.tolist() == [7]  # a prime outermost dim: the last tile runs past the end
    dims, strides, tile, pattern, _ = reference._tile(reference._layout((4099, 5, 3), (1,)))
    assert tile == 2040 and dims.tolist() == [31] and strides.tolist() == [0]  # 136 rows of 5 x 3 a tile
    dims, strides, tile, pattern, _ = reference._tile(reference._layout((11, 13, 5, 17509, 2), (1, 3)))
    assert tile == 17509 * 2 and dims.tolist() == [11, 13, 5]  # an inner prime dim: all of it in a tile
    dims, strides, tile, pattern, _ = reference._tile(reference._layout((601, 3), (1,)))
    assert tile == 1803 and dims.tolist() == []  # small enough: one tile
    dims, strides, tile, pattern, _ = reference._tile(reference._layout((5, 61835, 44), (1,)))
    # 61835 = 5 x 83 x 149: rows of 44 in tiles of 5 under TILE_MAX, so of 83 (up to twice TILE_MAX)
    assert tile == 83 * 44 and dims.tolist() == [5, 745] and strides.tolist() == [0, 83]
    dims, strides, tile, pattern, _ = reference._tile(reference._layout((8, 4096), (0,)))
    assert tile == 4096 and len(pattern) == 0  # wide rows run as they are
    dims, strides, tile, pattern, _ = reference._tile(reference._layout((6, 7, 2239, 4, 14), (2,)))
    # rows of 56 under a prime dim too large for a whole tile of TILE_WHOLE, but every tile reads one
    # scale window (the dim outside is not an axis): all of it joins, up to TILE_ONCE
    assert tile == 2239 * 56 and len(pattern) == 2239 and dims.tolist() == [42] and strides.tolist() == [0]
    assert reference._loop_layout(reference._tile(reference._layout((6, 7, 2239, 4, 14), (2,)))) == "tiles spread"
    dims, strides, tile, pattern, _ = reference._tile(reference._layout((6, 7, 2239, 4, 14), (0, 2)))
    # the same under an axis: the window would change every tile, so no dim joins and the rows run as
    # they are
    assert tile == 56 and len(pattern) == 0 and dims.tolist() == [6, 7, 2239] and strides.tolist() == [2239, 0, 1]


def test_out_argument():
    x = np.arange(12, dtype=np.uint8).reshape(3, 4)
    s = np.array([1.0, 2.0, 4.0], np.float32)
    buf = np.full((3, 4), np.nan, np.float32)
    assert odq.dequantize(x, s, axes=[0], out=buf) is buf
    assert same_bits(buf, odq.dequantize(x, s, axes=[0]))
    for bad in (np.empty((4, 3), np.float32), np.empty((3, 4), np.float64), np.empty((4, 3), np.float32).T, [0]):
        with pytest.raises(odq.DequantizeError, match="out must be"):
            odq.dequantize(x, s, axes=[0], out=bad)


@pytest.mark.parametrize("rows", [4, 1 << 10])  # the NumPy loop, the fused loop (calls cut where apart)
@pytest.mark.parametrize("alias", ["x", "s", "z"])
def test_out_overlapping_an_input_reads_every_input_first(cut_calls, rows, alias):
    rng = np.random.default_rng(rows)
    arrays = {
        "x": rng.integers(-1000, 1000, (rows, 256)).astype(np.int32),
        "s": rng.uniform(0.1, 1, (rows, 256)).astype(np.float32),
        "z": rng.integers(-5, 5, (rows, 256)).astype(np.int32),
    }
    expected = odq.dequantize(arrays["x"], arrays["s"], arrays["z"], axes=(0, 1))
    # the output half a tensor past the input's start: written in order, it would overwrite the
    # input's second half before reading it
    a = arrays[alias]
    both = np.concatenate([a.ravel(), np.zeros(a.size // 2, a.dtype)])
    arrays[alias] = both[: a.size].reshape(a.shape)
    out = both[a.size // 2 :].view(np.float32).reshape(a.shape)
    got = odq.dequantize(arrays["x"], arrays["s"], arrays["z"], axes=(0, 1), out=out)
    assert got is out and same_bits(got, expected)


def test_scalar_and_zero_size_inputs():
    assert odq.dequantize(np.int8(-3), np.float32(0.5), np.int8(1)).shape == ()
    assert float(odq.dequantize(np.int8(-3), np.float32(0.5), np.int8(1))) == -2.0
    y = odq.dequantize(np.zeros((0, 4), np.uint8), np.ones(4, np.float32), axes=[1])
    assert y.shape == (0, 4) and y.dtype == np.float32


def test_special_scales_flow_through():
    x = np.array([1, 0, -1, 2], dtype=np.int8)
    for s, want in [(0.0, [0.0, 0.0, -0.0, 0.0]), (np.inf, [np.inf, np.nan, -np.inf, np.inf])]:
        got = odq.dequantize(x, np.array(s, np.float32))
        np.testing.assert_array_equal(got, np.array(want, np.float32))
    assert np.isnan(odq.dequantize(x, np.array(np.nan, np.float32))).all()


def test_4bit_inputs():
    x = np.array([-8, 7, 0, 3], dtype=ml_dtypes.int4)
    zp = np.array(7, dtype=ml_dtypes.int4)
    got = odq.dequantize(x, np.array(0.25, np.float16), zp)
    assert got.dtype == np.float16 and got.tolist() == [-3.75, 0.0, -1.75, -1.0]


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: odq.dequantize([1, 2], np.float32(1)), "Input must be a NumPy array, got list"),
        (lambda: odq.dequantize(np.int8([1]), 1.0), "Scale must be a NumPy array, got float"),
        (
            lambda: odq.dequantize(np.float32([1]), np.float32(1)),
            "Zero point / input element type (f32) must be a quantized type",
        ),
        (
            lambda: odq.dequantize(np.int8([1]), np.float32(1), np.uint8(0)),
            "Zero point element type (u8) must match input element type (i8)",
        ),
        (
            lambda: odq.dequantize(np.int8([1]), np.float32(1), dtype="f64"),
            "Scale element type (f32) must match output element type (f64)",
        ),
        (
            lambda: odq.dequantize(np.int8([1]), np.float32(1), dtype="i8"),
            "Output element type (i8) must be a floating point type",
        ),
        (lambda: odq.dequantize(np.int8([1]), np.float32(1), dtype="q7"), "Unknown element type 'q7'"),
        (lambda: odq.dequantize(np.int8([[1]]), np.float32([1]), axes=[0, 0]), "must be distinct"),
        (lambda: odq.dequantize(np.int8([[1]]), np.float32([1]), axes=[-1]), "must not be negative"),
        (
            lambda: odq.dequantize(np.int8([[1]]), np.float32([1]), axes=[2]),
            "Quantization axis (2) must be less than input shape rank (2)",
        ),
        (
            lambda: odq.dequantize(np.int8([[1, 2]]), np.float32([1]), axes=[1]),
            "Scale / zero point shape ({1}) must match input shape ({1,2}) at the quantization axes (AxisSet{1})",
        ),
        (
            lambda: odq.dequantize(np.int64([1]), np.float32(1)),
            "Zero point / input element type (i64) must be a quantized type",
        ),
        (lambda: odq.dequantize(np.array(["a"]), np.float32(1)), "Unsupported element type"),
    ],
)
def test_bad_input_is_a_dequantize_error(call, message):
    with pytest.raises(odq.DequantizeError) as e:
        call()
    assert message in str(e.value)


def test_small_inputs_never_import_numba():
    """Inputs under ``FUSED_MIN_ELEMENTS`` run the NumPy loop, and a process that only dequantizes such
    inputs never imports Numba (its import and the loop's first compilation are the large one-off
    costs)."""
    code = (
        "import sys, numpy as np, onnx_dequant as odq\n"
        "from onnx_dequant import reference\n"
        "x = np.arange(reference.FUSED_MIN_ELEMENTS - 1, dtype=np.int64).astype(np.int8)\n"
        "odq.dequantize(x, np.float32(0.5), np.int8(1))\n"
        "print('numba' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]


def test_checks_are_kept_per_argument_types_and_errors_are_not():
    """The contract's checks are kept for the next call with the same argument types (a call's fixed cost):
    axes given as a list, a tuple or a NumPy array give the same result, and a call that breaks the
    contract raises every time, with the same message."""
    x = np.arange(24, dtype=np.int8).reshape(2, 3, 4)
    s = np.linspace(0.5, 2, 3, dtype=np.float32)
    want = odq.dequantize(x, s, axes=(1,))
    for axes in ([1], (1,), np.array([1]), [np.int64(1)]):
        assert same_bits(odq.dequantize(x, s, axes=axes), want)
    messages = set()
    for _ in range(2):
        with pytest.raises(odq.DequantizeError) as e:
            odq.dequantize(x, s, axes=(2,))
        messages.add(str(e.value))
    assert len(messages) == 1 and "(AxisSet{2})" in messages.pop()
    assert same_bits(odq.dequantize(x, s, axes=(1,)), want)  # the good types still check out


@pytest.mark.parametrize(
    ("kept", "other", "message"),
    [
        ({"axes": (1,)}, {"axes": (True,)}, "Quantization axis (True) must be an integer"),
        ({"axes": (1,)}, {"axes": (1.0,)}, "Quantization axis (1.0) must be an integer"),
        ({"axes": [1]}, {"axes": [1.0]}, "Quantization axis (1.0) must be an integer"),
        ({"axes": {1}}, {"axes": {1.0}}, "Quantization axis (1.0) must be an integer"),
        ({"axes": (1,)}, {"axes": (np.True_,)}, "must be an integer"),
        ({"axes": (1,)}, {"axes": np.array([1.0])}, "must be an integer"),
        ({"axes": (1,), "dtype": 1}, {"axes": (1,), "dtype": True}, "Unknown element type True"),
        ({"axes": (1,), "dtype": 1}, {"axes": (1,), "dtype": 1.0}, "Unknown element type 1.0"),
    ],
)
def test_a_kept_call_lets_through_no_equal_axes_or_dtype_of_another_type(kept, other, message, fresh_plans):
    """A kept call's checks are not another call's whose axes or dtype equal its own but are of types
    the contract refuses (``True == 1`` and ``1.0 == 1`` as cache keys): that call raises, as it does
    when nothing is kept."""
    x = np.arange(24, dtype=np.int8).reshape(2, 3, 4)
    s = np.linspace(0.5, 2, 3, dtype=np.float32)
    odq.dequantize(x, s, **kept)
    with pytest.raises(odq.DequantizeError) as e:
        odq.dequantize(x, s, **other)
    assert message in str(e.value)
    reference._checked.cache_clear()
    with pytest.raises(odq.DequantizeError) as fresh:
        odq.dequantize(x, s, **other)
    assert str(fresh.value) == str(e.value)
    odq.dequantize(x, s, axes=1)  # a scalar kept, then one of another type
    with pytest.raises(odq.DequantizeError, match="must be a set of axis indices, got True"):
        odq.dequantize(x, s, axes=True)


@pytest.mark.parametrize(
    ("axes", "want"),
    [
        (np.array(1), (1,)),
        (np.array([], np.float64), ()),
        (np.array([], np.int64), ()),
        (np.array([1], np.uint8), (1,)),
    ],
)
def test_axes_as_arrays_are_kept_like_tuples(axes, want, fresh_plans):
    """An integer array's axes (0-d or 1-D) and an empty array of any type are kept as the tuple they
    mean (``np.array([])`` is float64): not checked afresh on every call."""
    x = np.arange(24, dtype=np.int8).reshape(4, 6)
    s = np.linspace(0.5, 2, 6, dtype=np.float32) if want else np.float32(0.5)
    expected = odq.dequantize(x, s, axes=want)
    odq.dequantize(x, s, axes=axes)
    before = reference._checked.cache_info()
    assert same_bits(odq.dequantize(x, s, axes=axes), expected)
    after = reference._checked.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 0)


@pytest.mark.parametrize("axes", [np.ma.masked_array(1), np.asarray(1).view(np.recarray), np.ma.masked_array([1])])
def test_axes_as_an_array_subclass_are_read_as_the_contract_reads_them(axes):
    """An array subclass's axes (a masked array's, say) are left to the contract, which reads a 0-d one's
    value and iterates a 1-D one: not iterated as a key (a 0-d array cannot be)."""
    x = np.arange(12, dtype=np.int8).reshape(3, 4)
    s = np.linspace(0.5, 2, 4, dtype=np.float32)
    assert same_bits(odq.dequantize(x, s, axes=axes), odq.dequantize(x, s, axes=(1,)))


def test_an_error_of_an_input_in_the_other_byte_order_is_its_own():
    """An input in the other byte order that breaks the contract otherwise raises that error alone, not
    chained to the lookup of its element type."""
    x = np.arange(12, dtype=">i2").reshape(3, 4)
    with pytest.raises(odq.DequantizeError) as e:
        odq.dequantize(x, np.ones(3, np.float32), axes=(1,))
    with pytest.raises(odq.DequantizeError) as native:
        odq.dequantize(x.astype(np.int16), np.ones(3, np.float32), axes=(1,))
    assert str(e.value) == str(native.value)
    assert e.value.__context__ is None and e.value.__cause__ is None


def test_inputs_and_out_in_the_other_byte_order_give_the_same_bits():
    """Arrays in the other byte order (``'>i2'``, ``'>f4'``) are dequantized as their values, as the
    session's kernels take them; an ``out`` in the other byte order gets the result's values."""
    x = np.arange(-12, 12, dtype=np.int16).reshape(2, 3, 4)
    s = np.linspace(0.5, 2, 3, dtype=np.float32)
    z = np.arange(3, dtype=np.int16)
    want = odq.dequantize(x, s, z, axes=(1,))
    swapped = (x.astype(">i2"), s.astype(">f4"), z.astype(">i2"))
    assert same_bits(odq.dequantize(*swapped, axes=(1,)), want)
    out = np.empty(x.shape, ">f4")
    assert odq.dequantize(x, s, z, axes=(1,), out=out) is out
    assert same_bits(out.astype(np.float32), want)
    with pytest.raises(
        odq.DequantizeError, match=r"^Zero point element type \(i32\) must match input element type \(i16\)$"
    ):
        odq.dequantize(x.astype(">i2"), s.astype(">f4"), z.astype(">i4"), axes=(1,))


@pytest.mark.parametrize(
    ("make", "told"),
    [
        (lambda: np.empty((4, 3, 2), np.float32).transpose(2, 1, 0), "float32 (2, 3, 4), not C-contiguous"),
        (lambda: np.empty((2, 3, 4), np.float32)[:, :, :].copy(), "float32 (2, 3, 4), read-only"),
        (lambda: np.empty((2, 3, 4), np.float64), "float64 (2, 3, 4)"),
        (lambda: np.empty((2, 3), np.float32), "float32 (2, 3)"),
        (lambda: [0.0], "list"),
    ],
)
def test_an_unusable_out_is_refused_saying_what_is_wrong(make, told):
    x = np.arange(24, dtype=np.int8).reshape(2, 3, 4)
    out = make()
    if told.endswith("read-only"):
        out.flags.writeable = False
    with pytest.raises(odq.DequantizeError) as e:
        odq.dequantize(x, np.float32(0.5), out=out)
    assert str(e.value) == f"out must be a writeable C-contiguous f32 array of shape (2, 3, 4), got {told}"


@pytest.mark.parametrize("axes", [{0, 2}, [2, 0], frozenset({0, 2}), np.array([0, 2]), range(0, 3, 2)])
def test_axes_spelled_as_a_set_or_an_iterable_are_checked_once(axes, fresh_plans):
    """Axes given as a set (nGraph's AxisSet), a list, an integer array or a range are checked once and
    kept like a tuple: the next call of the same types finds them (a call checked afresh costs tens of
    microseconds)."""
    x = np.arange(60, dtype=np.int8).reshape(3, 4, 5)
    s = np.linspace(0.5, 2, 15, dtype=np.float32).reshape(3, 5)
    want = odq.dequantize(x, s, axes=(0, 2))
    odq.dequantize(x, s, axes=axes)
    before = reference._checked.cache_info()
    for _ in range(3):
        assert same_bits(odq.dequantize(x, s, axes=axes), want)
    after = reference._checked.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (3, 0)


def test_equal_axes_of_other_integer_types_share_the_kept_checks(fresh_plans):
    """Axes equal to a kept call's but of other integer types (NumPy's, which the contract takes too) use
    the kept checks: no call is checked afresh."""
    x = np.arange(60, dtype=np.int8).reshape(3, 4, 5)
    s = np.linspace(0.5, 2, 5, dtype=np.float32)
    want = odq.dequantize(x, s, axes=(2,))
    odq.dequantize(x, s, axes=(np.int64(2),))
    before = reference._checked.cache_info()
    for _ in range(3):
        assert same_bits(odq.dequantize(x, s, axes=(np.int64(2),)), want)
        assert same_bits(odq.dequantize(x, s, axes=(2,)), want)
    after = reference._checked.cache_info()
    assert after.misses == before.misses


@pytest.mark.parametrize(
    ("pattern", "width", "varies", "want"),
    [
        ([0, 0, 0, 4, 4, 4], 4, True, 3),
        ([0, 0, 2, 2, 4, 4], 2, True, 2),
        ([0, 0, 0, 4, 4], 4, True, 1),  # uneven groups
        ([0, 0, 4, 4, 0, 4], 4, True, 1),  # a run read by rows that are not consecutive
        ([0] * 8 + [3] * 8, 3, True, 8),  # rows of 3 and 5: in groups of 8 rows or more
        ([0] * 8 + [5] * 8, 5, True, 8),
        ([0, 0, 0, 3, 3, 3], 3, True, 1),
        ([0, 0, 0, 0], 6, True, 1),  # rows of 6 and 7: a row at a time
        ([0, 0, 0, 0], 9, True, 1),  # rows wider than ``NARROW_MAX``
        ([0, 0, 0, 0], 8, False, 1),  # one value a row: spread as values
        ([0, 4, 8], 4, True, 1),  # one row a run
    ],
)
def test_spread_groups_found_only_where_they_hold(pattern, width, varies, want):
    """``reference._spread_group``: the rows per group that ``_jit._spread_groups`` fills, 1 (the
    row-by-row spread) wherever the groups are not whole and alike or their rows not ``GROUP_WIDTHS``
    elements."""
    assert reference._spread_group(np.array(pattern, np.uint32), width, varies) == want


def runs_read_by(width: int, group: int, runs: int) -> list[int]:
    """A tile's pattern: ``runs`` consecutive runs of ``width`` values, each read by ``group`` rows."""
    return [r * width for r in range(runs) for _ in range(group)]


@pytest.mark.parametrize(
    ("pattern", "width", "want"),
    [
        (runs_read_by(4, 4, 4), 4, 4),  # 4 runs of 4 values, 16 vectors' elements: 16 rows
        (runs_read_by(4, 4, 4) + [16], 4, 4),  # the tile's last group a part of one
        (runs_read_by(4, 4, 2), 4, 0),  # a tile of fewer rows than a group of vectors: a run at a time
        (runs_read_by(4, 5, 4), 4, 5),  # 4 runs a vector group: 80 elements, 5 vectors
        (runs_read_by(3, 4, 4), 3, 4),  # runs of 3: 4 runs, 12 values, fill 3 vectors
        (runs_read_by(3, 3, 16), 3, 3),  # runs of 3 in groups of 3: whole vectors only in windows (16 runs, 9)
        (runs_read_by(5, 2, 8), 5, 2),  # 8 runs of 5: 5 vectors, in windows
        ([0] * 8 + [5] * 8, 5, 8),  # runs of 5: 2 runs, 10 values, 5 vectors
        (runs_read_by(2, 64, 7), 2, 64),  # 8 runs of 2 read by 64 rows each: 64 vectors; 7 runs fill 56
        ([0] * 64 + [17] * 64, 17, 0),  # one run fills 68 vectors
        (runs_read_by(2, 63, 8), 2, 63),
        ([0, 0, 4, 4, 0, 0], 4, 0),  # a run read again
        ([0, 0, 8, 8], 4, 0),  # runs that are not consecutive
        ([0, 4, 8, 12], 4, 1),  # one row a run: consecutive values
        (runs_read_by(17, 2, 8), 17, 2),  # runs wider than a vector: 8 runs, 17 vectors, in windows
        (runs_read_by(25, 4, 4), 25, 4),
        ([0, 0, 32, 32], 32, 2),
        ([0, 0, 33, 33], 33, 0),  # runs wider than a window
        ([0] * 3 + [31] * 3, 31, 0),  # 16 runs of 31 in groups of 3 fill 93 vectors
        ([0] * 26, 3, 0),  # rows that all read one run, fewer than 8 runs' (``(4,5,93418,3,1)`` {1,3,4})
        ([0] * 4, 7, 0),  # 4 rows of 7, fewer than 4 runs'
    ],
)
def test_lane_groups_found_only_where_they_hold(pattern, width, want):
    """``reference._lane_group``: the rows per run where every run is read by that many consecutive rows,
    consecutive runs, and some number of runs of up to 16 values, or of runs of up to ``WINDOW_MAX`` values,
    fills whole vectors in at most ``NARROW_VECTORS_MAX`` of them, the tile holding such a group of vectors;
    else 0 (the tile is spread, or computed in blocks)."""
    assert reference._lane_group(np.array(pattern, np.uint32), width) == want


def test_lane_windows_hold_every_vectors_values():
    """Where a group's runs fill whole vectors only beyond 16 values (``reference._lane_runs``), each vector's 16
    elements read values within 32 of the least of them (the two vectors ``_jit.narrow_run`` permutes), and no
    vector's 32 reach past ``WINDOW_MAX - 1`` beyond the group's own values (the room the loop checks): every
    run of 1-40 values in groups of 1-80 rows. Elsewhere the group's values fit one vector."""
    windowed = 0
    for width in range(1, 41):
        for group in range(1, 81):
            runs = reference._lane_runs(width, group)
            if not runs:
                assert width > reference.WINDOW_MAX or (width * group * 16 // np.gcd(width * group, 16)) > 16 * 63
                continue
            period = width * group
            t = np.arange(runs * period)
            assert len(t) % 16 == 0 and len(t) // 16 <= reference.NARROW_VECTORS_MAX
            values = (t // period * width + t % period % width).reshape(-1, 16)
            if runs * width <= 16:
                assert values.max() < 16, (width, group)
                continue
            windowed += 1
            least = values.min(axis=1)
            assert (values.max(axis=1) - least).max() < reference.WINDOW_MAX, (width, group)
            assert least.max() + reference.WINDOW_MAX <= runs * width + reference.WINDOW_MAX - 1
    assert windowed > 300


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_threads_calling_at_once_cut_or_not_get_their_own_results(cut_calls):
    """Calls from several threads at once: one holds the helpers and cuts, the others run in one piece."""
    rng = np.random.default_rng(5)
    shape, axes = (300, 7, 40), (0, 2)
    jobs = []
    for _ in range(6):
        x = rng.integers(-128, 128, shape, dtype=np.int8)
        s = rng.standard_normal((300, 40)).astype(np.float16)
        with loop_kind("numpy"):
            jobs.append((x, s, odq.dequantize(x, s, axes=axes)))
    with loop_kind("fused"), concurrent.futures.ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda j: [odq.dequantize(j[0], j[1], axes=axes) for _ in range(20)], jobs))
    for (_, _, want), outs in zip(jobs, got):
        assert all(same_bits(o, want) for o in outs)


@pytest.mark.skipif(not _fused.available() or not hasattr(os, "fork"), reason="no numba, or no fork")
def test_a_forked_child_cuts_calls_with_helpers_of_its_own(cut_calls):
    """The parent's helper threads are not in a forked child: it starts its own (not waiting forever)."""
    x = np.arange(1 << 16, dtype=np.int32).reshape(256, 256) % 251 - 125
    s = np.linspace(0.5, 2, 256, dtype=np.float32)
    with loop_kind("fused"):
        want = odq.dequantize(x, s, axes=[1])  # the parent's team
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_dequantize_into, args=(q, x, s))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: these hold no lock
        child.start()
    got = q.get(timeout=120)  # before the join: the child's queue flushes as it exits
    child.join(30)
    assert child.exitcode == 0
    assert same_bits(got, want)


def _dequantize_into(q, x, s):
    reference.FUSED_MIN_ELEMENTS = 0
    q.put(odq.dequantize(x, s, axes=[1]))
