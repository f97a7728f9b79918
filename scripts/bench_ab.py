"""onnx_dequant: the reference of this checkout against another revision's, in one process.

Two runs of the sweep on a shared machine differ by 20-50% on a single case; two contenders timed
side by side in one process differ much less. This script loads a second copy of the package (a git
revision, extracted under another module name) and times, per case, a casting copy, the other
revision's ``dequantize(..., out=)`` and this checkout's, interleaved round-robin, and checks that
both give the same bits. Ratios are over the casting copy (as the sweep's reference measure, without
the bytes floor); ``new/old`` is the one to read.

    python scripts/bench_ab.py --rev HEAD~1 '19,2910,3,6:0,1,2:i4:bf16' '4096,4,4:0,2:i8:f32:nozp'
    python scripts/bench_ab.py --rev HEAD~1 --sweep 'r5 \\(4,76,38,59,4\\)' --seed 1
    python scripts/bench_ab.py --rev HEAD~1 --one-thread --rounds 9 '185381,10,9:0,2:u4:f16'

``--one-thread`` keeps every call whole in both packages (``_split.MIN_ELEMENTS`` raised): the loops
compared alone, without the thread trials that decide whether a call is cut. ``--disturb DUTY`` runs
a busy process on the last CPU for that share of every 2 ms while the cases run (Linux): a CPU the host
runs slower for a while, as a shared virtual machine's do, for the threads of a cut call.

    python scripts/bench_ab.py --rev HEAD~1 --disturb 0.5 '4096,1024:0:i8:f32'

A case is ``SHAPE:AXES:IN:OUT`` (``:nozp`` for no zero point), or a sweep case by name (``--sweep``,
its own data).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import onnx_dequant as odq
from onnx_dequant import dtypes

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_sweep  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def load_revision(rev: str, into: Path) -> ModuleType:
    """The package as of git revision ``rev``, imported as a module of another name."""
    name = "odq_" + re.sub(r"\W", "_", rev)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "onnx_dequant"], check=True, capture_output=True
    ).stdout
    tar = into / "rev.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    (into / "onnx_dequant").rename(into / name)
    sys.path.insert(0, str(into))
    return importlib.import_module(name)


def parse_case(spec: str, rng: np.random.Generator) -> tuple[str, np.ndarray, np.ndarray, np.ndarray | None, tuple]:
    """(name, x, scale, zero point, axes) for ``SHAPE:AXES:IN:OUT[:nozp]``."""
    parts = spec.split(":")
    if len(parts) not in (4, 5) or (len(parts) == 5 and parts[4] != "nozp"):
        raise SystemExit(f"bench_ab: a case is SHAPE:AXES:IN:OUT[:nozp], got {spec!r}")
    shape = tuple(int(v) for v in parts[0].split(","))
    axes = tuple(int(v) for v in parts[1].split(",")) if parts[1] else ()
    it, ot = dtypes.parse(parts[2]), dtypes.parse(parts[3])
    sshape = tuple(shape[a] for a in axes)
    lo, hi = (-(1 << (it.bits - 1)), 1 << (it.bits - 1)) if it.signed else (0, 1 << it.bits)
    lo, hi = max(lo, -(1 << 20)), min(hi, 1 << 20)
    x = rng.integers(lo, hi, shape).astype(it.numpy)
    s = np.asarray(rng.uniform(0.001, 0.1, sshape)).astype(np.float32).astype(ot.numpy)
    z = None if len(parts) == 5 else np.asarray(rng.integers(lo, hi, sshape)).astype(it.numpy)
    return spec, x, s, z, axes


def sweep_cases(pattern: str, seed: int) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray | None, tuple]]:
    """The sweep's cases whose name matches, with the sweep's own data."""
    out = []
    for case in bench_sweep.make_cases(seed):
        if re.search(pattern, case.name):
            x, s, z = bench_sweep.data(case)
            out.append((case.name, x, s, z, tuple(case.axes)))
    return out


def compare(
    old: ModuleType, x: np.ndarray, s: np.ndarray, z: np.ndarray | None, axes: tuple, rounds: int
) -> dict[str, Any]:
    """Median seconds of the copy, the old and the new reference, interleaved; the outputs' bits compared."""
    out_old, out_new = np.empty(x.shape, s.dtype), np.empty(x.shape, s.dtype)
    copy = bench_sweep.copier(x, dtypes.parse(s.dtype).name)
    contenders: dict[str, Callable[[], object]] = {
        "copy": copy,
        "old": lambda: old.dequantize(x, s, z, axes=axes, out=out_old),
        "new": lambda: odq.dequantize(x, s, z, axes=axes, out=out_new),
    }
    seconds = bench_sweep.timed(contenders, rounds)
    same = bool(np.array_equal(out_old.view(np.uint8), out_new.view(np.uint8)))
    return {
        "elements": int(x.size),
        "seconds": seconds,
        "old": seconds["old"] / seconds["copy"],
        "new": seconds["new"] / seconds["copy"],
        "new/old": seconds["new"] / seconds["old"],
        "same_bits": same,
    }


BUSY = """
import os, sys, time
os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
duty = float(sys.argv[1])
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < duty * 2e-3:
        pass
    time.sleep((1 - duty) * 2e-3)
"""
"""The disturbing process: busy on the last CPU ``duty`` of every 2 ms, asleep the rest."""


@contextlib.contextmanager
def disturbed(duty: float) -> Iterator[None]:
    """While the block runs, ``BUSY`` for ``duty`` of the time (nothing for 0)."""
    if not duty:
        yield
        return
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(duty)])
    try:
        yield
    finally:
        busy.kill()
        busy.wait()


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; exit 1 when a case's bits differ between the revisions."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help="SHAPE:AXES:IN:OUT[:nozp]")
    ap.add_argument("--rev", default="HEAD", help="the git revision to compare with (default HEAD)")
    ap.add_argument("--sweep", metavar="REGEX", help="also the sweep's cases whose name matches")
    ap.add_argument("--seed", type=int, default=0, help="the sweep's case draw for --sweep")
    ap.add_argument("--rounds", type=bench_sweep.count, default=7, help="timed samples per contender (median taken)")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--one-thread", action="store_true", help="no call cut among threads, in either package")
    ap.add_argument(
        "--disturb", type=float, default=0.0, metavar="DUTY", help="a busy process on the last CPU, DUTY of the time"
    )
    args = ap.parse_args(argv)
    if not 0.0 <= args.disturb < 1.0:
        ap.error("--disturb takes a share of the time from 0 to below 1")
    rng = np.random.default_rng(0)
    cases = [parse_case(c, rng) for c in args.cases]
    if args.sweep:
        cases += sweep_cases(args.sweep, args.seed)
    if not cases:
        ap.error("no case given")
    results = []
    with tempfile.TemporaryDirectory() as tmp, disturbed(args.disturb):
        old = load_revision(args.rev, Path(tmp))
        if args.one_thread:
            for package in ("onnx_dequant", old.__name__):
                split = importlib.import_module(package + "._split")
                split.MIN_ELEMENTS = 1 << 62
        for name, x, s, z, axes in cases:
            r = compare(old, x, s, z, axes, args.rounds)
            results.append({"case": name, **r})
            flag = "" if r["same_bits"] else "  BITS DIFFER"
            print(
                f"{name}: {args.rev} {r['old']:.2f}x, this checkout {r['new']:.2f}x a copy"
                f" (new/old {r['new/old']:.2f}){flag}"
            )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"rev": args.rev, "one_thread": args.one_thread, "cases": results}, indent=1)
        )
    return 0 if all(r["same_bits"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
