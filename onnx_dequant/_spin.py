"""A thread's wait for a value in shared memory, spinning without the GIL (compiled with Numba; imported
only where it is installed): how ``_split``'s helper threads see a call posted to them, and the
caller sees it done, in a microsecond or two rather than through the kernel (a futex wake of an idle
core costs 20-50 us on a virtual machine, measured)."""

from __future__ import annotations

import platform
import time

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

__all__ = ["until", "serve", "spins_per_second"]

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


@intrinsic
def _load_acquire(typingctx, slots, i):  # pragma: no cover - compiled
    """``slots[i]`` (int64) read from memory each time (an atomic load: LLVM may not hoist it out of a
    loop)."""

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(a.data, [args[1]]), "acquire", 8)

    return types.int64(slots, i), codegen


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
def _store_release(typingctx, slots, i, value):  # pragma: no cover - compiled
    """``slots[i] = value`` (int64), written to memory at once, after every earlier write."""

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        builder.store_atomic(args[2], builder.gep(a.data, [args[1]]), "release", 8)
        return context.get_dummy_value()

    return types.void(slots, i, value), codegen


@numba.njit(nogil=True, cache=True)
def serve(done, finished, posted, value, spins, settle):  # pragma: no cover - compiled
    """A helper's turn between calls, without the GIL: ``done[0] = finished`` (the caller, spinning,
    sees its part done while this thread holds no GIL the caller needs), then whether ``posted[0]``
    reached ``value`` within ``spins`` turns; once it has, ``settle`` more turns, so that the caller,
    which posts holding the GIL, has let it go (into its own blocks) before this thread takes it: a
    thread that finds the GIL taken sleeps, and its wake-up costs what spinning saves."""
    _store_release(done, 0, finished)
    if not until(posted, 0, value, spins):
        return False
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
