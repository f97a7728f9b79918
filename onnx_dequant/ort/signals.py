"""Signals held back while ONNX Runtime may be running a Python kernel on the main thread.

Python runs signal handlers on the main thread, between two bytecodes of whatever Python code runs
there: during ``sess.run`` that can be a kernel called from C++ by onnxruntime-extensions, and an
exception raised there (``KeyboardInterrupt`` from Ctrl-C) aborts the process (pybind11
``error_already_set`` escapes a C++ thread). ``deferred()`` swaps every Python-level handler of the
signals in ``DEFERRED`` for one that only notes the signal, and on leaving puts the handlers back and
delivers what arrived, once per signal, in order: Ctrl-C during a run raises ``KeyboardInterrupt``
after the run returns. Signals whose handler is not a Python function (``SIG_DFL``, ``SIG_IGN``) are
left alone: the C runtime handles them without running Python code.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

try:  # the C module behind ``signal``: its functions take and return plain ints, no enum conversions
    import _signal as _calls
except ImportError:  # pragma: no cover - a Python without it
    _calls = signal  # type: ignore[assignment]

__all__ = ["DEFERRED", "deferred"]

DEFERRED: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGUSR1", "SIGUSR2", "SIGINT")
    if hasattr(signal, name)
)
"""The signals whose Python handlers ``deferred`` holds back, in the order their handlers go back
(``_restore``): SIGINT last."""

_NUMBERS: tuple[int, ...] = tuple(int(s) for s in DEFERRED)
"""``DEFERRED`` as the plain ints ``_signal`` takes: ``signal.getsignal`` and ``signal.signal`` convert
numbers and handlers to and from enums, 14 us of a run's swap against 1.5 this way."""

_depth = 0
_saved: dict[int, Any] = {}
_pending: list[tuple[int, FrameType | None]] = []
_originals: dict[int, Any] = {}
"""Each signal's handler that ``_note`` last replaced: what it stands for where a restore was cut short."""


def _note(signum: int, frame: FrameType | None) -> None:
    """The stand-in handler: remembers the signal, never raises."""
    if all(s != signum for s, _ in _pending):
        _pending.append((signum, frame))


def _install() -> None:
    for sig in _NUMBERS:
        try:
            handler = _calls.getsignal(sig)
            if handler is _note:  # left by a restore that a signal's handler cut short: it stands for this
                handler = _originals.get(sig)
            if callable(handler):
                _originals[sig] = handler
                _calls.signal(sig, _note)
                _saved[sig] = handler
        except (OSError, ValueError, RuntimeError):  # a signal this platform will not let us catch
            continue


Due = list[tuple[Any, int, "FrameType | None"]]


def _restore() -> tuple[Due, BaseException | None]:
    """Put every saved handler back. Returns the signals noted meanwhile with the handlers due to get
    them, and the first exception a put-back handler raised while the others went back (to raise after)."""
    # A put-back handler runs (and may raise: Ctrl-C) wherever Python checks for signals: at bytecodes and
    # in each ``signal.signal`` call, before it sets. First one C-level pass (``map``: no bytecode between
    # two), SIGINT's last; where a handler raised in it, the handlers go back one by one, the exception
    # kept, until all are back. Until the first handler is back, every handler is ``_note``: it never raises.
    saved = dict(_saved)
    _saved.clear()
    raised: BaseException | None = None
    try:
        list(map(_calls.signal, saved, saved.values()))
        left = []
    except BaseException as e:  # noqa: BLE001 - OSError...: a signal refused; else a handler's exception
        if not isinstance(e, (OSError, ValueError, RuntimeError)):
            raised = e
        left = list(saved.items())  # all again: setting a handler twice is harmless
    while left:
        try:
            while left:
                with contextlib.suppress(OSError, ValueError, RuntimeError):
                    _calls.signal(*left[0])
                del left[0]
        except BaseException as e:  # noqa: BLE001 - a handler put back raised here: the rest still go back
            raised = raised or e
    pending = _pending[:]  # every handler is back: ``_note`` adds nothing more
    _pending.clear()
    return [(saved.get(signum), signum, frame) for signum, frame in pending], raised


def _deliver(due: Due) -> None:
    for handler, signum, frame in due:
        if callable(handler):
            handler(signum, frame)  # e.g. signal.default_int_handler raises KeyboardInterrupt here


class _Deferred:
    """``deferred()``'s context manager (a class: a generator-based one costs a run 2 us more)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth
        if threading.current_thread() is not threading.main_thread():
            return  # handlers run only on the main thread: nothing of this thread can be interrupted
        if _depth == 0:
            try:
                _install()
            except BaseException:  # a signal handled before the swap was complete: undo it, deliver the rest
                due, _ = _restore()
                _deliver(due)
                raise
        _depth += 1

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        global _depth
        if threading.current_thread() is not threading.main_thread():
            return
        _depth -= 1
        if _depth == 0:
            due, raised = _restore()
            _deliver(due)
            if raised is not None:  # a signal that arrived as the handlers went back, after those before it
                raise raised


_DEFERRED = _Deferred()


def deferred() -> _Deferred:
    """Hold back Python signal handlers while the body runs (main thread only; nests); deliver after."""
    return _DEFERRED
