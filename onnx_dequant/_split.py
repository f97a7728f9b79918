"""A compiled loop's call cut among threads where measurement says it pays.

The calling thread and helper threads share the call's elements in blocks, each thread claiming its
next block from a shared counter in the compiled loop itself (``schedule``: the caller from the front,
the helpers from the back, in blocks that shrink toward where they meet, the last block the caller's),
so that a thread that starts late or runs slower (a helper woken from sleep, a virtual CPU the host
runs slower for a while) computes fewer of them and none waits long on another, and threads that run
alike compute the same part of the call from call to call (what each computed last is in its CPU's
cache). A helper that has just computed its blocks spins for the next call for ``SPIN`` seconds
without the GIL (``_spin``), then sleeps (without the GIL too, where it can); the caller spins the
same way for the helpers to end, and a caller that expects a cut call after work of its own can have
them spin on until then (``rouse``). A call
posted to a spinning helper starts within a few microseconds; one posted to a sleeping helper, after the
operating system wakes its core (20-50 us on a virtual machine, measured): a call is cut only where
the caller's share of fixed pieces, given that start latency (``share``, from the latency measured on
every cut call: ``LATENCY``), would save a fifth of its time (``SHARE_MAX``). What a call costs is
measured, not typed in: every call of ``MIN_ELEMENTS`` or more times itself, and its kind keeps what it
costs whole and cut (``Cost``), so that a kind of call whose cut calls measure slower stays whole
(where two CPUs share one core's vector units, a loop bound by their throughput gains nothing from a
second thread). A helper not started when the caller is done has nothing left to claim, and a call made
while another thread's call holds the helpers runs in one piece, so a call never waits on a busy or
sleeping helper.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["Cost", "run", "untimed", "share", "schedule", "claim_of", "block_end", "pool", "cpu_count", "NO_CLAIM"]

MIN_ELEMENTS = 1 << 17
"""Calls of fewer elements run in one piece, untimed: at the slowest loop's 0.5 ns an element they take
about a sleeping helper's start, and the calls that try cutting them cost more than cutting saves
(``(8,93,15,6)`` ``{3}`` i16 -> f16, 67K elements in 11 us: 1.15x the time at 64K)."""


SHARE_MAX = 0.8
"""The largest share of the elements the calling thread computes in a cut call: a larger one saves less
than a fifth of the call."""

SPIN = 100e-6
"""Seconds a helper spins for the next cut call after one before it sleeps: a CPU busy that long after
each cut call, for a start in microseconds for a call that follows within it. Where two CPUs share a
core (as on the 2-vCPU VM of docs/performance.md's nineteenth round), the spinning one slows the other:
a call in one piece right after a cut call ran 1.5x slower beside a helper spinning 200 us. 50 us there;
on the Xeon VM of the forty-sixth round a helper is done 50-110 us before the caller posts its next
call (the caller's return, its next call's checks, a GIL handed over on a 20-50 us wake-up), and at
50 us half the cut calls of calls in a row found it asleep: ``(315,160,8)`` u16 -> f32 1.30x a copy
at 50 us, 0.92x at 100 (forty-ninth round)."""


_SPINNING = [0.0]
"""Until when (``time.perf_counter``) the last cut call's helpers spin for the next."""

_CUTS = [0]
"""Cut calls made in this process (``cuts``)."""


def cuts() -> int:
    """How many cut calls this process has made: a caller whose last call was cut can ``rouse`` the
    helpers before its next."""
    return _CUTS[0]


SETTLE = 2e-6
"""Seconds a helper that sees a call posted spins on before it takes the GIL, which the caller holds
for a microsecond or two after posting (``_spin.serve``): measured start latency 6.2 us at 2 us, 5-15
at 0.5-1 us (the helper sometimes finds the GIL taken, and sleeps), 7-9 at 4 us, 11-13 at 8 us."""

LATENCY_MAX = 50e-6
"""A sleeping helper's start latency in seconds on a 2-core KVM virtual machine, where the operating
system wakes its core: ``LATENCY`` before it is measured, and the most one measurement counts for."""

LATENCY = [LATENCY_MAX]
"""The start latency in seconds of helpers found awake, as measured on cut calls (an average)."""

UNMEASURED = 0.0
"""The seconds per element a kind of call is taken to cost before it is measured: none, so its first
calls run whole, timed (another value is taken as measured)."""

_LEARN = 0.25
"""The weight of a new measurement in ``LATENCY``'s and a ``Cost``'s averages."""

_ALIGN = 64
"""Cuts fall on multiples of this many elements: no two threads write one cache line."""


class Cost:
    """What one kind of call (a compiled loop over one layout and shape) was measured to cost, in
    seconds per element: whole (``per_element``: ``UNMEASURED``, then the least of ``TRIALS`` calls
    after the first, which may load or compile the loop, then an average, each call counted at most
    ``OUTLIER`` times the average) and cut (``cut``: the least of its first ``TRIALS`` cut calls, then
    an average, each call counted at most ``OUTLIER`` whole calls' time); which calls count is
    ``learn``'s. And whether its calls run whole (``alone``: one in ``RETIME`` is then timed whole,
    and one cut where the model says so, in case cutting came to pay)."""

    __slots__ = ("per_element", "wholes", "cut", "cuts", "colds", "calls", "alone", "retry")

    def __init__(self) -> None:
        self.per_element = UNMEASURED
        self.wholes = TRIALS + 1 if UNMEASURED else 0  # whole calls measured (the first not kept)
        self.cut = 0.0
        self.cuts = 0  # cut calls
        self.colds = 0  # cut calls that found a helper asleep
        self.calls = 0
        self.alone = False
        self.retry = False  # the last cut call found a helper asleep: the next one is cut again

    def wants_cut(self, share: float) -> bool:
        """Whether the next call, whose caller's share would be ``share``, is to be cut: where the model
        says it pays, once whole calls are measured, unless cut calls measured slower than whole ones;
        one in ``RETIME`` calls tries the other way."""
        if share > SHARE_MAX or self.wholes <= TRIALS:
            return False
        if self.retry or self.cuts < TRIALS:
            return True
        return (not self._slower()) != (self.calls % RETIME == 0)

    def _slower(self) -> bool:
        """Whether cut calls measured clearly slower than whole ones (``SLOWER``)."""
        return self.cuts >= TRIALS and self.cut >= SLOWER * self.per_element

    def learn(
        self, seconds: float, elements: int, threads: int, cut: bool = False, cold: bool = False, beside: bool = False
    ) -> None:
        """Fold in a call's measured time (``cut`` or whole), and whether calls of as many elements, among
        ``threads`` threads, are to run whole from now on. Every cut call counts, one that found a helper
        asleep (``cold``) too: where a kind's calls come further apart, or end sooner, than a helper
        wakes, the wake-up is what cutting them costs (``(2,39357,4)`` i16 in a row, helpers spinning 50
        us: 88% of cut calls cold at 165 us, the others 105, whole 170; a kind whose cut calls are all
        cold was tried again uncounted for good); the call after a cold one is cut again (``retry``), so
        that one call after a pause does not decide alone. A whole call that ran ``beside`` helpers still
        spinning after a cut call, which slows it where two CPUs share a core, counts only where it
        measured less than the whole cost kept: then that estimate is too high (a kind that cuts times a
        whole call only beside them)."""
        self.calls += 1
        c = seconds / max(elements, 1)
        if cut:
            self.retry = cold and not self.retry
            self.colds += cold
            self.cuts += 1
            if self.cuts > TRIALS and self.wholes > 1:  # a helper descheduled mid-call: at most OUTLIER
                c = min(c, OUTLIER * self.per_element)
            self.cut = _trial(self.cut, c, self.cuts)
        else:
            self.retry = False
            if not beside or (self.wholes > TRIALS and c < self.per_element):
                self.wholes += 1
                if self.wholes > TRIALS + 1:  # a call that compiled a kernel (``_guarded``'s): at most OUTLIER
                    c = min(c, OUTLIER * self.per_element)
                if self.wholes > 1:  # the first may have loaded or compiled the loop
                    self.per_element = _trial(self.per_element, c, self.wholes - 1)
        pays = share(self.per_element * elements, LATENCY[0], threads) <= SHARE_MAX
        self.alone = self.wholes > TRIALS and not self.retry and (self._slower() or not pays)


def _trial(average: float, c: float, n: int) -> float:
    """A measure's estimate after its ``n``-th sample ``c``: the least of the first ``TRIALS`` (one
    sample disturbed by another process, or cold caches, decides nothing), then an average."""
    if n == 1:
        return c
    if n <= TRIALS:
        return min(average, c)
    return average + _LEARN * (c - average)


TRIALS = 3
"""Cut calls a kind of call makes before its measurements can stop it."""

SLOWER = 1.1
"""How much slower than whole calls cut calls must measure for a kind of call to stop cutting where the
model says it pays: both measures move by a tenth from call to call on a shared machine."""


OUTLIER = 1.5
"""The most a cut call's time counts for in its kind's average once its trials are made, in whole calls'
time: a helper descheduled by the host mid-call made single cut calls 2-30x slower (a 3 ms call
among 100 us ones, a 2-vCPU VM), and one such call counted whole kept the kind in one piece for
hundreds of calls after it (``(4,2,2,3,3,11269)`` ``{5}`` i8 -> f16: 2.0x a copy cut, 3.1x whole).
Cut calls slower than whole ones by ``SLOWER`` still stop the cutting: this bounds only how long it
takes a retimed call (``RETIME``) to resume it. A whole call counts for at most as many times the whole
calls' average: the call of an i32 kind that first needs its float64 kernel compiles it (seconds:
2000x the others, ``reference._guarded``), and counted whole it made the kind's calls cut whatever
cutting measured until whole calls were timed again."""

RETIME = 64
"""A kind of call measured faster one way is run the other way once in this many calls, and one that
runs in one piece is timed whole once in as many too, half-way between two of those (a timed call costs
about 0.7 us more, a tenth of a 64K-element call): its whole cost is measured again, not kept from its
first calls (a kind whose first calls met cold caches had its whole cost 2x too high, and kept it while
it ran whole: ``(15,309,2,2,2,6)`` u8 -> f32)."""


def share(seconds: float, latency: float, threads: int) -> float:
    """The calling thread's share of a call that takes ``seconds`` in one thread, cut among ``threads``
    (itself and ``threads - 1`` helpers that each start ``latency`` late) so that all finish together;
    1.0 for one thread."""
    if threads <= 1 or seconds <= 0.0:
        return 1.0
    return min(1.0, (latency / seconds * (threads - 1) + 1.0) / threads)


Kernel = Callable[[int, int, np.ndarray], Any]
"""A loop over elements ``[a, b)``, returning what the call returns: ``kernel(a, b, NO_CLAIM)`` computes
them all; ``kernel(0, size, claim)``, called by each thread of a cut call, the blocks it claims until
none is left to it (``claim_of``; ``_jit.claim_block``: the caller from the front, the helpers, given
``claim[:-1]``, from the back)."""

NO_CLAIM = np.zeros(0, np.int64)
"""A kernel's ``claim`` where it computes its whole range."""

BLOCK_MIN = 1 << 13
"""The fewest elements in a block of a cut call (``schedule``), but the last: each block the loop claims
costs it 0.05-0.07 us (the claim, the block's start in the odometer, the walk's set-up; one thread,
8K-element blocks: ``(2048,512)`` ``{0}`` i8 -> f32 1.14x the whole call's 59 us, ``(32768,4)``
``{0}`` 1.10x its 11 us; the schedule's 9-18 blocks 1.00-1.06x)."""


TAIL = 2e-6
"""Seconds of the block where a cut call's sides meet (``schedule``): a helper stops where one block is
left, so the caller computes the last one, and each helper is done (back from its loop into Python,
which takes the GIL, and spinning again without it, ``_spin.serve``) before the caller's loop returns.
Threads that leave their loops at once both take the GIL, and the one that finds it taken sleeps: a
20-50 us wake-up, measured as cut calls 1.1-1.25x slower than two fixed pieces at 0.1-0.2 ms a call."""


def schedule(size: int, threads: int, tail: int) -> np.ndarray:
    """A cut call's ``claim`` (``claim_of``) for ``size`` elements among ``threads`` threads: the caller's
    part (the first ``threads``-th, which it claims from the front) and the helpers' (the rest, claimed
    from the back) in blocks that shrink toward where the two meet (each the ``threads``-th part of what
    is left on its side, at least ``BLOCK_MIN``, on multiples of ``_ALIGN``: no two threads write one
    cache line), and between them a block of ``tail`` elements (``TAIL``), where threads that run alike
    meet: the helpers leave the last block to the caller. A thread that runs slower (a helper started
    late, a CPU the host runs slower for a while) leaves part of its side to the other. Kept for the next
    call of its size: a call claims from a copy."""
    return _schedule(size, threads, tail, BLOCK_MIN, _ALIGN)


@functools.lru_cache(maxsize=64)
def _schedule(size: int, threads: int, tail: int, least: int, align: int) -> np.ndarray:
    lo = max(0, size // threads - tail // 2) // align * align  # the meeting block [lo, hi)
    hi = min(size, lo + -(-tail // align) * align)
    left, right = [0], [size]
    while left[-1] < lo:
        step = max(least, (lo - left[-1]) // threads)
        left.append(min(lo, -(-(left[-1] + step) // align) * align))
    while right[-1] > hi:
        step = max(least, (right[-1] - hi) // threads)
        right.append(max(hi, (right[-1] - step) // align * align))
    return claim_of(sorted(set(left + right)))


def claim_of(bounds: list[int]) -> np.ndarray:
    """The ``claim`` array of the blocks between consecutive ``bounds``: the blocks not yet claimed
    (``claim[0]``: the first, low 32 bits, to one past the last, high 32 bits), their number, the bounds,
    and the last bound again (so that ``claim[:-1]``, a helper's, holds them all)."""
    n = len(bounds) - 1
    return np.array([n << 32, n, *bounds, bounds[-1]], np.int64)


def block_end(claim: np.ndarray, e: int) -> int:
    """The end of ``claim``'s block that holds element ``e``."""
    bounds = claim[2 : 3 + int(claim[1])]
    return int(bounds[np.searchsorted(bounds, e, "right")])


def untimed(size: int, cost: Cost) -> bool:
    """Whether a call of ``size`` elements of this kind runs in one piece, untimed (``run`` calls it;
    a caller that asks first can call the loop itself, without building ``run``'s arguments)."""
    if size < MIN_ELEMENTS:
        return True
    if cost.alone and cost.calls % RETIME not in (0, RETIME // 2):
        cost.calls += 1
        return True
    return False


def run(kernel: Kernel, size: int, cost: Cost, apart: Callable[[], bool]) -> Any:
    """``kernel(0, size, NO_CLAIM)``, or its blocks claimed among the caller and helper threads where
    ``cost`` says cutting pays (``Cost.wants_cut``) and ``apart()`` (asked only then) says the blocks may
    run at once (the call returns the caller's value)."""
    if untimed(size, cost):
        return kernel(0, size, NO_CLAIM)
    threads = cpu_count()
    f = share(cost.per_element * size, LATENCY[0], threads)
    team = _Team.get(threads - 1) if cost.wants_cut(f) else None
    if team is not None:
        try:
            team.active = True
            if apart():
                return _cut(kernel, size, cost, team, threads)
        finally:
            team.active = False  # the team given back as ``release`` does, with no call in between
            team.holder = 0
    t0 = time.perf_counter()
    result = kernel(0, size, NO_CLAIM)
    cost.learn(time.perf_counter() - t0, size, threads, beside=t0 < _SPINNING[0])
    return result


def _cut(kernel: Kernel, size: int, cost: Cost, team: _Team, threads: int) -> Any:
    """``run``'s call cut: ``size``'s blocks (``schedule``) claimed by the caller and ``threads - 1`` of
    ``team``'s helpers; the call's time and the helpers' start latency learned."""
    # this call's own copy (0.3 us): a helper the call does not wait for (a KeyboardInterrupt between
    # two statements of ``_join``) claims no block of a later call
    claim = schedule(size, threads, _tail(size, cost.per_element)).copy()
    t0 = time.perf_counter()
    jobs: list[_Job] = []
    try:
        for h in team.helpers[: threads - 1]:
            h.post(jobs, kernel, size, claim[:-1])
        result = kernel(0, size, claim)
    except BaseException:  # no block may be written once the call is over; this error first
        with contextlib.suppress(BaseException):
            _join(team.helpers, jobs)
        raise
    start = _join(team.helpers, jobs)
    _CUTS[0] += 1
    wall = time.perf_counter() - t0
    _SPINNING[0] = t0 + wall + SPIN
    cold = start is None or any(job.cold for job in jobs)
    cost.learn(wall, size, threads, cut=True, cold=cold)
    if not cold:  # a late start (the thread descheduled) counts as a sleeping helper's at most
        LATENCY[0] += _LEARN * (min(start - t0, LATENCY_MAX) - LATENCY[0])
    return result


def _tail(size: int, per_element: float) -> int:
    """The elements of a cut call's last block: ``TAIL`` seconds' worth at ``per_element`` (from half as
    many: a power of two, so that ``schedule``'s cache keeps few), at most an eighth of the call (the
    caller computes it alone), at least ``_ALIGN``."""
    want = TAIL / max(per_element, 1e-12)
    tail = 1 << max(0, math.floor(math.log2(max(want, 1.0))))
    return max(_ALIGN, min(tail, size // 8 // _ALIGN * _ALIGN))


def _join(helpers: list[_Helper], jobs: list[_Job]) -> float | None:
    """Wait for the helpers' calls (one not started by now has nothing left to claim: it is dropped,
    marked ``cold``); the latest start of those the helpers ran, or None. A call's exception (or one
    raised meanwhile, a KeyboardInterrupt) is raised once all are done: each job is settled again after an
    interrupt, since ``_Job.claimed`` says who took it however far the interrupted attempt went."""
    start, error = None, None
    for helper, job in zip(helpers, jobs):
        while True:
            try:
                if job.claimed(_CALLER):  # not started: the caller claimed its blocks
                    job.cold = True
                else:
                    helper.finished(job)
                    error = error or job.error
                    start = job.began if start is None else max(start, job.began)
                helper.job = None  # the call's arrays are not kept alive by the helper
                break
            except BaseException as e:  # noqa: BLE001 - raised below, once no block is written
                error = error or e
    if error is not None:
        raise error
    return start


_CALLER, _HELPER = "caller", "helper"


class _Job:
    """A helper's part in a cut call (``kernel(0, size, blocks)``): the helper runs it where it claims it
    before the caller, done with its own blocks, does (it is then dropped)."""

    __slots__ = ("seq", "kernel", "size", "blocks", "owner", "began", "error", "cold")

    def __init__(self, seq: int, kernel: Kernel, size: int, blocks: np.ndarray, cold: bool) -> None:
        self.seq, self.kernel, self.size, self.blocks = seq, kernel, size, blocks
        self.owner: dict[int, str] = {}  # who claimed the job: set once, by one C call (``claimed``)
        self.began, self.error = 0.0, None
        self.cold = cold  # posted to a sleeping helper, or dropped

    def claimed(self, who: str) -> bool:
        """Claim the job for ``who`` unless the other thread has: whether ``who`` holds it. ``setdefault``
        runs whole under the GIL, so an interrupt cannot split taking the job from recording who took it
        (with a Lock, a caller interrupted as its ``acquire`` returned could not tell whether it held it),
        and asking again gives the same answer."""
        return self.owner.setdefault(0, who) == who


class _Helper:
    """A daemon thread that computes its part of the calls posted to it. Between calls it waits in
    ``_spin.serve`` without the GIL (``SPIN`` seconds, then asleep there where ``sleeps``, else on
    ``bell``), where it also tells the caller its last part is done."""

    def __init__(self) -> None:
        from . import _spin

        self.posted = np.zeros(1, np.int64)  # the last call's number, raised by the caller
        self.done = np.zeros(1, np.int64)  # the last call done, raised by this thread
        # [0]: 1 while this thread sleeps (or is about to); [1]: the turns ``rouse`` asks it to spin on
        self.asleep = np.zeros(2, np.int64)
        self.sleeps = _spin.SLEEPS  # asleep inside ``_spin.serve``; else on ``bell``, in Python
        # where it sleeps in Python: a lock held until a post rings it (``_ring``), which any thread may
        # release, and no thread holds while it posts (an interrupt in a condition's ``with`` left its
        # lock held by the caller for good, and the helper asleep on it)
        self.bell = threading.Lock()
        self.bell.acquire()
        self.job: _Job | None = None
        self.seq = 0
        self.thread = threading.Thread(target=self._serve, name="onnx_dequant-helper", daemon=True)
        self.thread.start()

    def post(self, jobs: list[_Job], kernel: Kernel, size: int, blocks: np.ndarray) -> None:
        """Post ``kernel(0, size, blocks)`` to this helper, added to ``jobs`` before the helper can see it:
        an exception raised here (a KeyboardInterrupt as ``_spin.post`` or ``_ring`` returns) leaves no
        job running that the caller does not wait for."""
        from . import _spin

        self.seq += 1
        job = self.job = _Job(self.seq, kernel, size, blocks, self.sleeping)
        jobs.append(job)
        if self.sleeps:  # whether it slept, as it was posted
            job.cold = _spin.post(self.posted, self.seq, self.asleep)
            return
        self.posted[0] = self.seq
        if self.sleeping:
            self._ring()

    def _ring(self) -> None:
        """Wake this helper where it sleeps in Python (one ring more, while it does not, wakes it once to
        find nothing posted)."""
        try:
            self.bell.release()
        except RuntimeError:  # rung already
            pass

    @property
    def sleeping(self) -> bool:
        """Whether this helper sleeps (or is about to): a call posted to it waits for its wake-up."""
        return bool(self.asleep[0])

    def rouse(self, spins: int) -> None:
        """Have this helper spin ``spins`` more turns for a call to come, woken where it sleeps (only
        where it sleeps without the GIL: one woken in Python would take it)."""
        from . import _spin

        if self.sleeps:
            _spin.rouse(self.posted, self.asleep, spins)

    def finished(self, job: _Job) -> None:
        """Return once ``job``, which this helper claimed, is done (spinning, ``SPIN`` seconds a turn: it
        is being computed); an
        exception raised meanwhile (a KeyboardInterrupt) is raised then, not before."""
        from . import _spin

        pending = None
        while True:
            try:
                if _spin.until(self.done, 0, job.seq, _Team.spins):
                    break
            except BaseException as e:  # noqa: BLE001 - raised below, once the part is done
                pending = pending or e
        if pending is not None:
            raise pending

    def _serve(self) -> None:
        from . import _spin

        seen = finished = 0
        while True:
            posted = _spin.serve(
                self.done, finished, self.posted, seen + 1, _Team.spins, _Team.settle, self.asleep, self.sleeps
            )
            if not posted:
                self.asleep[0] = 1  # before posted is read again: ``post`` sees it, or raised posted first
                while self.posted[0] <= seen:
                    self.bell.acquire()
                self.asleep[0] = 0
            seen = int(self.posted[0])
            job = self.job
            if job is None or not job.claimed(_HELPER):
                job = None  # the caller dropped it (and its arrays are not kept alive here)
                continue
            job.began = time.perf_counter()
            try:
                job.kernel(0, job.size, job.blocks)
            except BaseException as e:  # noqa: BLE001 - the caller raises it
                job.error = e
            finished, job = job.seq, None


def rouse(seconds: float) -> None:
    """Have the helpers spin ``seconds`` more once their spin is over (one asleep, woken, spins its own
    ``SPIN`` first), for a cut call the caller expects within that time, after work of its own (a
    session's run before its kernel): the call then finds them awake. Nothing before the first cut
    call, or where helpers sleep in Python (``_spin.SLEEPS``)."""
    team = _Team._current
    if team is None or not any(h.sleeps for h in team.helpers):
        return
    spins = max(1, int(seconds / SPIN * _Team.spins))
    for h in team.helpers:
        h.rouse(spins)
    # a whole call meanwhile runs beside them (``Cost.learn``)
    _SPINNING[0] = max(_SPINNING[0], time.perf_counter() + SPIN + seconds)


class _Team:
    """The process's helpers, held by one call at a time."""

    spins = 0
    """``SPIN`` in turns of ``_spin.until``'s loop, timed when the first team starts."""
    settle = 0
    """``SETTLE`` in such turns."""

    _current: _Team | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.helpers: list[_Helper] = []
        self.holder = 0  # the thread whose call holds the team (``threading.get_ident``); 0: none
        self.active = False  # that call is in ``run``'s ``try``, which gives the team back

    @classmethod
    def get(cls, helpers: int) -> _Team | None:
        """The team, held, with at least ``helpers`` helpers; None where another call holds it. One this
        thread holds outside any call (a KeyboardInterrupt between ``get`` and ``run``'s ``try``, or in its
        ``finally``, left it so) is taken back; one held by a call in progress on this thread (a call
        from a signal handler) is not."""
        me = threading.get_ident()
        with cls._lock:
            team = cls._current
            if team is None:
                if not cls.spins:
                    from . import _spin

                    rate = _spin.spins_per_second()
                    cls.spins, cls.settle = max(1, int(SPIN * rate)), int(SETTLE * rate)
                    slot, state = np.zeros(1, np.int64), np.zeros(2, np.int64)
                    # loaded (or compiled) here, not by a helper's first call: none of them sleeps or wakes
                    _spin.serve(slot, 0, slot, 0, 0, 0, state, False)
                    _spin.post(slot, 0, state)
                    _spin.rouse(slot, state, 0)
                team = cls._current = _Team()
            if team.holder and (team.holder != me or team.active):
                return None
            team.holder, team.active = me, False
        try:
            while len(team.helpers) < helpers:
                team.helpers.append(_Helper())
        except RuntimeError:  # no thread can be started: the call runs in one piece
            team.release()
            return None
        except BaseException:
            team.release()
            raise
        return team

    @classmethod
    def forked(cls) -> None:
        """In a forked child: none of the parent's helper threads is there, and its locks may have been
        held by threads that are not either."""
        cls._current, cls._lock = None, threading.Lock()

    def release(self) -> None:
        """Give the team back (``run`` does so inline: a call's entry is where an interrupt is raised)."""
        self.active = False
        self.holder = 0


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _forked() -> None:
    """In a forked child: the helpers and the pool are the parent's (their threads are not here)."""
    global _POOL, _POOL_LOCK
    _Team.forked()
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def pool() -> ThreadPoolExecutor:
    """A thread pool of ``cpu_count`` threads, started at its first use (for the NumPy loop's blocks)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=cpu_count(), thread_name_prefix="onnx_dequant")
        return _POOL


@functools.cache
def cpu_count() -> int:
    """The CPUs this process may run on, at most 8 (asked once: a system call)."""
    try:
        return max(1, min(8, len(os.sched_getaffinity(0))))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, min(8, os.cpu_count() or 1))
