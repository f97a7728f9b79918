"""scripts/check_forms.py: every form in the graphs it meets, run by ORT at its default level."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from unittest import mock

import pytest

from onnx_dequant.lowering.strategies import dql

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def forms():
    spec = importlib.util.spec_from_file_location("check_forms", ROOT / "scripts" / "check_forms.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _wrapped_i32(forms, opset: int, reader: str):
    """A per-tensor i32 node under ``wrap_int32``, read by ``reader``: ORT 1.32 breaks its DequantizeLinear."""
    return forms.Case((4, 300), (), "i32", "f32", opset, False, False, True, True, (reader,), any_size=False, seed=5)


def test_every_form_of_random_nodes_loads_and_computes_the_reference(forms, tmp_path, capsys):
    out = tmp_path / "forms.json"
    assert forms.main(["--cases", "40", "--seed", "3", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["failures"] == []
    planner = {k: n for k, n in report["runs"].items() if k.startswith("planner: ")}
    assert sum(planner.values()) == 40 and len(report["runs"]) - len(planner) >= 5  # and several forced forms
    assert "0 failure(s)" in capsys.readouterr().out


@pytest.mark.parametrize("opset,what", [(21, "load"), (13, "value")])
def test_a_form_ort_breaks_is_reported(forms, opset, what):
    """Without the lowering's refusal, the int32 per-tensor DequantizeLinear before Reshape fails to load at
    opset 21 and clamps at 13 (docs/ort-facts.md): the checker names the form and the failure."""
    case = _wrapped_i32(forms, opset, "Reshape")
    assert forms.check(case).failures == []
    with mock.patch.object(dql, "ort_load_refusal", lambda info, layout: None):
        failures = forms.check(case).failures
    assert ("planner: dql-per-tensor", what) in {(f.form, f.what) for f in failures}  # reported once
    assert all(str(case) == f.case for f in failures)


def test_bad_usage_exits_2(forms):
    with pytest.raises(SystemExit) as e:
        forms.main(["--cases", "0"])
    assert e.value.code == 2
