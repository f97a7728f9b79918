"""scripts/bench_regret.py: the planner's regret (its form's time over the fastest form's) over the sweep."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@pytest.fixture(scope="module")
def regret():
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_regret

        yield bench_regret
    finally:
        sys.path.remove(str(SCRIPTS))


def test_regret_is_the_planners_form_over_the_fastest(regret):
    r = regret.verdict("c", "graph", "dql-blocked", {"dql-blocked": 1.5, "dql-tiled": 1.2, "cast-sub-mul": 3.0})
    assert r["fastest"] == "dql-tiled" and r["regret"] == pytest.approx(1.25)
    assert regret.verdict("c", "graph", "dql-tiled", {"dql-blocked": 1.5, "dql-tiled": 1.2})["regret"] == 1.0


def test_summary_per_place_and_the_cases_missed(regret):
    rows = [regret.verdict(f"g{i}", "graph", "a", {"a": 1.0, "b": 1.0 + i / 100}) for i in range(9)]
    rows.append(regret.verdict("bad", "graph", "a", {"a": 1.5, "b": 1.0}))
    rows.append(regret.verdict("close", "graph", "a", {"a": 1.05, "b": 1.0}))
    rows.append(regret.verdict("s", "standalone", "b", {"a": 2.0, "b": 1.0}))
    summ = regret.summary(rows, margin=0.1)
    g = summ["graph"]
    assert g["n"] == 11 and g["worst"] == pytest.approx(1.5) and g["worst_case"] == "bad"
    assert g["fastest_taken"] == 9 and g["median"] == 1.0
    assert [r["case"] for r in g["missed"]] == ["bad"]  # "close" is within the margin
    assert summ["standalone"] == {
        "n": 1,
        "median": 1.0,
        "p90": 1.0,
        "worst": 1.0,
        "worst_case": "s",
        "fastest_taken": 1,
        "missed": [],
    }


def test_a_missed_case_comes_with_the_command_that_measures_it_again(regret, monkeypatch):
    import bench_forms
    import bench_sweep

    case = bench_sweep.Case((13, 21957, 7, 5), (0, 1, 3), "apart", "u8", "f16", False, True)
    ratios = iter([{"dql-blocked": 4.9, "dql-tiled": 4.2}, {"dql-blocked": 4.7, "dql-tiled": 4.4}])
    fake = lambda *a: {"planner": "dql-blocked", "ratios": next(ratios)}  # noqa: E731
    monkeypatch.setattr(bench_forms, "measure", fake)
    r = regret.measured(case, standalone=True, repeat=1, rounds=2)
    assert r["ratios"] == {"dql-blocked": pytest.approx(4.8), "dql-tiled": pytest.approx(4.3)}  # medians
    argv = r["measure"].split()
    assert argv[:2] == ["python", "scripts/bench_forms.py"] and "--standalone" in argv
    assert argv[argv.index("--forms") + 1] == "dql-blocked,dql-tiled"
    parsed = bench_forms.parse_case(argv[2])
    assert (parsed.shape, parsed.axes, parsed.in_type, parsed.out_type) == (case.shape, case.axes, "u8", "f16")
    assert (parsed.zero_point, parsed.scale_input) == (False, True)
