#!/usr/bin/env python3
"""Convert a folder of nGraph graphs and validate every model converted: how much of the importer's
output the oracle can check, and which graphs it cannot.

    python scripts/validate_tree.py tests/golden                 # every golden graph (about 7 min, 2 cores)
    python scripts/validate_tree.py tests/golden --only ops_rnn  # the graphs under a subfolder
    python scripts/validate_tree.py DIR --seed 1 --jobs 2 --json OUT.json

Each model is validated by ``onnx-dequant validate MODEL -q --json`` in a process of its own (ONNX
Runtime dies of SIGFPE on some inputs: one graph's crash is that graph's outcome), with generated
inputs; the summary counts the verdicts and lists every graph that does not agree, with its verdict or
error. Exit 0 when every converted graph agrees, 1 otherwise, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

import onnx_dequant as odq  # noqa: E402

_CLI = "import sys; from onnx_dequant.cli import main; sys.exit(main(sys.argv[1:]))"

TIMEOUT_S = 300
"""Seconds one model's validation may take before it counts as timed out."""


def validate_one(model: Path, seed: int) -> dict:
    """``onnx-dequant validate``'s JSON result for ``model``, or what ended the process."""
    cmd = [sys.executable, "-c", _CLI, "validate", str(model), "-q", "--json", "--seed", str(seed)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "detail": f"over {TIMEOUT_S} s"}
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        return {"outcome": f"died ({done.returncode})", "detail": tail}
    if result.get("ok"):
        return {"outcome": "agree", "detail": result.get("verdict", "")}
    if "error" in result:
        return {"outcome": "error", "detail": result["error"]}
    return {"outcome": "disagree", "detail": result.get("verdict", "")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", help="a folder of nGraph *.json graphs")
    p.add_argument("--only", default="", help="only the graphs whose path starts with this")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json", metavar="FILE", help="write every graph's outcome here")
    args = p.parse_args(argv)
    if not Path(args.src).is_dir() or args.jobs < 1:
        print(f"error: {args.src} is not a folder, or --jobs < 1", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        report = odq.ngraph.convert_tree(args.src, out, jobs=args.jobs)
        models = [(r.graph, Path(out) / r.output) for r in report.converted if r.graph.startswith(args.only)]
        outcomes: dict[str, dict] = {r.graph: {"outcome": "refused", "detail": r.error or ""} for r in report.refused}
        with ThreadPoolExecutor(args.jobs) as pool:
            for k, (graph, result) in enumerate(
                zip((g for g, _ in models), pool.map(lambda gm: validate_one(gm[1], args.seed), models)), 1
            ):
                result["detail"] = result["detail"].replace(out + os.sep, "")  # the model's path, as the graph's
                outcomes[graph] = result
                print(f"\r[{k}/{len(models)}] {graph[-60:]:<60}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    outcomes = {g: outcomes[g] for g in sorted(outcomes) if g.startswith(args.only)}
    counts = Counter(o["outcome"] for o in outcomes.values())
    print(
        f"{len(outcomes)} graphs under {args.src}{' ' + args.only if args.only else ''}, seed {args.seed}, "
        f"{time.perf_counter() - t0:.0f} s: " + ", ".join(f"{n} {k}" for k, n in counts.most_common())
    )
    for graph, o in outcomes.items():
        if o["outcome"] != "agree":
            print(f"  {o['outcome']:<9} {graph}: {o['detail'][:200]}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"seed": args.seed, "counts": dict(counts), "graphs": outcomes}, indent=1)
        )
    return 0 if counts.get("agree", 0) == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
