#!/usr/bin/env python3
"""The planner against every form it could have taken, over the sweep: for each judged case of
``bench_sweep.py`` (in a graph feeding Relu, and standalone), every form that applies is forced and timed
side by side (``bench_forms.py``'s measurement), and the planner's **regret** is its own form's time over
the fastest form's (1.00: it took the fastest). Prints the distribution per place (median, p90, worst
with its case) and every case where another form was faster by more than ``--margin``, with the command
that measures it again.

    python scripts/bench_regret.py --max-elements 4M            # seed 0, what fits a few minutes
    python scripts/bench_regret.py --seed 1 --json regret.json   # the held-out draw
    python scripts/bench_regret.py --cases 'i16' --where graph --rounds 3

A form's ratio is its median over ``--rounds`` measurements (each interleaved with the others), so that a
regret is not one noisy sample. 4-bit inputs are left out (ORT's Python API takes no 4-bit array), as
are cases under the sweep's judged size.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_forms  # noqa: E402
import bench_sweep as bs  # noqa: E402

PLACES = ("graph", "standalone")


def measured(case: bs.Case, standalone: bool, repeat: int, rounds: int) -> dict:
    """Every applicable form's ratio over ORT's per-tensor DequantizeLinear (median over ``rounds``), the
    planner's choice, the fastest form and the regret."""
    runs = [bench_forms.measure(case, ["all"], standalone, repeat) for _ in range(rounds)]
    ratios = {name: statistics.median(r["ratios"][name] for r in runs) for name in runs[0]["ratios"]}
    r = verdict(case.name, "standalone" if standalone else "graph", runs[0]["planner"], ratios)
    forms = dict.fromkeys((r["planner"], r["fastest"]))  # one form where the planner's is the fastest
    return r | {"measure": bench_forms.command(case, list(forms), standalone)}


def verdict(case: str, where: str, planner: str, ratios: dict[str, float]) -> dict:
    """The planner's regret on one case: its form's ratio over the fastest form's."""
    fastest = min(ratios, key=ratios.__getitem__)
    return {
        "case": case,
        "where": where,
        "planner": planner,
        "fastest": fastest,
        "regret": ratios[planner] / ratios[fastest],
        "ratios": ratios,
    }


def summary(results: list[dict], margin: float) -> dict[str, dict]:
    """Per place: how many cases, the regret's median, p90 and worst (with its case), and the cases where
    another form was faster by more than ``margin``."""
    out = {}
    for where in PLACES:
        rows = sorted((r for r in results if r["where"] == where), key=lambda r: r["regret"])
        if not rows:
            continue
        v = np.array([r["regret"] for r in rows])
        out[where] = {
            "n": len(rows),
            "median": float(np.median(v)),
            "p90": float(np.percentile(v, 90)),
            "worst": float(v[-1]),
            "worst_case": rows[-1]["case"],
            "fastest_taken": sum(r["planner"] == r["fastest"] for r in rows),
            "missed": [r for r in rows[::-1] if r["regret"] > 1 + margin],
        }
    return out


def print_summary(summ: dict[str, dict], margin: float) -> None:
    print(f"\n{'place':<12} {'n':>4} {'median':>8} {'p90':>8} {'worst':>8}  fastest taken  worst case")
    for where, d in summ.items():
        taken = f"{d['fastest_taken']}/{d['n']}"
        print(
            f"{where:<12} {d['n']:>4} {d['median']:>8.3f} {d['p90']:>8.3f} {d['worst']:>8.3f}  {taken:>13}  "
            f"{d['worst_case']}"
        )
    for where, d in summ.items():
        print(f"\n# {where}: {len(d['missed'])} case(s) where another form was faster by more than {margin:.0%}")
        for r in d["missed"]:
            print(f"{r['regret']:.2f}  {r['case']}: {r['planner']} {r['ratios'][r['planner']]:.2f}, ", end="")
            print(f"{r['fastest']} {r['ratios'][r['fastest']]:.2f}\n      {r['measure']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="case draw (0: the sweep, with the issue's named cases)")
    p.add_argument("--cases", default="", metavar="REGEX", help="only cases whose name matches")
    p.add_argument("--max-elements", type=bs.parse_size, default=bs.MAX_ELEMENTS, help="skip larger cases")
    p.add_argument("--where", default=",".join(PLACES), help="comma-separated subset of: " + ",".join(PLACES))
    p.add_argument("--repeat", type=bs.count, default=5, help="timed samples per form and measurement (median)")
    p.add_argument("--rounds", type=bs.count, default=2, help="measurements per case (each form's median kept)")
    p.add_argument("--margin", type=float, default=0.1, help="list cases whose regret exceeds 1 + this")
    p.add_argument("--json", metavar="FILE", help="write every case's ratios and the distribution as JSON")
    args = p.parse_args(argv)
    places = [w for w in args.where.split(",") if w]
    if set(places) - set(PLACES):
        p.error(f"--where takes {','.join(PLACES)}, not {','.join(sorted(set(places) - set(PLACES)))}")
    pat = re.compile(args.cases)
    cases = bs.make_cases(args.seed) + (bs.NAMED if args.seed == 0 else [])
    jobs = [
        (c, where)
        for c in cases
        if c.in_type not in ("i4", "u4") and bs.JUDGED_MIN <= c.size <= args.max_elements and pat.search(c.name)
        for where in places
        if where == "standalone" or c.out_type == "f32"  # Relu after an f32 output, as bench_sweep measures
    ]
    print(f"# planner regret, seed {args.seed}: {len(jobs)} case(s), {args.rounds} round(s) each", flush=True)
    results, t0 = [], time.perf_counter()
    for i, (c, where) in enumerate(jobs):
        try:
            r = measured(c, where == "standalone", args.repeat, args.rounds)
        except Exception as e:  # one case's failure must not cost the run: reported, left out
            print(f"[{i + 1}/{len(jobs)}] {where} {c.name}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        results.append(r)
        forms = "  ".join(f"{k} {v:.2f}" for k, v in r["ratios"].items())
        print(f"[{i + 1}/{len(jobs)}] {where} {c.name}: regret {r['regret']:.2f} ({r['planner']}; {forms})", flush=True)
    summ = summary(results, args.margin)
    print_summary(summ, args.margin)
    print(f"\n{len(results)} measured in {time.perf_counter() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "summary": summ, "cases": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
