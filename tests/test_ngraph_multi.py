"""nGraph multi-output ops: GetOutputElement nodes (nGraph 0.26), inputs that name an output index (later
files), Results on any output; Split / VariadicSplit as the ops that make several outputs.

Expected values are NumPy's ``split`` (what nGraph's Split computes: slices of the axis in order); the
0.26-style graphs here were also run through real nGraph 0.26 (the golden suite holds those runs).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnx_dequant as odq
from onnx_dequant.ngraph.writer import FunctionWriter, Ref, dumps

X = np.arange(24, dtype=np.float32).reshape(2, 12)


def run(w: FunctionWriter, feeds: dict) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    model = odq.ngraph.convert(dumps([w]))
    onnx.checker.check_model(model, full_check=True)
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return model, s.run(None, feeds)


def test_get_output_element_and_results_on_each_output():
    w = FunctionWriter(era="v0.26")
    p = w.parameter("f32", [2, 12])
    s = w.op("Split", p, axis=1, splits=[3, 4, 5])
    g1 = w.op("GetOutputElement", Ref(s, 1), n=1)
    g2 = w.op("GetOutputElement", Ref(s, 2), n=2)
    g0 = w.op("GetOutputElement", s, n=0)  # the oldest spelling: the op's name, the index in "n" only
    r = [w.result(g2), w.result(w.op("Relu", g1)), w.result(g0)]
    model, got = run(w, {p: X})
    a, b, c = np.split(X, [3, 7], axis=1)
    assert [g.tolist() for g in got] == [c.tolist(), b.tolist(), a.tolist()]
    # no node for GetOutputElement: Split writes straight into the Results' names
    split = next(n for n in model.graph.node if n.op_type == "Split")
    assert split.name == s and list(split.output) == [r[2], f"{s}_1", r[0]]
    assert [o.name for o in model.graph.output] == r
    assert not any(n.name.startswith("GetOutputElement") for n in model.graph.node)


def test_inputs_naming_an_output_index_without_get_output_element():
    w = FunctionWriter(era="v0.29")
    p = w.parameter("f32", [2, 12])
    axis = w.constant(np.int64(-1))
    s = w.op("Split", p, axis, version=1, num_splits=3)
    w.result(w.binary("Add", Ref(s, 2), Ref(s, 0)))
    w.result(Ref(s, 1))
    w.result(Ref(s, 1))  # the same output twice: the second Result is a copy
    _, got = run(w, {p: X})
    a, b, c = np.split(X, 3, axis=1)
    assert got[0].tolist() == (c + a).tolist()
    assert got[1].tolist() == b.tolist() and got[2].tolist() == b.tolist()


def test_variadic_split_rest_and_split_v0_axis_input():
    w = FunctionWriter(era="v0.29")
    p = w.parameter("f32", [2, 12])
    v = w.op("VariadicSplit", p, w.constant(np.int64(1)), w.constant(np.array([2, -1, 3], np.int64)), version=1)
    s0 = w.op("Split", p, w.constant(np.int32(0)), splits=[1, 1])  # v0 with the axis as an input (later files)
    for i in range(3):
        w.result(Ref(v, i))
    w.result(Ref(s0, 1))
    _, got = run(w, {p: X})
    assert [g.shape for g in got] == [(2, 2), (2, 7), (2, 3), (1, 12)]
    assert np.concatenate(got[:3], axis=1).tolist() == X.tolist()
    assert got[3].tolist() == X[1:].tolist()


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda w, p, s: w.op("GetOutputElement", s, n=3), "index 3 requested, but node 'Split_1' has only 2"),
        (lambda w, p, s: w.op("GetOutputElement", s), "GetOutputElement needs 'n'"),
        (lambda w, p, s: w.op("Relu", Ref(s, 2)), "refers to output 2 of 'Split_1', which has 2 outputs"),
        (lambda w, p, s: w.op("GetOutputElement", p, n=1), "node 'Parameter_0' has only 1 output"),
    ],
)
def test_bad_output_indices(build, match):
    w = FunctionWriter(era="v0.26")
    p = w.parameter("f32", [2, 12])
    s = w.op("Split", p, axis=1, splits=[6, 6])
    w.result(build(w, p, s))
    with pytest.raises(odq.DequantizeError, match=match):
        odq.ngraph.convert(dumps([w]))


@pytest.mark.parametrize(
    "attrs, match",
    [
        ({"axis": 2, "splits": [6, 6]}, "has to point to one of the input tensor's shape dimensions"),
        ({"axis": 1, "splits": [6, 5]}, "has to be equal to the sum of splits passed to the op: 11"),
        ({"axis": 1, "splits": [12, 0]}, "must be greater than zero"),
    ],
)
def test_split_rules(attrs, match):
    w = FunctionWriter(era="v0.26")
    p = w.parameter("f32", [2, 12])
    w.result(w.op("GetOutputElement", w.op("Split", p, **attrs), n=0))
    with pytest.raises(odq.DequantizeError, match=match):
        odq.ngraph.convert(dumps([w]))


def test_split_axis_must_be_a_constant():
    w = FunctionWriter(era="v0.29")
    p = w.parameter("f32", [2, 12])
    a = w.parameter("i64", [])
    w.result(Ref(w.op("Split", p, a, version=1, num_splits=2), 0))
    with pytest.raises(odq.DequantizeError, match=r"needs its axis \(input 1\) as a Constant"):
        odq.ngraph.convert(dumps([w]))
