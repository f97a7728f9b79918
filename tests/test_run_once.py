"""A DequantizeLinear read by several nodes: how ORT reads a value (``Scope.reads``), and the Flatten/Reshape
pair ``run_once`` adds so that ORT 1.32 runs the DequantizeLinear once instead of once per reader."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from helpers import model_of, ort_optimized, random_case, run_ort, vi
from onnx import helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.cli import main as cli_main
from onnx_dequant.compare import same_bits, ulp_distance
from onnx_dequant.contract import TensorType
from onnx_dequant.lowering import LowerOptions, lower_model
from onnx_dequant.lowering.facts import Constants, Reads
from onnx_dequant.lowering.walk import Scope

SHAPE = (128, 128)  # large enough that the runs saved outweigh the pair's fixed cost


@pytest.mark.parametrize(
    ("edges", "outside", "runs"),
    [(0, False, 1), (0, True, 1), (1, False, 1), (1, True, 2), (2, False, 2), (3, True, 4)],
)
def test_dql_runs_follow_orts_duplication(edges, outside, runs):
    assert Reads(edges, outside).dql_runs == runs


def _scope(nodes, outputs=("z",), inits=(), main=True, y_shape=None) -> Scope:
    g = helper.make_graph(nodes, "g", [vi("y", "f32", [4])], [vi(o, "f32", [4]) for o in outputs], list(inits))
    types = {} if y_shape is None else {"y": TensorType("f32", y_shape)}
    return Scope(g, "main", Constants(None).scope(g), types, main=main)


def _node(op, inputs, output, **attrs):
    return helper.make_node(op, inputs, [output], **attrs)


Q_PARAMS = [numpy_helper.from_array(np.float32(0.5), "qs"), numpy_helper.from_array(np.uint8(0), "qz")]


@pytest.mark.parametrize(
    ("nodes", "outputs", "want"),
    [
        ([_node("Relu", ["y"], "a"), _node("Sigmoid", ["y"], "z")], ("a", "z"), Reads(2, False, False)),
        ([_node("Mul", ["y", "y"], "z")], ("z",), Reads(2, False, False)),
        ([_node("Identity", ["y"], "i"), _node("Relu", ["i"], "a"), _node("Relu", ["i"], "z")], ("a", "z"), Reads(2)),
        ([_node("Relu", ["y"], "z")], ("z", "y"), Reads(1, True, False)),
        ([_node("Identity", ["y"], "z")], ("z",), Reads(1, False, False)),  # a no-op returned: not removed
        # a QuantizeLinear after a reader (past ops a node unit may hold) forms a node unit ORT fuses
        ([_node("Relu", ["y"], "a"), _node("QuantizeLinear", ["a", "qs", "qz"], "z")], ("z",), Reads(1, False, True)),
        (
            [
                _node("Reshape", ["y", "shp"], "r"),
                _node("Sigmoid", ["r"], "a"),
                _node("Transpose", ["a"], "b"),
                _node("QuantizeLinear", ["b", "qs", "qz"], "z"),
            ],
            ("z",),
            Reads(1, False, True),
        ),
        # two ops that change values stand between: no node unit holds both
        (
            [_node("Relu", ["y"], "a"), _node("Neg", ["a"], "b"), _node("QuantizeLinear", ["b", "qs", "qz"], "z")],
            ("z",),
            Reads(1, False, False),
        ),
        ([_node("ArgMax", ["y"], "z")], ("z",), Reads(1, False, True)),
        ([_node("MatMul", ["y", "y"], "z")], ("z",), Reads(2, False, True)),
        ([_node("Relu", ["y"], "a"), _node("F", ["y"], "z", domain="local")], ("a", "z"), Reads(2, False, True)),
    ],
)
def test_reads(nodes, outputs, want):
    inits = [*Q_PARAMS, numpy_helper.from_array(np.array([4], np.int64), "shp")]
    assert _scope(nodes, outputs, inits).reads("y") == want


def test_a_shape_of_a_known_shape_is_no_read():
    """ORT folds a Shape (or Size) of a value whose shape it knows: no copy of the DequantizeLinear for it."""
    nodes = [_node("Relu", ["y"], "a"), _node("Shape", ["y"], "z")]
    assert _scope(nodes, ("a", "z"), y_shape=(4,)).reads("y") == Reads(1)
    assert _scope(nodes, ("a", "z"), y_shape=("n",)).reads("y") == Reads(2)


def test_reads_from_a_nested_graph_or_an_outer_graph():
    branch = helper.make_graph([_node("Relu", ["y"], "b")], "then", [], [vi("b", "f32", [4])])
    cond = numpy_helper.from_array(np.array(True), "c")
    nodes = [_node("Relu", ["y"], "a"), _node("If", ["c"], "z", then_branch=branch, else_branch=branch)]
    got = _scope(nodes, ("a", "z"), [cond]).reads("y")
    assert got == Reads(1, True, True)  # the If's branch: ORT may inline it (condition a constant)
    # returned by a function body or a subgraph: what reads it in the caller is not seen
    assert _scope([_node("Relu", ["y"], "z")], ("z", "y"), main=False).reads("y").fusing


def _readers_model(readers, *, shape=SHAPE, axes=(), qt="i8", graph_output=False, quantize=False):
    rng = np.random.default_rng(7)
    x, s, z = random_case(rng, shape, axes, qt, "f32")
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    nodes = [odq.make_node(["x", "s", "z"], ["y"], axes=list(axes), name="dq")]
    outs = []
    for i, op in enumerate(readers):
        ins = ["y", "y"] if op == "Mul" else ["y"]
        nodes.append(helper.make_node(op, ins, [f"r{i}"]))
        outs.append(vi(f"r{i}", "f32", list(shape)))
    if quantize:
        inits += Q_PARAMS
        nodes.append(helper.make_node("QuantizeLinear", ["r0", "qs", "qz"], ["q0"]))
        outs[0] = vi("q0", "u8", list(shape))
    if graph_output:
        outs.append(vi("y", "f32", list(shape)))
    return model_of(nodes, [vi("x", qt, list(shape))], outs, inits), x, s, z


def _lower(m, **options):
    return lower_model(onnx.ModelProto.FromString(m.SerializeToString()), LowerOptions(**options))


def _ort_dqls(model, tmp_path) -> int:
    return sum(n.op_type == "DequantizeLinear" for n in ort_optimized(model, tmp_path))


@pytest.mark.parametrize(
    ("readers", "axes", "runs"),
    [(["Relu", "Sigmoid"], (), 2), (["Relu", "Sigmoid", "Neg"], (0,), 3), (["Mul"], (), 2)],
)
def test_a_dql_read_by_several_nodes_runs_once(readers, axes, runs, tmp_path):
    m, x, s, z = _readers_model(readers, axes=axes)
    result = _lower(m)
    lowered = result.model
    assert result.nodes[0].runs_saved == runs - 1
    assert [n.op_type for n in lowered.graph.node][:3] == ["DequantizeLinear", "Flatten", "Reshape"]
    assert _ort_dqls(lowered, tmp_path) == 1  # without the pair ORT runs one per reader
    assert _ort_dqls(_lower(m, target="portable").model, tmp_path) == runs  # (no pair for other runtimes)
    y = odq.dequantize(x, s, z, axes=axes)
    got = run_ort(lowered, {"x": x})
    want = {"Relu": np.maximum(y, 0), "Neg": -y, "Mul": y * y}
    for op, g in zip(readers, got):
        if op in want:  # (Relu of -0.0 may give either zero)
            assert np.max(ulp_distance(g, want[op])) == 0, op


@pytest.mark.parametrize(
    ("readers", "kwargs", "why"),
    [
        (["Relu", "Relu"], {"quantize": True}, "a QuantizeLinear follows a reader: ORT fuses each copy"),
        (["Relu", "ArgMax"], {}, "ORT fuses ArgMax with its DequantizeLinear"),
        (["Relu", "Relu"], {"shape": (16, 16)}, "too small for the pair to pay"),
        (["Relu"], {"graph_output": True}, "a per-tensor DQL costs less than the output's copy"),
        (["Relu"], {}, "one reader"),
    ],
)
def test_no_pair_where_ort_fuses_or_it_does_not_pay(readers, kwargs, why):
    m, *_ = _readers_model(readers, **kwargs)
    result = _lower(m)
    assert result.nodes[0].runs_saved == 0, why
    assert "Flatten" not in [n.op_type for n in result.model.graph.node], why


def test_symbolic_dims_below_opset_14_get_no_pair():
    """Below opset 14 a Reshape has no ``allowzero``: a dim of 0 known only at run time would be copied from
    the Flatten's (1, 0), so over symbolic dims the pair is added from opset 14 only."""
    for opset, want in ((13, 0), (14, 1)):
        m, x, s, z = _readers_model(["Relu", "Sigmoid"])
        for v in (*m.graph.input, *m.graph.output):
            for i, d in enumerate(v.type.tensor_type.shape.dim):
                d.dim_param = f"d{i}"
        m.opset_import[0].version = opset
        result = _lower(m)
        assert result.nodes[0].runs_saved == want, opset
        empty = np.zeros((0, 5), x.dtype)
        relu, _ = run_ort(result.model, {"x": empty})
        assert relu.shape == (0, 5)
        (relu, _), y = run_ort(result.model, {"x": x}), odq.dequantize(x, s, z)
        assert np.max(ulp_distance(relu, np.maximum(y, 0))) == 0


def test_no_pair_before_a_transpose_ort_moves_the_dql_past(tmp_path):
    """ORT's QDQ propagation moves the copy of a per-tensor DQL (constant scale and zero point) that a
    Transpose reads past it, so that the Transpose moves 8-bit data: worth more than the run the pair saves
    (1.3-2.3x slower with it). A scale the model is fed stops the propagation: there the pair pays."""
    m, x, s, z = _readers_model(["Relu", "Transpose"], shape=(256, 256), qt="u8")
    result = _lower(m)
    assert result.nodes[0].runs_saved == 0
    # the Transpose reads the 8-bit input in ORT's optimized graph (the DequantizeLinear moved after it)
    assert any(n.op_type == "Transpose" and n.input[0] == "x" for n in ort_optimized(result.model, tmp_path))
    fed = _readers_model(["Relu", "Transpose"], shape=(256, 256), qt="u8")[0]
    fed.graph.input.extend([vi("s", "f32", []), vi("z", "u8", [])])
    del fed.graph.initializer[:]
    result = _lower(fed)
    assert result.nodes[0].runs_saved == 1 and _ort_dqls(result.model, tmp_path) == 1
    relu, t = run_ort(result.model, {"x": x, "s": s, "z": z})
    want = odq.dequantize(x, s, z)
    assert np.max(ulp_distance(relu, np.maximum(want, 0))) == 0 and same_bits(t, want.T)


def test_no_pair_over_symbolic_dims_of_a_4_bit_input():
    """The pair's Reshape would take its shape from Shape(x), and ORT has no Shape kernel for 4-bit types."""
    s, z = numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.array(1, np.int8), "zi")
    nodes = [
        helper.make_node("Cast", ["xi"], ["x"], to=onnx.TensorProto.INT4),
        helper.make_node("Cast", ["zi"], ["z"], to=onnx.TensorProto.INT4),
        odq.make_node(["x", "s", "z"], ["y"], axes=[], name="dq"),
        helper.make_node("Relu", ["y"], ["a"]),
        helper.make_node("Neg", ["y"], ["b"]),
    ]
    m = model_of(nodes, [vi("xi", "i8", ["d0", "d1"])], [vi("a", "f32", None), vi("b", "f32", None)], [s, z])
    result = _lower(m)
    assert result.nodes[0].runs_saved == 0
    xi = np.arange(-8, 8, dtype=np.int8).reshape(4, 4)
    a, b = run_ort(result.model, {"xi": xi})
    assert same_bits(b, -((xi - 1) * np.float32(0.5)).astype(np.float32))


def test_a_slow_form_returned_and_read_runs_once(tmp_path):
    """Returned by the graph and read: the pair costs a copy of the output, which a slow form's second run
    outweighs (rows of 14, i16, per column: a blocked DequantizeLinear)."""
    m, x, s, z = _readers_model(["Relu"], shape=(4096, 14), axes=(1,), qt="i16", graph_output=True)
    result = _lower(m)
    assert result.nodes[0].runs_saved == 1
    assert _ort_dqls(result.model, tmp_path) == 1
    relu, y = run_ort(result.model, {"x": x})
    want = odq.dequantize(x, s, z, axes=(1,))
    assert same_bits(y, want) and np.max(ulp_distance(relu, np.maximum(want, 0))) == 0


def test_lower_command_reports_runs_saved(tmp_path, capsys):
    m, *_ = _readers_model(["Relu", "Sigmoid"])
    src, dst = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(m, str(src))
    assert cli_main(["lower", str(src), "-o", str(dst), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "1 DequantizeLinear(s) read by several nodes run once" in out
    assert cli_main(["lower", str(src), "-o", str(dst), "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"][0]["runs_saved"] == 1
