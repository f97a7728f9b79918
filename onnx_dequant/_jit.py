"""The compiled half of ``_fused`` (imported only when Numba is installed): the fused loop and the
scalar conversions it inlines, all module-level so that Numba's on-disk cache can key them (a closure
over a compiled function is keyed by a per-process id and would be compiled again in every process;
``fused_for``'s closures hold NumPy scalars alone, which the cache keys by value).

The software conversions are branch-free, so that the loops calling them vectorize (Numba widens
integer arithmetic to 64 bits: every intermediate is cast back to uint32, so the lanes stay 32 bits
wide): f16/bf16 bits -> f32 (exact), f32 -> f16/bf16 bits (round to nearest even), f64 -> f16/bf16
bits rounded once (through float32 rounded to odd; the loop's float64 products, of an integer and a
scale of the output type, rounded in float64's own bits), and a float32 product rounded to odd from its
exact error (a fused multiply-add), so that 16-bit inputs reach f16 in float32 work (8-bit inputs'
float32 products, and 16-bit inputs' with bf16 scales, are exact, and are rounded once as they are).
Where the CPU has F16C, its f16 conversions replace the software ones (``HARDWARE_F16``): LLVM does
not always vectorize them, and they are still faster. Where it has AVX512-BF16, held bf16 runs are
rounded by it, in explicit vectors (``HARDWARE_BF16``, ``bf16_run``), and held f16 runs of exact products by
F16C (``f16_run``); the f16 loops are vectorized at 512 bits (``wide_vectors``).

Everything the loop does not compute reaches it as a marker argument whose Numba type selects the code
at compile time: the output type (``MARKERS``: the conversions ``load`` and ``store``), 4-bit inputs
(``INT4``, ``UINT4``), a zero point (``ZP``), the work type (a zero of it) and the layout (``LAYOUTS``). Each
combination is compiled alone, without the branches the others need: a loop beside a branch-selected
twin in one outer loop measured 1.5-2.5x slower a row on 128-element rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload

from . import dtypes
from .exactness import f32_work_exact

__all__ = ["INT4", "MARKERS", "PLAIN", "UINT4", "ZP", "fused_for", "narrow", "overlaps", "within"]

PLAIN = np.uint8(0)
"""The marker of f32/f64 outputs (the array's own cast on assignment)."""
MARKERS = {"float16": np.uint16(0), "bfloat16": np.int16(0)}
"""The marker of f16 and bf16 outputs (and scales), which the loop reads and writes as 16-bit patterns."""
ZP = np.int8(0)
"""The marker of a zero point given (``PLAIN``: none, and the loop reads none)."""
INT4 = np.int8(0)
"""The marker of int4 inputs (and zero points), which the loop reads as the bytes ml_dtypes keeps them in
(each value in the low 4 bits, not sign-extended; the high 4 bits, which only a raw view sets, ignored
as ml_dtypes ignores them)."""
UINT4 = np.int16(0)
"""The marker of uint4 inputs (and zero points): bytes read as ``INT4``'s, the low 4 bits alone."""

_u32 = np.uint32
_u64 = np.uint64
_jit = numba.njit(nogil=True, cache=True)
_loop = numba.njit(nogil=True, cache=True, boundscheck=False)  # the loops (whatever NUMBA_BOUNDSCHECK says)
# a loop's parts, inlined by Numba
_part = numba.njit(nogil=True, cache=True, boundscheck=False, inline="always")
# a function called by a loop that allocates nothing, compiled without reference counting: a call (or an
# inlined copy) counts the references of its array arguments, atomically, each time (an odometer step
# per 128-element row measured 2.5x slower so)
_bare = numba.njit(nogil=True, cache=True, boundscheck=False, _nrt=False)


@intrinsic
def f32_bits(typingctx, v):  # pragma: no cover - compiled
    """A float32's bits as uint32."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def f64_bits(typingctx, v):  # pragma: no cover - compiled
    """A float64's bits as uint64."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.uint64(types.float64), codegen


@intrinsic
def bits_f32(typingctx, u):  # pragma: no cover - compiled
    """uint32 bits as a float32."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@intrinsic
def bits_f64(typingctx, u):  # pragma: no cover - compiled
    """uint64 bits as a float64."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.uint64), codegen


@intrinsic
def fma32(typingctx, a, b, c):  # pragma: no cover - compiled
    """``a * b + c`` rounded once (LLVM's fma: the instruction, or the C library's ``fmaf``)."""

    def codegen(context, builder, sig, args):
        f32 = ir.FloatType()
        fma = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32, f32, f32]))
        return builder.call(fma, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


@intrinsic
def wide_vectors(typingctx, kind):  # pragma: no cover - compiled
    """Lets LLVM vectorize the calling function's loops at 512 bits where they write f16 (``kind`` the
    f16 marker of ``MARKERS``): the function attribute ``prefer-vector-width=512``, which LLVM's tuning
    for most AVX-512 Intel CPUs otherwise holds at 256 bits. An attribute of the function alone (other
    Numba code is compiled as it was), set on each compiled function with such a loop; a no-op without
    AVX-512. Those loops are compute-bound (the conversion, and 16-bit inputs' rounding to odd) and
    measured 1.04-1.4x faster so on a Granite Rapids VM (LLVM's ``rocketlake`` target: i16 -> f16 220 ->
    150 ps an element, loop alone; ``(336960,)`` per tensor 0.84x the time, ``(330,1021)`` ``{1}``
    0.84x). bf16's (integer rounding) measured 0.96-1.08x (per tensor slower: ``(2,168480)`` ``{0}``
    i16 -> bf16 1.08x) and f32's up to 1.29x slower (``(4096,4,4)`` ``{0,2}`` i8 -> f32, bound by
    stores that a 64-byte vector splits across cache lines); both keep 256 bits."""

    f16 = kind == types.uint16

    def codegen(context, builder, sig, args):
        if not f16:
            return context.get_dummy_value()
        # llvmlite's attribute set knows LLVM's keyword attributes alone: a key-value (string) one is
        # added to the set as it is, and printed so (``"key"="value"``) in the function's definition
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return types.void(kind), codegen


@intrinsic
def f16_from_f32_hw(typingctx, u):  # pragma: no cover - compiled
    """float32 bits ``u`` rounded to nearest even in f16, as bits, by the CPU (F16C's ``vcvtps2ph``; NaNs:
    a quiet NaN, sign and the payload's leading bits kept)."""

    def codegen(context, builder, sig, args):
        h = builder.fptrunc(builder.bitcast(args[0], ir.FloatType()), ir.HalfType())
        return builder.bitcast(h, ir.IntType(16))

    return types.uint16(types.uint32), codegen


@_jit
def f16_from_f32_sw(u):  # pragma: no cover - compiled
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


def _compiles_for(feature: str) -> bool:
    """Whether the CPU Numba compiles for has ``feature`` (an LLVM feature name, ``+f16c`` say)."""
    features, name = numba.config.CPU_FEATURES, numba.config.CPU_NAME
    if features:  # NUMBA_CPU_FEATURES: what Numba compiles for
        return feature in features.split(",")
    if name not in (None, "host"):  # a named target (NUMBA_CPU_NAME=generic for portable caches, say)
        return False
    return feature in llvm.get_host_cpu_features().flatten().split(",")


def _hardware_f16() -> bool:
    return _compiles_for("+f16c")


def _hardware_bf16() -> bool:
    return _compiles_for("+avx512bf16")


HARDWARE_F16 = _hardware_f16()
"""Whether the CPU Numba compiles for converts between float32 and f16 itself (F16C): LLVM would
otherwise call a library routine."""

f16_from_f32 = f16_from_f32_hw if HARDWARE_F16 else f16_from_f32_sw
"""float32 bits rounded to nearest even in f16, as bits: the same value either way (NaNs may differ in
payload, which no comparison here looks at)."""


@_jit
def bf16_from_product(u):  # pragma: no cover - compiled
    """float32 bits ``u`` rounded to nearest even in bf16, as bits, for the loop's products: a NaN stays a
    NaN where its low 16 bits are zero, as every NaN the loop forms has (a bf16 scale's NaN, quieted by
    the product, or the default NaN of infinity times zero; float64 work keeps a bf16 payload in the top
    bits, which float32 keeps). Without ``bf16_from_f32``'s NaN test: 2 of about 12 vector operations
    (0.117 -> 0.103 ns an element per tensor, i8 -> bf16)."""
    return np.uint16(_u32(_u32(_u32(u + _u32(0x7FFF)) + _u32(_u32(u >> _u32(16)) & _u32(1))) >> _u32(16)))


@_jit
def bf16_from_f32(u):  # pragma: no cover - compiled
    """float32 bits ``u`` rounded to nearest even in bf16, as bits (any NaN: a quiet NaN, sign kept)."""
    nan = np.uint16(_u32(_u32(_u32(u >> _u32(16)) & _u32(0x8000)) | _u32(0x7FC0)))
    return bf16_from_product(u) if bits_f32(u) == bits_f32(u) else nan


HARDWARE_BF16 = _hardware_bf16()
"""Whether the CPU Numba compiles for rounds float32 to bf16 itself (AVX512-BF16's ``vcvtneps2bf16``,
``bf16_run``)."""

HARDWARE_AVX512 = _compiles_for("+avx512f")
"""Whether the CPU Numba compiles for has AVX-512 (a permutation of 16 lanes by a vector of indices,
``narrow_run``)."""

HARDWARE_ODD = HARDWARE_F16 and HARDWARE_AVX512
"""Whether the CPU Numba compiles for multiplies float32 vectors rounding toward zero by the instruction's
own rounding (AVX-512's embedded rounding, ``odd_product_ir``), and converts to f16 (F16C): 16-bit inputs'
f16 products are then rounded to odd in explicit vectors (``odd_blocks``)."""

BF16_RUN = 16
"""Elements a ``bf16_run`` computes: one 512-bit vector of float32."""


def odd_product_ir(builder, d, s):
    """LLVM IR for the exact product of 16-lane float32 vectors ``d`` (integers) and ``s`` rounded to odd
    in float32, as ``odd_product_f32`` rounds it: the product rounded toward zero (``vmulps`` with
    embedded rounding, ``HARDWARE_ODD``) and its last bit set where the fused multiply-add's error is
    nonzero (an ordered comparison: false for a NaN error, an infinite or NaN factor, which leaves the
    product as it is; an overflow gives the largest float32, which f16 rounds to infinity, as it rounds
    the exact product). Four vector operations where ``odd_product_f32``'s rounding to nearest takes
    seven: 9.9 -> 7.6 us for 67K elements i16 -> f16, loops alone (AMD EPYC Zen 4, 2026-12-05)."""
    vf = d.type
    lanes, i32 = vf.count, ir.IntType(32)
    vi = ir.VectorType(i32, lanes)
    mul = builder.module.declare_intrinsic("llvm.x86.avx512.mul.ps.512", (), ir.FunctionType(vf, [vf, vf, i32]))
    p = builder.call(mul, [d, s, i32(11)])  # _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC
    fma = builder.module.declare_intrinsic(f"llvm.fma.v{lanes}f32", (), ir.FunctionType(vf, [vf, vf, vf]))
    e = builder.call(fma, [d, s, builder.fneg(p)])
    inexact = builder.fcmp_ordered("!=", e, ir.Constant(vf, [0.0] * lanes))
    pb = builder.bitcast(p, vi)
    # a masked or: the last bits' 1s pass an arithmetic fence (which emits nothing), or LLVM folds the
    # select of ``p | 1`` and ``p`` into ``p | zext(inexact)``, two vector operations more (9.2 against 7.6 us)
    fence = builder.module.declare_intrinsic(f"llvm.arithmetic.fence.v{lanes}f32", (), ir.FunctionType(vf, [vf]))
    ones = builder.bitcast(builder.call(fence, [builder.bitcast(ir.Constant(vi, [1] * lanes), vf)]), vi)
    return builder.bitcast(builder.select(inexact, builder.or_(pb, ones), pb), vf)


def bf16_hardware_ir(builder, p):
    """LLVM IR for 16-lane float32 vector ``p`` rounded to nearest even in bf16 bits by the CPU
    (``vcvtneps2bf16``, AVX512-BF16): a subnormal lane is taken for a zero, so ``p`` must hold none."""
    vh = ir.VectorType(ir.IntType(16), p.type.count)
    # declared with i16 lanes, its type in older LLVMs (llvmlite 0.43's LLVM 14), which newer ones upgrade
    fn = builder.module.declare_intrinsic("llvm.x86.avx512bf16.cvtneps2bf16.512", (), ir.FunctionType(vh, [p.type]))
    return builder.call(fn, [p])


def _held_ir(context, builder, sig, args, k, zv, sv, rounding: str, xkind):
    """LLVM IR for ``_held_vector``'s vector at ``k`` (``args``: x, o, ...; ``zv``, ``sv`` the zero point and the
    scale, float32); the input's 16 values as read."""
    x = sig.args[0]
    signed = x.dtype.signed
    biased = xkind == types.int8
    nibble = xkind in (types.int8, types.int16)
    xa = context.make_array(sig.args[0])(context, builder, args[0])
    oa = context.make_array(sig.args[1])(context, builder, args[1])
    lanes, i32 = BF16_RUN, ir.IntType(32)
    vin = ir.VectorType(context.get_data_type(sig.args[0].dtype), lanes)
    vf = ir.VectorType(ir.FloatType(), lanes)
    vh = ir.VectorType(ir.IntType(16), lanes)

    def splat(s):
        one = builder.insert_element(ir.Constant(vf, ir.Undefined), s, ir.Constant(i32, 0))
        return builder.shuffle_vector(
            one, ir.Constant(vf, ir.Undefined), ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
        )

    v = builder.load(builder.bitcast(builder.gep(xa.data, [k]), vin.as_pointer()), align=1)
    if biased:
        v = builder.xor(v, ir.Constant(vin, [8] * lanes))
    if nibble:  # the low 4 bits (``int4_biased``, ``uint4_value``)
        v = builder.and_(v, ir.Constant(vin, [15] * lanes))
    fx = builder.sitofp(v, vf) if signed else builder.uitofp(v, vf)
    f = builder.fsub(fx, splat(zv))
    if rounding == "bf16":
        h = bf16_hardware_ir(builder, builder.fmul(f, splat(sv)))
    elif rounding == "odd bf16":
        h = bf16_hardware_ir(builder, odd_product_ir(builder, f, splat(sv)))
    elif rounding == "f32":  # the float32 product as it is
        p = builder.fmul(f, splat(sv))
        builder.store(p, builder.bitcast(builder.gep(oa.data, [k]), vf.as_pointer()), align=1)
        return v
    else:
        p = odd_product_ir(builder, f, splat(sv)) if rounding == "odd" else builder.fmul(f, splat(sv))
        h = builder.bitcast(builder.fptrunc(p, ir.VectorType(ir.HalfType(), lanes)), vh)
    builder.store(h, builder.bitcast(builder.gep(oa.data, [k]), vh.as_pointer()), align=1)
    return v


def _held_vector(rounding: str):
    """An intrinsic ``(x, o, k, zv, sv, xkind)``: ``o[k : k + BF16_RUN]`` = ``(x[k : k + BF16_RUN] - zv) *
    sv``, one 16-lane vector, rounded by the CPU: to bf16 (``rounding`` "bf16": ``bf16_run``), to f16 from
    an exact product ("f16": ``f16_run``), or to f16 or bf16 through the product rounded to odd ("odd":
    ``odd_run``, "odd bf16": ``odd_bf16_run``; ``HARDWARE_ODD``, the difference exact in float32: 16-bit
    inputs, or i32 ones within the guarded loop's bound)."""

    @intrinsic
    def run(typingctx, x, o, k, zv, sv, xkind):  # pragma: no cover - compiled
        def codegen(context, builder, sig, args):
            _held_ir(context, builder, sig, args, args[2], args[3], args[4], rounding, xkind)
            return context.get_dummy_value()

        return types.void(x, o, types.int64, types.float32, types.float32, xkind), codegen

    return run


def _checked_row(rounding: str):
    """An intrinsic ``(x, o, i, n, zv, sv, limit, xkind)``: ``o[i : i + n]`` = ``(x[i : i + n] - zv) * sv`` of i32
    inputs (``n`` at least ``BF16_RUN``) in ``_held_vector``'s vectors at ``i``, ``i + 16``, ... and the last at
    ``i + n - 16``; whether
    every input lies within ``-limit..limit``, found as they are computed (each lane's largest ``x + limit``
    as uint32: a maximum a vector, and a row's lanes compared with ``2 * limit`` into a mask at its end, not
    reduced to one value: held rows of 64-128 i32 -> f16 0.9x the time). The guarded loop's held rows,
    checked as they are computed, not in a pass of their own before (``within``); other types lower to a
    trap."""

    @intrinsic
    def row(typingctx, x, o, i, n, zv, sv, limit, xkind):  # pragma: no cover - compiled
        def codegen(context, builder, sig, args):
            if sig.args[0].dtype != types.int32:  # a branch other types' loops never run
                _trap(context, builder)
                return ir.Constant(ir.IntType(1), 0)
            lanes = BF16_RUN
            i32, i64 = ir.IntType(32), ir.IntType(64)
            vi = ir.VectorType(i32, lanes)
            n, bound = args[3], builder.trunc(args[6], i32)
            # every ``v + limit`` as uint32 at most ``2 * limit``: ``-limit <= v <= limit``, wrapping or not
            shift = builder.shuffle_vector(
                builder.insert_element(ir.Constant(vi, ir.Undefined), bound, i32(0)),
                ir.Constant(vi, ir.Undefined),
                ir.Constant(vi, [0] * lanes),
            )
            acc = cgutils.alloca_once_value(builder, ir.Constant(vi, [0] * lanes))
            count = builder.sdiv(builder.add(n, i64(lanes - 1)), i64(lanes))
            last = builder.sub(n, i64(lanes))
            umax = builder.module.declare_intrinsic(f"llvm.umax.v{lanes}i32", (), ir.FunctionType(vi, [vi, vi]))
            with cgutils.for_range(builder, count) as loop:
                k = builder.mul(loop.index, i64(lanes))
                k = builder.add(args[2], builder.select(builder.icmp_signed(">", k, last), last, k))
                v = _held_ir(context, builder, sig, args, k, args[4], args[5], rounding, xkind)
                builder.store(builder.call(umax, [builder.load(acc), builder.add(v, shift)]), acc)
            # a lane above ``2 * limit``: one vector compare into a mask and its test, not a reduction (a
            # chain of shuffles)
            twice = builder.shuffle_vector(
                builder.insert_element(ir.Constant(vi, ir.Undefined), builder.add(bound, bound), i32(0)),
                ir.Constant(vi, ir.Undefined),
                ir.Constant(vi, [0] * lanes),
            )
            over = builder.bitcast(builder.icmp_unsigned(">", builder.load(acc), twice), ir.IntType(lanes))
            return builder.icmp_unsigned("==", over, ir.Constant(ir.IntType(lanes), 0))

        return types.boolean(x, o, types.int64, types.int64, types.float32, types.float32, types.int64, xkind), codegen

    return row


bf16_run = _held_vector("bf16")
"""``o[k : k + BF16_RUN]`` = ``(x[k : k + BF16_RUN] - zv) * sv`` rounded to bf16 bits by the CPU
(``vcvtneps2bf16``), one vector each step: the float32 product must be exact (``product_exact``) and
``sv`` not subnormal (the instruction takes a subnormal for a zero; an integer times a normal, zero,
infinite or NaN scale is never subnormal). Its rounding is ``bf16_from_product``'s (to nearest even;
a NaN quieted, which every NaN the loop forms already is). 4-bit bytes are read by their low 4 bits,
int4's biased (``xkind`` ``INT4``: ``int4_biased``), as ``zv`` is. LLVM vectorizes a loop of the conversion written per
element at 4 lanes (175 against 100 ps an element, ``bf16_from_product``'s); this runs at 64-70."""

odd_run = _held_vector("odd")
"""``o[k : k + BF16_RUN]`` = ``(x[k : k + BF16_RUN] - zv) * sv`` of 16-bit inputs rounded once to f16 bits
(``odd_product_ir``, then F16C), one vector each step (``odd_blocks``)."""

odd_bf16_run = _held_vector("odd bf16")
"""``o[k : k + BF16_RUN]`` = ``(x[k : k + BF16_RUN] - zv) * sv`` of i32 inputs within the guarded loop's
bound (``exactness.f32_guard``: the difference exact in float32) rounded once to bf16 bits: the product
rounded to odd (``odd_product_ir``), then to nearest even by the CPU (``vcvtneps2bf16``), one vector each
step (``odd_held``); ``sv`` not subnormal (the instruction takes a subnormal for a zero; an integer times
any other scale is never subnormal)."""

odd_row = _checked_row("odd")
"""``odd_run``'s vectors over a row of i32 inputs, checked as computed (``_checked_row``)."""

odd_bf16_row = _checked_row("odd bf16")
"""``odd_bf16_run``'s vectors over a row of i32 inputs, checked as computed (``_checked_row``)."""

f32_run = _held_vector("f32")
"""``o[k : k + BF16_RUN]`` = ``(x[k : k + BF16_RUN] - zv) * sv`` in float32, stored as it is (f32 outputs of
8/16-bit and 4-bit inputs, ``held_f32``), one vector each step: held rows read and write their arrays at
their offsets, without the slices of ``HELD_BLOCK``'s loop."""

f16_run = _held_vector("f16")
"""``o[k : k + BF16_RUN]`` = ``(x[k : k + BF16_RUN] - zv) * sv`` rounded to f16 bits by the CPU (F16C's
``vcvtps2ph``, as ``f16_from_f32_hw``), one vector each step: the float32 product must be exact
(``product_exact``: 8-bit and 4-bit inputs, ``hardware_f16``). LLVM vectorizes the loop of ``store``'s
conversion at fewer lanes: ``(10,32,349,66)`` ``{1,2}`` u4 -> f16 with a zero point, held rows of 66, 0.18
ns an element against 0.08 in these vectors."""


def _odd(kind, x, wkind) -> bool:
    """Whether inputs of Numba dtype ``x`` to output ``kind`` in work type ``wkind`` are rounded to odd by the
    CPU (``odd_blocks``, ``z_zeros``): 16-bit inputs to f16 in float32 work, where ``HARDWARE_ODD``. Only
    16-bit: a spread zero point reaches ``block_run`` as ``value`` read it, which is its own value for them
    alone (int4's is biased, and ``block_run`` would bias it again)."""
    is16 = isinstance(x, types.Integer) and x.bitwidth == 16
    return HARDWARE_ODD and kind == types.uint16 and wkind == types.float32 and is16


def odd_blocks(kind, x, wkind):  # pragma: no cover - compiled by its overload
    """Whether rows of input array ``x`` and output ``kind`` run in explicit vectors rounded to odd by the
    CPU (``odd_product_ir``, ``_odd``), not in the loops LLVM vectorizes from ``store``. A constant,
    folded where compiled."""


@overload(odd_blocks, jit_options={"nogil": True})
def _odd_blocks(kind, x, wkind):  # pragma: no cover - compiled
    on = _odd(kind, x.dtype, wkind)
    return (lambda kind, x, wkind: True) if on else (lambda kind, x, wkind: False)


BLOCK_RUN = 16
"""Elements a ``block_run`` or ``block_held`` computes: one 512-bit vector of float32."""


class _VectorKinds(NamedTuple):
    """What an explicit-vector intrinsic (``_block``, ``narrow_run``) computes for its argument types: int4
    bytes biased (``xkind`` ``INT4``), 4-bit bytes read by their low 4 bits, a zero point given, the output
    (``"f16"``, ``"bf16"`` or None: f32), the product rounded to odd (``_odd``), and whether the types are
    its at all (else it lowers to a trap: the branch of a loop their layout never runs)."""

    biased: bool
    nibble: bool
    has_z: bool
    half: str | None
    odd: bool
    runs: bool


def _vector_kinds(x, s, out, kind, xkind, zkind) -> _VectorKinds:
    """The ``_VectorKinds`` of these Numba argument types: float32 work where the float32 product is the
    one rounding (``product_exact``, ``f32_work_exact``: 8/16-bit or 4-bit inputs to f32, 8-bit and 4-bit
    ones to f16 and bf16, 16-bit ones to bf16) or is rounded to odd first (16-bit inputs to f16 where
    ``HARDWARE_ODD``), f16 only where the CPU converts it (``HARDWARE_F16``); the scale in the output's
    type (``kind``, ``MARKERS``: its bits) or spread in float32."""
    half = {types.uint16: "f16", types.int16: "bf16"}.get(kind)
    name = half or ("f32" if s.dtype == types.float32 else None)
    small = isinstance(x.dtype, types.Integer) and name is not None and s.dtype in (out.dtype, types.float32)
    exact = small and f32_work_exact(dtypes.parse(np.dtype(str(x.dtype))), dtypes.parse(name))
    odd = small and _odd(kind, x.dtype, types.float32)
    runs = (exact or odd) and (half != "f16" or HARDWARE_F16)
    return _VectorKinds(xkind == types.int8, xkind in (types.int8, types.int16), zkind == types.int8, half, odd, runs)


def _trap(context, builder):
    """LLVM IR that stops the process: an intrinsic's code for types it does not compute."""
    builder.call(builder.module.declare_intrinsic("llvm.trap", (), ir.FunctionType(ir.VoidType(), [])), [])
    return context.get_dummy_value()


def _i32_ir(builder, vk: _VectorKinds, v, signed: bool):
    """A vector of input (or zero point) elements as int32: int4 bytes biased (their low 4 bits with the sign
    bit flipped, ``int4_biased``), uint4's low 4 bits (``uint4_value``)."""
    if vk.biased:
        v = builder.xor(v, ir.Constant(v.type, [8] * v.type.count))
    if vk.nibble:
        v = builder.and_(v, ir.Constant(v.type, [15] * v.type.count))
    vi = ir.VectorType(ir.IntType(32), v.type.count)
    return builder.sext(v, vi) if vk.biased or signed else builder.zext(v, vi)  # int4's biased byte as an int8


def _difference_ir(builder, vk: _VectorKinds, d, zi):
    """The int32 difference of ``d`` and zero point ``zi`` (None: none; int4's bias then) as float32, exact."""
    if zi is not None:
        d = builder.sub(d, zi)
    elif vk.biased:
        d = builder.sub(d, ir.Constant(d.type, [8] * d.type.count))
    return builder.sitofp(d, ir.VectorType(ir.FloatType(), d.type.count))


def _scale_ir(builder, vk: _VectorKinds, v, dtype):
    """A vector of scale values of Numba type ``dtype`` (float32, or f16/bf16 bits) as float32, exact."""
    if dtype == types.float32:  # f32 output, or spread in float32 work
        return v
    n = v.type.count
    vf = ir.VectorType(ir.FloatType(), n)
    if vk.half == "f16":
        return builder.fpext(builder.bitcast(v, ir.VectorType(ir.HalfType(), n)), vf)
    vi = ir.VectorType(ir.IntType(32), n)
    return builder.bitcast(builder.shl(builder.zext(v, vi), ir.Constant(vi, [16] * n)), vf)


def _product_ir(builder, vk: _VectorKinds, f, s):
    """The float32 product of differences ``f`` and scales ``s``: rounded to nearest, or to odd where
    ``vk.odd`` (``odd_product_ir``)."""
    return odd_product_ir(builder, f, s) if vk.odd else builder.fmul(f, s)


def _rounded_ir(builder, vk: _VectorKinds, p):
    """The float32 products ``p`` as the output's elements: f16 bits by the CPU (F16C), bf16 bits rounded to
    nearest even as ``bf16_from_product`` rounds, f32 as they are."""
    n = p.type.count
    v16, vi = ir.VectorType(ir.IntType(16), n), ir.VectorType(ir.IntType(32), n)
    if vk.half == "f16":
        return builder.bitcast(builder.fptrunc(p, ir.VectorType(ir.HalfType(), n)), v16)
    if vk.half == "bf16":
        u = builder.bitcast(p, vi)
        odd = builder.and_(builder.lshr(u, ir.Constant(vi, [16] * n)), ir.Constant(vi, [1] * n))
        u = builder.add(builder.add(u, ir.Constant(vi, [0x7FFF] * n)), odd)
        return builder.trunc(builder.lshr(u, ir.Constant(vi, [16] * n)), v16)
    return p


def _block(held: bool):
    """An intrinsic ``(x, xo, z, zo, s, so, out, kind, xkind, zkind)``: ``out[xo : xo + BLOCK_RUN]`` = ``(x[xo :] -
    z[zo :]) * s[so :]`` over ``BLOCK_RUN`` elements in float32, one explicit vector each (``x`` and ``out`` share
    an offset; ``z`` and ``s`` a run beside them, or where ``held``, the one value at ``zo`` and ``so``, repeated),
    where the float32 product is the one rounding (``product_exact``, ``f32_work_exact``): 8/16-bit or 4-bit inputs
    to f32 (rounded once), 8-bit and 4-bit ones to f16 and bf16, 16-bit ones to bf16 (exact, then rounded once), and
    16-bit ones to f16 where ``HARDWARE_ODD`` (the product rounded to odd by ``odd_product_ir``, then once to f16).
    The difference is taken in int32 and converted once; int4 bytes (``xkind`` ``INT4``) are biased as
    ``int4_biased`` biases them (the low 4 bits with their sign bit flipped; uint4's low 4 bits, ``UINT4``), the
    zero point's alike, or less the bias where there is none (``zkind`` ``PLAIN``: ``z`` is not read). f16/bf16
    scales (``kind``, ``MARKERS``) are read as bits and converted (a float32 scale, spread in the work type, as it
    is), the product rounded once to nearest even: f16 by the CPU (F16C, ``HARDWARE_F16``), bf16 as
    ``bf16_from_product`` rounds. A block of a row's runtime width written as a Numba loop of a constant 16 is
    unrolled into scalar code (LLVM cannot tell ``out`` from the inputs), and one of the row's own width runs its
    last 1-31 elements one at a time: ``(13457,5,37)`` ``{0,2}`` i16 -> f32 4.3x a casting copy spread, 3.1x as such
    rows, 2.1x in these blocks (``tiles blocks``). Other types (float64 work, 16-bit inputs to f16 without AVX-512,
    f16 without F16C) lower to a trap: the branch of a layout their loop never runs (``_fused.blocks``)."""

    @intrinsic
    def block(typingctx, x, xo, z, zo, s, so, out, kind, xkind, zkind):  # pragma: no cover - compiled
        vk = _vector_kinds(x, s, out, kind, xkind, zkind)

        def codegen(context, builder, sig, args):
            if not vk.runs:  # a layout's loop lowers every layout's branch: this one never runs for other types
                return _trap(context, builder)
            lanes = BLOCK_RUN
            vi = ir.VectorType(ir.IntType(32), lanes)

            def pointer(k, offset, n):
                a = context.make_array(sig.args[k])(context, builder, args[k])
                p = builder.gep(a.data, [args[offset]])
                return builder.bitcast(p, ir.VectorType(context.get_data_type(sig.args[k].dtype), n).as_pointer())

            def load(k, offset, repeated):
                if repeated:  # one value, in every lane
                    return builder.shuffle_vector(
                        builder.load(pointer(k, offset, 1), align=1),
                        ir.Constant(ir.VectorType(context.get_data_type(sig.args[k].dtype), 1), ir.Undefined),
                        ir.Constant(vi, [0] * lanes),
                    )
                return builder.load(pointer(k, offset, lanes), align=1)

            zf = None
            if vk.has_z and isinstance(sig.args[2].dtype, types.Float):  # spread in float32 (``z_zeros``)
                zf = load(2, 3, held)
            zi = _i32_ir(builder, vk, load(2, 3, held), sig.args[2].dtype.signed) if vk.has_z and zf is None else None
            d = _difference_ir(builder, vk, _i32_ir(builder, vk, load(0, 1, False), sig.args[0].dtype.signed), zi)
            f = d if zf is None else builder.fsub(d, zf)
            p = _product_ir(builder, vk, f, _scale_ir(builder, vk, load(4, 5, held), sig.args[4].dtype))
            builder.store(_rounded_ir(builder, vk, p), pointer(6, 1, lanes), align=1)
            return context.get_dummy_value()

        sig = types.void(x, types.int64, z, types.int64, s, types.int64, out, kind, xkind, zkind)
        return sig, codegen

    return block


block_run, block_held = _block(False), _block(True)


NARROW_WIDTH = 63
"""The widest rows ``narrow_run`` computes (``reference.NARROW_VECTORS_MAX``'s; rows of ``reference.HELD_MIN``
run as they are)."""


def _narrow_lanes(builder, vectors, run, period, windowed):
    """LLVM IR for ``vectors`` 16-lane int32 vectors in a buffer on the stack (``NARROW_WIDTH`` of them, at
    the function's entry): vector ``q``, the offset of the value that each element of the group's vector
    ``q`` reads, where each ``period`` elements read ``run`` consecutive values, a run of them repeated
    (``(t // period) * run + t % period % run`` for element ``t = 16 * q + e``; rows of ``period``
    elements of one value each where ``run`` is 1): from the group's first value, or where ``windowed``
    (int1), from the vector's own first (its least), which a second buffer (int64) holds; a third holds the
    same offsets as 32 int16 lanes for a 16-bit permutation (``vpermw``), each twice (lanes ``2e`` and ``2e +
    1``). Each quotient
    is computed as ``(n + 0.5) * (1 / d)`` in float32, truncated: the exact quotient is at least ``0.5 /
    d`` from an integer, and for ``n`` below and ``d`` up to ``16 * NARROW_WIDTH`` the float32 one errs
    by less than ``2**-12``. A few vector operations each, once a call."""
    lanes, i32, i64 = BLOCK_RUN, ir.IntType(32), ir.IntType(64)
    vi, vf = ir.VectorType(i32, lanes), ir.VectorType(ir.FloatType(), lanes)
    buffer = cgutils.alloca_once(builder, vi, size=NARROW_WIDTH)
    firsts = cgutils.alloca_once(builder, i64, size=NARROW_WIDTH)
    v32 = ir.VectorType(ir.IntType(16), 2 * lanes)
    pairs = cgutils.alloca_once(builder, v32, size=NARROW_WIDTH)
    twice = ir.Constant(ir.VectorType(i32, 2 * lanes), [e // 2 for e in range(2 * lanes)])

    def splat(v, vt):
        one = builder.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(i32, 0))
        return builder.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(vi, [0] * lanes))

    def quotient(n, d):  # ``n // d`` of non-negative int32 vector ``n`` and int64 ``d``
        inverse = builder.fdiv(ir.Constant(ir.FloatType(), 1.0), builder.sitofp(d, ir.FloatType()))
        f = builder.fadd(builder.sitofp(n, vf), ir.Constant(vf, [0.5] * lanes))
        return builder.fptosi(builder.fmul(f, splat(inverse, vf)), vi)

    least = builder.module.declare_intrinsic(f"llvm.vector.reduce.smin.v{lanes}i32", (), ir.FunctionType(i32, [vi]))
    run_v, period_v = splat(builder.trunc(run, i32), vi), splat(builder.trunc(period, i32), vi)
    lane = ir.Constant(vi, list(range(lanes)))
    with cgutils.for_range(builder, vectors) as loop:
        t = builder.add(splat(builder.trunc(builder.mul(loop.index, loop.index.type(lanes)), i32), vi), lane)
        q = quotient(t, period)
        r = builder.sub(t, builder.mul(q, period_v))  # the element within its period
        c = builder.sub(r, builder.mul(quotient(r, run), run_v))  # its column within the run
        builder.store(builder.add(builder.mul(q, run_v), c), builder.gep(buffer, [loop.index]), align=64)
    with builder.if_then(windowed, likely=False):  # each vector's offsets from its least, apart: groups
        with cgutils.for_range(builder, vectors) as loop:  # that fit 16 values pay nothing for them
            at = builder.gep(buffer, [loop.index])
            offsets = builder.load(at, align=64)
            first = builder.call(least, [offsets])
            own = builder.sub(offsets, splat(first, vi))
            builder.store(own, at, align=64)
            builder.store(builder.sext(first, i64), builder.gep(firsts, [loop.index]))
            own16 = builder.trunc(own, ir.VectorType(ir.IntType(16), lanes))
            builder.store(builder.shuffle_vector(own16, own16, twice), builder.gep(pairs, [loop.index]))
    return buffer, firsts, pairs


@intrinsic
def narrow_run(
    typingctx, x, o, z, s, j, groups, vectors, step, run, period, kind, xkind, zkind
):  # pragma: no cover - compiled
    """``groups`` groups of ``vectors`` (1-63) vectors of ``BLOCK_RUN`` elements from the start of ``x`` and
    ``o``, group g's 16 values (and zero points) at ``s[j + g * step]``, each ``period`` of its elements
    reading ``run`` consecutive ones of them (``_narrow_lanes``): rows of ``period`` elements of one value
    each where ``run`` is 1 (a group 16 rows, ``step`` 16, ``vectors`` the rows' width), rows of ``run``
    elements beside a run of values, ``period // run`` rows reading each, where it is more. A group's 16
    values are loaded as one vector and converted once, each of its vectors taking its lanes' from them by
    AVX-512's permutation (``vpermps``), then computed as ``block_run`` computes its vectors (the types it
    computes, ``_VectorKinds``; others lower to a trap). bf16 is rounded by the CPU where ``HARDWARE_BF16``
    and no value of the group is subnormal. Where a group reads more than 16 values (``step`` > 16: runs of
    up to ``reference.WINDOW_MAX``), each vector takes its lanes' from the 32 values at its own least
    (``vpermt2ps``; bf16 bits permuted as 16-bit lanes, ``vpermw``), which must lie within the scale (and the
    zero point): ``step + 31`` values from a group's first; bf16 is then rounded by the CPU where no value
    the call reads is subnormal. Against runs of 9-25 in blocks (``block_rows``) or spread, single-threaded:
    ``(4,126,5,4,25)`` ``{0,1,2,4}`` u16 -> bf16 0.63x the time, ``(185381,10,9)`` ``{0,2}`` u4 -> f16 with a
    zero point 0.52x, ``(7,312,4,8,3,7)`` ``{0,1,2,3,5}`` i16 -> f32 0.54x. One loop for every width: a
    constant permutation a vector, each width's loop unrolled, cost each loop that calls it 0.7-1.0 s of
    compiling (this one 0.4-0.7 s; its windows cost each loop 0.2-0.5 s more); groups
    of the rows that fill one vector (8 rows of 2, 2 of 8) loaded the scale for each vector, 1.41x the time
    of LLVM's loop at width 2. LLVM vectorizes the rows of a constant width across rows through
    interleaved loads and shuffles, at 0.58 cycles an element for every type pair (``_narrow_rows``)."""
    vk = _vector_kinds(x, s, o, kind, xkind, zkind)
    # bf16 by the CPU (``HARDWARE_BF16``): every product these types give is exact (16-bit inputs' to f16,
    # rounded to odd, are the only inexact ones)
    hardware = HARDWARE_BF16 and vk.half == "bf16"

    def codegen(context, builder, sig, args):
        if not vk.runs or not HARDWARE_AVX512:
            return _trap(context, builder)
        lanes, i32, i64 = BLOCK_RUN, ir.IntType(32), ir.IntType(64)
        vi, vf = ir.VectorType(i32, lanes), ir.VectorType(ir.FloatType(), lanes)

        def at(k, offset):
            a = context.make_array(sig.args[k])(context, builder, args[k])
            p = builder.gep(a.data, [offset])
            return builder.bitcast(p, ir.VectorType(context.get_data_type(sig.args[k].dtype), lanes).as_pointer())

        def permute(v, idx):
            name = "llvm.x86.avx512.permvar.sf.512" if v.type == vf else "llvm.x86.avx512.permvar.si.512"
            fn = builder.module.declare_intrinsic(name, (), ir.FunctionType(v.type, [v.type, vi]))
            return builder.call(fn, [v, idx])

        def permute2(lo, idx, hi):  # lane k of ``lo`` then ``hi`` (``vpermt2ps``, ``vpermt2d``), k = 0..31
            suffix = "ps" if lo.type == vf else "d"
            fn = builder.module.declare_intrinsic(
                f"llvm.x86.avx512.vpermi2var.{suffix}.512", (), ir.FunctionType(lo.type, [lo.type, vi, lo.type])
            )
            return builder.call(fn, [lo, idx, hi])

        def window(k, lo, q, convert):  # vector q's 16 values of array k from the 32 at ``lo``: two converted, permuted
            return permute2(values(k, lo, convert), idx_of(q), values(k, builder.add(lo, i64(lanes)), convert))

        def window_scale(lo, q):  # the vector's 16 scale values from the 32 at ``lo``
            if vk.half != "bf16":
                return window(3, lo, q, scale)
            # bf16 bits permuted as 16-bit lanes (``vpermw``), each value in both halves of its 32-bit lane: the
            # high one is its float32 (against two vectors converted and permuted: 0.82-0.85x the time)
            v32 = ir.VectorType(ir.IntType(16), 2 * lanes)
            a = context.make_array(sig.args[3])(context, builder, args[3])
            raw = builder.load(builder.bitcast(builder.gep(a.data, [lo]), v32.as_pointer()), align=1)
            fn = builder.module.declare_intrinsic(
                "llvm.x86.avx512.permvar.hi.512", (), ir.FunctionType(v32, [v32, v32])
            )
            w = builder.bitcast(builder.call(fn, [raw, builder.load(builder.gep(pairs, [q]))]), vi)
            return builder.bitcast(builder.and_(w, ir.Constant(vi, [-65536] * lanes)), vf)

        def values(k, offset, convert):  # the scale's (k = 3) or zero point's (2) 16 values at ``offset``
            return convert(builder.load(at(k, offset), align=1))

        def scale(v):
            return _scale_ir(builder, vk, v, sig.args[3].dtype)

        def zero(v):
            return _i32_ir(builder, vk, v, sig.args[2].dtype.signed)

        def tiny(sv):  # whether a float32 scale value is subnormal (an integer times any other is never)
            bits = builder.and_(builder.bitcast(sv, vi), ir.Constant(vi, [0x7FFFFFFF] * lanes))
            one, least = ir.Constant(vi, [1] * lanes), ir.Constant(vi, [0x7FFFFF] * lanes)
            return builder.icmp_unsigned("<", builder.sub(bits, one), least)

        def any_of(flags):
            reduce = builder.module.declare_intrinsic(
                f"llvm.vector.reduce.or.v{lanes}i1", (), ir.FunctionType(ir.IntType(1), [flags.type])
            )
            return builder.call(reduce, [flags])

        def idx_of(q):
            return builder.load(builder.gep(lanes_w, [q]), align=64)

        def vector(base, q, sv, zv, hardware):  # vector q of the group whose elements start at ``base``
            xo = builder.add(base, builder.mul(q, i64(lanes)))
            d = _i32_ir(builder, vk, builder.load(at(0, xo), align=1), sig.args[0].dtype.signed)
            p = _product_ir(builder, vk, _difference_ir(builder, vk, d, zv), sv)
            h = bf16_hardware_ir(builder, p) if hardware else _rounded_ir(builder, vk, p)
            builder.store(h, at(1, xo), align=1)

        def either(flag, body):  # ``body(hardware)``: bf16 by the CPU where ``flag`` (int1) is false
            if not hardware:
                return body(False)
            with builder.if_else(flag, likely=False) as (soft, fast):
                with soft:
                    body(False)
                with fast:
                    body(True)

        j, groups, vectors, step = args[4], args[5], args[6], args[7]
        windowed = builder.icmp_signed(">", step, i64(lanes))  # a group reads more than one vector's values
        lanes_w, firsts, pairs = _narrow_lanes(builder, vectors, args[8], args[9], windowed)

        def windows(hardware):  # every group's vectors, each from its own window
            with cgutils.for_range(builder, groups) as loop:
                jg = builder.add(j, builder.mul(loop.index, step))
                base = builder.mul(loop.index, builder.mul(i64(lanes), vectors))
                with cgutils.for_range(builder, vectors) as inner:
                    lo = builder.add(jg, builder.load(builder.gep(firsts, [inner.index])))
                    zv = window(2, lo, inner.index, zero) if vk.has_z else None
                    vector(base, inner.index, window_scale(lo, inner.index), zv, hardware)

        with builder.if_else(windowed, likely=False) as (per_vector, whole):
            with per_vector:  # each vector's 32 values from its least (``firsts``), two vectors permuted
                if hardware:  # any subnormal among the values the groups read: 16 at a time, the last overlapping
                    count = builder.add(builder.mul(groups, step), i64(2 * lanes - 1))
                    found = cgutils.alloca_once_value(builder, ir.Constant(ir.IntType(1), 0))
                    last = builder.sub(count, i64(lanes))
                    with cgutils.for_range_slice(builder, i64(0), count, i64(lanes)) as (k, _):
                        at_k = builder.add(j, builder.select(builder.icmp_signed(">", k, last), last, k))
                        builder.store(builder.or_(builder.load(found), any_of(tiny(values(3, at_k, scale)))), found)
                    either(builder.load(found), windows)
                else:
                    windows(False)
            with whole:  # each group's 16 values loaded and converted once
                with cgutils.for_range(builder, groups) as loop:
                    jg = builder.add(j, builder.mul(loop.index, step))
                    base = builder.mul(loop.index, builder.mul(i64(lanes), vectors))
                    sv = values(3, jg, scale)
                    zv = values(2, jg, zero) if vk.has_z else None

                    def group(hardware):
                        with cgutils.for_range(builder, vectors) as inner:
                            idx = idx_of(inner.index)
                            zq = None if zv is None else permute(zv, idx)
                            vector(base, inner.index, permute(sv, idx), zq, hardware)

                    either(any_of(tiny(sv)), group)
        return context.get_dummy_value()

    return types.void(x, o, z, s, *[types.int64] * 6, kind, xkind, zkind), codegen


def narrow_vectors(kind, x, s, o, xkind, zkind, wkind):  # pragma: no cover - compiled by its overload
    """Whether ``narrow_run`` computes rows of these arrays' types in float32 work ``wkind`` (a constant,
    folded where compiled)."""


def _narrow_on(kind, x, s, o, xkind, zkind, wkind) -> bool:
    """``narrow_vectors``' answer for these Numba types."""
    return HARDWARE_AVX512 and wkind == types.float32 and _vector_kinds(x, s, o, kind, xkind, zkind).runs


@overload(narrow_vectors, jit_options={"nogil": True})
def _narrow_vectors(kind, x, s, o, xkind, zkind, wkind):  # pragma: no cover - compiled
    on = _narrow_on(kind, x, s, o, xkind, zkind, wkind)
    return (
        (lambda kind, x, s, o, xkind, zkind, wkind: True) if on else (lambda kind, x, s, o, xkind, zkind, wkind: False)
    )


PERIOD_BIAS = 2.0**23 + 2.0**17
"""The float32 whose bits plus a 16-bit difference's (an integer add) are the float32 ``PERIOD_BIAS + d``, exactly:
``2**17 + d`` lies in ``[0, 2**23)`` for every difference of two 16-bit integers (``odd_fma_ir``)."""
PERIOD_BIAS_BITS = 0x4B020000
"""``PERIOD_BIAS``'s float32 bits."""


def odd_fma_ir(builder, f, s, c):
    """LLVM IR for ``f * s + c`` of 16-lane float32 vectors, rounded to odd in float32: the fused
    multiply-add rounded down and, where that is even, up (each by the instruction's embedded rounding,
    ``HARDWARE_ODD``). The two roundings are one value where the sum is exact and adjacent floats where
    it is not, one of them odd: the odd one is the sum rounded to odd. With ``f = PERIOD_BIAS + d`` and
    ``c = -PERIOD_BIAS * s`` (exact for an f16 scale: 7 + 11 significant bits) the sum is the exact
    product ``d * s``, so that the difference is never converted nor subtracted: three vector operations
    for the difference, the product and its rounding to odd where ``odd_product_ir`` with its conversion
    and subtraction takes six (``period_run``). Only for a positive finite ``s``: ``d = 0`` gives ``+0``
    (``-0`` for a negative scale), and an infinite scale a NaN."""
    vf = f.type
    lanes, i32 = vf.count, ir.IntType(32)
    vi = ir.VectorType(i32, lanes)
    fma = builder.module.declare_intrinsic("llvm.x86.avx512.vfmadd.ps.512", (), ir.FunctionType(vf, [vf, vf, vf, i32]))
    down = builder.call(fma, [f, s, c, i32(9)])  # _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC
    up = builder.call(fma, [f, s, c, i32(10)])  # _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC
    last = builder.and_(builder.bitcast(down, vi), ir.Constant(vi, [1] * lanes))
    return builder.select(builder.icmp_unsigned("==", last, ir.Constant(vi, [0] * lanes)), up, down)


def _odd_fma_block(builder, xa, oa, k, kv, sv, cv, signed):
    """LLVM IR for ``o[k : k + 16]`` from 16-bit inputs ``x[k : k + 16]`` (arrays ``xa``, ``oa``) rounded once to
    f16 bits, the vectors ``kv`` (``PERIOD_BIAS`` bits less the zero point), ``sv`` (the scale) and ``cv``
    (``-PERIOD_BIAS`` times it) beside them (``odd_fma_ir``, then F16C)."""
    lanes = BLOCK_RUN
    vi, vf = ir.VectorType(ir.IntType(32), lanes), ir.VectorType(ir.FloatType(), lanes)
    vh = ir.VectorType(ir.IntType(16), lanes)
    xv = builder.load(builder.bitcast(builder.gep(xa.data, [k]), vh.as_pointer()), align=1)
    f = builder.bitcast(builder.add(builder.sext(xv, vi) if signed else builder.zext(xv, vi), kv), vf)
    h = builder.fptrunc(odd_fma_ir(builder, f, sv, cv), ir.VectorType(ir.HalfType(), lanes))
    builder.store(builder.bitcast(h, vh), builder.bitcast(builder.gep(oa.data, [k]), vh.as_pointer()), align=1)


@intrinsic
def period_run(typingctx, x, o, kv, sv, cv, blocks, vectors):  # pragma: no cover - compiled
    """``o[: 16 * blocks]`` (``blocks`` a multiple of ``vectors``, 1 to ``PERIOD_VECTORS``) from 16-bit inputs ``x``
    rounded once to f16 bits, each element ``e``'s ``PERIOD_BIAS`` bits less its zero point at ``kv[e % len]``,
    its scale at ``sv[...]`` and ``-PERIOD_BIAS`` times it at ``cv[...]`` (``len = 16 * vectors``): the three held
    in ``3 * vectors`` registers, loaded once, and the input read a vector at a time (``_odd_fma_block``). One
    loop for each number of vectors, chosen by a switch in the IR (registers cannot be indexed at run time)."""
    signed = x.dtype.signed

    def codegen(context, builder, sig, args):
        xa, oa, ka, sa, ca = (context.make_array(t)(context, builder, a) for t, a in zip(sig.args[:5], args[:5]))
        lanes, i64 = BLOCK_RUN, ir.IntType(64)
        vi, vf = ir.VectorType(ir.IntType(32), lanes), ir.VectorType(ir.FloatType(), lanes)

        def at(a, k, vt):
            return builder.bitcast(builder.gep(a.data, [k]), vt.as_pointer())

        done = builder.append_basic_block("period_done")
        switch = builder.switch(args[6], done)
        for vectors in range(1, PERIOD_VECTORS + 1):
            case = builder.append_basic_block(f"period_{vectors}")
            switch.add_case(i64(vectors), case)
            builder.position_at_end(case)
            held = [
                tuple(builder.load(at(a, i64(lanes * v), vt), align=1) for a, vt in ((ka, vi), (sa, vf), (ca, vf)))
                for v in range(vectors)
            ]
            with cgutils.for_range(builder, builder.sdiv(args[5], i64(vectors))) as loop:
                base = builder.mul(loop.index, i64(lanes * vectors))
                for v, h in enumerate(held):
                    _odd_fma_block(builder, xa, oa, builder.add(base, i64(lanes * v)), *h, signed)
            builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()

    return types.void(x, o, kv, sv, cv, types.int64, types.int64), codegen


@intrinsic
def held_odd_run(typingctx, x, o, k, kz, sv, cv):  # pragma: no cover - compiled
    """``o[k : k + 16]`` from 16-bit inputs ``x[k : k + 16]`` under one positive finite scale ``sv`` rounded once
    to f16 bits: ``kz`` the ``PERIOD_BIAS`` bits less the zero point and ``cv`` ``-PERIOD_BIAS * sv``, repeated
    across the lanes (``_odd_fma_block``: 7 vector operations where ``odd_run`` takes 8)."""
    signed = x.dtype.signed

    def codegen(context, builder, sig, args):
        xa, oa = (
            context.make_array(sig.args[0])(context, builder, args[0]),
            context.make_array(sig.args[1])(context, builder, args[1]),
        )
        lanes, i32 = BLOCK_RUN, ir.IntType(32)

        def splat(v):
            one = builder.insert_element(ir.Constant(ir.VectorType(v.type, lanes), ir.Undefined), v, i32(0))
            return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))

        _odd_fma_block(builder, xa, oa, args[2], splat(args[3]), splat(args[4]), splat(args[5]), signed)
        return context.get_dummy_value()

    return types.void(x, o, types.int64, types.int32, types.float32, types.float32), codegen


PERIOD_VECTORS = 8
"""The most vectors of ``BLOCK_RUN`` elements a period of the flat index may span for ``period_run`` to
hold it in registers (``reference._period``): three registers a vector, 24 of the 32."""


@_jit
def periodic(x, z, s, out, e0, e1, offsets, vectors, kind, xkind, zkind, wkind):  # pragma: no cover - compiled
    """The fused loop's elements ``e0 <= e < e1`` where element ``e``'s scale offset is ``offsets[e % len(offsets)]``
    (the flat index's period, ``reference._period``) and ``16 * vectors`` elements are a whole number of
    periods: the period's values from ``e0`` in ``period_run``'s registers, the last 0-15 elements one at a
    time. False, writing nothing, where a scale of the period is not positive and finite (``odd_fma_ir``).
    Compiled apart: once for the five layouts' loops that call it, not in each."""
    period = offsets.shape[0]
    span = BLOCK_RUN * vectors
    held = np.empty(3 * span, np.int32)  # one allocation (about 40 ns each)
    kv, sv, cv = held[:span], held[span : 2 * span].view(np.float32), held[2 * span :].view(np.float32)
    phase = e0 % period
    q = phase  # the phase of element e0 + k (no division in the loop: 20-40 cycles each)
    for k in range(min(period, span)):
        j = np.int64(offsets[q])
        q = q + 1 if q + 1 < period else 0
        f = as_work(wkind, load(kind, s[j]))
        if not (np.float32(0) < f < np.float32(np.inf)):
            return False
        kv[k] = np.int32(PERIOD_BIAS_BITS - (np.int64(value(xkind, z[j])) if given(zkind) else 0))
        sv[k] = f
        cv[k] = np.float32(-PERIOD_BIAS) * f
    for k in range(period, span):  # the period repeated: element k's values are element k - period's
        kv[k], sv[k], cv[k] = kv[k - period], sv[k - period], cv[k - period]
    n = e1 - e0
    blocks = n // BLOCK_RUN
    xr = x[e0:e1]
    rounds = blocks - blocks % vectors
    period_run(xr, out, kv, sv, cv, rounds, vectors)
    # the last 0 to ``vectors - 1`` whole vectors one at a time (a tail in each of the switch's eight loops
    # added a second to a cold compilation of three layouts' loops, 21.9 -> 20.8 s)
    for v in range(blocks % vectors):
        a, b = (blocks - blocks % vectors + v) * BLOCK_RUN, v * BLOCK_RUN
        period_run(xr[a : a + BLOCK_RUN], out[a : a + BLOCK_RUN], kv[b:], sv[b:], cv[b:], 1, 1)
    exact = product_exact(kind, x)
    k = blocks * BLOCK_RUN % span
    for i in range(blocks * BLOCK_RUN, n):
        j = np.int64(offsets[(phase + k) % period])
        if given(zkind):
            d = difference(xkind, wkind, xr[i], value(xkind, z[j]))
        else:
            d = plain(xkind, wkind, xr[i])
        out[i] = store(kind, d, sv[k], exact)
        k += 1
    return True


def bias(xkind):  # pragma: no cover - compiled by its overload
    """What ``bf16_run`` subtracts where no zero point is given: int4's bias (8.0, ``plain``'s), else 0.0."""


@overload(bias, jit_options={"nogil": True})
def _bias(xkind):  # pragma: no cover - compiled
    return (lambda xkind: np.float32(8)) if xkind == types.int8 else (lambda xkind: np.float32(0))


def hardware_bf16(kind, x, wkind):  # pragma: no cover - compiled by its overload
    """Whether a held run of output ``kind`` of ``x``'s elements in work type ``wkind`` goes through
    ``bf16_run``: bf16 in float32 work whose products are exact (``product_exact``: not i32's, whose
    float32 products a second rounding would round twice) where the CPU has AVX512-BF16. A constant,
    folded where compiled."""


@overload(hardware_bf16, jit_options={"nogil": True})
def _hardware_bf16_overload(kind, x, wkind):  # pragma: no cover - compiled
    on = HARDWARE_BF16 and kind == types.int16 and wkind == types.float32 and _exact_product(kind, x)
    return (lambda kind, x, wkind: True) if on else (lambda kind, x, wkind: False)


def odd_held(kind, x, wkind):  # pragma: no cover - compiled by its overload
    """Whether a held run of i32 inputs ``x`` to output ``kind`` in float32 work (the guarded loop: every
    value within ``exactness.f32_guard``'s bound, so that the difference is exact in float32) goes through
    ``odd_run`` (f16: 3) or ``odd_bf16_run`` (bf16, where the CPU has AVX512-BF16: 5), where
    ``HARDWARE_ODD``; 0: neither (``run_held``'s codes). A constant, folded where compiled."""


@overload(odd_held, jit_options={"nogil": True})
def _odd_held_overload(kind, x, wkind):  # pragma: no cover - compiled
    how = 0
    if HARDWARE_ODD and wkind == types.float32 and x.dtype == types.int32:
        how = 3 if kind == types.uint16 else 5 if kind == types.int16 and HARDWARE_BF16 else 0
    return lambda kind, x, wkind: how


def held_f32(kind, x, wkind):  # pragma: no cover - compiled by its overload
    """Whether a held run of ``x``'s elements to f32 goes through ``f32_run``: 8/16-bit and 4-bit inputs (their
    float32 products the one rounding) in float32 work, where the CPU has AVX-512. A constant, folded where
    compiled."""


@overload(held_f32, jit_options={"nogil": True})
def _held_f32_overload(kind, x, wkind):  # pragma: no cover - compiled
    small = isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 16
    on = HARDWARE_AVX512 and kind == types.uint8 and wkind == types.float32 and small
    return (lambda kind, x, wkind: True) if on else (lambda kind, x, wkind: False)


def hardware_f16(kind, x, wkind):  # pragma: no cover - compiled by its overload
    """Whether a held run of output ``kind`` of ``x``'s elements in work type ``wkind`` goes through
    ``f16_run``: f16 in float32 work whose products are exact (``product_exact``: 8-bit and 4-bit inputs)
    where the CPU converts f16 itself (``HARDWARE_F16``). A constant, folded where compiled."""


@overload(hardware_f16, jit_options={"nogil": True})
def _hardware_f16_overload(kind, x, wkind):  # pragma: no cover - compiled
    on = HARDWARE_F16 and kind == types.uint16 and wkind == types.float32 and _exact_product(kind, x)
    return (lambda kind, x, wkind: True) if on else (lambda kind, x, wkind: False)


@_jit
def odd_f32(v):  # pragma: no cover - compiled
    """float64 ``v`` in float32 rounded to odd, as bits: a second rounding to 8 or 11 significant bits
    from there is the single correct rounding of ``v``."""
    t = np.float32(v)
    tb = f32_bits(t)
    # as in ``odd_product_f32``: the rounding error ``v - t`` is exact (t is within a factor of 2 of
    # v), inexact where it is nonzero and finite (an infinite error is an overflow, left infinite; a
    # NaN one is a NaN or infinite v, left as it is); t was rounded away from zero where the error's
    # sign differs from t's
    eb = f64_bits(v - np.float64(t))
    ea = _u64(eb & _u64(0x7FFFFFFFFFFFFFFF))
    odd = _u32(_u32(tb - _u32(_u32(eb >> _u64(63)) ^ _u32(tb >> _u32(31)))) | _u32(1))
    return odd if _u64(ea - _u64(1)) < _u64(0x7FEFFFFFFFFFFFFF) else tb


@_jit
def odd_product_f32(d, s):  # pragma: no cover - compiled
    """The exact product of float32 ``d`` and ``s`` rounded to odd in float32, as bits: the fused
    multiply-add gives the rounding error ``d * s - p`` exactly (no underflow: ``d`` is an integer and
    ``s`` a multiple of 2**-149), and it says whether and which way ``p`` was rounded. A NaN error (an
    infinite or NaN factor) leaves ``p`` as it is; an infinite one (``p`` overflowed) gives the largest
    float32, which f16 and bf16 round to infinity, as they round the exact product."""
    p = d * s
    pb = f32_bits(p)
    e = fma32(d, s, -p)
    eb = f32_bits(e)
    # Inexact (an ordered comparison: a vector compare into a mask, false for a NaN): p moved one step
    # toward zero where it was rounded away from it (err's sign against p's; p is never a zero here),
    # its last bit set; a select between two values, as Numba's booleans combined with ``&`` are bytes
    # that a vectorized loop packs and unpacks (0.77 -> 0.39 ns an element against integer flags, 0.184
    # -> 0.149 against those, and 149 -> 137 ps an element against a test of the error's bits, loop
    # alone, i16 -> f16)
    odd = _u32(_u32(pb - _u32(_u32(eb ^ pb) >> _u32(31))) | _u32(1))
    return odd if abs(e) > np.float32(0) else pb


@_jit
def f64_to_bits_of(b, drop):  # pragma: no cover - compiled
    """float64 bits ``b`` rounded to nearest even at bit ``drop`` (the low ``drop`` bits cleared), as a
    float64: a mantissa carry moves into the exponent, as rounding up a power of two does."""
    half = _u64(_u64(_u64(1) << _u64(drop - 1)) - _u64(1))
    r = _u64(_u64(b + half) + _u64(_u64(b >> _u64(drop)) & _u64(1)))
    return bits_f64(_u64(r & ~_u64(_u64(_u64(1) << _u64(drop)) - _u64(1))))


@_jit
def bf16_from_f64_product(v):  # pragma: no cover - compiled
    """A float64 product of an integer and a bf16 scale rounded once to bf16, as bits: rounded to 8
    significant bits in float64 itself (integer arithmetic on its bits), which float32 then holds exactly
    (or overflows to infinity, the rounding's own result past bf16's largest value). Only for the loop's
    products: one below 2**-126 (bf16's subnormal range, where fewer bits are kept) is an integer times
    a subnormal scale, a multiple of 2**-133 that bf16 holds, so rounding it to 8 bits leaves it as it
    is. NaNs keep their payload's top bits (a bf16 scale's, or the default NaN). Against
    ``odd_f32`` and ``bf16_from_product``: 0.26 -> 0.13 ns an element, i32 -> bf16, loops alone."""
    t = np.float32(f64_to_bits_of(f64_bits(v), 45))
    return np.uint16(_u32(f32_bits(t) >> _u32(16)))


@_jit
def f16_from_f64_product(v):  # pragma: no cover - compiled
    """A float64 product of an integer and an f16 scale rounded once to f16, as bits, as
    ``bf16_from_f64_product`` rounds to bf16: to 11 significant bits in float64, exact in float32 and
    then in f16 (a product below 2**-14 is a multiple of 2**-24, which f16 holds; one rounded past f16's
    largest value is at least 2**16, which ``f16_from_f32`` makes infinite). 0.24 -> 0.13 ns an element."""
    return f16_from_f32(f32_bits(np.float32(f64_to_bits_of(f64_bits(v), 42))))


@intrinsic
def f32_from_f16_hw(typingctx, h):  # pragma: no cover - compiled
    """f16 bits ``h`` as float32 (exact), by the CPU (F16C's ``vcvtph2ps``)."""

    def codegen(context, builder, sig, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@_jit
def f32_from_f16_sw(h):  # pragma: no cover - compiled
    """f16 bits ``h`` as float32 (exact)."""
    h = _u32(h)
    em = _u32(h & _u32(0x7FFF))
    normal = _u32(_u32(em << _u32(13)) + _u32(0x38000000))
    normal = _u32(normal + _u32(0x38000000)) if em >= _u32(0x7C00) else normal  # infinities and NaNs
    sub = f32_bits(np.float32(em) * np.float32(2.0**-24))  # subnormals and zero: exact
    return bits_f32(_u32(_u32(_u32(h & _u32(0x8000)) << _u32(16)) | (sub if em < _u32(0x400) else normal)))


f32_from_f16 = f32_from_f16_hw if HARDWARE_F16 else f32_from_f16_sw


@_jit
def f32_from_bf16(h):  # pragma: no cover - compiled
    """bf16 bits ``h`` as float32 (exact)."""
    return bits_f32(_u32(_u32(h) << _u32(16)))


def value(xkind, v):  # pragma: no cover - compiled by its overload
    """A zero point element as the loop subtracts it: int4's byte biased (``INT4``: ``int4_biased``),
    uint4's low 4 bits (``UINT4``: ``uint4_value``); other types as they are."""


def minuend(xkind, wkind, v):  # pragma: no cover - compiled by its overload
    """An input element in the work type as a zero point (``value``'s) is subtracted from it: int4's
    byte biased as the zero point's is, so that the difference is the same; other types as they are."""


def plain(xkind, wkind, v):  # pragma: no cover - compiled by its overload
    """An input element's value in the work type (no zero point): int4's biased byte less the bias, uint4's
    low 4 bits."""


def load(kind, v):  # pragma: no cover - compiled by its overload
    """A scale element: f16/bf16 bits as float32; other types as they are."""


def store(kind, d, s, exact):  # pragma: no cover - compiled by its overload
    """The product of a difference and a scale in the work type, as an output element: f16/bf16 bits
    rounded once (bf16 by ``bf16_from_product``); other types as they are (the output array casts).
    ``exact``: whether the float32 product is exact (``product_exact``), so that it needs no rounding
    to odd first."""


def product_exact(kind, x):  # pragma: no cover - compiled by its overload
    """Whether a float32 difference of ``x``'s elements times a scale of output ``kind`` is exact, so that
    rounding it to f16/bf16 is the one rounding (``exactness.f32_work_exact``: 8-bit and 4-bit inputs,
    and 16-bit ones to bf16). A constant of the types, folded where the loop is compiled."""


@_jit
def int4_biased(b):  # pragma: no cover - compiled
    """An int4 plus 8, from the byte ml_dtypes keeps it in (its low 4 bits, 8-15 the negative values): the
    low 4 bits with their sign bit flipped. The loop subtracts the input's and the zero point's biased
    values, whose difference is the int4 one, or (no zero point) the bias from the input's: one vector
    operation an element (the flip and the mask: one ``vpternlogd``), where sign-extending the input in a
    separate pass cost up to 2.2x the loop (``(4096,1024)`` ``{1}`` i4 -> bf16 with a zero point, against
    u4's 1.0x)."""
    return np.int8(_u32(_u32(b) ^ _u32(8)) & _u32(15))


@_jit
def uint4_value(b):  # pragma: no cover - compiled
    """A uint4 from the byte ml_dtypes keeps it in: the low 4 bits."""
    return np.uint8(_u32(b) & _u32(15))


@overload(value, jit_options={"nogil": True})
def _value(xkind, v):  # pragma: no cover - compiled
    if xkind == types.int8:
        return lambda xkind, v: int4_biased(v)
    if xkind == types.int16:
        return lambda xkind, v: uint4_value(v)
    return lambda xkind, v: v


@overload(minuend, jit_options={"nogil": True})
def _minuend(xkind, wkind, v):  # pragma: no cover - compiled
    return lambda xkind, wkind, v: as_work(wkind, value(xkind, v))


@overload(plain, jit_options={"nogil": True})
def _plain(xkind, wkind, v):  # pragma: no cover - compiled
    if xkind == types.int8:
        return lambda xkind, wkind, v: as_work(wkind, int4_biased(v)) - as_work(wkind, np.int8(8))
    return lambda xkind, wkind, v: as_work(wkind, value(xkind, v))


def difference(xkind, wkind, v, z):  # pragma: no cover - compiled by its overload
    """An input element less a zero point element (as ``value`` reads it) in the work type: float32
    work subtracts in int32 (both at most 16 bits, int4's biased alike: exact) and converts once, one
    conversion an element fewer (149 -> 129 ps an element with the rounding to odd, i16 -> f16, loop
    alone); float64 work (i32 inputs) converts each, as ``minuend``."""


@overload(difference, jit_options={"nogil": True})
def _difference(xkind, wkind, v, z):  # pragma: no cover - compiled
    if wkind == types.float32:
        return lambda xkind, wkind, v, z: np.float32(np.int32(np.int32(value(xkind, v)) - np.int32(z)))
    return lambda xkind, wkind, v, z: minuend(xkind, wkind, v) - as_work(wkind, z)


@overload(load, jit_options={"nogil": True})
def _load(kind, v):  # pragma: no cover - compiled
    if kind == types.uint16:
        return lambda kind, v: f32_from_f16(v)
    if kind == types.int16:
        return lambda kind, v: f32_from_bf16(v)
    return lambda kind, v: v


@overload(store, jit_options={"nogil": True})
def _store(kind, d, s, exact):  # pragma: no cover - compiled
    if kind in (types.uint16, types.int16):
        to_bits = f16_from_f32 if kind == types.uint16 else bf16_from_product
        if d == types.float32:  # float32 holds the difference: its product, rounded to odd unless exact
            return lambda kind, d, s, exact: to_bits(f32_bits(d * s) if exact else odd_product_f32(d, s))
        # float64: the product is exact, and rounded once in float64 itself
        wide = f16_from_f64_product if kind == types.uint16 else bf16_from_f64_product
        return lambda kind, d, s, exact: wide(d * s)
    return lambda kind, d, s, exact: d * s


@overload(product_exact, jit_options={"nogil": True})
def _product_exact(kind, x):  # pragma: no cover - compiled
    exact = _exact_product(kind, x)
    return (lambda kind, x: True) if exact else (lambda kind, x: False)


def _exact_product(kind, x) -> bool:
    """``product_exact`` for the Numba types of an output marker and an input array, at compile time."""
    out = {types.uint16: "f16", types.int16: "bf16"}.get(kind)
    small = isinstance(x.dtype, types.Integer) and out is not None
    # int4 inputs arrive as int8 bytes, exact either way
    return small and f32_work_exact(dtypes.parse(np.dtype(str(x.dtype))), dtypes.parse(out))


@intrinsic
def copy_run(typingctx, dst, o, src, b, n):  # pragma: no cover - compiled
    """``dst[o : o + n] = src[b : b + n]`` (1-D C arrays of one type, apart) by LLVM's memcpy, which
    becomes a few vector moves where ``n`` is a constant (a loop of a constant width is not)."""

    def codegen(context, builder, sig, args):
        d = context.make_array(sig.args[0])(context, builder, args[0])
        s = context.make_array(sig.args[2])(context, builder, args[2])
        size = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype))
        dp, sp = builder.gep(d.data, [args[1]]), builder.gep(s.data, [args[3]])
        cgutils.raw_memcpy(builder, dp, sp, args[4], size)
        return context.get_dummy_value()

    return types.void(dst, types.int64, src, types.int64, types.int64), codegen


SPREAD_BLOCK = 16
"""Rows wider than 8 elements are spread in blocks of this many elements from each row's start
(``_spread_runs``, ``_spread_values_blocks``; runs of 3 and 5-7 in one block of 4 or 8): the last block
of a row runs into the next row, which overwrites it, and past the last row into the buffer's
``SPREAD_BLOCK`` spare elements (and the window's, read so)."""


@intrinsic
def fill_block(typingctx, dst, o, v):  # pragma: no cover - compiled
    """``dst[o : o + SPREAD_BLOCK] = v`` (a 1-D C array of ``v``'s type) by one vector store (a loop of
    a constant width, sliced or not, measured 3-6x slower)."""

    def codegen(context, builder, sig, args):
        d = context.make_array(sig.args[0])(context, builder, args[0])
        vec_t = ir.VectorType(context.get_data_type(sig.args[0].dtype), SPREAD_BLOCK)
        one = builder.insert_element(ir.Constant(vec_t, ir.Undefined), args[2], ir.Constant(ir.IntType(32), 0))
        lanes = ir.Constant(ir.VectorType(ir.IntType(32), SPREAD_BLOCK), [0] * SPREAD_BLOCK)
        vec = builder.shuffle_vector(one, ir.Constant(vec_t, ir.Undefined), lanes)
        builder.store(vec, builder.bitcast(builder.gep(d.data, [args[1]]), vec_t.as_pointer()), align=1)
        return context.get_dummy_value()

    return types.void(dst, types.int64, dst.dtype), codegen


@_bare
def _spread_values(dst, values, width):  # pragma: no cover - compiled
    """``dst``'s rows of ``width`` elements: each row's value repeated."""
    for r in range(values.shape[0]):
        v, o = values[r], r * width
        for k in range(width):
            dst[o + k] = v


@_bare
def _spread_runs(dst, src, pattern, width, block):  # pragma: no cover - compiled
    """``dst``'s rows of ``width`` elements: the run of ``src`` at each row's ``pattern`` offset, copied in
    blocks of ``block`` elements from the row's start (a constant: a copy of a constant size is a vector
    move or a few, one of the row's runtime width calls the C library's memcpy at 10-20 cycles a row,
    and one of a width short of a vector, 3 or 5-7 elements, takes two or three moves: 1.5-1.8x slower
    than one block of 4 or 8)."""
    for r in range(pattern.shape[0]):
        o, p = r * width, np.int64(pattern[r])
        for k in range(0, width, block):
            copy_run(dst, o + k, src, p + k, block)


@_bare
def _spread_values_blocks(dst, values, width):  # pragma: no cover - compiled
    """``_spread_values`` in ``SPREAD_BLOCK`` blocks (a row loop of a runtime width runs its remainder one
    element at a time)."""
    for r in range(values.shape[0]):
        v, o = values[r], r * width
        for k in range(0, width, SPREAD_BLOCK):
            fill_block(dst, o + k, v)


@intrinsic
def fill_repeat(typingctx, dst, o, src, p, width):  # pragma: no cover - compiled
    """``dst[o : o + SPREAD_BLOCK]`` = the ``width`` elements of ``src`` from ``p`` (a constant), repeated: one
    load, a shuffle in registers, one vector store. The load is of a power of two elements, past the run
    into the spare elements (runs of 7 loaded as 7 lanes: 1.3-1.5x the time of a spread row by row)."""
    if not isinstance(width, types.IntegerLiteral):
        return None
    w = width.literal_value
    lw = 1 << (w - 1).bit_length()

    def codegen(context, builder, sig, args):
        d = context.make_array(sig.args[0])(context, builder, args[0])
        a = context.make_array(sig.args[2])(context, builder, args[2])
        elem = context.get_data_type(sig.args[0].dtype)
        at = builder.bitcast(builder.gep(a.data, [args[3]]), ir.VectorType(elem, lw).as_pointer())
        run = builder.load(at, align=1)
        mask = ir.Constant(ir.VectorType(ir.IntType(32), SPREAD_BLOCK), [k % w for k in range(SPREAD_BLOCK)])
        block = builder.shuffle_vector(run, ir.Constant(ir.VectorType(elem, lw), ir.Undefined), mask)
        ptr = builder.bitcast(builder.gep(d.data, [args[1]]), ir.VectorType(elem, SPREAD_BLOCK).as_pointer())
        builder.store(block, ptr, align=1)
        return context.get_dummy_value()

    return types.void(dst, types.int64, src, types.int64, width), codegen


@_bare
def _spread_groups(dst, src, pattern, width, group):  # pragma: no cover - compiled
    """``_spread_runs`` where the rows come in groups of ``group`` consecutive rows reading one run of
    ``width`` elements (2, 3, 4, 5 or 8: ``reference.GROUP_WIDTHS``; a constant): the run repeated over
    ``SPREAD_BLOCK`` elements in registers (``fill_repeat``) and stored every ``SPREAD_BLOCK // width``
    runs, so that each store starts where a run does: one vector store for 2-8 rows (rows of 3 in groups
    of 8, ``(30738,8,3)`` ``{0,2}``: two a group where ``_spread_runs`` makes eight copies). A store's
    elements past the group's last row run into the next group, which overwrites them, and past the
    last into the spare elements."""
    n, step = group * width, SPREAD_BLOCK // width * width
    for g in range(0, pattern.shape[0], group):
        p, o = np.int64(pattern[g]), g * width
        for b in range(o, o + n, step):
            fill_repeat(dst, b, src, p, width)


@_bare
def spread(dst, src, pattern, width, varies, values, group):  # pragma: no cover - compiled
    """``dst``'s rows of ``width`` elements from ``src`` at each row's ``pattern`` offset: a contiguous run
    (``varies``) or one value repeated (gathered into ``values`` first, so that the spreading loop reads
    contiguously). Widths of 2-8 are constants: LLVM unrolls a row of one value and vectorizes across
    rows (a row loop of a runtime width that small runs at 1-3 cycles an element), and copies a run by
    one block of 2, 4 or 8 elements (a 16-element block for rows of 8 writes each element twice); wider
    rows go in ``SPREAD_BLOCK`` blocks. A row's last block runs into the next row, which overwrites it,
    and past the last row into the ``SPREAD_BLOCK`` spare elements ``dst`` and ``src`` hold past the
    tile and the window. The two dispatch chains are written out on purpose:
    one chain taking the row function as an argument makes the loop uncacheable (Numba keeps no
    function argument on disk), and one through a marker-selected overload or ``literal_unroll``
    measured 1.1-1.3x slower (a layer LLVM no longer inlines through) or unspecialized."""
    if varies and group > 1:
        if width == 2:
            _spread_groups(dst, src, pattern, 2, group)
        elif width == 3:
            _spread_groups(dst, src, pattern, 3, group)
        elif width == 4:
            _spread_groups(dst, src, pattern, 4, group)
        elif width == 5:
            _spread_groups(dst, src, pattern, 5, group)
        else:
            _spread_groups(dst, src, pattern, 8, group)
        return
    if varies:
        if width == 2:
            _spread_runs(dst, src, pattern, 2, 2)
        elif width == 3:
            _spread_runs(dst, src, pattern, 3, 4)
        elif width == 4:
            _spread_runs(dst, src, pattern, 4, 4)
        elif width == 5:
            _spread_runs(dst, src, pattern, 5, 8)
        elif width == 6:
            _spread_runs(dst, src, pattern, 6, 8)
        elif width == 7:
            _spread_runs(dst, src, pattern, 7, 8)
        elif width == 8:
            _spread_runs(dst, src, pattern, 8, 8)
        else:
            _spread_runs(dst, src, pattern, width, SPREAD_BLOCK)
        return
    for r in range(pattern.shape[0]):
        values[r] = src[np.int64(pattern[r])]
    if width == 2:
        _spread_values(dst, values, 2)
    elif width == 3:
        _spread_values(dst, values, 3)
    elif width == 4:
        _spread_values(dst, values, 4)
    elif width == 5:
        _spread_values(dst, values, 5)
    elif width == 6:
        _spread_values(dst, values, 6)
    elif width == 7:
        _spread_values(dst, values, 7)
    elif width == 8:
        _spread_values(dst, values, 8)
    else:
        _spread_values_blocks(dst, values, width)


HELD_BLOCK = 64
"""Runs whose scale is one value are computed in blocks of this many elements, the last one overlapping
the one before: a loop of a runtime length that is a multiple of the vector loop's step (16 or 8 lanes,
interleaved up to 4 times) runs no scalar remainder (up to 63 elements of a row, at a few cycles each)."""


def as_work(wkind, v):  # pragma: no cover - compiled by its overload
    """``v`` in the work type, whose marker ``wkind`` is a zero of that type."""


@overload(as_work, jit_options={"nogil": True})
def _as_work(wkind, v):  # pragma: no cover - compiled
    return (lambda wkind, v: np.float32(v)) if wkind == types.float32 else (lambda wkind, v: np.float64(v))


def work_zeros(wkind, n):  # pragma: no cover - compiled by its overload
    """An array of ``n`` zeros of the work type (``wkind``'s)."""


@overload(work_zeros, jit_options={"nogil": True})
def _work_zeros(wkind, n):  # pragma: no cover - compiled
    if wkind == types.float32:
        return lambda wkind, n: np.zeros(n, np.float32)
    return lambda wkind, n: np.zeros(n, np.float64)


def z_zeros(kind, xkind, wkind, z, n):  # pragma: no cover - compiled by its overload
    """An array of ``n`` zero-point zeros in the type ``value`` reads ``z``'s elements as (int4: int8), or
    in float32 where the rows run in ``odd_blocks``' vectors: the spread zero point is then subtracted in
    float32 (exact: both 16-bit), without a conversion of its own (6.9 against 7.6 us, 67K elements i16
    -> f16, loops alone)."""


@overload(z_zeros, jit_options={"nogil": True})
def _z_zeros(kind, xkind, wkind, z, n):  # pragma: no cover - compiled
    if _odd(kind, z.dtype, wkind):  # the zero point has the input's type
        return lambda kind, xkind, wkind, z, n: np.zeros(n, np.float32)
    if xkind == types.int8:
        return lambda kind, xkind, wkind, z, n: np.zeros(n, np.int8)
    return lambda kind, xkind, wkind, z, n: np.zeros(n, z.dtype)


def given(zkind):  # pragma: no cover - compiled by its overload
    """Whether ``zkind`` is ``ZP`` (a zero point is given): a constant, folded where the loop is compiled."""


@overload(given, jit_options={"nogil": True})
def _given(zkind):  # pragma: no cover - compiled
    return (lambda zkind: True) if zkind == types.int8 else (lambda zkind: False)


@_loop
def start(idx, e0, tile, dims, strides):  # pragma: no cover - compiled
    """Where flat element ``e0`` lies: the outer dims' odometer (written to ``idx``), its scale offset
    and the column in its tile."""
    m = dims.shape[0]
    unit = e0 // tile
    off = 0
    for k in range(m - 1, -1, -1):
        idx[k] = unit % dims[k]
        unit //= dims[k]
        off += idx[k] * strides[k]
    return off, e0 - (e0 // tile) * tile


@_bare
def advance(idx, dims, strides, off):  # pragma: no cover - compiled
    """The odometer advanced to the next tile; its scale offset (from ``off``, the current one)."""
    k = dims.shape[0] - 1
    while k >= 0:
        idx[k] += 1
        off += strides[k]
        if idx[k] < dims[k]:
            break
        off -= idx[k] * strides[k]
        idx[k] = 0
        k -= 1
    return off


@_part
def run_held(xs, o, i, n, zv, sv, kind, xkind, zkind, wkind, exact, limit):  # pragma: no cover - compiled
    """``o[i : i + n] = (xs[i : i + n] - zv) * sv`` (``xs`` and ``o`` aligned), a run under one scale value: in
    explicit vectors that read and write the arrays at their offsets, without a slice's wraparound tests (a
    held row's own cost, about 6 ns, was half of them on an Intel Xeon VM), or in ``HELD_BLOCK`` blocks (slices
    from 0: the loops' indexes are known non-negative, so no wraparound check stops vectorizing). Whether the
    run lies within ``-limit..limit`` (the guarded loop's bound where it computes i32 rows in vectors,
    ``odd_held``; 0: none to check): checked as the vectors are computed (``odd_row``, ``odd_bf16_row``), a row of fewer
    than 16 or under a subnormal scale to bf16 in a pass first; False as soon as it is known (the chunk
    then left to the float64 kernel)."""
    # explicit vectors, a step each (the last one overlapping), of one kind: bf16 by the CPU where the scale
    # is not subnormal (1), f16 by the CPU from an exact product (4), else 16-bit -> f16 rounded to odd by
    # the fused multiply-add rounded down and up where the scale is positive and finite (``odd_fma_ir``: 2),
    # or by ``odd_run`` (3), as i32's are within the guarded loop's bound, whose bf16 go by ``odd_bf16_run``
    # where the scale is not subnormal (5); f32 from 8/16-bit and 4-bit inputs (6); 0: none
    how = 0
    if hardware_bf16(kind, xs, wkind) and n >= BF16_RUN and not (np.float32(0) < abs(sv) < np.float32(2.0**-126)):
        how = 1
    elif hardware_f16(kind, xs, wkind) and n >= BF16_RUN:
        how = 4
    elif odd_blocks(kind, xs, wkind) and n >= BF16_RUN:
        how = 2 if np.float32(0) < sv < np.float32(np.inf) else 3
    elif held_f32(kind, xs, wkind) and BF16_RUN <= n <= 3 * HELD_BLOCK // 2:
        # HELD_BLOCK's loop computes 128 elements for rows of 65-127, and runs a vector 0.8x the time of these
        how = 6
    elif odd_held(kind, xs, wkind) and n >= BF16_RUN:  # i32 in float32: f16, or bf16 under a normal scale
        how = odd_held(kind, xs, wkind)
        if how == 5 and np.float32(0) < abs(sv) < np.float32(2.0**-126):
            how = 0
    if limit and how in (3, 5):  # i32 in the guarded loop: the bound checked as the row is computed
        zr = zv if given(zkind) else bias(xkind)
        if how == 3:
            return odd_row(xs, o, i, n, zr, sv, limit, xkind)
        return odd_bf16_row(xs, o, i, n, zr, sv, limit, xkind)
    if limit and not within(xs, i, i + n, limit):  # a row of fewer than 16, or under a subnormal scale to bf16
        return False
    if how:
        zr = zv if given(zkind) else bias(xkind)
        kz, cv = np.int32(PERIOD_BIAS_BITS - np.int32(zr)), np.float32(-PERIOD_BIAS) * sv
        k, last = i, i + n - BF16_RUN
        while True:  # vectors at i, i + 16, ... and the last one's start: one call of each kind, compiled once
            b = min(k, last)
            if how == 1:
                bf16_run(xs, o, b, zr, sv, xkind)
            elif how == 4:
                f16_run(xs, o, b, zr, sv, xkind)
            elif how == 2:
                held_odd_run(xs, o, b, kz, sv, cv)
            elif how == 3:
                odd_run(xs, o, b, zr, sv, xkind)
            elif how == 6:
                f32_run(xs, o, b, zr, sv, xkind)
            else:
                odd_bf16_run(xs, o, b, zr, sv, xkind)
            if b == last:
                return True
            k += BF16_RUN
    xr, orow = xs[i : i + n], o[i : i + n]
    lo, hi = 0, (n - n % HELD_BLOCK if n >= HELD_BLOCK else n)
    while True:
        xb, ob = xr[lo:hi], orow[lo:hi]
        if given(zkind):
            for i in range(hi - lo):
                ob[i] = store(kind, minuend(xkind, wkind, xb[i]) - zv, sv, exact)
        else:
            for i in range(hi - lo):
                ob[i] = store(kind, plain(xkind, wkind, xb[i]), sv, exact)
        if hi >= n:
            break
        lo, hi = n - HELD_BLOCK, n
    return True


@_part
def _vector_blocks(xr, orow, zr, sr, kind, xkind, zkind):  # pragma: no cover - compiled
    """``orow = (xr - zr) * sr`` in ``block_run``'s blocks, the last one overlapping the one before: at
    least ``BLOCK_RUN`` elements."""
    last = xr.shape[0] - BLOCK_RUN
    k = 0
    while True:  # one call: compiled once
        b = min(k, last)
        block_run(xr, b, zr, b, sr, b, orow, kind, xkind, zkind)
        if b == last:
            break
        k += BLOCK_RUN


@_part
def run_varies(xr, orow, zr, sr, kind, xkind, zkind, wkind, exact):  # pragma: no cover - compiled
    """``orow = (xr - zr) * sr``, the scale (and zero point) a run beside the input's, read in their own
    types (in ``block_run``'s vectors where ``odd_blocks``)."""
    if odd_blocks(kind, xr, wkind) and xr.shape[0] >= BLOCK_RUN:
        _vector_blocks(xr, orow, zr, sr, kind, xkind, zkind)
    else:
        _varies_loop(xr, orow, zr, sr, kind, xkind, zkind, wkind, exact)


@_part
def _varies_loop(xr, orow, zr, sr, kind, xkind, zkind, wkind, exact):  # pragma: no cover - compiled
    """``run_varies`` in the loop LLVM vectorizes, without explicit vectors."""
    if given(zkind):
        for i in range(xr.shape[0]):
            d = difference(xkind, wkind, xr[i], value(xkind, zr[i]))
            orow[i] = store(kind, d, as_work(wkind, load(kind, sr[i])), exact)
    else:
        for i in range(xr.shape[0]):
            orow[i] = store(kind, plain(xkind, wkind, xr[i]), as_work(wkind, load(kind, sr[i])), exact)


@_part
def run_spread(xr, orow, zt, st, kind, xkind, zkind, wkind, exact):  # pragma: no cover - compiled
    """``orow = (xr - zt) * st``, the scale spread in the work type, the zero point in its own (int4's
    biased, in int8): a quarter of the bytes to spread and read for 8-bit inputs; in ``block_run``'s
    vectors where ``odd_blocks``, the zero point in float32 (``z_zeros``)."""
    if odd_blocks(kind, xr, wkind) and xr.shape[0] >= BLOCK_RUN:
        _vector_blocks(xr, orow, zt, st, kind, xkind, zkind)
    elif given(zkind):
        for i in range(xr.shape[0]):
            orow[i] = store(kind, difference(xkind, wkind, xr[i], zt[i]), st[i], exact)
    else:
        for i in range(xr.shape[0]):
            orow[i] = store(kind, plain(xkind, wkind, xr[i]), st[i], exact)


@_bare
def window(s, z, off, sw, zw, kind, xkind, zkind, wkind):  # pragma: no cover - compiled
    """The window of the scale (and zero point) that the tile at scale offset ``off`` reads: the scale
    converted to the work type into ``sw``, each value once, the zero point into ``zw`` as ``value``
    reads it (``z_zeros``). The outermost dim's last tile may run past the input's end
    (``reference._tile``): the window stops at the scale's end, and what lies past it is never
    output."""
    w = min(sw.shape[0], s.shape[0] - off)
    sr = s[off : off + w]
    for k in range(w):
        sw[k] = as_work(wkind, load(kind, sr[k]))
    if given(zkind):
        zr = z[off : off + w]
        for k in range(w):
            zw[k] = value(xkind, zr[k])


@_part
def _narrow_rows(xr, orow, z, s, j, rows, width, kind, xkind, zkind, wkind, exact):  # pragma: no cover - compiled
    """``rows`` whole rows of ``width`` elements (a constant where the caller passes one: LLVM then unrolls
    a row and vectorizes across rows), row r's one value at ``s[j + r]`` (and ``z[j + r]``; both sliced
    from ``j`` first, so that every index is known non-negative and no wraparound check stops LLVM)."""
    sr = s[j : j + rows]
    zr = z[j : j + rows] if given(zkind) else z
    for r in range(rows):
        sv = as_work(wkind, load(kind, sr[r]))
        o = r * width
        if given(zkind):
            zv = as_work(wkind, value(xkind, zr[r]))
            for k in range(width):
                orow[o + k] = store(kind, minuend(xkind, wkind, xr[o + k]) - zv, sv, exact)
        else:
            for k in range(width):
                orow[o + k] = store(kind, plain(xkind, wkind, xr[o + k]), sv, exact)


def narrow_rest(xs, os_, z, s, j, rows, width, kind, xkind, zkind, wkind, exact):  # pragma: no cover - by its overload
    """``_narrow_rows`` of the whole rows ``held_narrow`` leaves to it: with the width a constant (written out
    for each, as ``spread``'s are) where ``narrow_run`` does not serve these types and every row is
    left; else (at most 15 rows a tile, and the rows past the scale's last whole group) as they are,
    and the seven constant widths are not compiled (2.5 s a loop)."""


@overload(narrow_rest, jit_options={"nogil": True})
def _narrow_rest(xs, os_, z, s, j, rows, width, kind, xkind, zkind, wkind, exact):  # pragma: no cover - compiled
    if _narrow_on(kind, xs, s, os_, xkind, zkind, wkind):

        def few(xs, os_, z, s, j, rows, width, kind, xkind, zkind, wkind, exact):
            _narrow_rows(xs, os_, z, s, j, rows, width, kind, xkind, zkind, wkind, exact)

        return few

    def each(xs, os_, z, s, j, rows, width, kind, xkind, zkind, wkind, exact):
        if width == 2:
            _narrow_rows(xs, os_, z, s, j, rows, 2, kind, xkind, zkind, wkind, exact)
        elif width == 3:
            _narrow_rows(xs, os_, z, s, j, rows, 3, kind, xkind, zkind, wkind, exact)
        elif width == 4:
            _narrow_rows(xs, os_, z, s, j, rows, 4, kind, xkind, zkind, wkind, exact)
        elif width == 5:
            _narrow_rows(xs, os_, z, s, j, rows, 5, kind, xkind, zkind, wkind, exact)
        elif width == 6:
            _narrow_rows(xs, os_, z, s, j, rows, 6, kind, xkind, zkind, wkind, exact)
        elif width == 7:
            _narrow_rows(xs, os_, z, s, j, rows, 7, kind, xkind, zkind, wkind, exact)
        elif width == 8:
            _narrow_rows(xs, os_, z, s, j, rows, 8, kind, xkind, zkind, wkind, exact)
        else:  # wider rows run narrow only where ``narrow_run`` serves the types (``reference._loop_layout``)
            _narrow_rows(xs, os_, z, s, j, rows, width, kind, xkind, zkind, wkind, exact)

    return each


@_bare
def held_narrow(xr, orow, z, s, off, col, width, kind, xkind, zkind, wkind, exact):  # pragma: no cover - compiled
    """The tile's rows of ``width`` (2-8, or up to 63 where ``narrow_vectors``) elements from its column
    ``col``, row r's one value at ``s[off + r]`` (the tile's rows read consecutive scale values): whole
    groups of 16 rows by ``narrow_run`` where the types allow (``narrow_vectors``), then the whole vectors of
    the rows left where their 16 values lie within the scale, the other whole rows by ``narrow_rest``, a row
    the range cuts as a row of its own part. No window is converted and nothing is spread: where every
    tile reads a new window that costs more than the product (``(165870,6)`` ``{0}`` i8 -> f32 with a zero
    point: 161 us spread, 72 us so, in tiles of up to ``reference.TILE_NARROW``). Compiled apart (not
    inlined): seven inlined copies of the row loop made the loops that call it slow to compile."""
    wide_vectors(kind)
    n = xr.shape[0]
    r = col // width
    a = 0
    if col != r * width:  # the range starts inside row r
        a = min((r + 1) * width - col, n)
        _narrow_rows(xr[0:a], orow[0:a], z, s, off + r, 1, a, kind, xkind, zkind, wkind, exact)
        r += 1
    full = (n - a) // width
    if full:
        xs, os_ = xr[a : a + full * width], orow[a : a + full * width]
        done = 0  # elements of whole rows in explicit vectors where the types allow, the rest as rows
        if width <= NARROW_WIDTH and narrow_vectors(kind, xr, s, orow, xkind, zkind, wkind):
            room = s.shape[0] - (off + r)  # whole groups of 16 rows, their 16 values within the scale
            groups = min(full, room) // BLOCK_RUN
            if groups:
                narrow_run(xs, os_, z, s, off + r, groups, width, BLOCK_RUN, 1, width, kind, xkind, zkind)
            done = groups * BLOCK_RUN * width
            # the whole vectors of the rows left (fewer than 16, whose 16 values lie within the scale):
            # a tile of a few rows (a prime dim's) is then no longer computed row by row
            left = (full - groups * BLOCK_RUN) * width // BLOCK_RUN
            if left and room - groups * BLOCK_RUN >= BLOCK_RUN:
                j = off + r + groups * BLOCK_RUN
                narrow_run(xs[done:], os_[done:], z, s, j, 1, left, BLOCK_RUN, 1, width, kind, xkind, zkind)
                done += left * BLOCK_RUN
        rows = done // width
        if done != rows * width:  # the vectors ended inside a row: the rest of it (``narrow_rest``, compiled
            # already, as a row of its own: one more inlined row loop cost each "tiles narrow" loop a second)
            m = (rows + 1) * width - done
            xm, om = xs[done : done + m], os_[done : done + m]
            narrow_rest(xm, om, z, s, off + r + rows, 1, m, kind, xkind, zkind, wkind, exact)
            done += m
            rows += 1
        if rows < full:
            narrow_rest(
                xs[done:], os_[done:], z, s, off + r + rows, full - rows, width, kind, xkind, zkind, wkind, exact
            )
        a += full * width
        r += full
    if a < n:  # the range ends inside row r
        _narrow_rows(xr[a:n], orow[a:n], z, s, off + r, 1, n - a, kind, xkind, zkind, wkind, exact)


@_bare
def _grouped_rows(xr, orow, z, s, off, t0, width, period, kind, xkind, zkind, wkind, exact):  # pragma: no cover
    """The tile's elements from its column ``t0`` (``xr`` and ``orow`` hold them), element t beside the scale
    (and zero point) at ``off + t // period * width + t % period % width``: each run of a row as
    ``_varies_loop`` computes it."""
    n = xr.shape[0]
    a = 0
    while a < n:
        t = t0 + a
        p = t // period
        c = (t - p * period) % width
        m = min(width - c, n - a)
        so = off + p * width + c
        zr = z[so : so + m] if given(zkind) else z
        _varies_loop(xr[a : a + m], orow[a : a + m], zr, s[so : so + m], kind, xkind, zkind, wkind, exact)
        a += m


@_bare
def grouped_narrow(xr, orow, z, s, off, col, width, group, runs, kind, xkind, zkind, wkind, exact):  # pragma: no cover
    """The tile's elements from its column ``col``, its rows of ``width`` elements in groups of ``group``
    consecutive rows beside one run of the scale (and zero point), consecutive runs (row r's at ``s[off + r
    // group * width]``): whole periods of ``runs`` runs (``reference._lane_runs``; 0: none) in
    ``narrow_run``'s vectors where the types allow (``narrow_vectors``) and the values they read lie within
    the scale (their 16, or where they are more, each vector's 32 from its least), the rest a run at a time
    (``_grouped_rows``). No window is converted and nothing is spread:
    where every tile reads a new window, spreading it costs more than the product (``(52,3,5,118,4,4)``
    ``{0,1,2,3,5}`` i4 -> bf16 with a zero point, rows of 4 in groups of 4, single-threaded: 393 us
    spread, 187 us so)."""
    wide_vectors(kind)
    period = width * group
    n = xr.shape[0]
    a = 0
    # ``narrow_run``'s buffer holds the lanes of NARROW_WIDTH vectors at most
    if runs and runs * period <= BLOCK_RUN * NARROW_WIDTH and narrow_vectors(kind, xr, s, orow, xkind, zkind, wkind):
        a = min((period - col % period) % period, n)  # to the first whole period
        _grouped_rows(xr[:a], orow[:a], z, s, off, col, width, period, kind, xkind, zkind, wkind, exact)
        vectors, step = runs * period // BLOCK_RUN, runs * width
        # the values a group may read from its first: its 16, or each vector's 32 from the vector's first
        reach = BLOCK_RUN if step <= BLOCK_RUN else step + 2 * BLOCK_RUN - 1
        j = off + (col + a) // period * width
        room = s.shape[0] - j
        if room >= reach:
            groups = min((n - a) // (BLOCK_RUN * vectors), (room - reach) // step + 1)
            if groups:
                narrow_run(xr[a:], orow[a:], z, s, j, groups, vectors, step, width, period, kind, xkind, zkind)
            a += groups * BLOCK_RUN * vectors
            j += groups * step
            left = min((n - a) // BLOCK_RUN, vectors - 1)  # whole vectors of the last group
            if left and s.shape[0] - j >= reach:
                narrow_run(xr[a:], orow[a:], z, s, j, 1, left, step, width, period, kind, xkind, zkind)
                a += left * BLOCK_RUN
    _grouped_rows(xr[a:], orow[a:], z, s, off, col + a, width, period, kind, xkind, zkind, wkind, exact)


@_part
def _blocks(xr, orow, z, s, a, so, m, varies, kind, xkind, zkind, wkind, exact):  # pragma: no cover - compiled
    """``m`` elements of a row from ``a``, beside the run of the scale (and zero point) at ``so`` where
    ``varies``, else under their one value there: in ``BLOCK_RUN`` blocks, the last one overlapping the
    one before; a row narrower than a block in one block where a block's elements lie in the range (``xr``)
    and its run in the scale (and zero point), the elements past the row written and then overwritten by
    the rows after it; or fewer than a block as ``_varies_loop`` or ``_narrow_rows`` (one row) computes them."""
    spill = m < BLOCK_RUN and xr.shape[0] - a >= BLOCK_RUN
    if spill and varies:  # the run's block must lie in the scale (and the zero point)
        spill = so + BLOCK_RUN <= s.shape[0] and (so + BLOCK_RUN <= z.shape[0] or not given(zkind))
    if spill:  # written out apart from the loop below: a loop for these rows of 9-15 took 1.2-1.4x the time
        if varies:
            block_run(xr, a, z, so, s, so, orow, kind, xkind, zkind)
        else:
            block_held(xr, a, z, so, s, so, orow, kind, xkind, zkind)
    elif m >= BLOCK_RUN:
        last = m - BLOCK_RUN
        if varies:
            for k in range(0, last, BLOCK_RUN):
                block_run(xr, a + k, z, so + k, s, so + k, orow, kind, xkind, zkind)
            block_run(xr, a + last, z, so + last, s, so + last, orow, kind, xkind, zkind)
        else:
            for k in range(0, last, BLOCK_RUN):
                block_held(xr, a + k, z, so, s, so, orow, kind, xkind, zkind)
            block_held(xr, a + last, z, so, s, so, orow, kind, xkind, zkind)
    elif varies:  # fewer than a block: no explicit vectors (each inlined copy of them is compiled anew)
        zr = z[so : so + m] if given(zkind) else z
        _varies_loop(xr[a : a + m], orow[a : a + m], zr, s[so : so + m], kind, xkind, zkind, wkind, exact)
    else:
        _narrow_rows(xr[a : a + m], orow[a : a + m], z, s, so, 1, m, kind, xkind, zkind, wkind, exact)


@_bare
def block_rows(
    xr, orow, z, s, off, col, pattern, width, varies, kind, xkind, zkind, wkind, exact
):  # pragma: no cover - compiled
    """The tile's rows from its column ``col``, row r beside the run of the scale (and zero point) at
    ``off + pattern[r]`` where ``varies``, else under the one value there, read where they are: each
    row (or the part the range holds) in ``_blocks``, so that no element runs alone. No window is
    converted and nothing is spread."""
    n = xr.shape[0]
    r = col // width
    c = col - r * width  # the column in row r
    a = 0
    while a < n:
        m = min(width - c, n - a)
        so = off + np.int64(pattern[r]) + (c if varies else 0)
        _blocks(xr, orow, z, s, a, so, m, varies, kind, xkind, zkind, wkind, exact)
        a += m
        r += 1
        c = 0


LAYOUTS = {
    "rows held": np.uint8(0),
    "rows varying": np.int8(0),
    "tiles spread": np.int32(0),
    "tiles narrow": np.int64(0),
    "tiles blocks": np.uint32(0),
}
"""The markers of the loop's five layouts (``reference._loop_layout`` picks one): wide rows of one scale
value each, or each beside a run of the scale; tiles of narrow rows (and tiles that all read one
window), the tile's window spread over it; tiles of rows of 2-63 elements of one value each,
consecutive values, a new window every tile (or any, in vectors), computed from the scale itself
(``held_narrow``), or of rows of up to 32 elements beside runs of the scale, groups of rows a run
(``grouped_narrow``); tiles of rows of 9 or more elements (runs: up to 127) whose float32 products are
exact, a new window every tile or every other, computed from the scale itself in vector blocks
(``block_rows``)."""


PLAN_HEAD = 7
"""The fields before ``reference._kernel_plan``'s pattern."""


@_part
def unplan(plan):  # pragma: no cover - compiled
    """``reference._kernel_plan``'s array as (tile, whether the scale runs along rows, the rows of a spread
    group, the pattern, the outer dims, their scale strides)."""
    rows, m = plan[2], plan[3]
    a, b = PLAN_HEAD + rows, PLAN_HEAD + rows + m
    return plan[0], plan[1] != 0, plan[4], plan[PLAN_HEAD:a], plan[a:b], plan[b : b + m]


@_part
def unplan_period(plan):  # pragma: no cover - compiled
    """``reference._kernel_plan``'s period: (its vectors, 0 where it has none; the scale offsets of the
    flat index's period, ``reference._period``)."""
    return plan[5], plan[PLAN_HEAD + plan[2] + 2 * plan[3] :]


def spread_buffers(mode, tile, rows, span):  # pragma: no cover - compiled by its overload
    """Where the fused loop's scratch arrays (``fused_for``) hold the spread tile, the window and spread's
    gathered values of held rows: (spread tile's length, window's, values'); only "tiles spread" spreads
    a tile."""


@overload(spread_buffers, jit_options={"nogil": True})
def _spread_buffers(mode, tile, rows, span):  # pragma: no cover - compiled
    if numba.typeof(LAYOUTS["tiles spread"]) == mode:
        return lambda mode, tile, rows, span: (tile + SPREAD_BLOCK, span, rows)
    return lambda mode, tile, rows, span: (0, span, 0)


def _tiles_for(layout: str):
    """The fused loop's walk over its tiles in one layout, from odometer ``idx`` (scale offset ``off``,
    column ``col``), in the scratch ``fused_for``'s loop allocated (``spread_buffers``). Its flags are the
    closure's constants, so that Numba prunes the other layouts' branches before typing them (a loop
    that typed all five compiled 2-3x slower, each layout's helpers compiled for every layout); it is
    compiled without reference counting, as every tile slices its arrays (a slice's reference counted,
    atomically, in and out: about 22 ns a tile)."""
    held, varies, narrow, blocks = (
        layout == name for name in ("rows held", "rows varying", "tiles narrow", "tiles blocks")
    )

    @_bare
    def walk(
        x, z, s, out, e0, e1, plan, idx, off, col, wb, zs, span, kind, xkind, zkind, wkind, mode, limit
    ):  # pragma: no cover - compiled

        tile, inner_varies, group, pattern, dims, strides = unplan(plan)
        width = tile // max(pattern.shape[0], 1)
        nb, nw, nv = spread_buffers(mode, tile, max(pattern.shape[0], 1), span)
        sb, sw, rv = wb[:nb], wb[nb : nb + nw], wb[nb + nw : nb + nw + nv]
        zb, zw, rzv = zs[:nb], zs[nb : nb + nw], zs[nb + nw : nb + nw + nv]
        wide_vectors(kind)
        exact = product_exact(kind, x)
        cached = -1
        e = e0
        xs = x[e0:e1]  # aligned with ``out``: held rows read and write them at their offsets
        while e < e1:
            n = min(tile - col, e1 - e)
            if held:
                # the guarded loop's caller has checked a zero point of one value a row (``limit``)
                zv = as_work(wkind, value(xkind, z[off])) if given(zkind) else wkind
                sv = as_work(wkind, load(kind, s[off]))
                if not run_held(xs, out, e - e0, n, zv, sv, kind, xkind, zkind, wkind, exact, limit):
                    return False
            else:
                xr = x[e : e + n]
                orow = out[e - e0 : e - e0 + n]
                if varies:
                    zr = z[off + col : off + col + n] if given(zkind) else z
                    run_varies(xr, orow, zr, s[off + col : off + col + n], kind, xkind, zkind, wkind, exact)
                elif narrow and inner_varies:
                    grouped_narrow(xr, orow, z, s, off, col, width, group, plan[6], kind, xkind, zkind, wkind, exact)
                elif narrow:
                    held_narrow(xr, orow, z, s, off, col, width, kind, xkind, zkind, wkind, exact)
                elif blocks:
                    block_rows(xr, orow, z, s, off, col, pattern, width, inner_varies, kind, xkind, zkind, wkind, exact)
                else:
                    if off != cached:
                        window(s, z, off, sw, zw, kind, xkind, zkind, wkind)
                        spread(sb, sw, pattern, width, inner_varies, rv, group)
                        if given(zkind):
                            spread(zb, zw, pattern, width, inner_varies, rzv, group)
                        cached = off
                    zt = zb[col : col + n] if given(zkind) else zb
                    run_spread(xr, orow, zt, sb[col : col + n], kind, xkind, zkind, wkind, exact)
            e += n
            col = 0
            off = advance(idx, dims, strides, off)
        return True

    return walk


walk_rows_held = _tiles_for("rows held")
walk_rows_varying = _tiles_for("rows varying")
walk_tiles_spread = _tiles_for("tiles spread")
walk_tiles_narrow = _tiles_for("tiles narrow")
walk_tiles_blocks = _tiles_for("tiles blocks")


@_jit
def overlaps(out, a):  # pragma: no cover - compiled
    """Whether the memory of 1-D C-contiguous arrays ``out`` and ``a`` overlaps (``np.may_share_memory``'s
    bounds test, which costs about 0.5 us a call from Python)."""
    o, p = out.ctypes.data, a.ctypes.data
    return out.nbytes > 0 and a.nbytes > 0 and o < p + a.nbytes and p < o + out.nbytes


@intrinsic
def _swapped(typingctx, slots, old, new):  # pragma: no cover - compiled
    """``slots[0]`` (int64) set to ``new`` where it is ``old``, atomically; its value before."""

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.extract_value(builder.cmpxchg(a.data, args[1], args[2], "acq_rel", "monotonic"), 0)

    return types.int64(slots, old, new), codegen


@_jit
def claim_block(claim):  # pragma: no cover - compiled
    """The number of the next block a claiming loop computes (``fused_for``'s ``claim``), or -1 where
    none is left to it. ``claim[0]`` (int64, shared among the threads of a call) holds the blocks not
    yet claimed, ``front`` (low 32 bits) to ``back`` (high 32 bits); the caller's loop, given the whole
    array, takes the block at the front, a helper's, given it less its last element (``claim[:-1]``),
    the block at the back, and leaves the last one to the caller; each by a compare-and-swap. So each
    thread computes the same part of the call from call to call where they run alike (what it computed
    the last time is in its CPU's cache), and the two meet where they meet."""
    helper = claim.shape[0] == claim[1] + 3
    w = claim[0]
    while True:
        front, back = w & 0xFFFFFFFF, w >> 32
        if helper:
            if back - front <= 1:
                return -1
            k, new = back - 1, w - (1 << 32)
        else:
            if front >= back:
                return -1
            k, new = front, w + 1
        seen = _swapped(claim, w, new)
        if seen == w:
            return k
        w = seen


GUARD_CHUNK = 1 << 16
"""The elements a guarded loop (``fused_for``'s ``guard``) checks, then computes, at a time: 256 KB of
i32, which the computation reads again from the L2 cache (1 MB on Zen 4). Each chunk is one walk's
call, about 0.1 us: chunks of 2**10 took 1.4x the time of these, 2**15 1.02x
(``(3,84,2085,1)`` ``{1,2,3}`` i32 -> bf16)."""


WITHIN_BLOCK = 4096
"""The elements ``within`` reduces before it tests the bounds."""


@_loop
def within(a, e0, e1, limit):  # pragma: no cover - compiled
    """Whether every element of ``a[e0:e1]`` (int32) lies within ``-limit..limit``: a minimum and a
    maximum, which LLVM vectorizes (0.045 ns an element; a test of each element against the bounds:
    0.075), a block of ``WITHIN_BLOCK`` at a time, stopping at the first beyond."""
    for b0 in range(e0, e1, WITHIN_BLOCK):
        lo, hi = np.int32(limit), np.int32(-limit)
        part = a[b0 : min(e1, b0 + WITHIN_BLOCK)]  # indexes from 0, known non-negative: no wraparound check
        for i in range(part.shape[0]):
            v = part[i]
            lo = v if v < lo else lo
            hi = v if v > hi else hi
        if lo < -limit or hi > limit:
            return False
    return True


def period_done(x, z, s, out, e0, e1, plan, kind, xkind, zkind, wkind):  # pragma: no cover - compiled by its overload
    """Whether ``periodic`` computed ``out``'s elements ``e0 <= e < e1``: 16-bit inputs to f16 (``_odd``) whose
    plan has a period (``unplan_period``), where its scales allow. For other types a constant False, and
    ``periodic`` is not compiled for them (0.7 s each)."""


@overload(period_done, jit_options={"nogil": True})
def _period_done(x, z, s, out, e0, e1, plan, kind, xkind, zkind, wkind):  # pragma: no cover - compiled
    if not _odd(kind, x.dtype, wkind):
        return lambda x, z, s, out, e0, e1, plan, kind, xkind, zkind, wkind: False

    def done(x, z, s, out, e0, e1, plan, kind, xkind, zkind, wkind):
        vectors, offsets = unplan_period(plan)
        return vectors > 0 and periodic(x, z, s, out, e0, e1, offsets, vectors, kind, xkind, zkind, wkind)

    return done


def fused_for(kind, xkind, zkind, wkind, mode, guard=0):
    """The fused loop with its markers fixed: ``out[0 : e1 - e0] = (x[e] - z[j]) * s[j]`` for the flat
    elements ``e0 <= e < e1``, called with the eight array and index arguments alone. It returns the end
    of what it wrote: ``e1``, or -1, writing nothing, where ``out`` overlaps an input.

    ``claim`` (int64) is empty, or the blocks of ``e0..e1`` shared among the threads of a call
    (``_split.claim_of``): the blocks not yet claimed, their number, their bounds (``e0`` first, ``e1``
    last) and a spare last element. Each thread calls the loop on the whole range and computes the
    blocks it claims (``claim_block``) until none is left; so a thread that runs slower (a helper started
    late, a virtual CPU the host runs slower for a while) computes fewer.

    ``plan`` (``reference._kernel_plan``'s, ``unplan``): ``tile`` elements per innermost unit;
    ``pattern`` (tiles) the scale offset of each of the tile's rows (of ``tile // len(pattern)``
    elements); whether the scale runs along a row (or is one value); the outer dims and their scale
    strides; the rows of a spread group (``_spread_groups``). The markers: ``kind`` the output's
    (``MARKERS``), ``xkind`` the input's (``INT4``, ``UINT4`` for 4-bit bytes, else ``PLAIN``), ``zkind``
    whether a zero point is given (``ZP``, else ``PLAIN``: ``z`` is not read), ``wkind`` a zero of the work
    type and ``mode`` the layout (``LAYOUTS``), whose walk over the tiles (``_tiles_for``) the loop calls
    after allocating the odometer and the scratch; 16-bit inputs to f16 whose plan has a period run from
    it instead (``period_done``), whatever the layout, where its scales allow.

    With a ``guard`` (float32 work for i32 inputs, ``exactness.f32_guard``) it computes ``GUARD_CHUNK``
    elements at a time, each once its inputs are found within ``-guard..guard`` (``within``), a zero
    point as large as the input with them (the caller checks any other whole), and returns the start of
    the first that is not (its claimed block left to the caller); held rows that the CPU computes in
    vectors (``odd_held``) are checked as they are computed (``run_held``: the input read once, not first
    in a pass of its own: per tensor ``(13,5,4,78,4)`` i32 -> bf16 0.88x the time, held rows of 99
    elements 0.94-1.03x). Numba types
    every argument of every call; a NumPy scalar marker costs about 0.25 us of it (five: a third of a
    call's fixed cost), a closure's cells are compile-time constants (and part of the cache's key). The
    layout's flags are such cells, so that Numba prunes the other walks before typing; the walks are
    module globals (a closure over a compiled function is compiled again in every process), and each
    level of calls between this loop and its walk cost a compilation about a second more."""
    guarded = guard > 0
    held, varies, spreads, narrow, blocks = (mode.dtype == LAYOUTS[name].dtype for name in LAYOUTS)

    @_loop
    def loop(x, z, s, out, e0, e1, plan, claim):  # pragma: no cover - compiled
        if overlaps(out, x) or overlaps(out, s) or overlaps(out, z):
            return -1
        tile, inner_varies, group, pattern, dims, strides = unplan(plan)
        rows = max(pattern.shape[0], 1)
        width = tile // rows
        # an int64 from the start: a literal 0 that the loop below widens made Numba type the walk's call
        # twice, compiling the walk for a literal span first (1.3 s, in vain, for every loop that spreads
        # or reads rows: 96 of the suite's 287 walks)
        span = np.int64(0)  # a tile's scale window: its rows' offsets and a row's run; none where the walk reads
        if not (narrow or blocks):  # the scale itself
            for r in range(pattern.shape[0]):
                span = max(span, np.int64(pattern[r]) + (width if inner_varies else 1))
        if spreads:
            span += SPREAD_BLOCK  # the spare elements ``spread`` reads
        # the odometer, the scale's scratch in one array and the zero point's in another (about 40 ns
        # each), allocated once a call, where a chunk needs them (each claimed block is one)
        idx = np.zeros(max(dims.shape[0], 1), np.int64)
        nb, nw, nv = spread_buffers(mode, tile, rows, span)
        n = nb + nw + nv
        wb, zs = work_zeros(wkind, 0), z_zeros(kind, xkind, wkind, z, 0)
        claiming = claim.shape[0] > 0
        paired = z.shape[0] == x.shape[0]  # a zero point of the input's elements: guarded with it
        # i32 held rows in vectors, checked as computed; their zero point is never as large as the input
        # (rows of ``reference.HELD_MIN`` or more under one value each), which the caller checks whole
        checks_rows = guarded and held and odd_held(kind, x, wkind) > 0
        limit = guard if checks_rows else 0
        e, end = e0, e0 if claiming else e1  # claiming: the first block claimed
        while True:
            if e >= end:
                if not claiming:
                    return e1
                k = claim_block(claim)
                if k < 0:
                    return e1
                e, end = claim[2 + k], claim[3 + k]
            c = end
            if guarded:
                c = min(end, e + GUARD_CHUNK)
                # held rows in vectors are checked as each is computed (``run_held``)
                if not checks_rows and not within(x, e, c, guard):
                    return e
                if not checks_rows and given(zkind) and paired and not within(z, e, c, guard):
                    return e
            o = out[e - e0 : c - e0]
            if not period_done(x, z, s, o, e, c, plan, kind, xkind, zkind, wkind):
                off, col = start(idx, e, tile, dims, strides)
                if wb.shape[0] < n:  # a walk rewrites what it reads of them before it reads it
                    wb, zs = work_zeros(wkind, n), z_zeros(kind, xkind, wkind, z, n if given(zkind) else 0)
                if held:
                    if not walk_rows_held(
                        x, z, s, o, e, c, plan, idx, off, col, wb, zs, span, kind, xkind, zkind, wkind, mode, limit
                    ):
                        return e
                elif varies:
                    walk_rows_varying(
                        x, z, s, o, e, c, plan, idx, off, col, wb, zs, span, kind, xkind, zkind, wkind, mode, 0
                    )
                elif spreads:
                    walk_tiles_spread(
                        x, z, s, o, e, c, plan, idx, off, col, wb, zs, span, kind, xkind, zkind, wkind, mode, 0
                    )
                elif narrow:
                    walk_tiles_narrow(
                        x, z, s, o, e, c, plan, idx, off, col, wb, zs, span, kind, xkind, zkind, wkind, mode, 0
                    )
                else:
                    walk_tiles_blocks(
                        x, z, s, o, e, c, plan, idx, off, col, wb, zs, span, kind, xkind, zkind, wkind, mode, 0
                    )
            e = c

    return loop


def rounded(kind, v):  # pragma: no cover - compiled by its overload
    """Float32 or float64 ``v`` rounded once to f16/bf16 bits as ``store`` rounds a product, any NaN kept
    a NaN (``bf16_from_f32``, which is ``bf16_from_product`` and a NaN test)."""


@overload(rounded, jit_options={"nogil": True})
def _rounded(kind, v):  # pragma: no cover - compiled
    to_bits = f16_from_f32 if kind == types.uint16 else bf16_from_f32
    if v == types.float32:
        return lambda kind, v: to_bits(f32_bits(v))
    return lambda kind, v: to_bits(odd_f32(v))


@_loop
def narrow(src, dst, kind):  # pragma: no cover - compiled
    """``dst[i] = rounded(kind, src[i])``: the fused loop's rounding alone."""
    wide_vectors(kind)
    for i in range(src.shape[0]):
        dst[i] = rounded(kind, src[i])
