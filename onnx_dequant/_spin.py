"""A thread's wait for a value in shared memory, spinning without the GIL (compiled with Numba; imported
only where it is installed): how ``_split``'s helper threads see a call posted to them, and the
caller sees it done, in a microsecond or two rather than through the kernel (a futex wake of an idle
core costs 20-50 us on a virtual machine, measured); and, where it can (``SLEEPS``), how a helper
sleeps once it has spun long enough, and is woken (``post``, ``rouse``), without the GIL either."""

from __future__ import annotations

import platform
import sys
import time

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["until", "serve", "post", "rouse", "spins_per_second", "SLEEPS"]

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")

_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine().lower())
if not sys.platform.startswith("linux"):
    _SYS_FUTEX = None
SLEEPS = _SYS_FUTEX is not None
"""Whether ``serve`` can sleep (a futex wait, without the GIL: Linux on x86-64 and ARM64). A helper that
went to sleep in Python took the GIL to do so, just as the caller, starting its next call, wanted it:
a session's run between two cut calls took 15-25 us longer. Elsewhere ``serve`` returns, and the
helper sleeps in Python."""
_FUTEX_WAIT, _FUTEX_WAKE = 128, 129  # FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE


def _load(ordering: str):
    """An intrinsic ``(slots, i) -> slots[i]`` (int64), an atomic load of ``ordering``: read from memory
    each time (LLVM may not hoist it out of a loop)."""

    @intrinsic
    def load(typingctx, slots, i):
        def codegen(context, builder, sig, args):
            a = context.make_array(sig.args[0])(context, builder, args[0])
            return builder.load_atomic(builder.gep(a.data, [args[1]]), ordering, 8)

        return types.int64(slots, i), codegen

    return load


def _store(ordering: str):
    """An intrinsic ``(slots, i, value)``: ``slots[i] = value`` (int64), an atomic store of ``ordering``,
    written to memory at once."""

    @intrinsic
    def store(typingctx, slots, i, value):
        def codegen(context, builder, sig, args):
            a = context.make_array(sig.args[0])(context, builder, args[0])
            builder.store_atomic(args[2], builder.gep(a.data, [args[1]]), ordering, 8)
            return context.get_dummy_value()

        return types.void(slots, i, value), codegen

    return store


_load_acquire = _load("acquire")
"""``slots[i]``, read after the store of the thread that released it."""
_load_seq = _load("seq_cst")
"""``slots[i]``, read after every earlier store of this thread (a full barrier)."""
_store_release = _store("release")
"""``slots[i] = value``, after every earlier write of this thread."""
_store_seq = _store("seq_cst")
"""``slots[i] = value``, ordered before every later load of this thread (a full barrier)."""


@intrinsic
def _pause(typingctx):  # pragma: no cover - compiled
    """A spin-wait hint to the CPU (x86's ``pause``: it yields the core's resources to a sibling thread
    and keeps the wait from flooding memory with loads); nothing elsewhere."""

    def codegen(context, builder, sig, args):
        if _X86:
            fn = builder.module.declare_intrinsic("llvm.x86.sse2.pause", fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@numba.njit(nogil=True, cache=True)
def until(slots, i, value, spins):  # pragma: no cover - compiled
    """Whether ``slots[i]`` (a counter that only grows) reached ``value`` within ``spins`` turns of the
    loop (``spins_per_second``)."""
    for _ in range(spins):
        if _load_acquire(slots, i) >= value:
            return True
        _pause()
    return _load_acquire(slots, i) >= value


@intrinsic
def _take(typingctx, slots, i):  # pragma: no cover - compiled
    """``slots[i]`` (int64), replaced by 0 in one atomic exchange (a store meanwhile is never lost)."""

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        zero = ir.Constant(ir.IntType(64), 0)
        return builder.atomic_rmw("xchg", builder.gep(a.data, [args[1]]), zero, "seq_cst")

    return types.int64(slots, i), codegen


@intrinsic
def _futex(typingctx, slots, op, value):  # pragma: no cover - compiled
    """The futex system call on ``slots[0]``'s low 32 bits (little-endian): ``op`` ``_FUTEX_WAIT`` sleeps
    while they equal ``value``'s; ``_FUTEX_WAKE`` wakes ``value`` threads asleep on them. Nothing where
    ``SLEEPS`` is False."""

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        if _SYS_FUTEX is None:
            return ir.Constant(i64, -1)
        a = context.make_array(sig.args[0])(context, builder, args[0])
        fnty = ir.FunctionType(i64, [i64], var_arg=True)
        fn = cgutils.get_or_insert_function(builder.module, fnty, "syscall")
        low = builder.and_(args[2], ir.Constant(i64, 0xFFFFFFFF))
        zero = ir.Constant(i64, 0)
        call = [ir.Constant(i64, _SYS_FUTEX), builder.ptrtoint(a.data, i64), args[1], low, zero, zero, zero]
        return builder.call(fn, call)  # no timeout: a wait ends only when woken

    return types.int64(slots, op, value), codegen


@numba.njit(nogil=True, cache=True)
def _wake(posted, asleep):  # pragma: no cover - compiled
    """Wake the helper asleep on ``posted`` in ``serve`` (after a store of this thread that it is to see);
    whether it slept (or was about to)."""
    if _load_seq(asleep, 0) == 0:
        return False
    _futex(posted, _FUTEX_WAKE, 1)
    return True


@numba.njit(nogil=True, cache=True)
def post(posted, value, asleep):  # pragma: no cover - compiled
    """``posted[0] = value``, and the helper waiting on it woken where it sleeps in ``serve``; whether it
    slept (or was about to)."""
    _store_seq(posted, 0, value)
    return _wake(posted, asleep)


@numba.njit(nogil=True, cache=True)
def rouse(posted, asleep, spins):  # pragma: no cover - compiled
    """Have the helper waiting on ``posted`` (``serve``) spin ``spins`` more turns for a call to come, once
    its spin is over (woken where it sleeps); whether it slept."""
    _store_seq(asleep, 1, spins)
    return _wake(posted, asleep)


@numba.njit(nogil=True, cache=True)
def serve(done, finished, posted, value, spins, settle, asleep, sleeps):  # pragma: no cover - compiled
    """A helper's turn between calls, without the GIL: ``done[0] = finished`` (the caller, spinning,
    sees its part done while this thread holds no GIL the caller needs), then a wait for ``posted[0]``
    to reach ``value``: ``spins`` turns, and as many more as ``rouse`` asked for in ``asleep[1]``; then,
    where ``sleeps`` (``SLEEPS``), asleep (``asleep[0]`` is 1) until ``post`` or ``rouse`` wakes it, and
    so on. Whether it was posted (False: it has not been, and ``sleeps`` is False). Once posted,
    ``settle`` more turns, so that the caller, which posts holding the GIL, has let it go (into its own
    blocks) before this thread takes it: a thread that finds the GIL taken sleeps, and its wake-up
    costs what spinning saves."""
    _store_release(done, 0, finished)
    turns = spins
    while not until(posted, 0, value, turns):
        turns = _take(asleep, 1)
        if turns > 0:  # roused: a call is to come
            continue
        turns = spins
        if not sleeps:
            return False
        _store_seq(asleep, 0, 1)  # before posted is read: ``post`` (``rouse``) sees it, or raised posted first
        if _load_seq(posted, 0) < value and _load_seq(asleep, 1) == 0:
            _futex(posted, _FUTEX_WAIT, value - 1)  # returns at once where posted moved meanwhile
        _store_release(asleep, 0, 0)
    _take(asleep, 1)  # a rousing for this call is spent
    for _ in range(settle):
        _pause()
    return True


def spins_per_second() -> float:
    """``until``'s turns a second on this CPU, timed once (about 1 ms)."""
    probe = np.zeros(1, np.int64)
    until(probe, 0, 1, 10)  # compiled (or loaded from the cache) before it is timed
    turns = 50_000
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        until(probe, 0, 1, turns)
        best = min(best, time.perf_counter() - t0)
    return turns / max(best, 1e-9)
