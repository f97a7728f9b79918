"""A compiled call cut among threads (``_split``): where it is cut, that its blocks cover it once, and
that it never waits on busy or sleeping helpers nor returns while a block is still written."""

from __future__ import annotations

import gc
import inspect
import os
import signal
import sys
import threading
import time
import warnings
import weakref

import numpy as np
import pytest

from onnx_dequant import _split


@pytest.fixture
def cut(monkeypatch):
    """Every call of ``_split.run`` cut among ``threads`` threads, on any element, in blocks of 10 or more."""
    monkeypatch.setattr(_split, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(_split, "UNMEASURED", 1.0)
    monkeypatch.setattr(_split, "LATENCY", [0.0])
    monkeypatch.setattr(_split, "_ALIGN", 1)
    monkeypatch.setattr(_split, "BLOCK_MIN", 10)

    def threads(n: int) -> None:
        monkeypatch.setattr(_split, "cpu_count", lambda: n)

    return threads


def claim_block(claim: np.ndarray, lock: threading.Lock) -> int:
    """``_jit.claim_block`` in Python, under ``lock``: the caller's next block from the front, a helper's
    (given ``claim[:-1]``) from the back but the last one, or -1."""
    with lock:
        w = int(claim[0])
        front, back = w & 0xFFFFFFFF, w >> 32
        if claim.shape[0] == claim[1] + 3:  # a helper
            if back - front <= 1:
                return -1
            claim[0] = w - (1 << 32)
            return back - 1
        if front >= back:
            return -1
        claim[0] = w + 1
        return front


class Pieces:
    """A kernel that records the blocks it computes and the thread of each, claiming them as the compiled
    loop does (``claim_block``). ``sleep``: seconds the ``sleeper``'s (the caller's or a helper's) every
    block takes; ``fail_on``: whose first block raises."""

    def __init__(self, fail_on: str | None = None, sleep: float = 0.0, sleeper: str = "helper") -> None:
        self.pieces: list[tuple[int, int, int]] = []
        self.lock = threading.Lock()
        self.fail_on, self.sleep, self.sleeper = fail_on, sleep, sleeper
        self.caller = threading.get_ident()
        self.running = 0

    def role(self) -> str:
        return "caller" if threading.get_ident() == self.caller else "helper"

    def __call__(self, a: int, b: int, claim: np.ndarray) -> bool:
        if not claim.shape[0]:
            self.block(a, b)
            return True
        while (k := claim_block(claim, self.lock)) >= 0:
            self.block(int(claim[2 + k]), int(claim[3 + k]))
        return True

    def block(self, a: int, b: int) -> None:
        with self.lock:
            self.running += 1
        try:
            time.sleep(self.sleep if self.role() == self.sleeper else 0.0)
            with self.lock:
                self.pieces.append((a, b, threading.get_ident()))
            if self.fail_on == self.role():
                raise ValueError(f"block {a}-{b}")
        finally:
            with self.lock:
                self.running -= 1

    def covered(self) -> list[tuple[int, int]]:
        return sorted((a, b) for a, b, _ in self.pieces)

    def covers(self, size: int) -> bool:
        """Whether the blocks cover ``0..size`` once, in more than one block."""
        spans = self.covered()
        return (
            len(spans) > 1
            and spans[0][0] == 0
            and spans[-1][1] == size
            and all(b == c for (_, b), (c, _) in zip(spans, spans[1:]))
        )


def test_share_balances_the_callers_piece_against_the_helpers_late_start():
    assert _split.share(300e-6, 45e-6, 2) == pytest.approx((45 / 300 + 1) / 2)
    assert _split.share(1.0, 0.0, 4) == pytest.approx(0.25)
    assert _split.share(300e-6, 45e-6, 1) == 1.0
    assert _split.share(40e-6, 45e-6, 2) == 1.0  # the helper would start after the call's end
    shares = [_split.share(t * 1e-6, 45e-6, 2) for t in (100, 200, 400, 800)]
    assert shares == sorted(shares, reverse=True) and shares[-1] > 0.5


def test_a_schedule_shrinks_its_blocks_from_both_ends_to_where_the_threads_meet(monkeypatch):
    monkeypatch.setattr(_split, "BLOCK_MIN", 1 << 13)
    size, half = 1 << 20, 1 << 19
    claim = _split.schedule(size, 2, 1 << 12)
    n = int(claim[1])
    bounds = claim[2 : 3 + n]
    assert claim[0] == n << 32 and len(claim) == n + 4 and claim[-1] == size  # none claimed yet
    assert bounds[0] == 0 and bounds[-1] == size and (bounds % _split._ALIGN == 0).all()
    steps = np.diff(bounds)
    (meet,) = np.flatnonzero(bounds[:-1] == half - 2048)
    assert bounds[meet + 1] == half + 2048  # the tail, where threads that run alike meet
    assert steps[0] == (half - 2048) // 2 and steps[-1] >= (half - 2048) // 2  # half of each side first
    assert (np.diff(steps[:meet]) <= 0).all() and (np.diff(steps[meet + 1 :]) >= 0).all()
    assert 10 <= n <= 20
    one = _split.schedule(1000, 2, 64)  # fewer elements than a block: a block each side of the tail
    assert list(one) == [3 << 32, 3, 0, 448, 512, 1000, 1000]
    assert [_split.block_end(one, e) for e in (0, 447, 448, 511, 512, 999)] == [448, 448, 512, 512, 1000, 1000]


def test_a_tail_is_about_TAIL_seconds_of_the_call_at_most_an_eighth():
    assert _split._tail(1 << 20, _split.TAIL / 5000) == 4096  # 5000 elements' worth: a power of two below
    assert _split._tail(1 << 20, _split.TAIL / 10) == _split._ALIGN  # at least a cache line's
    assert _split._tail(1 << 17, _split.TAIL / 1e6) == 1 << 14  # at most an eighth
    assert _split._tail(1 << 17, 1.0) == _split._ALIGN


class Gated(Pieces):
    """``Pieces`` whose ``sleeper`` is slow by rule, not by the clock: its first block waits (10 s at
    most) until the others have claimed all they will, and where the helpers are the slow ones the
    caller's first block waits until each helper is in a block of its own. What a thread that starts
    late or runs slower sees, whatever else the machine runs (a fixed sleep lost to descheduling)."""

    def __init__(self, sleeper: str, helpers: int) -> None:
        super().__init__(sleeper=sleeper)
        self.helpers = helpers
        self.changed = threading.Condition(self.lock)
        self.in_block: set[int] = set()  # helpers that claimed a block
        self.done: set[int] = set()  # threads whose claiming is over
        self.waited: set[int] = set()

    def __call__(self, a: int, b: int, claim: np.ndarray) -> bool:
        try:
            return super().__call__(a, b, claim)
        finally:
            with self.changed:
                self.done.add(threading.get_ident())
                self.changed.notify_all()

    def _others_done(self) -> bool:
        if self.sleeper == "caller":
            return len(self.done - {self.caller}) == self.helpers
        return self.caller in self.done

    def block(self, a: int, b: int) -> None:
        me, role = threading.get_ident(), self.role()
        with self.changed:
            if role == "helper":
                self.in_block.add(me)
                self.changed.notify_all()
            if me not in self.waited:
                self.waited.add(me)
                if role == self.sleeper:
                    self.changed.wait_for(self._others_done, 10)
                elif role == "caller":
                    self.changed.wait_for(lambda: len(self.in_block) == self.helpers, 10)
        super().block(a, b)


def callers_prefix(k: Pieces, size: int) -> int:
    """Where the caller's blocks end, asserting that they are a prefix of ``0..size`` (claimed from the
    front) and the helpers' the rest (claimed from the back)."""
    assert k.covers(size)
    mine = sorted((a, b) for a, b, t in k.pieces if t == k.caller)
    assert mine and mine[0][0] == 0 and all(b == c for (_, b), (c, _) in zip(mine, mine[1:]))
    return mine[-1][1]


@pytest.mark.parametrize("sleeper", ["caller", "helper"])
def test_the_caller_claims_from_the_front_the_helpers_from_the_back(cut, sleeper):
    cut(3)
    k = Gated(sleeper, helpers=2)  # the other takes most of the call
    _split.run(k, 1000, _split.Cost(), lambda: True)
    m = callers_prefix(k, 1000)
    assert m < 500 if sleeper == "caller" else m > 500
    helpers = [(a, b) for a, b, t in k.pieces if t != k.caller]
    assert helpers and len(helpers) < len(k.pieces)  # the helpers leave the last block to the caller


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_blocks_cover_the_call_once_the_first_the_callers(cut, threads):
    cut(threads)
    k = Pieces(sleep=0.002, sleeper="caller")  # the helpers claim blocks while the caller sleeps in its own
    assert _split.run(k, 1000, _split.Cost(), lambda: True) is True
    callers_prefix(k, 1000)
    assert {t for _, _, t in k.pieces} - {threading.get_ident()}  # helpers took part


def test_a_slower_thread_leaves_its_blocks_to_the_others(cut):
    cut(2)
    k = Pieces(sleep=0.1, sleeper="caller")  # a helper woken within 0.1 s takes all but one or two
    _split.run(k, 1000, _split.Cost(), lambda: True)
    callers_prefix(k, 1000)
    mine = [(a, b) for a, b, t in k.pieces if t == threading.get_ident()]
    assert len(mine) <= 3 and len(k.pieces) >= 8  # its first block (or two), the last; the rest the helper's


def test_first_calls_of_a_kind_run_in_one_piece_and_are_timed(cut, monkeypatch):
    cut(4)
    monkeypatch.setattr(_split, "UNMEASURED", 0.0)
    k, cost = Pieces(), _split.Cost()
    _split.run(k, 1000, cost, lambda: True)  # its time may be a compilation's: not kept
    assert cost.per_element == 0.0
    for _ in range(_split.TRIALS):
        _split.run(k, 1000, cost, lambda: True)
    assert k.covered() == [(0, 1000)] * (_split.TRIALS + 1)
    assert cost.per_element > 0.0


def test_calls_that_would_save_little_or_may_overlap_run_in_one_piece(cut, monkeypatch):
    cut(2)
    k = Pieces()
    _split.run(k, 1000, _split.Cost(), lambda: False)  # pieces that may not run at once
    assert k.covered() == [(0, 1000)]
    monkeypatch.setattr(_split, "LATENCY", [1e6])  # helpers that start too late to help
    k, cost = Pieces(), _split.Cost()
    for _ in range(3):
        _split.run(k, 1000, cost, lambda: True)
    assert k.covered() == [(0, 1000)] * 3
    assert cost.alone and cost.calls == 3  # from now on timed once in RETIME calls
    _split.run(k, 1000, cost, lambda: True)
    assert cost.calls == 4
    monkeypatch.setattr(_split, "MIN_ELEMENTS", 1001)  # a small call, never timed
    cost = _split.Cost()
    _split.run(Pieces(), 1000, cost, lambda: True)
    assert cost.calls == 0


def test_learns_the_helpers_start_latency(cut, monkeypatch):
    cut(2)
    monkeypatch.setattr(_split, "LATENCY", [0.0])
    _split.run(Pieces(), 1000, _split.Cost(), lambda: True)  # the team
    monkeypatch.setattr(_split._Team, "spins", _split._Team.spins * 100)  # awake from call to call
    for _ in range(50):  # a call that finds the helper asleep (the first) measures no start latency
        _split.run(Pieces(sleep=1e-4, sleeper="caller"), 1000, _split.Cost(), lambda: True)
        if _split.LATENCY[0]:
            break
    assert 0.0 < _split.LATENCY[0] <= _split.LATENCY_MAX


def test_blocks_helpers_never_start_are_computed_by_the_caller(cut, monkeypatch):
    cut(3)

    def post(self, jobs, kernel, size, blocks):  # a helper that never wakes
        self.seq += 1
        self.job = _split._Job(self.seq, kernel, size, blocks, False)
        jobs.append(self.job)

    monkeypatch.setattr(_split._Helper, "post", post)
    k = Pieces()
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.covers(1000)
    assert {t for _, _, t in k.pieces} == {threading.get_ident()}


def hold_team_in_another_thread(helpers: int):
    """Take the team in a thread of its own, which holds it until the returned ``give_back()``."""
    taken, done = threading.Event(), threading.Event()
    got = []

    def hold() -> None:
        got.append(_split._Team.get(helpers))
        taken.set()
        done.wait()
        got[0].release()

    t = threading.Thread(target=hold)
    t.start()
    taken.wait()
    assert got[0] is not None

    def give_back() -> None:
        done.set()
        t.join()

    return give_back


def test_a_call_while_another_holds_the_helpers_runs_in_one_piece(cut):
    cut(3)
    give_back = hold_team_in_another_thread(2)
    try:
        k = Pieces()
        _split.run(k, 1000, _split.Cost(), lambda: True)
        assert k.covered() == [(0, 1000)]
    finally:
        give_back()
    k = Pieces()
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.covers(1000)


def test_a_team_an_interrupt_left_held_is_taken_back_by_its_thread_but_not_by_a_nested_call(cut):
    """A KeyboardInterrupt between ``_Team.get`` and ``run``'s ``try`` leaves the team held by this thread
    outside any call: its next call takes it back (every later call would otherwise run whole). A call
    made inside a cut call on the same thread (from a signal handler) runs whole, the team left to the
    call in progress."""
    cut(2)
    assert _split._Team.get(1) is not None  # held, and never given back
    k = Pieces(sleep=0.002, sleeper="caller")
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.covers(1000) and len({t for _, _, t in k.pieces}) == 2

    inner = Pieces()

    class Nesting(Pieces):
        def block(self, a: int, b: int) -> None:
            if self.role() == "caller" and not inner.pieces:
                _split.run(inner, 500, _split.Cost(), lambda: True)
            super().block(a, b)

    outer = Nesting(sleep=0.002, sleeper="caller")
    _split.run(outer, 1000, _split.Cost(), lambda: True)
    assert inner.covered() == [(0, 500)]  # whole: the team was the outer call's
    assert outer.covers(1000) and len({t for _, _, t in outer.pieces}) == 2
    assert _split._Team._current.holder == 0


@pytest.mark.parametrize("fail_on", ["caller", "helper"])
def test_an_error_is_raised_once_every_block_is_done(cut, fail_on):
    cut(2)
    # the other's blocks, where they run, end after the failing one
    k = Pieces(fail_on=fail_on, sleep=0.05, sleeper="helper" if fail_on == "caller" else "caller")
    with pytest.raises(ValueError, match="block"):
        _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.running == 0  # no block still writes
    k = Pieces(sleep=0.002, sleeper="caller")  # the helpers still serve
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.covers(1000) and {t for _, _, t in k.pieces} - {threading.get_ident()}


def test_a_kind_of_call_goes_the_way_measured_faster_and_tries_the_other_now_and_then():
    c = _split.Cost()
    c.learn(9.0, 1000, 2)  # the first call may compile the loop: not kept
    assert c.per_element == _split.UNMEASURED
    for seconds in (1.5, 1.0, 1.2):  # the least of the first whole calls: one disturbed decides nothing
        assert not c.wants_cut(0.6)
        c.learn(seconds, 1000, 2)
    assert c.per_element == pytest.approx(1e-3)
    c.learn(3.0, 1000, 2, beside=True)  # slower beside spinning helpers: not a whole call's cost
    assert c.per_element == pytest.approx(1e-3)
    c.learn(0.6, 1000, 2, beside=True)  # faster beside them all the same: the cost kept is too high
    assert c.per_element == pytest.approx(1e-3 + _split._LEARN * (0.6e-3 - 1e-3))
    assert c.wants_cut(0.6) and not c.wants_cut(_split.SHARE_MAX + 0.01)  # untried; where it cannot pay
    c.learn(5.0, 1000, 2, cut=True, cold=True)  # a helper was asleep: counted, and the next call cut again
    assert c.cut == pytest.approx(5e-3) and c.retry and c.wants_cut(0.6) and not c.alone
    c.learn(9.0, 1000, 2, cut=True)  # the least of the first cut calls: one disturbed decides nothing
    assert c.cut == pytest.approx(5e-3) and not c.retry and c.wants_cut(0.6) and not c.alone
    c.learn(2.0, 1000, 2, cut=True)  # cut measured slower: one piece from now on
    assert c.cut == pytest.approx(2e-3) and c.alone
    assert not c.wants_cut(0.6)
    c.calls = 2 * _split.RETIME  # once in RETIME calls: the other way
    assert c.wants_cut(0.6)
    for _ in range(12):
        c.learn(0.1, 1000, 2, cut=True)  # cutting came to pay
    assert c.cut < c.per_element and not c.alone
    c.calls = 3 * _split.RETIME + 1
    assert c.wants_cut(0.6)
    c.calls = 4 * _split.RETIME  # a call in one piece keeps the whole cost measured
    assert not c.wants_cut(0.6)


def test_cut_calls_that_find_their_helpers_asleep_are_what_cutting_costs():
    """Where a kind's calls come further apart, or end sooner, than a helper wakes, its cut calls find
    one asleep call after call: they count, so where they are slower than whole calls the kind runs
    whole (they were tried again uncounted, and such a kind cut for good at 2-5x its whole time:
    ``(15,309,2,2,2,6)`` ``{1,2,3,4,5}`` u8 -> f32 in the sweep's reference and kernel measures), and
    where they are faster (a large call, the wake-up a small part of it) it keeps cutting."""
    slow, fast = _split.Cost(), _split.Cost()
    for c in (slow, fast):
        for _ in range(_split.TRIALS + 1):
            c.learn(1.0, 1000, 2)
    for _ in range(10):
        slow.learn(2.5, 1000, 2, cut=True, cold=True)
        fast.learn(0.7, 1000, 2, cut=True, cold=True)
    assert slow.alone and not slow.wants_cut(0.6) and slow.cut > _split.SLOWER * slow.per_element
    assert not fast.alone and fast.wants_cut(0.6) and fast.cut == pytest.approx(0.7e-3)
    assert slow.cuts == slow.colds == 10  # every cut call counted, and as cold


def test_a_kind_that_runs_whole_is_timed_whole_again_now_and_then():
    """A kind that runs in one piece is timed whole once in ``RETIME`` calls, as well as tried cut once
    in as many: its whole cost is measured again, not kept from its first calls (which met cold
    caches: 2x its later cost, and kept, cut calls compared with it)."""
    c = _split.Cost()
    for _ in range(_split.TRIALS + 1):
        c.learn(2.0, 1000, 2)  # the first calls: 2e-3 an element
    for _ in range(_split.TRIALS):
        c.learn(5.0, 1000, 2, cut=True)  # cutting slower: one piece
    assert c.alone
    ways = []
    for _ in range(4 * _split.RETIME):
        if not _split.untimed(_split.MIN_ELEMENTS, c):
            cut = c.wants_cut(0.6)
            ways.append(cut)
            c.learn(5.0 if cut else 1.0, 1000, 2, cut=cut)  # whole calls now take 1e-3 an element
    assert ways.count(False) >= 4 and ways.count(True) >= 4
    assert c.per_element < 1.4e-3 and c.alone


def test_one_cut_call_a_descheduled_helper_made_slow_does_not_stop_the_cutting():
    """Past its trials, a cut call counts for at most ``OUTLIER`` whole calls' time: one 30x slower
    call (a helper descheduled mid-call) leaves a kind that cuts at half the time cutting, and one
    retimed call resumes it after cut calls measured slower for a while; cut calls steadily slower than
    whole ones still stop it."""
    c = _split.Cost()
    for _ in range(_split.TRIALS + 1):
        c.learn(1.0, 1000, 2)  # whole: 1e-3 an element
    for _ in range(_split.TRIALS + 5):
        c.learn(0.5, 1000, 2, cut=True)
    assert c.cut == pytest.approx(5e-4) and not c.alone
    c.learn(30.0, 1000, 2, cut=True)
    assert c.cut == pytest.approx(5e-4 + 0.25 * (1.5e-3 - 5e-4)) and not c.alone and c.wants_cut(0.6)
    for _ in range(3):
        c.learn(30.0, 1000, 2, cut=True)  # slow for a while: one piece from now on
    assert c.alone and c.cut <= _split.OUTLIER * c.per_element
    c.learn(0.5, 1000, 2, cut=True)  # the first retimed call (once in RETIME)
    c.learn(0.5, 1000, 2, cut=True)  # the second
    assert not c.alone
    for _ in range(20):
        c.learn(1.3, 1000, 2, cut=True)  # cut calls steadily 1.3x slower: they stop
    assert c.alone


def test_an_error_before_the_blocks_start_lets_the_helpers_go(cut):
    cut(2)

    def apart() -> bool:
        raise KeyboardInterrupt  # a signal delivered there, say

    with pytest.raises(KeyboardInterrupt):
        _split.run(Pieces(), 1000, _split.Cost(), apart)
    k = Pieces()
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.covers(1000)


def test_the_helpers_keep_no_call_alive(cut):
    """A helper that wakes to find its part dropped by the caller drops it too, and the call's arrays."""
    cut(6)
    refs = []
    for _ in range(30):
        x, out = np.ones(1 << 22, np.int8), np.empty(1 << 22, np.int8)

        def kernel(a: int, b: int, claim: np.ndarray, x=x, out=out, caller=threading.get_ident()) -> bool:
            if threading.get_ident() != caller:  # the caller done at once: it drops a sleeping helper's part
                np.copyto(out[a:b], x[a:b])
            return True

        refs.append(weakref.ref(x))
        _split.run(kernel, x.size, _split.Cost(), lambda: True)
        del x, out, kernel
        time.sleep(0.002)  # the helpers fall asleep: the next call's blocks are the caller's
    time.sleep(0.05)  # every helper has woken, seen its part dropped, and waits again
    gc.collect()
    assert not [r for r in refs if r() is not None]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_does_not_inherit_a_held_team_lock(cut):
    """A fork while another thread sets the team up (its lock held) leaves the child free to cut."""
    cut(2)
    _split.run(Pieces(), 1000, _split.Cost(), lambda: True)  # the parent's team
    with _split._Team._lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: the point of the test
        pid = os.fork()
        if pid == 0:  # the child: one cut call, then out
            k = Pieces()
            try:
                _split.run(k, 1000, _split.Cost(), lambda: True)
                os._exit(0 if k.covers(1000) else 3)
            finally:
                os._exit(4)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    pytest.fail("the child's cut call hung")


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timer")
def test_an_interrupt_while_waiting_for_a_helper_is_raised_once_its_block_is_done(cut):
    cut(2)
    started, done = threading.Event(), []
    caller = threading.get_ident()

    def kernel(a: int, b: int, claim: np.ndarray) -> bool:
        if threading.get_ident() == caller:  # done once the helper's block is under way, an alarm to come
            started.wait(10)
            signal.setitimer(signal.ITIMER_REAL, 0.05)
        else:
            started.set()
            time.sleep(0.3)
            done.append(b)
        return True

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            _split.run(kernel, 1000, _split.Cost(), lambda: True)
        assert done == [1000]  # the helper's block was over when the interrupt came out
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_one_whole_call_that_compiled_a_kernel_does_not_make_the_kind_cut():
    """Past its trials, a whole call counts for at most ``OUTLIER`` times the whole calls' average: a
    call that compiled a kernel (2000x the others) leaves a kind whose cut calls measure slower in one
    piece; whole calls steadily slower still move the average."""
    c = _split.Cost()
    for _ in range(_split.TRIALS + 1):
        c.learn(1.0, 1000, 2)  # whole: 1e-3 an element
    for _ in range(_split.TRIALS):
        c.learn(1.05, 1000, 2, cut=True)  # cut: no faster
    assert not c.alone or c.cut < _split.SLOWER * c.per_element
    c.learn(2000.0, 1000, 2)
    assert c.per_element == pytest.approx(1e-3 + 0.25 * 0.5e-3)
    for _ in range(20):
        c.learn(1.3, 1000, 2, cut=True)  # cut calls slower than whole ones: one piece
    assert c.alone and not c.wants_cut(0.6)
    for _ in range(30):
        c.learn(2.0, 1000, 2)  # whole calls steadily 2x slower: the average follows
    assert c.per_element == pytest.approx(2e-3, rel=0.01)


@pytest.fixture(params=["futex", "python"])
def sleeper_kind(request, monkeypatch, cut):
    """A new team of helpers that sleep inside ``_spin.serve`` (a futex wait: "futex") or in Python on
    their condition ("python"), among two threads; the kind's name."""
    from onnx_dequant import _spin

    if request.param == "futex" and not _spin.SLEEPS:
        pytest.skip("no futex on this platform")
    monkeypatch.setattr(_spin, "SLEEPS", request.param == "futex")
    monkeypatch.setattr(_split._Team, "_current", None)
    cut(2)
    _split.run(Pieces(), 1000, _split.Cost(), lambda: True)  # the team
    assert _split._Team._current.helpers[0].sleeps == (request.param == "futex")
    return request.param


def helper_of_two() -> _split._Helper:
    """The helper a call among two threads posts to."""
    return _split._Team._current.helpers[0]


def asleep_soon(helper: _split._Helper, timeout: float = 2.0) -> bool:
    """Whether ``helper`` is asleep within ``timeout`` seconds (it spins ``SPIN`` seconds first)."""
    end = time.monotonic() + timeout
    while not helper.sleeping and time.monotonic() < end:
        time.sleep(0.001)
    return helper.sleeping


def test_an_interrupt_while_waking_a_helper_leaves_no_block_written_after_the_call(sleeper_kind):
    """A KeyboardInterrupt raised as the sleeping helper is woken (in ``_spin.post`` or ``_ring``), once
    it may see its part, is raised by the call once that part is done or dropped: the helper writes
    nothing after the call is over, and serves the calls after it."""
    from onnx_dequant import _spin

    helper = helper_of_two()
    assert asleep_soon(helper)  # the next call wakes it

    def interrupting(wake):
        def interrupted(*args):
            wake(*args)
            raise KeyboardInterrupt

        return interrupted

    owner, name = (_spin, "post") if sleeper_kind == "futex" else (helper, "_ring")
    wake = getattr(owner, name)
    setattr(owner, name, interrupting(wake))
    try:
        k = Pieces(sleep=0.02, sleeper="helper")
        with pytest.raises(KeyboardInterrupt):
            _split.run(k, 1000, _split.Cost(), lambda: True)
        time.sleep(0.005)  # a helper the call did not wait for would be in its block by now
        assert k.running == 0
    finally:
        setattr(owner, name, wake)
    k = Pieces(sleep=0.002, sleeper="caller")  # the helpers still serve
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.covers(1000)


def test_a_helper_sleeps_where_it_needs_no_gil(sleeper_kind):
    """A helper asleep waits inside ``_spin.serve`` (no Python frame of its own beyond the one that
    called it), where the platform has a futex; elsewhere on its bell, in Python."""
    helper = helper_of_two()
    assert asleep_soon(helper)
    frame = sys._current_frames()[helper.thread.ident]
    assert frame.f_code.co_name == "_serve"  # in a call from its loop, no Python frame of its own
    lines, first = inspect.getsourcelines(_split._Helper._serve)
    waiting = lines[frame.f_lineno - first]
    assert ("_spin.serve(" in waiting) == (sleeper_kind == "futex")
    assert ("bell.acquire()" in waiting) == (sleeper_kind == "python")


def test_calls_cut_in_turn_with_sleeps_and_rousings_cover_their_elements_once(sleeper_kind):
    """Calls among two threads, posted to a helper spinning, asleep, falling asleep or roused, each
    covered once and never waiting on a sleeping helper: no wake-up lost, none of a later call taken
    for an earlier one's."""
    rng = np.random.default_rng(7)
    helper = helper_of_two()
    slept = 0
    for i in range(300):
        pause = float(rng.choice([0.0, 20e-6, 60e-6, 200e-6, 2e-3]))
        if rng.random() < 0.3:
            _split.rouse(float(rng.choice([10e-6, 100e-6, 1e-3])))
        end = time.perf_counter() + pause
        while time.perf_counter() < end:
            pass
        slept += helper.sleeping
        k = Pieces(sleep=0.0002 if i % 3 == 0 else 0.0, sleeper="caller")
        _split.run(k, 1000, _split.Cost(), lambda: True)
        assert k.covers(1000)
        assert {t for _, _, t in k.pieces} <= {threading.get_ident(), helper.thread.ident}
    assert slept > 0  # some calls woke it
    k = Pieces(sleep=0.005, sleeper="caller")  # the helper still serves: it takes blocks of its own
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.covers(1000) and helper.thread.ident in {t for _, _, t in k.pieces}


def test_a_roused_helper_takes_the_next_call_awake_and_then_sleeps_again(sleeper_kind, monkeypatch):
    """``rouse`` keeps a helper spinning (waking it where it sleeps) until the call it expects: posted
    long after its own spin ended, that call finds it awake; the rousing spent, it sleeps again, also
    where the call came before its own spin ended. Where helpers sleep in Python, rousing does nothing
    (waking one would take the GIL)."""
    helper = helper_of_two()
    cost = _split.Cost()
    assert asleep_soon(helper)
    _split.run(Pieces(), 1000, cost, lambda: True)  # posted to it asleep: cold
    assert cost.colds == 1
    for asleep in (True, False):  # roused asleep, then roused as it spins after a call
        if asleep:
            assert asleep_soon(helper)
        _split.rouse(5.0)
        time.sleep(0.05)  # 1000 times its spin
        assert helper.sleeping == (sleeper_kind == "python")
        # the caller's blocks take a while (the GIL released), so that a helper found awake starts before the
        # caller has claimed every block: a call of blocks computed in Python at once was over before the
        # awake helper took the GIL on an Intel Xeon VM, its part dropped and counted cold
        _split.run(Pieces(sleep=0.002, sleeper="caller"), 1000, cost, lambda: True)
        assert cost.colds == (1 if sleeper_kind == "futex" else 2 + (not asleep))
    assert asleep_soon(helper)  # not for 5 s: the rousing was for one call
    monkeypatch.setattr(_split._Team, "spins", _split._Team.spins * 100)  # the next call within its spin
    _split.run(Pieces(), 1000, cost, lambda: True)
    _split.rouse(5.0)
    _split.run(Pieces(), 1000, cost, lambda: True)
    assert asleep_soon(helper)  # that call spent the rousing


def test_calls_interrupted_anywhere_leave_the_helpers_serving_and_the_team_free(sleeper_kind):
    """KeyboardInterrupts raised by timers at random points of cut calls (taking the team, posting, waking
    a sleeping helper, joining, in blocks) and of rousings: no block runs after its call is over, and
    afterwards the team is free and the helper computes blocks (an interrupt as a condition's lock was
    taken left the helper asleep for good, and one as the team was taken left it held)."""
    rng = np.random.default_rng(11)
    helper = helper_of_two()
    calls: list[Pieces] = []  # each call's blocks, and as many as it had computed when it was over

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    interrupted, ended = 0, []
    gc.disable()  # no collection's callbacks (another package's) for an interrupt to land in
    try:
        for _ in range(1500):
            k = Pieces(sleep=float(rng.choice([0.0, 1e-5])), sleeper="caller")
            calls.append(k)
            try:
                try:
                    time.sleep(float(rng.choice([0.0, 1e-4, 1e-3])))
                    signal.setitimer(signal.ITIMER_REAL, float(rng.choice([1e-5, 5e-5, 2e-4, 1e-3])))
                    if rng.random() < 0.3:
                        _split.rouse(1e-4)
                    _split.run(k, 1000, _split.Cost(), lambda: True)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except KeyboardInterrupt:
                interrupted += 1
            ended.append(len(k.pieces))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        gc.enable()
    assert interrupted > 100
    time.sleep(0.01)
    assert [len(k.pieces) for k in calls] == ended  # no block of a call was computed once it was over
    k = Pieces(sleep=0.002, sleeper="caller")
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.covers(1000) and helper.thread.ident in {t for _, _, t in k.pieces}
    assert _split._Team._current.holder == 0
