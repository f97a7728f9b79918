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


def _restore() -> list[tuple[Any, int, FrameType | None]]:
    # A put-back handler runs (and may raise: Ctrl-C) wherever Python checks for signals: at its bytecodes
    # and in each ``signal.signal`` call, before it sets. The handlers go back in one C-level loop
    # (``map``: no bytecode between two), SIGINT's last, so Ctrl-C cannot cut the loop short; a handler of
    # another signal that raises there leaves the rest with ``_note``, which the next ``_install`` takes
    # for their ``_originals``. Until the first handler is back, every handler is ``_note``: it never raises.
    saved = dict(_saved)
    _saved.clear()
    try:
        list(map(_calls.signal, saved, saved.values()))
    except (OSError, ValueError, RuntimeError):  # one by one: the others still go back
        for sig, handler in saved.items():
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                _calls.signal(sig, handler)
    finally:  # nothing is delivered twice: a slice and a clear, no check for signals between
        pending = _pending[:]
        _pending.clear()
    return [(saved.get(signum), signum, frame) for signum, frame in pending]


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
            except BaseException:  # a signal handled before the swap was complete: undo it
                _restore()
                raise
        _depth += 1

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        global _depth
        if threading.current_thread() is not threading.main_thread():
            return
        _depth -= 1
        due = _restore() if _depth == 0 else []
        for handler, signum, frame in due:
            if callable(handler):
                handler(signum, frame)  # e.g. signal.default_int_handler raises KeyboardInterrupt here


_DEFERRED = _Deferred()


def deferred() -> _Deferred:
    """Hold back Python signal handlers while the body runs (main thread only; nests); deliver after."""
    return _DEFERRED
