"""Per-run state the kernels share with ``KernelSession``: the errors they record, the output
buffers they borrow or are handed, and the inputs that reach them through the session rather than
through ONNX Runtime: constant scales and zero points the session holds, and graph inputs read from
the caller's feed (``Params``).

A run token (an int64 scalar fed to every kernel node) names one run of one session. Kernels record
their errors under it (the session raises them when the run is over) and borrow output buffers from
the session's ``ScratchPool``; the buffers go back to the pool when the run ends well. A kernel whose
output is a graph output bound to an array (``Run.placed``) computes into that array instead: the
extension's copy of its result is then a copy onto itself, which the C library skips. Arrays the
session binds so are lent by the pool (``ScratchPool.lend``) and come back to it once the caller
drops them. A pool keeps at most ``max_bytes`` between runs and is freed with its session.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import math
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from ..errors import DequantizeError

__all__ = [
    "SCRATCH_MAX_BYTES",
    "Fed",
    "Misplaced",
    "Feeds",
    "NodeInputs",
    "Params",
    "Placed",
    "Source",
    "ScratchPool",
    "Run",
    "begin",
    "lookup",
    "inputs",
    "record",
    "end",
]

log = logging.getLogger("onnx_dequant.ort")

SCRATCH_MAX_BYTES = 256 << 20
"""Default for ``ScratchPool.max_bytes``: the most scratch a session keeps between runs."""


class Misplaced(DequantizeError):
    """A kernel's output bound to an array of another shape or type than the kernel gives."""


@dataclass(frozen=True)
class Fed:
    """A graph input a kernel reads from the run's feed (the caller's array), not as an op input."""

    name: str


Source = np.ndarray | Fed
"""Where a kernel finds an input the session hands it: a constant the session holds (read-only), or a
graph input of the run's feed."""


@dataclass(frozen=True)
class NodeInputs:
    """The inputs one kernel node finds through the session: ``x`` (None: an op input, as ONNX Runtime
    hands it over), its scale and its zero point (None: the node has none)."""

    x: Source | None
    scale: Source
    zero_point: Source | None


Params = dict[str, NodeInputs]
"""By node name, the inputs of the kernels that are not fed them by ONNX Runtime."""

Feeds = Mapping[str, np.ndarray]
"""A run's graph inputs as the kernels read them, by name (the caller's arrays, not copies)."""


LEND_SLACK = 2
"""``ScratchPool.lend`` lends a kept buffer at most this many times the array's size (else a new one)."""


class ScratchPool:
    """Output buffers one session reuses from run to run; at most ``max_bytes`` kept between runs.

    Reusing a buffer saves the page faults of a fresh output array (about as long as a copy).
    ``max_bytes=0`` turns reuse off: every kernel output is a fresh array.
    """

    def __init__(self, max_bytes: int = SCRATCH_MAX_BYTES) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise DequantizeError(f"scratch_bytes must be an integer >= 0, got {max_bytes!r}")
        self._free: list[np.ndarray] = []
        self._returned = _Returned(int(max_bytes))
        self._lock = threading.Lock()

    @property
    def max_bytes(self) -> int:
        """The most bytes kept between runs (and, apart, of buffers coming back from the caller)."""
        return self._returned.max_bytes

    @property
    def kept_bytes(self) -> int:
        """Bytes held between runs now."""
        with self._lock:
            self._collect()
            return sum(b.nbytes for b in self._free)

    def _collect(self) -> None:
        """Move the buffers that came back from the caller to the free list (under the lock)."""
        returned = self._returned.buffers
        if not returned:  # most calls: nothing came back (a run's own lend and take cost 2 us less)
            return
        while returned:
            self._free.append(returned.pop())
        if sum(b.nbytes for b in self._free) > self.max_bytes:
            self._free = _largest_within(self._free, self.max_bytes)

    def take(self, nbytes: int, most: int | None = None) -> np.ndarray | None:
        """A byte buffer of at least ``nbytes`` (the smallest kept one that fits, and holds at most
        ``most`` bytes where given; else a new one); None when ``nbytes`` is 0 or over ``max_bytes``."""
        if nbytes <= 0 or nbytes > self.max_bytes:
            return None
        most = self.max_bytes if most is None else most
        with self._lock:
            self._collect()
            best, size = -1, 0
            for i, b in enumerate(self._free):
                n = b.nbytes
                if nbytes <= n <= most and (best < 0 or n < size):
                    best, size = i, n
            if best >= 0:
                return self._free.pop(best)
        return np.empty(nbytes, np.uint8)

    def give(self, buffers: list[np.ndarray]) -> None:
        """Keep ``buffers``, largest first, while the total kept stays within ``max_bytes``."""
        with self._lock:
            self._collect()
            self._free = _largest_within([*self._free, *buffers], self.max_bytes)

    def lend(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A C-contiguous ``shape``/``dtype`` array for the caller to keep, in a kept buffer where one
        fits (no page faults): the buffer comes back to the pool once no array refers to it. A fresh
        array where the pool keeps none so large."""
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        raw = self.take(nbytes, LEND_SLACK * nbytes)  # an array the caller keeps holds all of ``raw``
        if raw is None:
            return np.empty(shape, dtype)
        # the arrays made from it (views included) refer to this carrier, not to ``raw``, which the
        # pool keeps: the carrier dies with the last of them, and then ``raw`` is free again (never
        # before: not at the interpreter's exit either, while exit handlers may still run the session
        # beside arrays held)
        carrier = (ctypes.c_char * raw.nbytes).from_buffer(raw)
        self._returned.watch(carrier, raw)
        return np.frombuffer(carrier, dtype, count).reshape(shape)

    def clear(self) -> None:
        """Drop every kept buffer (a lent one comes back to the pool when the caller drops it)."""
        with self._lock:
            self._collect()
            self._free = []


class _Returned:
    """Buffers lent with arrays the caller has dropped since, at most ``max_bytes`` of them (the rest
    are freed). Added to by weak references' callbacks, which may run in any thread at any time (inside
    the pool's lock too): so no lock, only a list's and a dict's atomic updates; and no reference to the
    pool, which is freed with its session while the caller still holds arrays."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.buffers: list[np.ndarray] = []
        self._watched: dict[int, weakref.ref] = {}  # a weak reference must live for its callback to run

    def watch(self, carrier: Any, raw: np.ndarray) -> None:
        """``raw`` comes back (``add``) when ``carrier`` dies (a weak reference, not ``weakref.finalize``,
        which costs a lent array 2 us more)."""

        def back(ref: weakref.ref) -> None:
            self._watched.pop(id(ref), None)
            self.add(raw)

        ref = weakref.ref(carrier, back)
        self._watched[id(ref)] = ref

    def add(self, raw: np.ndarray) -> None:
        if raw.nbytes + sum(b.nbytes for b in list(self.buffers)) <= self.max_bytes:
            self.buffers.append(raw)


def _largest_within(buffers: list[np.ndarray], max_bytes: int) -> list[np.ndarray]:
    """``buffers``, largest first, while their total stays within ``max_bytes``."""
    kept, total = [], 0
    for b in sorted(buffers, key=lambda b: b.nbytes, reverse=True):
        if total + b.nbytes <= max_bytes:
            kept.append(b)
            total += b.nbytes
    return kept


Placed = Mapping[str, np.ndarray]
"""By node name, the arrays kernels compute their outputs into: graph outputs bound to them."""


class Run:
    """One run: the ``(node, error)`` pairs recorded so far, the buffers borrowed, by thread, and (read
    only) the session's inputs by node, the run's feed and the arrays its graph outputs are bound to;
    ``stop``, the ``RunOptions`` a kernel whose bound array it cannot fill terminates the run with."""

    def __init__(
        self,
        pool: ScratchPool | None,
        params: Params | None = None,
        feeds: Feeds | None = None,
        placed: Placed | None = None,
        stop: Any = None,
    ) -> None:
        self.stop = stop
        self.largest = 0  # the most elements an x that reached a kernel as an op input had (kernels set it)
        self.errors: list[tuple[str, BaseException]] = []
        self.params: Mapping[str, NodeInputs] = MappingProxyType(params or {})
        self.feeds: Feeds = MappingProxyType(dict(feeds or {}))
        self.placed: Placed = MappingProxyType(dict(placed or {}))
        self._pool = pool
        self._lock = threading.Lock()
        self._current: dict[int, np.ndarray] = {}  # thread id -> the buffer its last kernel call used
        self._spent: list[np.ndarray] = []

    def out_array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """A C-contiguous ``shape``/``dtype`` array in a buffer this thread holds for the run, or None
        (no pool, or too large): the caller then makes a fresh array.

        The extension copies a kernel's result into ONNX Runtime's output before the kernel call
        returns, so a thread's buffer is free again when that thread's next kernel call starts.
        """
        if self._pool is None:
            return None
        nbytes = math.prod(shape) * dtype.itemsize
        me = threading.get_ident()
        with self._lock:
            buf = self._current.get(me)
        if buf is None or buf.nbytes < nbytes:
            new = self._pool.take(nbytes)
            if new is None:
                return None
            with self._lock:
                if buf is not None:
                    self._spent.append(buf)
                self._current[me] = buf = new
        return buf[:nbytes].view(dtype).reshape(shape)

    def release(self) -> None:
        """Give every borrowed buffer back to the pool (only once no kernel of the run can be running)."""
        if self._pool is not None:
            with self._lock:
                borrowed = [*self._current.values(), *self._spent]
                self._current, self._spent = {}, []
            if borrowed:  # none where every kernel computed into an array bound to its output
                self._pool.give(borrowed)


_counter = itertools.count(1)
_runs: dict[int, Run] = {}
_lock = threading.Lock()


def begin(
    pool: ScratchPool | None = None,
    params: Params | None = None,
    feeds: Feeds | None = None,
    placed: Placed | None = None,
    stop: Any = None,
) -> int:
    """A fresh run token; kernels fed it record errors, borrow from ``pool``, find the inputs ``params``
    names for them (held, or in ``feeds``) and compute into the arrays ``placed`` binds until ``end``
    (``stop``: ``Run.stop``)."""
    token = next(_counter)
    with _lock:
        _runs[token] = Run(pool, params, feeds, placed, stop)
    return token


def lookup(token: Any) -> Run | None:
    """The run a kernel's token input names (an int64 scalar array), or None. Never raises."""
    try:
        key = int(token.item()) if isinstance(token, np.ndarray) else int(np.asarray(token).reshape(-1)[0])
    except Exception:  # noqa: BLE001 - called from kernels, which must never raise
        return None
    with _lock:
        return _runs.get(key)


def inputs(run: Run | None, node: str) -> tuple[np.ndarray | None, np.ndarray, np.ndarray | None]:
    """``(x, scale, zero_point)`` as the session hands them to ``node``'s kernel (x None: an op input);
    ``DequantizeError`` when the kernel runs outside the session that prepared its model (the op then has
    no scale), or when a graph input it reads is missing from the run's feed."""
    found = run.params.get(node) if run is not None else None
    if found is None or run is None:
        raise DequantizeError(
            "this kernel's inputs are handed to it by the onnx_dequant.session that prepared the model: "
            "run the original model through onnx_dequant.session"
        )

    def get(source: Source | None) -> np.ndarray | None:
        if not isinstance(source, Fed):
            return source
        value = run.feeds.get(source.name)
        if value is None:
            raise DequantizeError(f"graph input '{source.name}' was not fed where the kernel can read it")
        return value

    return get(found.x), get(found.scale), get(found.zero_point)  # type: ignore[return-value]


def record(token: Any, node: str, error: BaseException) -> None:
    """Record a kernel's error under its run; logged when no run is waiting for it. Never raises."""
    run = lookup(token)
    if run is not None:
        with run._lock:
            run.errors.append((node, error))
        return
    log.error("node '%s': Dequantize kernel error outside a KernelSession run (its result is zeros): %s", node, error)


def end(token: int, *, reuse: bool) -> list[tuple[str, BaseException]]:
    """Forget the run; its ``(node, error)`` pairs in the order they happened. ``reuse``: give its
    buffers back to the pool (pass False when the run may not be over, e.g. it raised)."""
    with _lock:
        run = _runs.pop(token, None)
    if run is None:
        return []
    if reuse:
        run.release()
    return run.errors
