"""The tests' shared helpers, in one module: models (small fixed ones in ONNX's text syntax), inputs,
running ORT, and tampering with lowered models."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import onnx.parser
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import dtypes
from onnx_dequant.schema import opset_import

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@contextlib.contextmanager
def script_module(name: str, *, beside: tuple[str, ...] = ()) -> Iterator[ModuleType]:
    """``scripts/NAME.py`` imported as a module, registered in ``sys.modules`` while in use (its dataclasses
    look their module up there); ``beside``: the scripts it imports from its folder, unloaded afterwards."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if beside:
        sys.path.insert(0, str(SCRIPTS))
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        for n in (name, *beside):
            sys.modules.pop(n, None)
        if beside:
            sys.path.remove(str(SCRIPTS))


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
    elif consumer == "Transpose":  # the perm named (ORT's Transpose optimizer leaves one without it alone)
        perm = {"perm": list(range(x.ndim))[::-1]} if x.ndim else {}
        nodes.append(helper.make_node("Transpose", ["t"], ["y"], **perm))
    elif consumer is not None:
        nodes.append(helper.make_node(consumer, ["t"], ["y"]))
    out_shape = [int(x.size)] if consumer == "Reshape" else [f"d{i}" if symbolic else d for i, d in enumerate(x.shape)]
    if consumer == "Transpose":
        out_shape.reverse()
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


def ort_optimized(model: onnx.ModelProto, folder) -> list[onnx.NodeProto]:
    """The nodes of ORT's optimized graph of ``model`` at its default level (written into ``folder``)."""
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(Path(folder) / "ort_optimized.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return list(onnx.load(so.optimized_model_filepath).graph.node)


def domain_nodes(model: onnx.ModelProto) -> int:
    from onnx_dequant.graphs import iter_nodes as _all_nodes

    return sum(n.domain == odq.DOMAIN for n in _all_nodes(model))


# ---- one-node models with graph inputs, random integers and scales (the kernel tests) ----

SHAPE = (3, 4, 5)


def vi(name, elem, shape):
    """A tensor value_info of element type ``elem`` (any spelling)."""
    return helper.make_tensor_value_info(name, dtypes.parse(elem).onnx, shape)


def model_of(nodes, inputs, outputs, initializers=(), opset=21):
    """A model of ``nodes`` importing the default domain at ``opset`` and ours."""
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(odq.DOMAIN, 1)], ir_version=10
    )


def ints(rng, elem, shape, extremes=True):
    """Random integers of ``elem`` spanning the type (its min and max at both ends with ``extremes``)."""
    t = dtypes.parse(elem)
    v = np.asarray(rng.integers(int(t.min), int(t.max) + 1, size=shape, dtype=np.int64))
    if extremes and v.size >= 2:
        v.flat[0], v.flat[-1] = int(t.min), int(t.max)
    return v.astype(t.numpy)


def scales(rng, elem, shape):
    """Random scales of the real type ``elem``."""
    return np.asarray(rng.standard_normal(shape) * 0.37).astype(dtypes.parse(elem).numpy)


def single_node_model(x_elem, out_elem, axes, *, zero_point=True, x_shape=SHAPE, scale_shape="exact", name="dq"):
    """One Dequantize node fed by graph inputs x, s (and z); scale_shape None gives the scale no shape."""
    sshape = tuple(x_shape[a] for a in axes) if scale_shape == "exact" else scale_shape
    ins = ["x", "s"] + (["z"] if zero_point else [])
    vis = [vi("x", x_elem, x_shape), vi("s", out_elem, sshape)] + ([vi("z", x_elem, sshape)] if zero_point else [])
    node = odq.make_node(ins, ["y"], axes=axes, name=name)
    return model_of([node], vis, [vi("y", out_elem, x_shape)])


# ---- models for validation: Dequantize with constant parameters, two stages, plain; tampering ----


def scale_values(shape, dt, seed=1):
    """Scales in [0.01, 2) of the real type ``dt``, reproducible by ``seed``."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0.01, 2.0, shape).astype(dtypes.parse(dt).numpy)


def zero_points(shape, dt, seed=2):
    """Zero points spanning the quantized type ``dt``, reproducible by ``seed``."""
    d = dtypes.parse(dt)
    rng = np.random.default_rng(seed)
    return rng.integers(int(d.min), int(d.max) + 1, shape).astype(d.numpy)


def dq_model(
    x_dt="i8",
    out_dt="f32",
    shape=(2, 3, 4),
    axes=(0, 2),
    *,
    symbolic=False,
    relu=True,
    opset=21,
    zero_point=True,
):
    """x -> Dequantize 'dq1' (scale/zp initializers) [-> Relu 'relu'] -> y."""
    x = dtypes.parse(x_dt)
    out = dtypes.parse(out_dt)
    pshape = tuple(shape[a] for a in axes)
    inits = [numpy_helper.from_array(scale_values(pshape, out), "s")]
    ins = ["x", "s"]
    if zero_point:
        inits.append(numpy_helper.from_array(zero_points(pshape, x), "zp"))
        ins.append("zp")
    nodes = [odq.make_node(ins, ["w" if relu else "y"], axes=axes, name="dq1")]
    if relu:
        nodes.append(helper.make_node("Relu", ["w"], ["y"], name="relu"))
    in_shape = ["N", *shape[1:]] if symbolic else list(shape)
    g = helper.make_graph(
        nodes,
        "dq",
        [helper.make_tensor_value_info("x", x.onnx, in_shape)],
        [helper.make_tensor_value_info("y", out.onnx, in_shape)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), odq.schema.opset_import()])


def two_stage_model():
    """y = Relu(dq1(x)) + dq2(w): two Dequantize nodes, then float ops."""
    m = onnx.parser.parse_model(
        f"""
        <ir_version: {onnx.IR_VERSION}, opset_import: ["" : 21, "{odq.DOMAIN}" : 1]>
        two (int8[3,4] x, uint8[3,4] wq) => (float[3,4] y) {{
            [dq1] a = {odq.DOMAIN}.Dequantize <axes = [1]> (x, s1, z1)
            [relu] r = Relu(a)
            [dq2] b = {odq.DOMAIN}.Dequantize <axes = [0, 1]> (wq, s2, z2)
            [add] y = Add(r, b)
        }}
        """
    )
    m.graph.initializer.extend(
        [
            numpy_helper.from_array(scale_values((4,), "f32", 3), "s1"),
            numpy_helper.from_array(zero_points((4,), "i8", 4), "z1"),
            numpy_helper.from_array(scale_values((3, 4), "f32", 5), "s2"),
            numpy_helper.from_array(zero_points((3, 4), "u8", 6), "z2"),
        ]
    )
    return m


def hand_lowered_two_stage(model):
    """The two-stage model lowered by hand: per-axis and blocked DequantizeLinear, names kept."""
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    g = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["x", "s1", "z1"], ["a"], axis=1, name="dql1"),
            helper.make_node("Relu", ["a"], ["r"], name="relu"),
            helper.make_node("DequantizeLinear", ["wq", "s2", "z2"], ["b"], axis=0, block_size=1, name="dql2"),
            helper.make_node("Add", ["r", "b"], ["y"], name="add"),
        ],
        "two_lowered",
        list(model.graph.input),
        list(model.graph.output),
        [numpy_helper.from_array(v, k) for k, v in init.items()],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def tamper_scale(model, name, index=(0,), factor=1.5):
    """A copy of ``model`` with one value of initializer ``name`` changed."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        if t.name == name:
            a = numpy_helper.to_array(t).copy()
            a[index] = a[index] * factor
            t.CopyFrom(numpy_helper.from_array(a, name))
            return m
    raise KeyError(name)


def plain_model():
    """y = Tanh(x) + x: no Dequantize node."""
    return onnx.parser.parse_model(
        f"""
        <ir_version: {onnx.IR_VERSION}, opset_import: ["" : 17]>
        plain (float[B,5] x) => (float[B,5] y) {{
            [tanh] t = Tanh(x)
            [add] y = Add(t, x)
        }}
        """
    )


def statuses(report):
    """Each path's status by label ("lowered/default": "pass")."""
    return {p.label: p.status for p in report.paths}


def swap_axis(lowered):
    """A copy of ``lowered`` with every DequantizeLinear's axis swapped between 0 and 1."""
    bad = onnx.ModelProto()
    bad.CopyFrom(lowered)
    swapped = 0
    for n in bad.graph.node:
        if n.op_type == "DequantizeLinear":
            axis = [a for a in n.attribute if a.name == "axis"]
            if axis:
                axis[0].i = 1 - axis[0].i if axis[0].i in (0, 1) else 0
            else:  # axis defaults to 1
                n.attribute.append(helper.make_attribute("axis", 0))
            swapped += 1
    assert swapped
    return bad


def guard_checks(graph: onnx.GraphProto) -> list[bool]:
    """For each ReduceMax/ReduceMin of an i32 guard in ``graph`` and the graphs inside its nodes (an If's
    branches, a Scan's body): whether it reduces a Cast's output (the check through float32)."""
    casts = {n.output[0] for n in graph.node if n.op_type == "Cast"}
    found = [n.input[0] in casts for n in graph.node if n.op_type in ("ReduceMax", "ReduceMin")]
    for n in graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                found += guard_checks(a.g)
    return found
