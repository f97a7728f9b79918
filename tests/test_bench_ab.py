"""scripts/bench_ab.py's disturbing process (``--disturb``): busy on the last CPU while the cases run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import script_module


@pytest.fixture(scope="module")
def bench_ab():
    with script_module("bench_ab", beside=("bench_sweep",)) as module:
        yield module


def cpu_seconds(pid: int) -> float:
    """The CPU time a process used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or not hasattr(os, "sched_setaffinity"), reason="not Linux")
def test_disturb_runs_a_busy_process_on_the_last_cpu_while_the_cases_run(bench_ab, monkeypatch):
    started = []
    popen = bench_ab.subprocess.Popen
    monkeypatch.setattr(bench_ab.subprocess, "Popen", lambda *a, **k: started.append(popen(*a, **k)) or started[-1])
    with bench_ab.disturbed(0.5):
        (busy,) = started
        last = {max(os.sched_getaffinity(0))}
        deadline = time.monotonic() + 60  # it pins itself once started: a busy machine may start it late
        while os.sched_getaffinity(busy.pid) != last and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.0)
        assert busy.poll() is None
        used = cpu_seconds(busy.pid)
        assert os.sched_getaffinity(busy.pid) == last
    assert busy.poll() is not None  # gone with the block
    assert 0.05 < used < 0.95  # busy part of the time (about half, where the CPU is free), not all
    with bench_ab.disturbed(0.0):
        assert len(started) == 1  # none for no share
