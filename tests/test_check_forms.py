"""scripts/check_forms.py: every form in the graphs it meets, run by ORT at its default level."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from helpers import script_module

from onnx_dequant.lowering.strategies import dql


@pytest.fixture(scope="module")
def forms():
    with script_module("check_forms") as module:
        yield module


def _wrapped_i32(forms, opset: int, reader: str):
    """A per-tensor i32 node under ``wrap_int32``, read by ``reader``: ORT 1.32 breaks its DequantizeLinear."""
    return forms.Case(
        (4, 300), (), "i32", "f32", opset, False, False, True, True, (reader,), any_size=False, holder="main", seed=5
    )


def test_every_form_of_random_nodes_loads_and_computes_the_reference(forms, tmp_path, capsys):
    out = tmp_path / "forms.json"
    # inputs under 4096 elements: the reference's NumPy path, no compiled loop to build in a cold run (50 s)
    assert forms.main(["--cases", "40", "--seed", "3", "--max-elements", "4000", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["failures"] == []
    planner = {k: n for k, n in report["runs"].items() if k.startswith("planner: ")}
    assert sum(planner.values()) == 40 and len(report["runs"]) - len(planner) >= 5  # and several forced forms
    assert "0 failure(s)" in capsys.readouterr().out


@pytest.mark.parametrize("opset,what", [(21, "load"), (13, "value")])
def test_a_form_ort_breaks_is_reported(forms, opset, what):
    """Without the Flatten/Reshape pair the lowering puts after it, the int32 per-tensor DequantizeLinear
    before Reshape fails to load at opset 21 and clamps at 13 (docs/ort-facts.md): the checker names the
    form and the failure."""
    case = _wrapped_i32(forms, opset, "Reshape")
    assert forms.check(case).failures == []
    with mock.patch.object(dql, "ort_pass_hazard", lambda info, layout: None):
        failures = forms.check(case).failures
    assert ("planner: dql-per-tensor", what) in {(f.form, f.what) for f in failures}  # reported once
    assert all(str(case) == f.case for f in failures)


def test_bad_usage_exits_2(forms):
    with pytest.raises(SystemExit) as e:
        forms.main(["--cases", "0"])
    assert e.value.code == 2


def test_a_guard_ort_folds_and_inlines_keeps_its_readers(forms):
    """A constant input in a function: ORT inlines the function, folds the i32 guard's check and inlines
    the branch it picks, so the guard's DequantizeLinear meets the Transpose the function's caller applies
    (it failed to load before the guard's branch kept the node's readers)."""
    for seed in range(4):
        case = forms.Case(
            (4, 30),
            (),
            "i32",
            "f32",
            25,
            True,
            True,
            True,
            False,
            ("Transpose",),
            any_size=True,
            holder="function",
            seed=seed,
        )
        assert forms.check(case).failures == []
