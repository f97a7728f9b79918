"""A pytest plugin: the seconds Numba spends compiling each function during a test run.

It listens to Numba's ``numba:compile`` events and counts each compilation's time less that of the
compilations nested in it, per function; at the end of the session each process (each xdist worker)
writes its counts as JSON, and this module, run as a script, sums and prints them.

    PYTHONPATH=scripts NUMBA_CACHE_DIR=$(mktemp -d) python -m pytest -q -n 2 -p numba_compile_times
    python scripts/numba_compile_times.py          # the functions that took longest, both workers
"""

from __future__ import annotations

import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from numba.core import event

OUT = Path(os.environ.get("NUMBA_COMPILE_TIMES", Path(tempfile.gettempdir()) / "numba_compile_times"))
_stack: list[list] = []
_seconds: collections.Counter = collections.Counter()
_count: collections.Counter = collections.Counter()


class _Listener(event.Listener):
    def on_start(self, ev: event.Event) -> None:
        _stack.append([ev.data["dispatcher"].py_func.__qualname__, time.perf_counter(), 0.0])

    def on_end(self, ev: event.Event) -> None:
        name, start, nested = _stack.pop()
        took = time.perf_counter() - start
        _seconds[name] += took - nested
        _count[name] += 1
        if _stack:
            _stack[-1][2] += took


event.register("numba:compile", _Listener())


def pytest_sessionfinish(session) -> None:  # noqa: ANN001 - pytest's hook
    """Write this process's counts."""
    OUT.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (OUT / f"{worker}.json").write_text(json.dumps({"seconds": _seconds, "count": _count}))


def main() -> int:
    """Sum the processes' counts and print the functions that took longest."""
    seconds, count = collections.Counter(), collections.Counter()
    for f in sorted(OUT.glob("*.json")):
        d = json.loads(f.read_text())
        seconds.update(d["seconds"])
        count.update(d["count"])
    print(f"{sum(seconds.values()):.1f} s compiling, {sum(count.values())} compilations ({OUT})")
    for name, s in seconds.most_common(15):
        print(f"{s:8.1f} s {count[name]:5d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
