"""Progress on stderr for steps that take more than a couple of seconds; quiet for quick ones."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

__all__ = ["SLOW_AFTER", "Progress"]

SLOW_AFTER = 2.0
"""Seconds after which a step is shown."""


class Progress:
    """``with progress.step("running lowered/default"):`` prints the step once it has run ``after`` seconds,
    and its duration when it ends; steps after the whole run passed ``after`` seconds print as they start."""

    def __init__(
        self, enabled: bool, *, after: float | None = None, stream: TextIO | None = None, prefix: str = "validate"
    ) -> None:
        self.enabled = enabled
        self.after = SLOW_AFTER if after is None else after
        self.stream = stream
        self.prefix = prefix
        self.start = time.perf_counter()
        self._lock = threading.Lock()

    def _print(self, text: str) -> None:
        with self._lock:
            stream = self.stream or sys.stderr
            print(f"{self.prefix}: {text}", file=stream, flush=True)

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        t0 = time.perf_counter()
        shown = threading.Event()

        def show() -> None:
            shown.set()
            self._print(f"{what} ...")

        if t0 - self.start >= self.after:
            show()
            timer = None
        else:
            timer = threading.Timer(self.after, show)
            timer.daemon = True
            timer.start()
        try:
            yield
        finally:
            if timer is not None:
                timer.cancel()
            if shown.is_set():
                self._print(f"{what}: {time.perf_counter() - t0:.1f} s")
