"""nGraph training ops, bad input: each refusal is a DequantizeError naming the file, the op and the rule, and the
command exits 2 writing nothing. (Their results against real nGraph are golden cases: tests/golden/training.)"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnx_dequant as odq
from onnx_dequant.ngraph.writer import FunctionWriter

POOL = dict(window_shape=[2, 2], window_movement_strides=[1, 1], padding_below=[0, 0], padding_above=[0, 0])
CONV = dict(
    window_movement_strides_forward=[1],
    window_dilation_strides_forward=[1],
    padding_below_forward=[0],
    padding_above_forward=[0],
    data_dilation_strides_forward=[1],
)


def _max_pool_backprop(delta_shape=(1, 1, 2, 2), et="f32", **attrs) -> FunctionWriter:
    w = FunctionWriter()
    w.result(
        w.op("MaxPoolBackprop", w.parameter(et, [1, 1, 3, 3]), w.parameter(et, list(delta_shape)), **(POOL | attrs))
    )
    return w


def _unary(op: str, shape, et="f64", **attrs) -> FunctionWriter:
    w = FunctionWriter()
    w.result(w.op(op, w.parameter(et, list(shape)), **attrs))
    return w


def _losses(op: str, labels_et: str, **attrs) -> FunctionWriter:
    w = FunctionWriter()
    w.result(w.op(op, w.parameter("f32", [4, 5]), w.parameter(labels_et, [4, 1]), **attrs))
    return w


def _conv_data(**attrs) -> FunctionWriter:
    w = FunctionWriter()
    f, d = w.parameter("f32", [2, 3, 3]), w.parameter("f32", [1, 2, 4])
    w.result(w.op("ConvolutionBackpropData", f, d, data_batch_shape=[1, 3, 6], **(CONV | attrs)))
    return w


def _bn_backprop(delta_shape=(2, 3), et="f32") -> FunctionWriter:
    w = FunctionWriter()
    g, b, x = w.parameter(et, [3]), w.parameter(et, [3]), w.parameter(et, [2, 3])
    m, v, d = w.parameter(et, [3]), w.parameter(et, [3]), w.parameter(et, list(delta_shape))
    w.result(w.op("GetOutputElement", w.op("BatchNormTrainingBackprop", g, b, x, m, v, d, eps=1e-3), n=0))
    return w


BAD = [
    (
        _bn_backprop((3, 2)),
        {},
        "Shape of delta does not match the shape of the input data",
        "BatchNormTrainingBackprop_6",
    ),
    (
        _bn_backprop(et="i32"),
        {},
        "Input element type must be a floating-point type (got i32)",
        "BatchNormTrainingBackprop_6",
    ),
    (
        _unary("LayerNormBackprop", [2, 3], use_stats=False, use_affine=False, epsilon=1e-5, begin_norm_axis=1),
        {},
        "LayerNormBackprop takes 2 inputs, got 1",
        "LayerNormBackprop_1",
    ),
    (
        _max_pool_backprop((1, 1, 3, 2)),
        {},
        "Inferred forward output shape does not match delta shape",
        "MaxPoolBackprop_2",
    ),
    (
        _max_pool_backprop(),
        {"opset": 15},
        "needs opset 16 or later (ScatterElements with reduction add)",
        "MaxPoolBackprop_2",
    ),
    (_max_pool_backprop(et="boolean"), {}, "MaxPoolBackprop on boolean is not supported", "MaxPoolBackprop_2"),
    (
        _unary("AvgPoolBackprop", [1, 1, 2, 2], "i32", forward_arg_shape=[1, 1, 3, 3], **POOL),
        {},
        "AvgPoolBackprop on i32 is not supported (real types only)",
        "AvgPoolBackprop_1",
    ),
    (
        _unary("PartialSlice", [3, 4], axes=[1], lower_bounds=[0], upper_bounds=[2], decrease_axes=[1]),
        {},
        "Decrease dim should be 1",
        "PartialSlice_1",
    ),
    (
        _unary("PartialSlice", [3, 4], axes=[1, 1], lower_bounds=[0, 0], upper_bounds=[2, 2], decrease_axes=[]),
        {},
        "'axes' must be distinct axes of the data",
        "PartialSlice_1",
    ),
    (
        _unary("PartialSlice", [3, 4], "i32", axes=[1], lower_bounds=[0], upper_bounds=[2], decrease_axes=[]),
        {},
        "Argument element type must be f16, bf16, f32, f64",
        "PartialSlice_1",
    ),
    (
        _unary("GeluBackpropFactor", [3], "i8"),
        {},
        "Argument element type must be f16, bf16, f32, f64",
        "GeluBackpropFactor_1",
    ),
    (
        _losses("SoftmaxCrossEntropy", "f32", soft_label=False, ignore_index=-1),
        {},
        "hard labels (soft_label false) must be class indices of an integer type, got f32",
        "SoftmaxCrossEntropy_2",
    ),
    (
        _losses("CrossEntropy", "i64", ignore_index=-1),
        {},
        "CrossEntropy has no 'soft_label' attribute",
        "CrossEntropy_2",
    ),
    (
        _conv_data(data_dilation_strides_forward=[2]),
        {},
        "data dilation [2] has no ONNX counterpart",
        "ConvolutionBackpropData_2",
    ),
    (
        _conv_data(window_movement_strides_forward=[2]),
        {},
        "is not the forward convolution's output shape {1,2,2}",
        "ConvolutionBackpropData_2",
    ),
]


@pytest.mark.parametrize("w, kw, match, node", BAD, ids=[f"{b[3]}-{i}" for i, b in enumerate(BAD)])
def test_bad_training_op_is_refused(tmp_path, w, kw, match, node):
    p = tmp_path / "graph.json"
    p.write_text(json.dumps([w.to_json()]))
    with pytest.raises(odq.DequantizeError) as info:
        odq.ngraph.convert(p, **kw)
    msg = str(info.value)
    assert msg.startswith(f"{p}: node '{node}': ") and match in msg, msg


def test_cli_refused_training_op_exits_2_writes_nothing(tmp_path):
    src = tmp_path / "g.json"
    src.write_text(json.dumps([_max_pool_backprop((1, 1, 1, 1)).to_json()]))
    out = tmp_path / "m.onnx"
    r = subprocess.run(
        [sys.executable, "-m", "onnx_dequant.cli", "convert", str(src), "-o", str(out)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{src}: node 'MaxPoolBackprop_2': Inferred forward output shape" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]


def test_max_pool_backprop_model_is_checker_clean_at_opset_16_and_21():
    for opset in (16, 21):
        model = odq.ngraph.convert(json.dumps([_max_pool_backprop().to_json()]), opset=opset)
        onnx.checker.check_model(model, full_check=True)
        assert {n.op_type for n in model.graph.node} >= {"ArgMax", "ScatterElements"}
        assert [o.name for o in model.graph.output] == ["Result_3"]
        assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
        assert np.prod([d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]) == 9


# ---------------------------------------------------------------- TensorIterator


def _ti(ins=None, outs=None, body_op="Tanh", seq=(2, 4, 3), nested=False) -> FunctionWriter:
    """h' = body_op(x_t + h) over axis 1 of a (2, 4, 3) sequence; h carried; outputs: last h, all h."""
    body = FunctionWriter("body")
    body._id = 1000
    x, h = body.parameter("f32", [2, 1, 3]), body.parameter("f32", [2, 1, 3])
    y = body.op(body_op, body.binary("Add", x, h, "none"))
    if nested:
        y = body.op("TensorIterator", y)
    body.result(y)
    js = body.to_json()
    by = {o["name"]: o for o in js["ops"]}
    w = FunctionWriter()
    s, h0 = w.parameter("f32", list(seq)), w.parameter("f32", [2, 1, 3])
    ins = ins or [
        dict(kind="slice", input_index=0, body_parameter_index=0, start=0, stride=1, part_size=1, end=-1, axis=1),
        dict(kind="merged", input_index=1, body_parameter_index=1, body_value_index=0),
    ]
    outs = outs or [
        dict(kind="body_output", body_value_index=0, output_index=0, iteration=-1),
        dict(kind="concat", body_value_index=0, output_index=1, start=0, stride=1, part_size=1, end=-1, axis=1),
    ]
    body_js = {
        "nodes": js["ops"],
        "parameters": [by[p] for p in js["parameters"]],
        "results": [by[r] for r in js["result"]],
    }
    ti = w.op("TensorIterator", s, h0, body=body_js, input_descriptions=ins, output_descriptions=outs)
    for i in range(len(outs)):
        w.result(w.op("GetOutputElement", ti, n=i))
    return w


def test_tensor_iterator_is_a_loop_over_the_converted_body():
    model = odq.ngraph.convert(json.dumps([_ti().to_json()]))
    onnx.checker.check_model(model, full_check=True)
    (loop,) = [n for n in model.graph.node if n.op_type == "Loop"]
    body = loop.attribute[0].g
    assert [n.op_type for n in body.node][:1] == ["Gather"] and "Tanh" in {n.op_type for n in body.node}
    seq = np.arange(24, dtype=np.float32).reshape(2, 4, 3) / 24
    h = np.full((2, 1, 3), 0.5, np.float32)
    last, every = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"Parameter_0": seq, "Parameter_1": h}
    )
    want = []
    for t in range(4):  # the definition, step by step in f32
        h = np.tanh(seq[:, t : t + 1, :] + h)
        want.append(h)
    np.testing.assert_allclose(last, want[-1], rtol=1e-6)
    np.testing.assert_allclose(every, np.concatenate(want, axis=1), rtol=1e-6)


TI_BAD = [
    (
        _ti(
            ins=[
                dict(
                    kind="slice", input_index=0, body_parameter_index=0, start=0, stride=1, part_size=1, end=-1, axis=1
                ),
                dict(
                    kind="slice", input_index=1, body_parameter_index=1, start=0, stride=1, part_size=1, end=-1, axis=2
                ),
            ]
        ),
        "Number of slices not the same",
    ),
    (_ti(body_op="Erff"), "TensorIterator: node 'Erff_1003' of the body: unknown or unsupported op type 'Erff'"),
    (_ti(nested=True), "No nested TensorIterator"),
    (
        _ti(
            ins=[
                dict(
                    kind="slice", input_index=0, body_parameter_index=0, start=0, stride=1, part_size=1, end=-1, axis=1
                )
            ]
        ),
        "Number of inputs must be the same as number of input descriptions",
    ),
    (
        _ti(
            ins=[
                dict(
                    kind="slice", input_index=0, body_parameter_index=0, start=0, stride=2, part_size=1, end=-1, axis=1
                ),
                dict(kind="merged", input_index=1, body_parameter_index=1, body_value_index=0),
            ]
        ),
        "do not tile axis 1",
    ),
    (
        _ti(
            ins=[
                dict(kind="merged", input_index=0, body_parameter_index=1, body_value_index=0),
                dict(
                    kind="slice", input_index=1, body_parameter_index=0, start=0, stride=1, part_size=1, end=-1, axis=1
                ),
            ]
        ),
        "Iterator input is not compatible with body param",
    ),
    (_ti(outs=[dict(kind="body_output", body_value_index=0, output_index=0, iteration=4)]), "iteration 4 is outside"),
]


@pytest.mark.parametrize("w, match", TI_BAD, ids=[str(i) for i in range(len(TI_BAD))])
def test_bad_tensor_iterator_is_refused(tmp_path, w, match):
    p = tmp_path / "graph.json"
    p.write_text(json.dumps([w.to_json()]))
    with pytest.raises(odq.DequantizeError) as info:
        odq.ngraph.convert(p)
    msg = str(info.value)
    assert msg.startswith(f"{p}: node 'TensorIterator_2': ") and match in msg, msg
