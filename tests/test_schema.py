"""The op as an ONNX node: schema registration, checker, shape inference, the reference evaluator."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_dequant as odq
from onnx_dequant.compare import same_bits


def model(
    x_type=TensorProto.INT8,
    x_shape=("N", 3, 4),
    s_type=TensorProto.FLOAT,
    s_shape=(3,),
    axes=(1,),
    zp=True,
    dtype=None,
    out_shape=None,
    name="dq",
):
    inputs = ["x", "s"] + (["z"] if zp else [])
    node = odq.make_node(inputs, ["y"], axes=axes, dtype=dtype, name=name)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", x_type, x_shape), helper.make_tensor_value_info("s", s_type, s_shape)]
        + ([helper.make_tensor_value_info("z", x_type, s_shape)] if zp else []),
        [helper.make_tensor_value_info("y", s_type, out_shape or [None] * len(x_shape))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)])


def output_type(m):
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    t = inferred.graph.output[0].type.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim)
    return t.elem_type, dims


def test_make_node_attributes():
    node = odq.make_node(["x", "s", "z"], ["y"], axes=[3, 1], dtype="f16", name="n")
    assert node.domain == odq.DOMAIN and node.op_type == "Dequantize" and node.name == "n"
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"axes": [1, 3], "type": TensorProto.FLOAT16}
    with pytest.raises(odq.DequantizeError, match="must be distinct"):
        odq.make_node(["x", "s"], ["y"], axes=[1, 1])
    with pytest.raises(odq.DequantizeError, match="2 or 3 inputs"):
        odq.make_node(["x"], ["y"])
    with pytest.raises(odq.DequantizeError, match="floating point"):
        odq.make_node(["x", "s"], ["y"], dtype="i8")


def test_checker_accepts_valid_models_and_inference_fills_the_output():
    m = model(out_shape=None)
    onnx.checker.check_model(m, full_check=True)
    assert output_type(m) == (TensorProto.FLOAT, ("N", 3, 4))
    m = model(x_type=TensorProto.UINT16, x_shape=(2, "C", 5), s_type=TensorProto.BFLOAT16, s_shape=(2, 5), axes=(0, 2))
    onnx.checker.check_model(m, full_check=True)
    assert output_type(m) == (TensorProto.BFLOAT16, (2, "C", 5))
    # a known scale dim fills an unknown input dim
    m = model(x_shape=("N", None, 4), s_shape=(3,), zp=False)
    assert output_type(m) == (TensorProto.FLOAT, ("N", 3, 4))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            dict(s_shape=(4,)),
            "Scale / zero point shape ({4}) must match input shape ({?,3,4}) at the quantization axes (AxisSet{1})",
        ),
        (dict(axes=(3,)), "Quantization axis (3) must be less than input shape rank (3)"),
        (dict(axes=(0, 1)), "Scale / zero point rank (1) does not match the number of quantization axes (2)"),
        (dict(s_type=TensorProto.FLOAT, dtype="f64"), "Scale element type (f32) must match output element type (f64)"),
    ],
)
def test_checker_rejects_invalid_models_with_the_contract_message(kwargs, message):
    m = model(**kwargs)
    with pytest.raises(Exception) as e:
        onnx.checker.check_model(m, full_check=True)
    assert f"node 'dq': {message}" in str(e.value)
    with pytest.raises(Exception) as e:
        onnx.shape_inference.infer_shapes(m, strict_mode=True)
    assert message in str(e.value)


def test_type_constraints_reject_non_quantized_input():
    m = model(x_type=TensorProto.FLOAT)
    with pytest.raises(Exception) as e:
        onnx.checker.check_model(m, full_check=True)
    assert "node 'dq': Zero point / input element type (f32) must be a quantized type" in str(e.value)


def test_reference_evaluator_runs_models_with_the_op():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (2, 3, 4), dtype=np.int8)
    s = rng.standard_normal(3).astype(np.float32)
    z = rng.integers(-128, 128, 3, dtype=np.int8)
    m = model()
    y = ReferenceEvaluator(m, new_ops=[odq.DequantizeOp]).run(None, {"x": x, "s": s, "z": z})[0]
    assert same_bits(y, odq.dequantize(x, s, z, axes=[1]))


def test_reference_evaluator_with_initializers_and_bf16():
    s = np.array([0.5, 2.0, -1.0], dtype=ml_dtypes.bfloat16)
    node = odq.make_node(["x", "s"], ["y"], axes=[1], dtype="bf16")
    cast = helper.make_node("Cast", ["y"], ["y32"], to=TensorProto.FLOAT)
    graph = helper.make_graph(
        [node, cast],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, (2, 3))],
        [helper.make_tensor_value_info("y32", TensorProto.FLOAT, (2, 3))],
        [numpy_helper.from_array(s, "s")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])
    onnx.checker.check_model(m, full_check=True)
    x = np.array([[1, 2, 3], [255, 0, 7]], np.uint8)
    y = ReferenceEvaluator(m, new_ops=[odq.DequantizeOp]).run(None, {"x": x})[0]
    assert y.tolist() == [[0.5, 4.0, -3.0], [127.5, 0.0, -7.0]]


def test_registration_survives_reimport_and_prior_registration():
    code = """
import importlib, onnx, onnx.defs
# someone else registered a schema of the same name first, without inference
S = onnx.defs.OpSchema
onnx.defs.register_schema(S("Dequantize", "ngraph", 1, inputs=[S.FormalParameter("input", "T")],
    outputs=[S.FormalParameter("output", "T")], type_constraints=[("T", ["tensor(int8)"], "")]))
import onnx_dequant, onnx_dequant.schema as sch
importlib.reload(sch)
import onnx_dequant
s = onnx.defs.get_schema("Dequantize", 1, "ngraph")
assert s.has_type_and_shape_inference_function, "ours replaced the bare one"
assert len(s.inputs) == 3
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_every_public_name_is_exported():
    names = set(odq.__all__)
    assert all(hasattr(odq, n) for n in names)
    for required in (
        "DOMAIN",
        "DequantizeError",
        "TensorType",
        "dequantize",
        "infer",
        "make_node",
        "lower",
        "session",
        "ngraph",
        "validate",
        "Report",
    ):
        assert required in names
    assert callable(odq.ngraph.convert)
    assert issubclass(odq.DequantizeError, ValueError)
