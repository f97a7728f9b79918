"""The row switch (an If choosing a form by the rows' length over dims known only at run time) and the
run-time expansion of a scale along outer axes."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from helpers import one_node_model, random_case, run_ort, vi
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from test_planner import info

import onnx_dequant as odq
from onnx_dequant.compare import same_bits
from onnx_dequant.lowering import LowerOptions, lower_model, plan
from onnx_dequant.lowering.facts import UNKNOWN_DIM, Reads
from onnx_dequant.lowering.strategies.dql import Layout, layout_cost
from onnx_dequant.lowering.strategies.row_switch import NARROW_DIM
from onnx_dequant.validation.standard_ops import OPS


def _symbolic(x, s, z, axes, dims, *, const=True, consumer="Neg"):
    m = one_node_model(x, s, z, axes, const=const, consumer=consumer)
    m.graph.input[0].CopyFrom(vi("x", "i8" if x.dtype == np.int8 else "u8", list(dims)))
    return m


def _if(model):
    (node,) = [n for n in model.graph.node if n.op_type == "If"]
    branches = {a.name: a.g for a in node.attribute}
    return branches["then_branch"], branches["else_branch"]


def test_rows_of_dims_known_at_run_time_take_the_form_their_length_calls_for():
    """A scale per channel over a batch and a length known only at run time: an If runs the form planned for
    narrow rows below the threshold and the long rows' form above it; both exact at every length, 0 included,
    under ORT and the validation's reference evaluator."""
    rng = np.random.default_rng(3)
    dims, axes = ("n", 64, "t"), (1,)
    x, s, z = random_case(rng, (2, 64, 5), axes, "i8", "f32")
    result = lower_model(_symbolic(x, s, z, axes, dims))
    assert result.nodes[0].strategy == "row-switch"
    narrow, long = _if(result.model)
    assert [n.op_type for n in long.node] == ["DequantizeLinear"]  # per channel: rows of t elements
    assert "DequantizeLinear" in [n.op_type for n in narrow.node] and len(narrow.node) > 1
    evaluator = ReferenceEvaluator(result.model, new_ops=OPS)
    for n, t in [(3, 0), (0, 4), (1, 1), (2048, 1), (1024, 3), (2, 63), (2, 64), (1, 300)]:
        xs = random_case(rng, (n, 64, t), (), "i8", "f32")[0]
        want = -odq.dequantize(xs, s, z, axes=axes)
        (got,) = run_ort(result.model, {"x": xs})
        assert got.shape == xs.shape and same_bits(got, want), (n, t)
        assert same_bits(evaluator.run(None, {"x": xs})[0], want), (n, t)


def test_a_branch_leaves_its_view_to_one_reshape_after_the_if():
    """A branch's form that reshapes the input ends at its DequantizeLinear (a Reshape there would copy into
    the If's output); one Reshape after the If restores the shape."""
    rng = np.random.default_rng(4)
    dims, axes = ("a", "b", 4, 3, "c"), (2, 3)
    x, s, z = random_case(rng, (3, 5, 4, 3, 2), axes, "u8", "f32", zp=False)
    result = lower_model(_symbolic(x, s, z, axes, dims))
    assert result.nodes[0].strategy == "row-switch"
    narrow, long = _if(result.model)
    assert [n.op_type for n in result.model.graph.node][-3:] == ["If", "Reshape", "Neg"]
    for branch in (narrow, long):
        assert branch.node[-1].op_type == "DequantizeLinear", [n.op_type for n in branch.node]
    assert any(n.op_type == "Reshape" for n in long.node)  # (the long form merges the quantized axes)
    for shape in [(3, 5, 4, 3, 2), (2, 1, 4, 3, 300), (0, 2, 4, 3, 1)]:
        xs = random_case(rng, shape, (), "u8", "f32")[0]
        (got,) = run_ort(result.model, {"x": xs})
        assert same_bits(got, -odq.dequantize(xs, s, z, axes=axes)), shape


def test_the_condition_weighs_the_narrow_forms_expansion_against_the_rows_it_saves():
    """The narrow form expands the scale over the row when the model runs, once, where the long form pays per
    row: narrow rows take it under a large batch, not under a batch of one or two (a review measured
    `(1,4096,63)` 4.8x slower and `(256,4096,1)` 0.15x the time with it). The If's condition computes what
    ``Switch.narrow_at`` says."""
    axes, dims = (1,), ("n", 4096, "t")
    switch = plan(info(dims, axes, "u8")).choice
    assert not switch.narrow_at(4096, 63) and not switch.narrow_at(2 * 4096, 63)
    assert switch.narrow_at(256 * 4096, 1) and switch.narrow_at(64 * 4096, 4)
    assert not switch.narrow_at(8 * 4096, 1000)
    rng = np.random.default_rng(6)
    x, s, z = random_case(rng, (1, 4096, 2), axes, "u8", "f32")
    m = _symbolic(x, s, z, axes, dims)
    result = lower_model(m)
    (cond,) = [n.input[0] for n in result.model.graph.node if n.op_type == "If"]
    result.model.graph.output.append(helper.make_tensor_value_info(cond, onnx.TensorProto.BOOL, []))
    for shape in [
        (1, 4096, 63),
        (2, 4096, 63),
        (256, 4096, 1),
        (64, 4096, 4),
        (8, 4096, 300),
        (0, 4096, 5),
        (300, 4096, 0),
    ]:
        xs = random_case(rng, shape, (), "u8", "f32")[0]
        got, narrow = run_ort(result.model, {"x": xs})
        assert bool(narrow) == switch.narrow_at(shape[0] * 4096, shape[2]), shape
        assert same_bits(got, -odq.dequantize(xs, s, z, axes=axes)), shape


@pytest.mark.parametrize(
    "dims,axes,sizes",
    [
        (("n", 64, "t"), (1,), [(1, 64, 3), (300, 64, 2), (2, 64, 900), (5000, 64, 0)]),
        (("n", "m", 256, "t"), (2,), [(1, 1, 256, 3), (64, 32, 256, 2), (2, 3, 256, 900)]),  # two lead dims
        (("a", "b", "c", "d", 13, "t"), (4,), [(1, 1, 1, 1, 13, 3), (8, 5, 10, 10, 13, 3), (2, 2, 2, 2, 13, 500)]),
    ],
)
def test_the_condition_reads_each_shape_of_dims(dims, axes, sizes):
    """The If's condition gathers the dims it weighs from the input's Shape, whatever unknown dims lie before
    and in the rows; it computes what ``Switch.narrow_at`` says, and both branches are exact."""
    rng = np.random.default_rng(len(dims))
    switch = plan(info(dims, axes, "i8")).choice
    known = tuple(d if isinstance(d, int) else 2 for d in dims)
    x, s, z = random_case(rng, known, axes, "i8", "f32")
    result = lower_model(_symbolic(x, s, z, axes, dims))
    assert result.nodes[0].strategy == "row-switch"
    (cond,) = [n.input[0] for n in result.model.graph.node if n.op_type == "If"]
    result.model.graph.output.append(helper.make_tensor_value_info(cond, onnx.TensorProto.BOOL, None))
    (row,) = [a for a in range(len(dims)) if a > min(axes) and isinstance(dims[a], str)]
    seen = set()
    for shape in sizes:
        xs = random_case(rng, shape, (), "i8", "f32")[0]
        got, narrow = run_ort(result.model, {"x": xs})
        others = int(np.prod([d for a, d in enumerate(shape) if a != row]))
        want = switch.narrow_at(others, shape[row])
        assert bool(narrow) == want and same_bits(got, -odq.dequantize(xs, s, z, axes=axes)), shape
        seen.add(want)
    assert seen == {True, False}  # both branches ran


@pytest.mark.parametrize(
    "facts,reason",
    [
        ({"shape": (8, 64, 1000)}, "no dim known only at run time after a quantization axis"),
        ({"shape": ("n", 64, 1000)}, "no dim known only at run time after a quantization axis"),
        ({"shape": ("n", 64, "a", "b")}, "several dims known only at run time in the rows"),
        ({"shape": (5, 64, "t"), "qt": "u8"}, "the long form costs only"),  # the narrow form's nodes outweigh it
        ({"qt": "i4", "zp": False}, "ORT has no Shape kernel for 4-bit types"),
        ({"reads": Reads(fusing=True)}, "a reader may fuse with the DequantizeLinear"),
        ({"rt": "bf16", "opset": 15}, "If has no bf16 output before opset 16"),
        ({"axes": ()}, "no dim known only at run time after a quantization axis"),
        ({"target": "portable"}, "not a portable form"),
    ],
)
def test_row_switch_refusals(facts, reason):
    args = {"shape": ("n", 64, "t"), "axes": (1,), "qt": "i8"} | facts
    shape, axes, qt = args.pop("shape"), args.pop("axes"), args.pop("qt")
    assert reason in plan(info(shape, axes, qt, **args)).refused["row-switch"]


def test_the_same_form_for_any_row_is_not_switched():
    """Where the narrow rows' form is the long rows' one (a scale per row over rows of a known length), or
    costs little more, no If is emitted."""
    p = plan(info(("n", 64, "t", 256), (1,), "i8"))
    assert p.strategy.name != "row-switch" and "same form" in p.refused["row-switch"]


def test_unknown_row_dims_are_counted_as_the_row_length_assumed():
    i = info(("n", 64, "t", 5), (1,), "i8")
    assert i.row_axes == (2,)
    assert i.size() == UNKNOWN_DIM * 64 * UNKNOWN_DIM * 5
    narrow = dataclasses.replace(i, row_dim=NARROW_DIM)
    assert narrow.size() == UNKNOWN_DIM * 64 * NARROW_DIM * 5 and narrow.size((1, 2)) == 64 * NARROW_DIM
    assert info((8, 64, 16), (1,)).row_axes == () and info(None, (1,)).row_axes == ()


def test_a_scale_expanded_at_run_time_is_priced_so():
    """A constant scale expanded over dims known only when the model runs is expanded at every run (ORT folds
    it over known dims): its Expand and Transpose are charged."""
    layout = Layout(((0,), (1,), (2,)), (False, True, False), "blocked", 0, (2,))
    known = info((8, 64, UNKNOWN_DIM), (1,), "i8")
    unknown = info((8, 64, "t"), (1,), "i8")
    assert layout_cost(unknown, layout) > layout_cost(known, layout) + 64 * UNKNOWN_DIM * 2


@pytest.mark.parametrize("const", [False, True])
def test_a_scale_is_expanded_inward_by_a_transpose_when_the_model_runs(const):
    """ORT 1.32's Expand copies a scale broadcast along an inner axis an element at a time: a scale the
    model expands when it runs (fed, here) is expanded along outer axes and transposed in place; a constant
    one over known dims (which ORT folds) keeps its one Expand."""
    rng = np.random.default_rng(5)
    x, s, z = random_case(rng, (10, 2, 6), (1,), "u8", "f32")
    m = one_node_model(x, s, z, (1,), const=const, consumer="Neg")
    result = lower_model(m, LowerOptions(strategies=["dql-blocked"]))
    ops = [n.op_type for n in result.model.graph.node]
    if const:
        assert "Transpose" not in ops and ops.count("Expand") == 2, ops
    else:
        assert ops.count("Transpose") == 4 and ops.count("Expand") == 2, ops
        transposes = [n for n in result.model.graph.node if n.op_type == "Transpose"]
        perms = [list(helper.get_attribute_value(n.attribute[0])) for n in transposes]
        assert perms == [[2, 0, 1], [1, 2, 0]] * 2, perms
    feeds = {"x": x} | ({} if const else {"s": s, "z": z})
    (got,) = run_ort(result.model, feeds)
    assert same_bits(got, -odq.dequantize(x, s, z, axes=(1,)))


@pytest.mark.parametrize("t", [300, 5])
def test_a_branch_is_planned_with_the_nodes_readers(t):
    """Where ORT learns the input's dims (here a Reshape to a shape it folds and ONNX's inference leaves
    unknown), it folds the If's condition and inlines the branch next to the node's readers: an int32
    DequantizeLinear with a zero point then meets the Transpose reading it, which ORT 1.32 cannot load
    unless the branch put its Flatten/Reshape pair there (a review found the model failing to load, with a
    condition of Shape nodes alone)."""
    rng = np.random.default_rng(7)
    s = (rng.standard_normal(64) * 0.01).astype(np.float32)
    z = rng.integers(-1000, 1000, 64).astype(np.int32)
    inits = [
        numpy_helper.from_array(s, "s"),
        numpy_helper.from_array(z, "z"),
        numpy_helper.from_array(np.array([-2, -64, -t], np.int64), "negative_shape"),
    ]
    nodes = [
        helper.make_node("Abs", ["negative_shape"], ["shape"]),
        helper.make_node("Reshape", ["x_in", "shape"], ["x"]),
        odq.make_node(["x", "s", "z"], ["t"], axes=(1,), name="dq"),
        helper.make_node("Transpose", ["t"], ["y"], perm=[2, 1, 0]),
    ]
    graph = helper.make_graph(nodes, "g", [vi("x_in", "i32", [2 * 64 * t])], [vi("y", "f32", [t, 64, 2])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)])
    m.ir_version = 10
    result = lower_model(m, LowerOptions(wrap_int32=True, strategies=["row-switch"]))
    assert result.nodes[0].strategy == "row-switch"
    for branch in _if(result.model):
        assert "Flatten" in [n.op_type for n in branch.node]  # (the If's condition uses Size, which ORT does not fold)
    x = rng.integers(-100000, 100000, 2 * 64 * t).astype(np.int32)
    (got,) = run_ort(result.model, {"x_in": x})
    want = odq.dequantize(x.reshape(2, 64, t), s, z, axes=(1,)).transpose(2, 1, 0)
    assert same_bits(got, want)


@pytest.mark.parametrize("rt", ["f16", "bf16"])
def test_a_16_bit_output_is_cast_after_the_if(rt):
    """Both branches DequantizeLinear forms of an f16/bf16 output: they end in f32 and one Cast follows the
    If (ORT fuses no Cast across an If: a reader without an f16 kernel got Casts of its own, 1.8x slower),
    the same bits on both branches."""
    rng = np.random.default_rng(9)
    dims, axes = ("n", 64, "t"), (1,)
    x, s, z = random_case(rng, (2, 64, 3), axes, "i8", rt)
    result = lower_model(_symbolic(x, s, z, axes, dims, consumer="Identity"))
    assert result.nodes[0].strategy == "row-switch"
    ops = [n.op_type for n in result.model.graph.node]
    assert ops[ops.index("If") + 1] == "Cast"
    for branch in _if(result.model):
        assert branch.node[-1].op_type == "DequantizeLinear" and branch.output[0].type.tensor_type.elem_type == 1
    switch = plan(info(dims, axes, "i8", rt)).choice
    seen = set()
    for shape in [(1, 64, 3), (2048, 64, 1), (3, 64, 500)]:
        xs = random_case(rng, shape, (), "i8", rt)[0]
        (got,) = run_ort(result.model, {"x": xs})
        want = odq.dequantize(xs, s, z, axes=axes)
        assert same_bits(got, want if rt == "f16" else want.astype(np.float32)), shape  # (bf16 read as f32)
        seen.add(switch.narrow_at(shape[0] * 64, shape[2]))
    assert seen == {True, False}
