"""The golden suite: every case in tests/golden/ (nGraph 0.26.0's own results, written by
scripts/make_golden.py) converted, run under ONNX Runtime lowered and with the Python kernel, at the
default level and with optimizations off, and compared with nGraph's outputs under the precision policy:
bit-identical (signed zeros included) unless the case states a budget for an inexact op."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnx_dequant as odq
from onnx_dequant.validation.diff import compare_output
from onnx_dequant.validation.loading import with_types
from onnx_dequant.validation.policy import against_expected, tolerances

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted(GOLDEN.glob("*/*.json"))
LEVELS = ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL")


def load_case(path: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict]:
    """(inputs by parameter, nGraph's outputs by result, metadata) of one golden case."""
    with np.load(path.with_suffix(".npz"), allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        arrays = {k: z[k] for k in z.files if k != "meta"}
    for key, et in meta["types"].items():
        assert et == "bf16", (path, key, et)
        arrays[key] = arrays[key].view(ml_dtypes.bfloat16)
    inputs = {p: arrays[f"in.{p}"] for p in meta["parameters"]}
    outputs = {r: arrays[f"out.{r}"] for r in meta["results"]}
    return inputs, outputs, meta


def _options(level: str) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    # MatMulNBits' default accuracy level quantizes activations (docs/ngraph.md): keep them f32
    so.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "0")
    so.log_severity_level = 3
    return so


def _runs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]):
    lowered = odq.lower(model)
    for level in LEVELS:
        s = ort.InferenceSession(lowered.SerializeToString(), _options(level), providers=["CPUExecutionProvider"])
        yield f"lowered/{level}", s.run(None, feeds)
        yield f"kernel/{level}", odq.session(model, _options(level)).run(None, feeds)


def _where_loses_negative_zero() -> bool:
    """ORT's Where returns +0 when it selects -0 from its second input (onnxruntime #32191; docs/ort-facts.md)."""
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("Where", ["c", "a", "b"], ["y"])],
        "where",
        [vi("c", TensorProto.BOOL, [1]), vi("a", TensorProto.FLOAT, [1]), vi("b", TensorProto.FLOAT, [1])],
        [vi("y", TensorProto.FLOAT, [1])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"c": np.array([True]), "a": np.array([-0.0], np.float32), "b": np.array([1.0], np.float32)}
    return not bool(np.signbit(s.run(None, feeds)[0][0]))


WHERE_LOSES_NEGATIVE_ZERO = _where_loses_negative_zero()


def _same_bits(want: np.ndarray, got: np.ndarray, model: onnx.ModelProto) -> bool:
    """Bit equality; where ORT's Where loses -0 and the model uses Where, -0 against +0 is that bug."""
    if odq.same_bits(want, got):
        return True
    if not (WHERE_LOSES_NEGATIVE_ZERO and any(n.op_type == "Where" for n in model.graph.node)):
        return False
    bad = odq.compare.bit_mismatches(want, got)
    lost = (want == 0) & np.signbit(want) & ~np.signbit(got) & (got == 0)
    return not (bad & ~lost).any()


def test_golden_folder_is_small():
    total = sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file())
    assert CASES and total < 8 << 20, total


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_golden(path: Path):
    inputs, expected, meta = load_case(path)
    model = odq.ngraph.convert(path)
    onnx.checker.check_model(model, full_check=True)
    outs = [o.name for o in model.graph.output]
    assert len(outs) == len(expected)
    tol = tolerances(with_types(model))
    budgets = [against_expected(tol[o], meta["ulp"], meta["why"]) for o in outs]
    feeds = {i.name: x for i, x in zip(model.graph.input, inputs.values())}
    lowered = odq.lower(model)
    for run, got in _runs(model, feeds):
        for (rname, want), g, budget in zip(expected.items(), got, budgets):
            res = compare_output(rname, want, g, budget)
            assert res.ok, (run, rname, res.to_dict())
            if budget.exact:  # bit patterns, signed zeros included
                assert _same_bits(want, g, lowered), (run, rname, want, g)
