"""The lowering pass over whole models: subgraphs, functions, opsets, metadata, bad input, unused
initializers, and ORT's MatMul fusions (files and the command line: test_lowering_files.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import domain_nodes, one_node_model, ort_optimized, random_case, run_ort, vi
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.cli import main as cli_main
from onnx_dequant.compare import same_bits
from onnx_dequant.lowering import LowerOptions, lower_model
from onnx_dequant.schema import opset_import

RNG = np.random.default_rng(11)


def _if_model():
    """x -> If(cond): then Dequantize(axes {1}), else Dequantize(axes {0, 2}), outer-scope initializers."""
    x, s1, z1 = random_case(RNG, (2, 3, 4), (1,), "u8", "f32")
    _, s2, z2 = random_case(RNG, (2, 3, 4), (0, 2), "u8", "f32")
    then_g = helper.make_graph(
        [odq.make_node(["x", "s1", "z1"], ["a"], axes=[1], name="dq_then")],
        "then",
        [],
        [vi("a", TensorProto.FLOAT, [2, 3, 4])],
    )
    else_g = helper.make_graph(
        [odq.make_node(["x", "s2", "z2"], ["b"], axes=[0, 2], name="dq_else")],
        "else",
        [],
        [vi("b", TensorProto.FLOAT, [2, 3, 4])],
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g, name="branch")
    inits = [numpy_helper.from_array(a, n) for a, n in ((s1, "s1"), (z1, "z1"), (s2, "s2"), (z2, "z2"))]
    g = helper.make_graph(
        [node],
        "g",
        [vi("x", TensorProto.UINT8, [2, 3, 4]), vi("cond", TensorProto.BOOL, [])],
        [vi("y", TensorProto.FLOAT, [2, 3, 4])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), opset_import()])
    m.ir_version = 10
    return m, x, (s1, z1, (1,)), (s2, z2, (0, 2))


def test_if_subgraphs():
    m, x, (s1, z1, a1), (s2, z2, a2) = _if_model()
    lowered = odq.lower(m)
    assert domain_nodes(lowered) == 0
    onnx.checker.check_model(lowered, full_check=True)
    for cond, (s, z, axes) in ((True, (s1, z1, a1)), (False, (s2, z2, a2))):
        (y,) = run_ort(lowered, {"x": x, "cond": np.array(cond)})
        assert same_bits(y, odq.dequantize(x, s, z, axes=axes))


def test_loop_body():
    x, s, z = random_case(RNG, (3, 4), (0,), "i8", "f32")
    body = helper.make_graph(
        [
            odq.make_node(["x", "s", "z"], ["d"], axes=[0], name="dq_loop"),
            helper.make_node("Add", ["acc_in", "d"], ["acc_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            vi("i", TensorProto.INT64, []),
            vi("cond_in", TensorProto.BOOL, []),
            vi("acc_in", TensorProto.FLOAT, [3, 4]),
        ],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", TensorProto.FLOAT, [3, 4])],
    )
    loop = helper.make_node("Loop", ["n", "", "acc0"], ["acc"], body=body)
    inits = [
        numpy_helper.from_array(s, "s"),
        numpy_helper.from_array(z, "z"),
        numpy_helper.from_array(np.array(2, np.int64), "n"),
        numpy_helper.from_array(np.zeros((3, 4), np.float32), "acc0"),
    ]
    g = helper.make_graph(
        [loop], "g", [vi("x", TensorProto.INT8, [3, 4])], [vi("acc", TensorProto.FLOAT, [3, 4])], inits
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), opset_import()])
    m.ir_version = 8
    lowered = odq.lower(m)
    assert domain_nodes(lowered) == 0
    onnx.checker.check_model(lowered, full_check=True)
    (y,) = run_ort(lowered, {"x": x})
    d = odq.dequantize(x, s, z, axes=(0,))
    assert same_bits(y, d + d)


def test_model_local_function():
    x, s, z = random_case(RNG, (2, 3, 4), (1, 2), "u8", "f32")
    fn = helper.make_function(
        "local",
        "DQ",
        ["a", "sc", "zp"],
        ["b"],
        [odq.make_node(["a", "sc", "zp"], ["t"], axes=[1, 2], name="dq_fn"), helper.make_node("Relu", ["t"], ["b"])],
        opset_imports=[helper.make_opsetid("", 21), opset_import()],
    )
    call = helper.make_node("DQ", ["x", "s", "z"], ["y"], domain="local", name="call")
    g = helper.make_graph(
        [call],
        "g",
        [vi("x", TensorProto.UINT8, [2, 3, 4])],
        [vi("y", TensorProto.FLOAT, [2, 3, 4])],
        [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")],
    )
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 21), opset_import(), helper.make_opsetid("local", 1)], functions=[fn]
    )
    m.ir_version = 10
    lowered = odq.lower(m)
    assert domain_nodes(lowered) == 0
    assert all(o.domain != odq.DOMAIN for o in lowered.opset_import)
    assert all(o.domain != odq.DOMAIN for o in lowered.functions[0].opset_import)
    onnx.checker.check_model(lowered, full_check=True)
    (y,) = run_ort(lowered, {"x": x})
    assert np.array_equal(y, np.maximum(odq.dequantize(x, s, z, axes=(1, 2)), 0))


def test_keeps_opset_metadata_value_info():
    x, s, z = random_case(RNG, (2, 3), (1,), "i8", "f32")
    m = one_node_model(x, s, z, (1,), opset=17, consumer="Relu")
    m.graph.value_info.append(vi("t", TensorProto.FLOAT, [2, 3]))
    m.doc_string, m.producer_name, m.graph.doc_string = "model doc", "me", "graph doc"
    helper.set_model_props(m, {"k": "v"})
    lowered = odq.lower(m)
    assert [(o.domain, o.version) for o in lowered.opset_import] == [("", 17)]
    assert lowered.ir_version == m.ir_version
    assert (lowered.doc_string, lowered.producer_name, lowered.graph.doc_string) == ("model doc", "me", "graph doc")
    assert {p.key: p.value for p in lowered.metadata_props} == {"k": "v"}
    assert [v.name for v in lowered.graph.value_info] == ["t"]
    assert lowered.graph.node[-1].op_type == "Relu"


def test_opset_conversion():
    x, s, z = random_case(RNG, (2, 3), (0, 1), "i8", "f32")
    m = one_node_model(x, s, z, (0, 1), opset=13, consumer="Relu")
    lowered = odq.lower(m, opset=21)
    assert [o.version for o in lowered.opset_import if o.domain == ""] == [21]
    onnx.checker.check_model(lowered, full_check=True)
    (y,) = run_ort(lowered, {"x": x})
    assert np.array_equal(y, np.maximum(odq.dequantize(x, s, z, axes=(0, 1)), 0))


def test_low_model_opset_needs_explicit_opset():
    x, s, z = random_case(RNG, (2, 3), (), "u8", "f32")
    m = one_node_model(x, s, z, (), opset=11)
    with pytest.raises(odq.DequantizeError, match="opset 11"):
        odq.lower(m)
    lowered = odq.lower(m, opset=13)
    (y,) = run_ort(lowered, {"x": x})
    assert same_bits(y, odq.dequantize(x, s, z))


def test_ort_int8_reshape_bug_avoided():
    """docs/ort-facts.md: an int8 per-tensor DQL with a zero point before Reshape breaks ORT 1.32 at opset 21+;
    a Flatten then a Reshape back after it keep ORT's QDQ propagation off it."""
    x, s, z = random_case(RNG, (4, 6), (), "i8", "f32")
    z[...] = 3
    m = one_node_model(x, s, z, (), opset=21, consumer="Reshape")
    result = lower_model(m)
    lowered, report = result.model, result.nodes
    assert report[0].strategy == "dql-per-tensor" and "before Reshape at opset 21+" in report[0].barrier
    assert [n.op_type for n in lowered.graph.node] == ["DequantizeLinear", "Flatten", "Reshape", "Reshape"]
    (y,) = run_ort(lowered, {"x": x})  # ORT's default optimization level
    assert same_bits(y, odq.dequantize(x, s, z).reshape(-1))


def test_a_constant_input_ort_would_break_takes_the_form_ort_folds(tmp_path):
    """A constant x, scale and zero point: ORT folds a form without a DequantizeLinear when it loads the
    model (its constant folding leaves DequantizeLinear alone), so the Flatten/Reshape pair, which would run
    the DequantizeLinear every time (1.3-3.2x slower), is not taken there."""
    x, s, z = random_case(RNG, (64, 64), (), "i8", "f32")
    m = one_node_model(x, s, z, (), opset=21, consumer="Reshape", x_const=True)
    result = lower_model(m)
    node = result.nodes[0]
    assert node.strategy == "cast-sub-mul" and node.barrier == ""
    assert "folded when ORT loads the model" in node.refused["dql-per-tensor"]
    assert _optimized_ops(result.model, tmp_path) == []  # all folded: the output is a constant
    (y,) = run_ort(result.model, {})
    assert same_bits(y, odq.dequantize(x, s, z).reshape(-1))


def test_the_i32_guards_pair_is_reported():
    """An i32 input computed in the graph (not fed): ORT may fold the guard's check, so its DequantizeLinear
    branch is planned with the node's own readers, and gets the pair before a Reshape; the report says so."""
    x, s, _ = random_case(RNG, (64, 64), (), "i32", "f32", zp=False)
    x >>= 9
    nodes = [
        helper.make_node("Neg", ["x_in"], ["x"]),
        odq.make_node(["x", "s"], ["t"], name="dq"),
        helper.make_node("Reshape", ["t", "flat"], ["y"]),
    ]
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(np.array([-1], np.int64), "flat")]
    g = helper.make_graph(
        nodes, "g", [vi("x_in", TensorProto.INT32, [64, 64])], [vi("y", TensorProto.FLOAT, None)], inits
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), opset_import()])
    m.ir_version = 10
    result = lower_model(m)
    assert result.nodes[0].strategy == "i32-guarded"
    assert "before Reshape" in result.nodes[0].barrier
    (y,) = run_ort(result.model, {"x_in": -x})
    assert same_bits(y, odq.dequantize(x, s, None).reshape(-1))


def test_a_no_op_ort_computes_from_constants_counts():
    """ORT folds Div(2, 2) to 1, then removes the Mul by it and moves the DequantizeLinear to the Reshape
    behind: a reader whose other operand is computed (not fed) counts as one ORT may remove (the model failed
    to load: an int8 DequantizeLinear with a zero point at opset 21)."""
    x, s, z = random_case(RNG, (3, 4), (), "i8", "f32")
    nodes = [
        odq.make_node(["x", "s", "z"], ["t"], name="dq"),
        helper.make_node("Div", ["two", "two"], ["one"]),
        helper.make_node("Mul", ["t", "one"], ["u"]),
        helper.make_node("Reshape", ["u", "flat"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(s, "s"),
        numpy_helper.from_array(z, "z"),
        numpy_helper.from_array(np.float32(2), "two"),
        numpy_helper.from_array(np.array([-1], np.int64), "flat"),
    ]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.INT8, [3, 4])], [vi("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), opset_import()])
    m.ir_version = 10
    result = lower_model(m)
    assert "before Reshape" in result.nodes[0].barrier
    (y,) = run_ort(result.model, {"x": x})  # ORT's default level
    assert same_bits(y, odq.dequantize(x, s, z).reshape(-1))


def test_lower_command_names_the_pass_a_pair_keeps_off(tmp_path, capsys):
    x, s, z = random_case(RNG, (4, 6), (), "i8", "f32")
    src, dst = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(one_node_model(x, s, z, (), opset=21, consumer="Transpose"), str(src))
    assert cli_main(["lower", str(src), "-o", str(dst), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "1 DequantizeLinear(s) followed by a Flatten/Reshape pair" in out
    assert "ORT 1.32 cannot load an int8 per-tensor DequantizeLinear with a zero point before Transpose" in out
    assert cli_main(["lower", str(src), "-o", str(dst), "--quiet", "--json"]) == 0
    assert "before Transpose" in json.loads(capsys.readouterr().out)["nodes"][0]["barrier"]


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("consumer", ["Reshape", "Transpose", "Unsqueeze"])
@pytest.mark.parametrize(
    "axes,zp,x_const,wrap",
    [((), False, False, True), ((), True, False, True), ((1,), True, False, True), ((), True, True, False)],
    ids=["wrapped", "wrapped-zp", "wrapped-axis-zp", "constant-zp"],
)
def test_ort_int32_propagation_bugs_avoided(axes, zp, x_const, wrap, consumer, opset):
    """docs/ort-facts.md: ORT 1.32 fails to load (or, at opsets 13-20, clamps) an int32 per-tensor DQL before
    Reshape & co., and one with a zero point before Transpose; each such node takes another form. (A constant
    input within the guard's bound, or ``wrap_int32``, would otherwise be one DequantizeLinear.)"""
    x, s, z = random_case(RNG, (4, 6), axes, "i32", "f32", zp=zp)
    x >>= 9  # within +-2**22: ORT's int32 semantics and the reference's agree
    if z is not None:
        z >>= 9
    m = one_node_model(x, s, z, axes, opset=opset, consumer=consumer, x_const=x_const)
    if consumer == "Unsqueeze":  # axes as an input from opset 13
        m.graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "ax0"))
        m.graph.node[-1].input.append("ax0")
        del m.graph.output[0].type.tensor_type.shape.dim[:]
    lowered = lower_model(m, LowerOptions(wrap_int32=wrap)).model
    (y,) = run_ort(lowered, {} if x_const else {"x": x})  # ORT's default optimization level
    want = odq.dequantize(x, s, z, axes=axes)
    want = {"Reshape": want.reshape(-1), "Transpose": want.T, "Unsqueeze": want[None]}[consumer]
    assert same_bits(y, want)


@pytest.mark.parametrize(
    "via,broken",
    [
        ("Identity", True),
        ("Dropout", True),
        ("Cast", True),
        ("Add0", True),
        ("Sub0", True),
        ("Mul1", True),
        ("Div1", True),
        ("Expand1", True),
        ("ConstMul1", True),
        ("Mul2", False),
        ("0-Sub", False),
        ("Relu", False),
    ],
)
def test_readers_behind_ops_ort_removes_count(via, broken):
    """ORT removes Identity, Dropout, a Cast to the same type, Add/Sub 0, Mul/Div 1 (a Constant node's
    ``value_float`` too) and an Expand to the same shape before its QDQ passes, which then find the Reshape
    behind them: such a chain breaks an int32 per-tensor DQL as a
    Reshape reading it does, so a Flatten/Reshape pair follows the DQL. Other readers (Mul by 2, 0 - x, Relu)
    need none."""
    # (2048 elements: on fewer, Cast/Mul's two nodes cost less than a DequantizeLinear and its pair's three)
    x, s, _ = random_case(RNG, (32, 64), (), "i32", "f32", zp=False)
    x >>= 9
    m = one_node_model(x, s, None, (), opset=21, consumer="Reshape")
    reshape = m.graph.node[-1]
    ops = {"Add0": ("Add", 0), "Sub0": ("Sub", 0), "Mul1": ("Mul", 1), "Div1": ("Div", 1), "Mul2": ("Mul", 2)}
    if via == "Expand1":  # an Expand to the input's own shape (by ones), which ORT removes
        m.graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "ones"))
        mid = helper.make_node("Expand", ["t", "ones"], ["t2"])
    elif via == "ConstMul1":  # the one from a Constant's value_float, which ORT folds
        m.graph.node.insert(0, helper.make_node("Constant", [], ["k"], value_float=1.0))
        mid = helper.make_node("Mul", ["t", "k"], ["t2"])
    elif via in ops or via == "0-Sub":
        op, k = ops.get(via, ("Sub", 0))
        m.graph.initializer.append(numpy_helper.from_array(np.array(k, np.float32), "k"))
        mid = helper.make_node(op, ["k", "t"] if via == "0-Sub" else ["t", "k"], ["t2"])
    else:
        mid = helper.make_node(via, ["t"], ["t2"], **({"to": TensorProto.FLOAT} if via == "Cast" else {}))
    reshape.input[0] = "t2"
    m.graph.node.insert(len(m.graph.node) - 1, mid)
    result = lower_model(m, LowerOptions(wrap_int32=True))
    assert (result.nodes[0].strategy, bool(result.nodes[0].barrier)) == ("dql-per-tensor", broken)
    (y,) = run_ort(result.model, {"x": x})
    want = odq.dequantize(x, s, None).reshape(-1)
    if via in ("Mul2", "0-Sub", "Relu"):
        want = {"Mul2": want * 2, "0-Sub": 0 - want, "Relu": np.maximum(want, 0)}[via]
    assert same_bits(y, want)


def _wrapped_i32_where_ort_inlines(where: str, opset: int):
    """A per-tensor i32 Dequantize with ``wrap_int32``, its Reshape where ORT brings them together when it
    loads the model: across a model-local function's boundary ("function-dq", "function-reader"), an
    ``If`` branch whose condition is a constant ("branch-dq"), or a scale computed from a constant
    ("computed-scale")."""
    x, s, _ = random_case(RNG, (2, 3, 4), (), "i32", "f32", zp=False)
    x >>= 9
    ops = [helper.make_opsetid("", opset), opset_import()]
    shape = numpy_helper.from_array(np.array([-1], np.int64), "shape")
    dq = odq.make_node(["x", "s"], ["t"], name="dq")
    inits, funcs = [numpy_helper.from_array(s, "s"), shape], []
    if where == "function-dq":
        body = [helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(s, "sv")), dq]
        funcs = [helper.make_function("local", "F", ["x"], ["t"], body, ops)]
        nodes = [
            helper.make_node("F", ["x"], ["t"], domain="local"),
            helper.make_node("Reshape", ["t", "shape"], ["y"]),
        ]
    elif where == "function-reader":
        body = [
            helper.make_node("Constant", [], ["shape"], value=shape),
            helper.make_node("Reshape", ["a", "shape"], ["b"]),
        ]
        funcs = [helper.make_function("local", "G", ["a"], ["b"], body, ops[:1])]
        nodes = [dq, helper.make_node("G", ["t"], ["y"], domain="local")]
    elif where == "branch-dq":
        then = helper.make_graph(
            [odq.make_node(["x", "s"], ["u"], name="dq")], "then", [], [vi("u", TensorProto.FLOAT, None)]
        )
        other = helper.make_graph(
            [helper.make_node("Cast", ["x"], ["v"], to=TensorProto.FLOAT)],
            "else",
            [],
            [vi("v", TensorProto.FLOAT, None)],
        )
        inits.append(numpy_helper.from_array(np.array(True), "c"))
        nodes = [
            helper.make_node("If", ["c"], ["t"], then_branch=then, else_branch=other),
            helper.make_node("Reshape", ["t", "shape"], ["y"]),
        ]
    else:  # computed-scale
        nodes = [helper.make_node("Identity", ["s0"], ["s"]), dq, helper.make_node("Reshape", ["t", "shape"], ["y"])]
        inits[0] = numpy_helper.from_array(s, "s0")
    g = helper.make_graph(
        nodes, "g", [vi("x", TensorProto.INT32, [2, 3, 4])], [vi("y", TensorProto.FLOAT, None)], inits
    )
    m = helper.make_model(g, opset_imports=ops + [helper.make_opsetid("local", 1)] * bool(funcs), functions=funcs)
    m.ir_version = 10
    return m, x, odq.dequantize(x, s, None).reshape(-1)


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("where", ["function-dq", "function-reader", "branch-dq", "computed-scale"])
def test_readers_ort_brings_next_to_the_node_count(where, opset):
    """ORT inlines model-local functions and an If of a constant condition, and folds a scale computed from
    constants, before its QDQ passes: the lowering counts such readers (and such scales) as it counts a
    Reshape reading the node (at opset 13 the model gave clamped values, at 21 it did not load)."""
    m, x, want = _wrapped_i32_where_ort_inlines(where, opset)
    lowered = lower_model(m, LowerOptions(wrap_int32=True)).model
    (y,) = run_ort(lowered, {"x": x})
    assert same_bits(y, want)


def _optimized_ops(model: onnx.ModelProto, tmp_path: Path) -> list[str]:
    return [n.op_type for n in ort_optimized(model, tmp_path)]


@pytest.mark.parametrize("axes", [(), (1,)])
def test_matmul_weight_keeps_dql_for_ort_fusion(axes, tmp_path, record_property):
    w, s, z = random_case(RNG, (16, 8), axes, "i8", "f32")
    nodes = [
        odq.make_node(["w", "s", "z"], ["wf"], axes=axes, name="dq_w"),
        helper.make_node("MatMul", ["a", "wf"], ["y"]),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    g = helper.make_graph(
        nodes, "g", [vi("a", TensorProto.FLOAT, [4, 16])], [vi("y", TensorProto.FLOAT, [4, 8])], inits
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), opset_import()])
    m.ir_version = 10
    result = lower_model(onnx.ModelProto.FromString(m.SerializeToString()))
    lowered, report = result.model, result.nodes
    assert report[0].strategy in ("dql-per-tensor", "dql-per-axis")
    # our part: the weight stays a DequantizeLinear feeding the MatMul, the form ORT's QDQ fusions match
    assert [n.op_type for n in lowered.graph.node] == ["DequantizeLinear", "MatMul"]
    ops = _optimized_ops(lowered, tmp_path)
    record_property("ort_fusion", "+".join(ops))  # ORT 1.32: MatMulNBits (one node)
    # the Cast/Sub/Mul form gives ORT nothing to fuse: its optimized graph has no DequantizeLinear
    csm = lower_model(
        onnx.ModelProto.FromString(m.SerializeToString()), LowerOptions(strategies=["cast-sub-mul"])
    ).model
    assert "DequantizeLinear" not in _optimized_ops(csm, tmp_path)
    a = RNG.standard_normal((4, 16)).astype(np.float32)
    (y,) = run_ort(lowered, {"a": a}, level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    np.testing.assert_allclose(y, a @ odq.dequantize(w, s, z, axes=axes), rtol=1e-4, atol=1e-2)
    # ORT 1.32's fused kernel quantizes the activations dynamically: close, not exact (an exact one passes too)
    (y_fused,) = run_ort(lowered, {"a": a})
    assert np.linalg.norm(y_fused - y) <= 0.05 * np.linalg.norm(y)


def test_scan_body():
    x, s, z = random_case(RNG, (5, 3, 4), (2,), "i8", "f32")
    s1, z1 = s, z  # per-axis along the slice's last axis (axis 1 of a (3, 4) slice)
    body = helper.make_graph(
        [
            odq.make_node(["xs", "s", "z"], ["ys"], axes=[1], name="dq_scan"),
            helper.make_node("Identity", ["st"], ["st_out"]),
        ],
        "body",
        [vi("st", TensorProto.FLOAT, [1]), vi("xs", TensorProto.INT8, [3, 4])],
        [vi("st_out", TensorProto.FLOAT, [1]), vi("ys", TensorProto.FLOAT, [3, 4])],
    )
    scan = helper.make_node("Scan", ["st0", "x"], ["st", "y"], body=body, num_scan_inputs=1)
    inits = [
        numpy_helper.from_array(s1, "s"),
        numpy_helper.from_array(z1, "z"),
        numpy_helper.from_array(np.zeros(1, np.float32), "st0"),
    ]
    g = helper.make_graph(
        [scan],
        "g",
        [vi("x", TensorProto.INT8, [5, 3, 4])],
        [vi("st", TensorProto.FLOAT, [1]), vi("y", TensorProto.FLOAT, [5, 3, 4])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), opset_import()])
    m.ir_version = 10
    lowered = odq.lower(m)
    assert domain_nodes(lowered) == 0
    onnx.checker.check_model(lowered, full_check=True)
    _, y = run_ort(lowered, {"x": x})
    assert same_bits(y, odq.dequantize(x, s, z, axes=(2,)))


# ---- functions called more than once, function opsets ----


def _function_model(calls, fn_opset=21, model_opset=21, axes=(1, 2), extra_fn_nodes=()):
    """A model-local function DQ(a, sc, zp) = Dequantize(axes) [+ extra nodes], called once per entry of
    ``calls`` (x's name, elem type, shape); scale/zero point of shape (3, 4) shared."""
    _, s, z = random_case(RNG, (1, 3, 4), axes, "u8", "f32")
    body = [
        odq.make_node(["a", "sc", "zp"], ["t" if extra_fn_nodes else "b"], axes=list(axes), name="dq_fn"),
        *extra_fn_nodes,
    ]
    fn = helper.make_function(
        "local", "DQ", ["a", "sc", "zp"], ["b"], body, opset_imports=[helper.make_opsetid("", fn_opset), opset_import()]
    )
    nodes = [helper.make_node("DQ", [x, "s", "z"], [f"y{i}"], domain="local") for i, (x, _, _) in enumerate(calls)]
    g = helper.make_graph(
        nodes,
        "g",
        [vi(x, et, shape) for x, et, shape in calls],
        [vi(f"y{i}", TensorProto.FLOAT, shape) for i, (_, _, shape) in enumerate(calls)],
        [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")],
    )
    m = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", model_opset), opset_import(), helper.make_opsetid("local", 1)],
        functions=[fn],
    )
    m.ir_version = 10
    return m, s, z


def test_function_called_with_two_shapes():
    """One body serves both calls: dims the call sites disagree on are unknown, not the first call's."""
    m, s, z = _function_model([("x1", TensorProto.UINT8, [2, 3, 4]), ("x2", TensorProto.UINT8, [5, 3, 4])])
    lowered = odq.lower(m)
    onnx.checker.check_model(lowered, full_check=True)
    x1 = RNG.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    x2 = RNG.integers(0, 256, (5, 3, 4)).astype(np.uint8)
    y1, y2 = run_ort(lowered, {"x1": x1, "x2": x2})
    assert same_bits(y1, odq.dequantize(x1, s, z, axes=(1, 2)))
    assert same_bits(y2, odq.dequantize(x2, s, z, axes=(1, 2)))


def test_function_called_with_two_element_types_refused():
    m, *_ = _function_model([("x1", TensorProto.UINT8, [2, 3, 4]), ("x2", TensorProto.INT8, [2, 3, 4])])
    with pytest.raises(odq.DequantizeError, match="Function 'DQ' is called with input 'a' of types u8 and i8"):
        odq.lower(m)


def test_function_opset_follows_the_model():
    """A function that imports opset 17 but holds only our node lowers at the model's 21 (the blocked
    form), with its import raised to match: it held no ONNX op whose meaning could change."""
    m, s, z = _function_model([("x", TensorProto.UINT8, [2, 3, 4])], fn_opset=17, axes=(2,))
    lowered = odq.lower(m)
    assert [o.version for o in lowered.functions[0].opset_import if o.domain == ""] == [21]
    assert any(a.name == "block_size" for n in lowered.functions[0].node for a in n.attribute)
    onnx.checker.check_model(lowered, full_check=True)
    x = RNG.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    (y,) = run_ort(lowered, {"x": x})
    assert same_bits(y, odq.dequantize(x, s, z, axes=(2,)))


def test_function_with_onnx_ops_at_another_opset_refused():
    m, *_ = _function_model(
        [("x", TensorProto.UINT8, [2, 3, 4])], fn_opset=17, extra_fn_nodes=[helper.make_node("Relu", ["t"], ["b"])]
    )
    with pytest.raises(odq.DequantizeError, match="Function 'DQ' imports opset 17 but the model 21"):
        odq.lower(m)
    lowered = odq.lower(m, opset=19)  # converting aligns them
    assert {o.version for f in lowered.functions for o in f.opset_import if o.domain == ""} == {19}
    onnx.checker.check_model(lowered, full_check=True)


# ---- opsets: conversion failures, never raised ----


def test_opset_conversion_failure_is_clear(tmp_path, capsys):
    g = helper.make_graph(
        [helper.make_node("Gelu", ["x"], ["y"])],
        "g",
        [vi("x", TensorProto.FLOAT, [2])],
        [vi("y", TensorProto.FLOAT, [2])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    src = tmp_path / "gelu.onnx"
    src.write_bytes(m.SerializeToString())
    out = tmp_path / "o.onnx"
    assert cli_main(["lower", str(src), "-o", str(out), "--opset", "13"]) == 2
    err = capsys.readouterr().err
    assert "Cannot convert the model from opset 20 to 13" in err and "Gelu" in err and "Traceback" not in err
    assert not out.exists()


def test_opset_13_model_stays_at_13():
    """{0, 2} would take the blocked form (opset 21+): at 13 it takes another one, and the opset stays."""
    x, s, z = random_case(RNG, (4, 5, 6), (0, 2), "u8", "f32")
    lowered = odq.lower(one_node_model(x, s, z, (0, 2), opset=13))
    assert [o.version for o in lowered.opset_import if o.domain == ""] == [13]
    assert not any(a.name == "block_size" for n in lowered.graph.node for a in n.attribute)
    (y,) = run_ort(lowered, {"x": x})
    assert same_bits(y, odq.dequantize(x, s, z, axes=(0, 2)))


@pytest.mark.parametrize("axes", [(0, 2), (1,), (0, 1)])
def test_lowering_leaves_no_orphan_initializers(axes):
    """Scales and zero points the lowering replaced with reshaped copies are removed; the rest stay."""
    shape = (4, 6, 8)
    sshape = tuple(shape[a] for a in axes)
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.integers(-128, 128, shape, dtype=np.int8), "w"),
        numpy_helper.from_array(rng.random(sshape).astype(np.float32), "s"),
        numpy_helper.from_array(rng.integers(-128, 128, sshape, dtype=np.int8), "z"),
        numpy_helper.from_array(np.ones(3, np.float32), "unused_before"),  # not ours to remove
    ]
    graph = helper.make_graph(
        [odq.make_node(["w", "s", "z"], ["y"], axes=axes, name="dq")],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)])
    out = odq.lower(m)
    read = {i for n in out.graph.node for i in n.input}
    names = {t.name for t in out.graph.initializer}
    assert "unused_before" in names
    assert names - {"unused_before"} <= read, names - read
    y = ort.InferenceSession(out.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {})[0]
    want = odq.dequantize(*(numpy_helper.to_array(t) for t in inits[:3]), axes=axes)
    assert same_bits(y, want)
