"""Models written by ONNX Runtime's quantization tool (``onnxruntime.quantization``), built in the test run:
a small float Conv/Relu/MaxPool/Reshape/MatMul/Add model at a chosen opset, quantized static (QDQ per
tensor or per channel, or the QOperator format with com.microsoft ops) or dynamic."""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime import quantization as q

KINDS = ("qdq-per-tensor", "qdq-per-channel", "dynamic", "qoperator")


def float_model(opset: int) -> onnx.ModelProto:
    """The float model: Conv -> Relu -> MaxPool -> Reshape -> MatMul -> Add -> Add, input x (1, 3, 8, 8)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.standard_normal((64, 8)).astype(np.float32), "w2"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b2"),
        numpy_helper.from_array(np.array([1, 64], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("Reshape", ["p", "shape"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "w2"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b2"], ["a"], name="bias"),
        helper.make_node("Add", ["a", "a"], ["y"], name="double"),
    ]
    g = helper.make_graph(
        nodes,
        "float",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 19 else 10
    return m


class _Reader(q.CalibrationDataReader):
    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self._data = iter([{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self._data, None)


def quantized(folder: str, opset: int, kind: str, *, reduce_range: bool = False) -> str:
    """The path of the float model at ``opset`` quantized by ONNX Runtime's tool as ``kind`` (of ``KINDS``)."""
    src = os.path.join(folder, f"float{opset}.onnx")
    if not os.path.exists(src):
        onnx.save(float_model(opset), src)
    dst = os.path.join(folder, f"{kind}{opset}{'-rr' if reduce_range else ''}.onnx")
    if kind == "dynamic":
        q.quantize_dynamic(src, dst, weight_type=q.QuantType.QInt8)
    else:
        q.quantize_static(
            src,
            dst,
            _Reader(),
            quant_format=q.QuantFormat.QOperator if kind == "qoperator" else q.QuantFormat.QDQ,
            per_channel=kind == "qdq-per-channel",
            reduce_range=reduce_range,
            activation_type=q.QuantType.QUInt8,
            weight_type=q.QuantType.QInt8,
        )
    return dst
