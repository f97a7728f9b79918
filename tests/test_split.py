"""A compiled call cut among threads (``_split``): where it is cut, that its pieces cover it once, and
that it never waits on busy or sleeping helpers nor returns while a piece still writes."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
import warnings
import weakref

import numpy as np
import pytest

from onnx_dequant import _split


@pytest.fixture
def cut(monkeypatch):
    """Every call of ``_split.run`` cut among ``threads`` threads, on any element."""
    monkeypatch.setattr(_split, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(_split, "UNMEASURED", 1.0)
    monkeypatch.setattr(_split, "LATENCY", [0.0])
    monkeypatch.setattr(_split, "_ALIGN", 1)

    def threads(n: int) -> None:
        monkeypatch.setattr(_split, "cpu_count", lambda: n)

    return threads


class Pieces:
    """A kernel that records its pieces and the thread of each."""

    def __init__(self, fail_at: int | None = None, sleep: float = 0.0, sleeper: str = "helper") -> None:
        self.pieces: list[tuple[int, int, int]] = []
        self.lock = threading.Lock()
        self.fail_at, self.sleep, self.sleeper = fail_at, sleep, sleeper
        self.running = 0

    def __call__(self, a: int, b: int) -> bool:
        with self.lock:
            self.running += 1
        try:
            time.sleep(self.sleep if (a == 0) == (self.sleeper == "caller") else 0.0)
            with self.lock:
                self.pieces.append((a, b, threading.get_ident()))
            if self.fail_at is not None and a <= self.fail_at < b:
                raise ValueError(f"piece {a}-{b}")
            return True
        finally:
            with self.lock:
                self.running -= 1

    def covered(self) -> list[tuple[int, int]]:
        return sorted((a, b) for a, b, _ in self.pieces)


def test_share_balances_the_callers_piece_against_the_helpers_late_start():
    assert _split.share(300e-6, 45e-6, 2) == pytest.approx((45 / 300 + 1) / 2)
    assert _split.share(1.0, 0.0, 4) == pytest.approx(0.25)
    assert _split.share(300e-6, 45e-6, 1) == 1.0
    assert _split.share(40e-6, 45e-6, 2) == 1.0  # the helper would start after the call's end
    shares = [_split.share(t * 1e-6, 45e-6, 2) for t in (100, 200, 400, 800)]
    assert shares == sorted(shares, reverse=True) and shares[-1] > 0.5


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_pieces_cover_the_call_once_the_first_the_callers(cut, threads):
    cut(threads)
    k = Pieces()
    assert _split.run(k, 1000, _split.Cost(), lambda: True) is True
    spans = k.covered()
    assert spans[0][0] == 0 and spans[-1][1] == 1000
    assert all(b == c for (_, b), (c, _) in zip(spans, spans[1:]))
    assert len(spans) == threads
    first = next(p for p in k.pieces if p[0] == 0)
    assert first[2] == threading.get_ident()
    assert first[1] == pytest.approx(1000 / threads, abs=1)


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


def test_pieces_of_helpers_not_started_are_computed_by_the_caller(cut, monkeypatch):
    cut(3)

    def post(self, kernel, a, b):  # a helper that never wakes
        self.seq += 1
        self.job = _split._Job(self.seq, kernel, a, b, False)
        return self.job

    monkeypatch.setattr(_split._Helper, "post", post)
    k = Pieces()
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.covered()[-1][1] == 1000 and len(k.covered()) == 3
    assert {t for _, _, t in k.pieces} == {threading.get_ident()}


def test_a_call_while_another_holds_the_helpers_runs_in_one_piece(cut):
    cut(3)
    team = _split._Team.get(2)
    assert team is not None
    try:
        k = Pieces()
        _split.run(k, 1000, _split.Cost(), lambda: True)
        assert k.covered() == [(0, 1000)]
    finally:
        team.release()
    k = Pieces()
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert len(k.covered()) == 3


@pytest.mark.parametrize("fail_at", [0, 999], ids=["caller", "helper"])
def test_an_error_is_raised_once_every_piece_is_done(cut, fail_at):
    cut(2)
    k = Pieces(fail_at=fail_at, sleep=0.05)  # the helper's piece, where it runs, ends after the caller's
    with pytest.raises(ValueError, match="piece"):
        _split.run(k, 1000, _split.Cost(), lambda: True)
    assert k.running == 0  # no piece still writes
    if fail_at:
        assert len(k.pieces) == 2
    k = Pieces()  # the helpers still serve
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert len(k.covered()) == 2


def test_a_kind_of_call_goes_the_way_measured_faster_and_tries_the_other_now_and_then():
    c = _split.Cost()
    c.learn(9.0, 1000, 2)  # the first call may compile the loop: not kept
    assert c.per_element == _split.UNMEASURED
    for seconds in (1.5, 1.0, 1.2):  # the least of the first whole calls: one disturbed decides nothing
        assert not c.wants_cut(0.6)
        c.learn(seconds, 1000, 2)
    assert c.per_element == pytest.approx(1e-3)
    c.learn(3.0, 1000, 2, beside=True)  # beside spinning helpers: not a whole call's cost
    assert c.per_element == pytest.approx(1e-3)
    assert c.wants_cut(0.6) and not c.wants_cut(_split.SHARE_MAX + 0.01)  # untried; where it cannot pay
    c.learn(5.0, 1000, 2, cut=True, cold=True)  # a helper was asleep: a wake-up, not a cut call's cost
    assert c.cut == 0.0 and c.wants_cut(0.6) and not c.alone
    c.learn(9.0, 1000, 2, cut=True)  # one disturbed call decides nothing
    assert c.wants_cut(0.6) and not c.alone
    for _ in range(_split.TRIALS - 1):
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


def test_one_cut_call_a_descheduled_helper_made_slow_does_not_stop_the_cutting():
    """Past its trials, a cut call counts for at most ``OUTLIER`` whole calls' time: one 30x slower
    call (a helper descheduled mid-piece) leaves a kind that cuts at half the time cutting, and one
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


def test_an_error_before_the_pieces_start_lets_the_helpers_go(cut):
    cut(2)

    def apart() -> bool:
        raise KeyboardInterrupt  # a signal delivered there, say

    with pytest.raises(KeyboardInterrupt):
        _split.run(Pieces(), 1000, _split.Cost(), apart)
    k = Pieces()
    _split.run(k, 1000, _split.Cost(), lambda: True)
    assert len(k.covered()) == 2


def test_the_helpers_keep_no_call_alive(cut):
    """A helper that wakes to find its piece taken by the caller drops it, and the call's arrays."""
    cut(6)
    refs = []
    for _ in range(30):
        x, out = np.ones(1 << 22, np.int8), np.empty(1 << 22, np.int8)

        def kernel(a: int, b: int, x=x, out=out) -> bool:
            if a:  # the caller's own piece at once: it takes a sleeping helper's while that wakes
                np.copyto(out[a:b], x[a:b])
            return True

        refs.append(weakref.ref(x))
        _split.run(kernel, x.size, _split.Cost(), lambda: True)
        del x, out, kernel
        time.sleep(0.002)  # the helpers fall asleep: the next call's pieces are the caller's
    time.sleep(0.05)  # every helper has woken, seen its piece, and waits again
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
                os._exit(0 if len(k.covered()) == 2 else 3)
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
def test_an_interrupt_while_waiting_for_a_helper_is_raised_once_its_piece_is_done(cut):
    cut(2)
    started, done = threading.Event(), []

    def kernel(a: int, b: int) -> bool:
        if a == 0:  # the caller's piece: on once the helper's is under way, an alarm to come
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
        assert done == [1000]  # the helper's piece was over when the interrupt came out
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
