"""The planner's measuring scripts: ``plan_diff.py`` (the choices a recalibrated cost table changes, and
the command measuring each) and ``bench_regret.py`` (the planner's regret over the sweep: its form's time
over the fastest form's). Named to run after test_reference.py, whose compiled loops a cold cache builds
first."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import guard_checks

from onnx_dequant.lowering import LowerOptions, lower_model
from onnx_dequant.lowering.strategies import costs, ort_costs

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@pytest.fixture(scope="module")
def scripts():
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_forms
        import bench_sweep
        import plan_diff

        yield bench_sweep, bench_forms, plan_diff
    finally:
        sys.path.remove(str(SCRIPTS))


CASES = [
    ((64, 48, 5), (0, 2), "i8", "f32", True, False),  # tiled or blocked
    ((64, 48, 5), (0, 2), "u16", "f32", False, True),
    ((30, 7, 40), (1,), "i8", "f16", True, False),  # a Scan or a Cast after the DequantizeLinear
    ((24, 30), (0, 1), "i16", "f32", True, True),  # a scale as large as the input
    ((12, 9, 11), (), "i32", "f32", True, False),  # the i32 guard
]


@pytest.mark.parametrize(
    "shape,axes,in_type,out_type,zero_point,scale_input,graph",
    [(*c, graph) for c in CASES for graph in (True, False) if c[3] == "f32" or not graph],  # Relu takes f32 here
)
def test_the_facts_it_plans_from_are_the_lowering_passes(
    scripts, shape, axes, in_type, out_type, zero_point, scale_input, graph
):
    """plan_diff plans from facts it writes down rather than from a model (a sweep case's constant scale
    can hold 64M elements): the strategy is the one ``lower_model`` picks for bench_sweep's model."""
    bench_sweep, _, plan_diff = scripts
    case = bench_sweep.Case(shape, axes, "any", in_type, out_type, zero_point, scale_input)
    _, s, z = bench_sweep.data(case)
    model = bench_sweep.model(case, s, z, consumer="Relu" if graph else None)
    lowered = lower_model(model, LowerOptions()).nodes[0].strategy
    assert plan_diff.planner.plan(plan_diff.node_info(case, graph)).strategy.name == lowered


def test_the_committed_table_changes_nothing_and_a_changed_entry_is_listed(scripts, tmp_path, capsys):
    _, bench_forms, plan_diff = scripts
    same = {t: dict(v) for t, v in ort_costs.COSTS.items()}
    assert plan_diff.diff(same) == []
    # the per-axis kernel made nearly free: cases that took another form now take it
    cheap = {t: {**v, "dql_axis": 0.01, "dql_axis_row": 0.0} for t, v in ort_costs.COSTS.items()}
    changed = plan_diff.diff(cheap)
    assert "dql-per-axis" in {c["after"] for c in changed} and all(c["after"] != c["before"] for c in changed)
    assert kernel_cost_is_committed()  # diff leaves the planner's table as it found it
    for c in changed[:5]:  # each command names the case bench_forms parses back, and the two forms
        argv = c["measure"].split()[2:]
        words = c["case"].split(" ")  # bench_forms names a case's axes class "forms"
        assert bench_forms.parse_case(argv[0]).name == " ".join([*words[:3], "forms", *words[4:]])
        assert argv[argv.index("--forms") + 1] == f"{plan_diff.strategy(c['before'])},{plan_diff.strategy(c['after'])}"
        assert ("--standalone" in argv) == (c["where"] == "standalone")
    path = tmp_path / "new.json"
    path.write_text(json.dumps({"table": cheap}))
    assert plan_diff.main([str(path), "--json", str(tmp_path / "diff.json")]) == 0
    assert capsys.readouterr().out.startswith(f"{len(changed)} of ")
    assert json.loads((tmp_path / "diff.json").read_text()) == changed


def test_a_changed_check_is_listed_with_the_command_that_times_both_checks(scripts):
    """The i32 guard's check follows the table without changing the strategy: plan_diff labels a guarded
    choice with its check's form, and where only that changes it times the form with either check."""
    _, bench_forms, plan_diff = scripts
    flipped = {t: dict(v) for t, v in ort_costs.COSTS.items()}
    for by_name in flipped.values():  # the two checks from memory swapped
        by_name["check_i32"], by_name["check_f32"] = by_name["check_f32"], by_name["check_i32"]
    changed = plan_diff.diff(flipped)
    checks_only = [c for c in changed if plan_diff.strategy(c["before"]) == plan_diff.strategy(c["after"])]
    assert checks_only and all("i32->" in c["case"] for c in changed)
    for c in checks_only:
        assert {c["before"][-11:], c["after"][-11:]} == {"[i32 check]", "[f32 check]"}
        argv = c["measure"].split()
        assert "--checks" in argv and argv[argv.index("--forms") + 1] == plan_diff.strategy(c["before"])
    assert kernel_cost_is_committed()


def test_a_scans_label_names_its_row(scripts):
    """A Scan's choice is labelled with its row's form, which a table can change alone (a fed bf16 scale's
    row: dql-blocked or Cast/Sub/Mul); the command measures the Scan."""
    bench_sweep, _, plan_diff = scripts
    case = bench_sweep.Case((4864, 306, 15), (0, 1, 2), "any", "i8", "bf16", False, True)
    info = plan_diff.node_info(case, graph=False)
    p = plan_diff.planner.plan(info)
    text = plan_diff.label(info, p)
    assert p.strategy.name == "scan-chunked" and text == f"scan-chunked/{p.choice.row.strategy.name}"
    assert plan_diff.strategy(text) == "scan-chunked" and plan_diff.check(text) == ""
    guarded = plan_diff.node_info(bench_sweep.Case((21, 239, 4766), (0,), "any", "i32", "f16", True, False), False)
    text = plan_diff.label(guarded, plan_diff.planner.plan(guarded))
    assert text.startswith("scan-chunked/i32-guarded [") and plan_diff.strategy(text) == "scan-chunked"


def test_a_partial_table_is_refused(scripts, tmp_path):
    _, _, plan_diff = scripts
    partial = {t: {k: v for k, v in by_name.items() if k != "dql_axis"} for t, by_name in ort_costs.COSTS.items()}
    path = tmp_path / "partial.json"
    path.write_text(json.dumps({"table": partial}))
    with pytest.raises(SystemExit, match=r"not a whole table.*dql_axis"):
        plan_diff.main([str(path)])


def kernel_cost_is_committed() -> bool:
    values = {name: np.mean([by[name] for by in ort_costs.COSTS.values()]) for name in ("dql_axis", "dql_axis_row")}
    return all(costs.kernel_cost(name) == pytest.approx(v) for name, v in values.items())


@pytest.fixture(scope="module")
def regret(scripts):
    import bench_regret  # scripts/ is on the path while ``scripts`` is held

    return bench_regret


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
    ratios = iter([{"dql-blocked": 4.1, "dql-tiled": 4.2}])  # the planner's form is the fastest: named once
    r = regret.measured(case, standalone=False, repeat=1, rounds=1)
    argv = r["measure"].split()
    assert argv[argv.index("--forms") + 1] == "dql-blocked" and "--standalone" not in argv


@pytest.mark.parametrize("as_f32", [True, False])
def test_bench_forms_checks_forces_the_i32_guards_check_and_restores_the_tables(scripts, as_f32):
    """``bench_forms.py --checks`` lowers each form with the guard's int32 and float32 checks in turn: under
    ``checked_as`` every guard, a Scan's rows' too, reduces the input as asked; after it, as the table says."""
    bench_sweep, bench_forms, _ = scripts
    from onnx_dequant.lowering.strategies import guarded

    case = bench_forms.parse_case("64,2048::i32")
    x, s, z = bench_sweep.data(case)
    model = bench_sweep.model(case, s, z, consumer="Relu")
    table = guarded.checks_as_f32
    with bench_forms.checked_as(as_f32):
        lowered = lower_model(model, LowerOptions(strategies=["i32-guarded"])).model
    assert guarded.checks_as_f32 is table
    assert set(guard_checks(lowered.graph)) == {as_f32}


def test_bench_forms_times_the_planners_form_with_either_check(scripts):
    """``--forms planner --checks``: the planner's own form, lowered once with each check and timed beside
    ORT's DequantizeLinear (the ratios' keys name the form and the check)."""
    _, bench_forms, _ = scripts
    r = bench_forms.measure(bench_forms.parse_case("64,2048::i32"), ["planner"], False, repeat=1, checks=True)
    assert r["planner"] == "i32-guarded" and r["refused"] == {}
    assert set(r["ratios"]) == {"i32-guarded [i32]", "i32-guarded [f32]"}
    assert all(v > 0 for v in r["ratios"].values())


def test_bench_forms_expands_all_among_other_names_and_rejects_unknown_ones(scripts, capsys):
    """``--forms all,planner`` times every form that applies and the planner's choice among them (each
    once); a name no strategy has, a 4-bit input ORT cannot be fed from Python, a case that is not one
    (a malformed dim, axes the op's contract refuses, an empty input), or no round ends with a usage
    error rather than a traceback or an empty run."""
    _, bench_forms, _ = scripts
    case = bench_forms.parse_case("64,48,5:0,2:i8")
    r = bench_forms.measure(case, ["all", "planner"], False, repeat=1)
    assert r["planner"] in r["ratios"] and {"dql-blocked", "cast-sub-mul"} <= set(r["ratios"])
    with pytest.raises(SystemExit) as e:
        bench_forms.main(["64,48,5:0,2:i8", "--forms", "dql-blocked,dql-bogus"])
    assert e.value.code == 2 and "unknown form(s) dql-bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="4-bit inputs"):
        bench_forms.parse_case("64,48:0:u4")
    bad = {  # a case the op could not take, or not a case: a usage error before any case is timed
        "64x48:0:i8": "invalid literal",
        "64,48:2:i8": r"Quantization axis \(2\) must be less than input shape rank \(2\)",
        "64,48:1,1:i8": "must be distinct",
        "64,48:0:i9": "Unknown element type 'i9'",
        "64,48:0:f32": "non-empty, of a quantized type",
        "64,0:0:i8": "non-empty, of a quantized type",
    }
    for text, message in bad.items():
        with pytest.raises(SystemExit, match=message):
            bench_forms.main(["64,48,5:0,2:i8", text, "--forms", "dql-blocked"])
        assert "64,48,5" not in capsys.readouterr().out  # the good case before it was not timed
    for option, value, why in (
        ("--rounds", "0", "must be at least 1"),
        ("--repeat", "0", "must be at least 1"),
        ("--repeat", "two", "not a whole number"),
    ):
        with pytest.raises(SystemExit) as e:  # no round measures nothing and exits 0; no sample has no median
            bench_forms.main(["64,48,5:0,2:i8", "--forms", "dql-blocked", option, value])
        assert e.value.code == 2 and f"argument {option}: {why}" in capsys.readouterr().err


def test_bench_rows_times_both_loops_over_the_per_tensor_kernel(scripts, tmp_path, capsys):
    """``bench_rows.py``: per-axis and blocked DequantizeLinear over rows of each length, as ratios over ORT's
    per-tensor one on the same input (one row per type and length, in the JSON too); 4-bit or float types,
    and no round, are a usage error."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_rows
    finally:
        sys.path.remove(str(SCRIPTS))
    out = tmp_path / "rows.json"
    argv = ["--types", "i8,u16", "--rows", "8,16", "--elements", "4096", "--repeat", "1", "--json", str(out)]
    assert bench_rows.main(argv) == 0
    rows = json.loads(out.read_text())
    assert [(r["type"], r["row"]) for r in rows] == [("i8", 8), ("i8", 16), ("u16", 8), ("u16", 16)]
    assert all(r["axis"] > 0 and r["blocked"] > 0 for r in rows)
    assert capsys.readouterr().out.count("x ") >= 4
    refused = [
        (["--types", "u4"], "not u4"),
        (["--types", "f32"], "not f32"),
        (["--rounds", "0"], "at least 1"),
        (["--repeat", "0"], "at least 1"),
    ]
    for argv, why in refused:
        with pytest.raises(SystemExit) as e:  # (no round: no median to take)
            bench_rows.main(argv)
        assert e.value.code == 2 and why in capsys.readouterr().err
