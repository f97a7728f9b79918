"""scripts/bench_ab.py's disturbing process (``--disturb``): busy on the last CPU while the cases run."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench_ab():
    sys.path.insert(0, str(ROOT / "scripts"))  # it imports bench_sweep beside it
    spec = importlib.util.spec_from_file_location("bench_ab", ROOT / "scripts" / "bench_ab.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)
        sys.modules.pop("bench_sweep", None)
        sys.path.remove(str(ROOT / "scripts"))


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
