"""Helpers for the lowering tests: build one-node models, run them in ORT, compare with the reference."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import dtypes
from onnx_dequant.schema import opset_import


def random_case(rng: np.random.Generator, shape: Sequence[int], axes: Sequence[int], qt: str, rt: str, zp: bool = True):
    """Random ``(x, scale, zero_point)`` of the given shapes and types (scales with varied exponents)."""
    q, r = dtypes.parse(qt), dtypes.parse(rt)
    x = np.asarray(rng.integers(int(q.min), int(q.max) + 1, size=tuple(shape))).astype(q.numpy)
    ss = tuple(shape[a] for a in axes)
    s = np.asarray(rng.standard_normal(ss) * np.exp2(rng.integers(-8, 8, ss))).astype(r.numpy)
    z = np.asarray(rng.integers(int(q.min), int(q.max) + 1, size=ss)).astype(q.numpy) if zp else None
    return x, s, z


def one_node_model(
    x: np.ndarray,
    s: np.ndarray,
    z: np.ndarray | None,
    axes: Sequence[int],
    *,
    opset: int = 21,
    const: bool = True,
    consumer: str | None = None,
    symbolic: bool = False,
    x_const: bool = False,
) -> onnx.ModelProto:
    """A model with one Dequantize node: x a graph input (or initializer), scale/zero point initializers
    (``const``) or graph inputs; ``consumer`` appends that op (Relu, Reshape ...) after it."""
    r = dtypes.parse(s.dtype)
    inputs, inits = [], []

    def add(name: str, arr: np.ndarray, is_const: bool) -> None:
        if is_const:
            inits.append(numpy_helper.from_array(arr, name))
        else:
            dims = [f"d{i}" if symbolic else d for i, d in enumerate(arr.shape)]
            inputs.append(helper.make_tensor_value_info(name, dtypes.parse(arr.dtype).onnx, dims))

    add("x", x, x_const)
    add("s", s, const)
    names = ["x", "s"]
    if z is not None:
        add("z", z, const)
        names.append("z")
    nodes = [odq.make_node(names, ["y" if consumer is None else "t"], axes=axes, name="dq")]
    if consumer == "Relu":
        nodes.append(helper.make_node("Relu", ["t"], ["y"]))
    elif consumer == "Reshape":
        inits.append(numpy_helper.from_array(np.array([-1], np.int64), "flat"))
        nodes.append(helper.make_node("Reshape", ["t", "flat"], ["y"]))
    elif consumer is not None:
        nodes.append(helper.make_node(consumer, ["t"], ["y"]))
    out_shape = [int(x.size)] if consumer == "Reshape" else [f"d{i}" if symbolic else d for i, d in enumerate(x.shape)]
    out = helper.make_tensor_value_info("y", r.onnx, out_shape)
    g = helper.make_graph(nodes, "g", inputs, [out], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), opset_import()])
    m.ir_version = helper.find_min_ir_version_for(list(m.opset_import), ignore_unknown=True)
    return m


def readable(model: onnx.ModelProto) -> onnx.ModelProto:
    """bf16 graph outputs get a Cast to f32 (exact), since ORT's Python API cannot return bf16."""
    for i, o in enumerate(model.graph.output):
        if o.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            name = o.name + "__f32"
            model.graph.node.append(helper.make_node("Cast", [o.name], [name], to=TensorProto.FLOAT))
            dims = [d.dim_value or d.dim_param for d in o.type.tensor_type.shape.dim]
            model.graph.output[i].CopyFrom(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
    return model


def run_ort(
    model: onnx.ModelProto, feeds: dict, *, level: ort.GraphOptimizationLevel | None = None
) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if level is not None:
        so.graph_optimization_level = level
    sess = ort.InferenceSession(readable(model).SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def domain_nodes(model: onnx.ModelProto) -> int:
    from onnx_dequant.graphs import iter_nodes as _all_nodes

    return sum(n.domain == odq.DOMAIN for n in _all_nodes(model))
