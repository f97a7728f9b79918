"""onnx_dequant: how long the reference's fused loop takes to compile, cold, per layout.

A user's first call of a new combination of input type, output type, zero point and layout compiles
the fused loop for it (Numba keeps it on disk for the next process). This script times those first
calls: for each layout case, a fresh process with an empty Numba cache calls ``odq.dequantize`` once for
each type pair (with a zero point), the fused loop forced (``reference.FUSED_MIN_ELEMENTS = 0``), and
prints the seconds of each call and their sum. ``--checkout DIR`` times another checkout's package (a
``git worktree`` of the revision to compare) instead of the installed one.

    python scripts/bench_compile.py
    python scripts/bench_compile.py --checkout /tmp/base --json base.json
    python scripts/bench_compile.py --gc-threshold 1000000   # Python's collector out of the way

The cases share one process with ``--one-process`` (what a test run or a sweep does: later layouts
find the overloads' typing of the same types done).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = {
    "tiles narrow": ((2048, 8), (0,)),
    "tiles spread": ((4096, 4, 4), (0, 2)),
    "tiles blocks": ((1031, 20), (0,)),
    "rows": ((3, 100, 130), (0, 1)),
}
PAIRS = (
    ("int8", "float32"),
    ("uint8", "float32"),
    ("int16", "float16"),
    ("uint16", "bfloat16"),
    ("int32", "float32"),
    ("uint4", "bfloat16"),
)

SHORT = {"int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16", "int32": "i32", "uint4": "u4"}
SHORT |= {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}

CHILD = r"""
import gc, json, sys, time
if {threshold}:
    gc.set_threshold({threshold}, 1000, 1000)
sys.path.insert(0, {checkout!r}) if {checkout!r} else None
import ml_dtypes, numpy as np
import onnx_dequant as odq
from onnx_dequant import reference
reference.FUSED_MIN_ELEMENTS = 0
rng = np.random.default_rng(0)
out = {{}}
for name, (shape, axes) in {cases!r}.items():
    sshape = tuple(shape[a] for a in axes)
    times = []
    for x_t, s_t in {pairs!r}:
        xt, st = np.dtype(getattr(ml_dtypes, x_t, x_t)), np.dtype(getattr(ml_dtypes, s_t, s_t))
        info = ml_dtypes.iinfo(xt)
        x = rng.integers(info.min, info.max, shape).astype(xt)
        s = rng.standard_normal(sshape).astype(st)
        z = rng.integers(info.min, info.max, sshape).astype(xt)
        t = time.perf_counter()
        odq.dequantize(x, s, z, axes=axes)
        times.append(time.perf_counter() - t)
    out[name] = times
print(json.dumps(out))
"""


def run(cases: dict, checkout: str, threshold: int) -> dict:
    """Each case's first-call seconds per type pair, in one fresh process with an empty Numba cache."""
    code = CHILD.format(threshold=threshold, checkout=checkout, cases=cases, pairs=PAIRS)
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        done = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Time the first calls and print them (``--json`` also writes them)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", default="", help="time this checkout's package (a directory holding onnx_dequant/)")
    ap.add_argument("--gc-threshold", type=int, default=0, help="Python's first collector threshold (0: unchanged)")
    ap.add_argument("--one-process", action="store_true", help="every case in one process, one after another")
    ap.add_argument("--json", metavar="FILE", help="write the seconds as JSON")
    args = ap.parse_args(argv)
    checkout = str(Path(args.checkout).resolve()) if args.checkout else ""
    if args.one_process:
        results = run(CASES, checkout, args.gc_threshold)
    else:
        results = {}
        for name, case in CASES.items():
            results.update(run({name: case}, checkout, args.gc_threshold))
    print(f"{'layout':14s} " + " ".join(f"{SHORT[x]}->{SHORT[o]}".rjust(10) for x, o in PAIRS) + "        sum")
    for name, times in results.items():
        print(f"{name:14s} " + " ".join(f"{t:10.2f}" for t in times) + f" {sum(times):10.1f}")
    print(f"total {sum(map(sum, results.values())):.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"checkout": checkout or "installed", **results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
