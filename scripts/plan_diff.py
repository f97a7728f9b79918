#!/usr/bin/env python3
"""Which planner choices a new cost table changes: every case of the performance sweep (seeds 0 and 1,
the issue's named cases; in a graph feeding Relu and standalone), planned under the committed table
(``onnx_dequant/lowering/strategies/ort_costs.py``) and under the table in a ``calibrate_costs.py --json``
file, with the ``bench_forms.py`` command that measures each changed choice side by side.

    python scripts/calibrate_costs.py --dry-run --rounds 9 --json new.json
    python scripts/plan_diff.py new.json                 # the choices it changes, and how to measure them
    python scripts/plan_diff.py new.json --json diff.json

A recalibrated table is worth committing where the forms it picks measure faster than the ones it
replaces; the changed cases are where to look (docs/lowering.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_forms  # noqa: E402
import bench_sweep as bs  # noqa: E402

from onnx_dequant import dtypes  # noqa: E402
from onnx_dequant.errors import DequantizeError  # noqa: E402
from onnx_dequant.lowering import planner  # noqa: E402
from onnx_dequant.lowering.facts import NodeInfo  # noqa: E402
from onnx_dequant.lowering.strategies import costs, guarded, ort_costs  # noqa: E402
from onnx_dequant.lowering.strategies.base import Plan  # noqa: E402
from onnx_dequant.lowering.strategies.chunked import RowPlan  # noqa: E402

SEEDS = (0, 1)


def node_info(case: bs.Case, graph: bool) -> NodeInfo:
    """The facts the planner sees for ``case`` as ``bench_sweep.model`` builds it: feeding Relu where
    ``graph``, else its output the model's output; scale and zero point constants unless fed."""
    zp = "z" if case.zero_point else None
    node = helper.make_node("Dequantize", ["x", "s", *([zp] if zp else [])], ["t"], name="dq")
    return NodeInfo(
        node,
        "x",
        "s",
        zp,
        "t",
        tuple(case.axes),
        dtypes.parse(case.in_type),
        dtypes.parse(case.out_type),
        tuple(case.shape),
        21,
        "ort",
        graph_output=not graph,
        model_output=not graph,
        consumers=("Relu",) if graph else (),
        scale_const=not case.scale_input,
        zp_const=not case.scale_input and zp is not None,
    )


def planned() -> Iterator[tuple[int, bs.Case, bool]]:
    """(seed, case, in a graph) for every sweep case ORT runs (4-bit inputs are the reference's only)."""
    for seed in SEEDS:
        for case in bs.make_cases(seed) + (bs.NAMED if seed == 0 else []):
            if case.in_type in ("i4", "u4"):
                continue
            for graph in (True, False) if case.out_type == "f32" else (False,):
                yield seed, case, graph


def label(info: NodeInfo, plan: Plan) -> str:
    """The plan's strategy (a Scan's with its row's: ``scan-chunked/dql-blocked``), and the form of its i32
    guard's check where it (or a Scan's row) guards one at run time: ``i32-guarded [f32 check]``. A table
    can change a row or a check without changing the strategy."""
    row = plan.choice.row if isinstance(plan.choice, RowPlan) else None
    name = f"{plan.strategy.name}/{row.strategy.name}" if row else plan.strategy.name
    choice = row.choice if row else plan.choice
    if not isinstance(choice, guarded.Branches) or choice.known is not None:
        return name
    return f"{name} [{'f32' if guarded.checks_as_f32(info) else 'i32'} check]"


def strategy(choice: str) -> str:
    """The strategy a ``label`` names (a Scan's, not its row's)."""
    return choice.split(" [")[0].split("/")[0]


def check(choice: str) -> str:
    """The check a ``label`` names (empty where it guards nothing at run time)."""
    return choice.partition(" [")[2]


def choices(table: dict[str, dict[str, float]] | None = None) -> dict[tuple[int, str, bool], str]:
    """Each planned case's ``label`` under ``table`` (default: the committed one)."""
    saved = {t: dict(v) for t, v in ort_costs.COSTS.items()}
    if table is not None:
        ort_costs.COSTS.clear()
        ort_costs.COSTS.update(table)
        costs.kernel_cost.cache_clear()
    try:
        out = {}
        for seed, case, graph in planned():
            try:
                info = node_info(case, graph)
                out[(seed, case.name, graph)] = label(info, planner.plan(info))
            except DequantizeError as e:
                out[(seed, case.name, graph)] = f"refused: {e}"
        return out
    finally:
        ort_costs.COSTS.clear()
        ort_costs.COSTS.update(saved)
        costs.kernel_cost.cache_clear()


def diff(table: dict[str, dict[str, float]]) -> list[dict]:
    """Every planned case whose choice ``table`` changes: seed, case, where, the two choices and the
    command that measures them (the forms, each with either check where the check changes)."""
    cases = {(seed, case.name, graph): case for seed, case, graph in planned()}
    old, new = choices(), choices(table)
    out = []
    for key, before in old.items():
        if new[key] != before:
            seed, name, graph = key
            forms = list(dict.fromkeys((strategy(before), strategy(new[key]))))
            checks = check(before) != check(new[key])  # each form timed with either check
            command = bench_forms.command(cases[key], forms, standalone=not graph, checks=checks)
            where = "graph" if graph else "standalone"
            out.append(
                {"seed": seed, "case": name, "where": where, "before": before, "after": new[key], "measure": command}
            )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("table", help="a calibrate_costs.py --json file")
    p.add_argument("--json", metavar="FILE", help="write the changed choices as JSON")
    args = p.parse_args(argv)
    table = json.loads(Path(args.table).read_text())["table"]
    missing = {k for by_name in ort_costs.COSTS.values() for k in by_name} - {k for v in table.values() for k in v}
    if set(table) != set(ort_costs.COSTS) or missing:
        raise SystemExit(
            f"plan_diff: {args.table} is not a whole table like the committed one "
            f"(thread counts {sorted(table)} against {sorted(ort_costs.COSTS)}; missing {sorted(missing)})"
        )
    changed = diff(table)
    total = sum(1 for _ in planned())
    print(f"{len(changed)} of {total} choices change")
    for c in changed:
        print(f"seed {c['seed']} {c['where']}: {c['case']}: {c['before']} -> {c['after']}\n    {c['measure']}")
    if args.json:
        Path(args.json).write_text(json.dumps(changed, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
