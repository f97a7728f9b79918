"""The planner as a specification: for a node's facts (a ``NodeInfo`` written out here, no model), the
strategy docs/lowering.md says it gets, and every refusal text a report can show."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

import onnx_dequant as odq
from onnx_dequant import dtypes
from onnx_dequant.lowering import NodeInfo, Refusal, plan
from onnx_dequant.lowering.planner import ROW_STRATEGIES, STRATEGIES
from onnx_dequant.lowering.strategies import ort_costs
from onnx_dequant.lowering.strategies.chunked import CACHED, CHUNK_MAX, CHUNK_MIN, CHUNK_TARGET
from onnx_dequant.lowering.strategies.costs import CACHE_BYTES, chunked_cast_saving, kernel_cost, scale_cast_cost
from onnx_dequant.lowering.strategies.dql import Layout, layout_cost


def info(shape=(4, 8, 16), axes=(), qt="u8", rt="f32", *, opset=21, target="ort", zp=True, **facts) -> NodeInfo:
    """A node's facts: a constant scale and zero point unless said otherwise."""
    facts = {"scale_const": True, "zp_const": zp, **facts}
    return NodeInfo(
        node=onnx.helper.make_node("Dequantize", ["x", "s", "z"], ["y"], name="dq", domain=odq.DOMAIN),
        x="x",
        scale="s",
        zero_point="z" if zp else None,
        output="y",
        axes=tuple(axes),
        in_type=dtypes.parse(qt),
        out_type=dtypes.parse(rt),
        shape=None if shape is None else tuple(shape),
        opset=opset,
        target=target,
        **facts,
    )


def chosen(i: NodeInfo, names=None) -> str:
    return plan(i, names).strategy.name


def refused(i: NodeInfo, strategy: str) -> str:
    return plan(i).refused[strategy]


def test_the_rule_set():
    assert [s.name for s in STRATEGIES] == [
        "empty-output",
        "fold-weight",
        "row-switch",
        "dql-per-tensor",
        "dql-per-axis",
        "dql-merged-axes",
        "dql-expanded",
        "dql-blocked",
        "dql-tiled",
        "i32-guarded",
        "scan-chunked",
        "cast-sub-mul",
        "cast-sub-mul-tiled",
        "sub-cast-mul",
        "cast-sub-min-mul",
    ]
    assert "scan-chunked" not in {s.name for s in ROW_STRATEGIES}  # a Scan's row is never a Scan
    assert {s.name for s in STRATEGIES if s.portable} >= {"dql-per-tensor", "dql-per-axis", "cast-sub-mul"}
    assert {s.name for s in STRATEGIES if not s.portable} == {
        "row-switch",
        "dql-blocked",
        "dql-tiled",
        "i32-guarded",
        "scan-chunked",
        "sub-cast-mul",
    }


@pytest.mark.parametrize(
    "shape,axes,expected",
    [
        ((4, 8, 16), (), "dql-per-tensor"),
        ((4, 8, 256), (1,), "dql-per-axis"),  # (per-axis DQL pays per row: rows of 16 go blocked)
        ((4, 8, 64), (0, 1), "dql-merged-axes"),  # adjacent axes: one Reshape, one DQL axis (on 512 elements
        # its two Reshapes cost more than blocking along axis 2 saves)
        ((4, 8, 16), (0, 2), "dql-blocked"),  # not adjacent: a whole-axis block on axis 1
    ],
)
def test_each_axes_pattern_gets_its_form(shape, axes, expected):
    assert chosen(info(shape, axes)) == expected


def test_f64_outputs_and_i32_inputs_use_cast_sub_mul():
    assert chosen(info(rt="f64")) == "cast-sub-mul"
    assert refused(info(rt="f64"), "dql-per-tensor") == "DequantizeLinear has no f64 scale or output"
    assert chosen(info(qt="i32", rt="f64")) == "cast-sub-mul"
    # to f32: a DequantizeLinear where a run-time check allows, Cast/Sub/Mul where not
    p = plan(info((8, 16, 16), qt="i32"))
    assert (p.strategy.name, p.choice.fast.strategy.name, p.choice.exact.strategy.name) == (
        "i32-guarded",
        "dql-per-tensor",
        "cast-sub-mul",
    )
    assert (
        refused(info(qt="i32"), "dql-per-tensor") == "DequantizeLinear subtracts i32 in int32 (wraps) and rounds twice"
    )
    assert chosen(info(qt="i32", int32_wrap=True)) == "dql-per-tensor"  # the user accepts ORT's int32


def _barrier(i: NodeInfo) -> str:
    p = plan(i)
    return p.strategy.ort_barrier(p.choice)


def test_a_dql_orts_passes_would_break_gets_a_flatten_reshape_pair():
    """Where ORT 1.32's QDQ propagation or Transpose optimizer would break the DequantizeLinear (docs/ort-facts.md),
    a Flatten/Reshape pair follows it (neither pass crosses a Flatten); below opset 14 over dims not known when
    lowering (no ``allowzero``), the same arithmetic in Sub/Cast/Mul."""
    for facts in ({"consumers": ("Reshape",)}, {"axes": (1,), "consumers": ("Transpose",)}):
        i = info(qt="i32", int32_wrap=True, **facts)
        assert chosen(i).startswith("dql-") and "ORT 1.32 cannot" in _barrier(i)
        symbolic = dataclasses.replace(i, shape=(4, None, 16), opset=13)
        assert chosen(symbolic) == "sub-cast-mul"
        assert chosen(dataclasses.replace(i, shape=(4, 8, 16), opset=13)).startswith("dql-")
    i8 = info(qt="i8", consumers=("Transpose",))
    assert chosen(i8) == "dql-per-tensor" and "int8 per-tensor" in _barrier(i8)
    assert _barrier(dataclasses.replace(i8, opset=20)) == ""  # (with a zero point, int8 breaks from opset 21)
    # ORT moves only a DequantizeLinear of a constant scale and zero point (one the model is fed is not; one
    # computed from constants it folds first), and none followed by its Cast
    for facts in ({"fed": frozenset({"s"})}, {"rt": "f16"}):
        i = info(qt="i32", int32_wrap=True, consumers=("Reshape",), **facts)
        assert chosen(i) == "dql-per-tensor" and _barrier(i) == ""
    assert _barrier(info(qt="i32", int32_wrap=True, consumers=("Reshape",), scale_const=False)) != ""
    # readers ORT may inline next to it: a function's, a branch's, or its own graph's caller's
    for mark in ("<call>", "<subgraph>", "<outer>"):  # (on 2048 elements: on 512, Cast/Mul's two nodes cost less)
        assert "may inline" in _barrier(info((4, 8, 64), qt="i32", int32_wrap=True, zp=False, consumers=(mark,)))


def test_the_slow_last_axis_is_avoided():
    """ORT's per-axis DQL on the last axis costs 6-7 casting copies (calibrated): blocking along axis 1 costs
    less. Among the layouts that do not merge axes, ``{last}`` of (256,256,256) reduces axis 1 and expands
    the scale along axis 0 (its rows stay in L1), not the other way round; merging axes 0 and 1 first costs
    less still."""
    assert chosen(info((64, 1024), (1,))) == "dql-blocked"
    i = info((256, 256, 256), (2,))
    p = plan(i)
    assert p.strategy.name == "dql-blocked" and p.costs["dql-per-axis"] > p.costs["dql-blocked"]
    assert isinstance(p.choice, Layout) and p.choice.reshapes
    blocked = next(s for s in STRATEGIES if s.name == "dql-blocked")
    unmerged = [lay for lay in blocked.layouts(i) if not lay.reshapes]
    best = min(unmerged, key=lambda lay: layout_cost(i, lay))
    assert (best.axis, best.expand) == (1, (0,))
    # portable has no blocked DQL; Cast/Sub/Mul measured 2.6x faster than the per-axis DQL on the last axis
    assert chosen(info((64, 1024), (1,), target="portable")) == "cast-sub-mul"
    # over dims known only at run time (a batch, a sequence), one open block along one of them; its scale row
    # (after the block's axis) stays the channels' alone, not expanded along the other unknown dim
    for shape in ((None, 512), (None, None, 512)):
        p = plan(info(shape, (len(shape) - 1,), qt="i8"))
        assert p.strategy.name == "dql-blocked" and p.costs["cast-sub-mul"] > p.cost, shape
        assert p.choice.axis == len(shape) - 2 or p.choice.reshapes, shape


def test_below_opset_14_a_reshape_merges_no_dim_known_at_run_time():
    """Without ``allowzero`` a 0 in a Reshape's target copies the input's dim: a dim known only at run time
    may stay where it is (a 0 copies a 0), not be merged or moved to another place in the view."""
    for shape, axes, opset, refused in (
        ((None, 4, 8), (1, 2), 13, False),  # the symbolic dim keeps its place
        ((4, 8, None), (0, 1), 13, True),  # it moves from axis 2 to axis 1 of the view
        ((None, 4, 8), (0, 1), 13, True),  # merged
        ((None, 4, 8), (0, 1), 14, False),  # allowzero
    ):
        i = info(shape, axes, opset=opset)
        assert ("dql-merged-axes" in plan(i).refused) is refused, (shape, axes, opset)


def test_a_reshape_copies_only_a_graph_output():
    inside = plan(info((4, 8, 16), (0, 1)))
    output = plan(info((4, 8, 16), (0, 1), graph_output=True))
    assert output.costs["dql-merged-axes"] > inside.costs["dql-merged-axes"]
    assert output.costs["cast-sub-mul"] == inside.costs["cast-sub-mul"]


def test_a_fusable_weight_gets_a_form_ort_fuses_whatever_its_cost():
    weight = info((64, 1024), (1,), fusable_weight=True)
    p = plan(weight)
    assert p.strategy.name == "dql-per-axis" and p.costs["dql-per-axis"] > min(p.costs.values())
    assert chosen(info((64, 1024), (0, 1), fusable_weight=True)) != "dql-per-axis"  # none fuses: the cheapest


def test_scan_chunked_for_f16_and_bf16_model_outputs():
    rows = (4, CHUNK_MIN)
    assert chosen(info(rows, rt="f16", model_output=True, graph_output=True)) == "scan-chunked"
    assert chosen(info(rows, rt="bf16", model_output=True, graph_output=True)) == "scan-chunked"
    p = plan(info(rows, (0,), rt="f16", model_output=True, graph_output=True))
    assert p.strategy.name == "scan-chunked" and p.choice.shape == rows
    assert p.choice.row.strategy.name in {s.name for s in ROW_STRATEGIES}  # the row plan rides in the choice
    why = plan(info(rows, rt="f16", model_output=True, graph_output=True, target="portable")).refused
    assert why["scan-chunked"] == "not a portable form"


def test_scan_chunked_for_exact_i32_inputs():
    """i32 lowers to Cast/Sub/Mul in float64 (DequantizeLinear wraps); with 64K-4M-element rows along
    axis 0 the Scan keeps its float64 intermediates in cache, in a graph too (measured 1.0x DQL -> Relu
    against 4x for the whole-tensor chain at 16M elements). To f32/f16/bf16 each row is i32-guarded: its
    check's two reads and its DequantizeLinear's read find the row in cache (one read of the input
    from memory, not three)."""
    rows = (16, 1 << 20)
    for facts in ({}, {"model_output": True, "graph_output": True}, {"rt": "f64"}, {"zp": False}):
        p = plan(info(rows, **{"qt": "i32", **facts}))
        assert p.strategy.name == "scan-chunked"
        assert p.costs["scan-chunked"] < min(p.costs["cast-sub-mul"], p.costs.get("i32-guarded", np.inf))
        row = p.choice.row
        if facts.get("rt") != "f64":  # each row checked, then its DequantizeLinear or its float64 form
            assert row.strategy.name == "i32-guarded" and row.choice.fast.strategy.name == "dql-per-tensor"
            row = row.choice.exact
        assert row.strategy.name == "cast-sub-mul"
    # rows of 91 along axis 0 joined 2685 at a time: axis 0 split into (30, 2685)
    p = plan(info((80550, 91), axes=(1,), qt="i32", rt="f64"))
    assert p.strategy.name == "scan-chunked" and p.choice.shape == (30, 2685, 91)
    assert chosen(info((1009, 7), axes=(1,), qt="i32", rt="f64")) == "cast-sub-mul"  # 1009 is prime: no join
    # per tensor, rows that small are reshaped into rows of a divisor of the size (7330050 = 30 x 244335)
    p = plan(info((80550, 91), qt="i32", rt="f64"))
    assert p.strategy.name == "scan-chunked" and p.choice.shape == (30, 244335)
    assert chosen(info(rows, qt="i32", int32_wrap=True)) == "dql-per-tensor"  # ORT's own int32 semantics


def test_a_scanned_f16_scale_is_cast_at_run_time():
    """A constant f16/bf16 scale is converted to f32 when lowering, but one the Scan slices (0 is an axis)
    is a row input, converted at every run: as large as the input, that Cast costs what chunking saves
    (standalone (321,1939) {0,1} u16 -> f16: dql-blocked 2.0-2.3x ORT's f32 DequantizeLinear, the Scan
    2.9-3.4x). A fed scale's Cast is a widening one, at its own calibrated cost (ORT 1.32 on the Xeon:
    from f16 threaded, from bf16 not; both unlike the narrowing Casts)."""
    facts = {"qt": "u16", "rt": "f16", "zp": False, "graph_output": True, "model_output": True}
    p = plan(info((321, 1939), axes=(0, 1), **facts))
    assert p.strategy.name == "dql-blocked" and "scan-chunked" in p.costs
    for rt in ("f16", "bf16"):
        const = plan(info((321, 1939), axes=(0, 1), **{**facts, "rt": rt}), ["dql-blocked"])
        fed = plan(info((321, 1939), axes=(0, 1), **{**facts, "rt": rt, "scale_const": False}), ["dql-blocked"])
        assert scale_cast_cost(dtypes.parse(rt)) == kernel_cost(f"cast_{rt}_to_f32")
        assert fed.cost - const.cost == pytest.approx(321 * 1939 * 6 * kernel_cost(f"cast_{rt}_to_f32") / 6)
        # Cast/Sub/Mul casts it to its f32 work type the same way
        const = plan(info((321, 1939), axes=(0, 1), **{**facts, "qt": "u8", "rt": rt}), ["cast-sub-mul"])
        fed = plan(
            info((321, 1939), axes=(0, 1), **{**facts, "qt": "u8", "rt": rt, "scale_const": False}), ["cast-sub-mul"]
        )
        assert const.choice.name == "f32"
        assert fed.cost - const.cost == pytest.approx(321 * 1939 * 6 * kernel_cost(f"cast_{rt}_to_f32") / 6)


def test_rows_reshaped_only_where_the_intermediate_leaves_the_cache():
    """A view that reshapes the input into other rows pays a final Reshape (a copy, as a graph output);
    where the whole f32 intermediate fits a core's cache (``CACHE_BYTES``) chunking saves nothing to pay
    it with: (3455,122) {0} i8 -> f16 (1.7 MB) stays one per-axis DequantizeLinear; 8x as many rows are joined."""
    facts = {"qt": "i8", "rt": "f16", "zp": False, "graph_output": True, "model_output": True}
    small = plan(info((3455, 122), axes=(0,), **facts))
    assert small.strategy.name == "dql-per-axis" and 3455 * 122 * 4 <= CACHE_BYTES
    large = plan(info((8 * 3455, 122), axes=(0,), **facts))
    assert large.strategy.name == "scan-chunked" and large.choice.shape == (10, 2764, 122)


@pytest.fixture
def table(monkeypatch):
    """Set entries of the calibrated table for one test, every thread count's (the costs read from it are
    recomputed before and after)."""

    def set_entries(**entries: float) -> None:
        for by_name in ort_costs.COSTS.values():
            for name, value in entries.items():
                monkeypatch.setitem(by_name, name, value)
        kernel_cost.cache_clear()

    yield set_entries
    monkeypatch.undo()
    kernel_cost.cache_clear()


def test_a_cast_to_bf16_saves_in_a_scan_row_what_it_measured_there(table):
    """A Scan's row saves a final Cast to bf16 what the calibrated table says that Cast costs over a whole
    tensor (its f32 input from memory) against a row's (the product in cache, ``cast_to_bf16_chunked``).
    ORT 1.32 on a 2-vCPU Intel Xeon: about 17 copy bytes an element against 4-6, and the Scan halves the
    time (standalone, over ORT's f32 DequantizeLinear: (4096,4096) {} i8 -> bf16 dql-per-tensor 4.25-4.42x,
    the Scan 2.09-2.10x; (27640,122) {0} dql-per-axis 8.3-9.4x, the Scan 3.4-4.2x; (4864,306,15) {0,1,2}
    dql-blocked 4.7x, the Scan 2.6x). Where the whole f32 intermediate fits a core's cache, chunking saves
    nothing ((3455,122) {0}). Where the row's Cast measures as costly as the whole one (a compute-bound
    Cast: AMD EPYC Zen 4 measured the per-tensor DequantizeLinear 3.3-3.4x, the Scan 3.9-4.0x), the Scan
    saves the intermediate's traffic alone and the whole forms stay."""
    facts = {"qt": "i8", "zp": False, "graph_output": True, "model_output": True}
    bf16 = dtypes.parse("bf16")
    saving = kernel_cost("cast_to_bf16") - kernel_cost("cast_to_bf16_chunked")
    assert chunked_cast_saving(bf16) == pytest.approx(saving) and saving > 0
    assert chosen(info((4096, 4096), rt="bf16", **facts)) == "scan-chunked"
    assert chosen(info((8 * 3455, 122), axes=(0,), rt="bf16", **facts)) == "scan-chunked"
    assert chosen(info((3455, 122), axes=(0,), rt="bf16", **facts)) == "dql-per-axis"
    for const in (True, False):
        assert chosen(info((4864, 306, 15), axes=(0, 1, 2), rt="bf16", **facts, scale_const=const)) == "scan-chunked"
    # a Cast that costs as much in a row: the Scan is credited the product's traffic alone, as for f32
    n = 4096 * 4096
    big = info((4096, 4096), rt="bf16", **facts)
    before = plan(big, ["scan-chunked"]).cost
    table(cast_to_bf16_chunked=kernel_cost("cast_to_bf16") + 1.0)
    assert chunked_cast_saving(bf16) == 0
    credit = (1 - CACHED) * 2 * 4  # the f32 product's write and read-back, half charged
    assert plan(big, ["scan-chunked"]).cost - before == pytest.approx(n * (saving - credit))


def test_rows_too_long_along_axis_0_are_rows_along_leading_axes_merged():
    """(5,7,35,7,2853) {2} i16 -> bf16: a row along axis 0 holds 4.9M elements (past ``CHUNK_MAX``), one along
    axes 0 and 1 merged 699K: the Scan over those (standalone on the Xeon, over ORT's f32 DequantizeLinear:
    2.2-2.4x against ``dql-per-axis``'s 3.9-4.2x). Axes from the first quantization axis on stay in the row;
    with axis 0 quantized there is nothing to merge."""
    facts = {"qt": "i16", "rt": "bf16", "graph_output": True, "model_output": True}
    p = plan(info((5, 7, 35, 7, 2853), axes=(2,), **facts))
    assert p.strategy.name == "scan-chunked" and p.choice.shape == (35, 35, 7, 2853)
    refused = plan(info((5, 7, 35, 7, 2853), axes=(0, 2), **facts)).refused["scan-chunked"]
    assert "no leading axes before the first quantization axis leave such rows" in refused


@pytest.mark.parametrize(
    "shape,qt,whole",
    [
        ((4, 32, 16), "i8", True),  # rows of 16 int8: one vector of ORT's loop each
        ((4, 32, 8), "i8", False),  # rows of 8 int8: all scalar rest
        ((4, 32, 8), "u16", True),  # rows of 8 16-bit: one vector
        ((4, 32, 12), "i32", True),  # rows of 12 int32: three vectors of 4
        ((4, 32, 10), "i32", False),
        ((4, 32, 16), "u4", False),  # 4-bit: an element at a time
        ((4, 32, None), "i8", False),  # rows of a dim known only at run time
    ],
)
def test_rows_of_whole_vectors_pay_the_vector_rows_cost(table, shape, qt, whole):
    """ORT's per-axis and blocked DequantizeLinear loops run 16-byte vectors of a row, then its rest an element
    at a time: a row of whole vectors is charged ``*_row_vec`` a row, any other ``*_row`` (measured on the
    Xeon, int8 per axis: rows of 16 at the per-element cost of rows of 4096, rows of 8 2.7x it). Each row
    entry moves the layout's cost by the layout's rows (here of the last dim) alone, scaled as the per-element
    entries are by the input's width (the table's kernels read int8)."""
    groups = ((0,), (1,), (2,))
    cases = [
        ("dql_axis", info(shape, (1,), qt=qt), Layout(groups, (False, True, False), "axis", 1)),
        ("dql_blocked", info(shape, (0, 2), qt=qt), Layout(groups, (True, False, True), "blocked", 1)),
    ]
    for kernel, i, layout in cases:
        rows = i.size() // i.size([2])
        table(**{f"{kernel}_row": 1000.0, f"{kernel}_row_vec": 10.0})
        before = layout_cost(i, layout)
        table(**({f"{kernel}_row_vec": 11.0} if whole else {f"{kernel}_row": 1001.0}))
        assert layout_cost(i, layout) - before == pytest.approx(rows * (max(i.in_type.bits, 8) / 8 + 4) / 5)


@pytest.mark.parametrize(
    "facts,name,nodes",
    [
        ({}, "dql-per-tensor", 1),
        ({"rt": "f16"}, "dql-per-tensor", 2),  # and its Cast
        ({"axes": (0, 1), "shape": (4, 8, 64)}, "dql-merged-axes", 3),  # a Reshape to the view and back
        ({"axes": (2,), "shape": (64, 8, 4)}, "dql-tiled", 3),  # a Reshape to rows and back
        ({}, "cast-sub-mul", 3),  # Cast, Sub, Mul
        ({"zp": False, "rt": "f16"}, "cast-sub-mul", 3),  # Cast, Mul, Cast
        ({"qt": "i32", "int32_wrap": True, "consumers": ("Reshape",)}, "dql-per-tensor", 3),  # a Flatten/Reshape pair
    ],
)
def test_each_node_a_form_runs_costs_a_nodes_fixed_cost(table, facts, name, nodes):
    """A form is charged ORT's fixed cost of a node (``node``) for each node it runs over the input, besides
    what each moves: on a few elements that decides (``(4,5,2)`` ``{1,2}`` u16 -> f32 in a graph, Intel Xeon:
    a blocked DequantizeLinear 0.98-1.01x ORT's per-tensor one, the tiled form's Reshape, DequantizeLinear and
    Reshape 1.19-1.20x)."""
    i = info(**facts)
    table(node=1000.0)
    before = plan(i, [name]).cost
    table(node=1001.0)
    assert plan(i, [name]).cost - before == pytest.approx(nodes)
    assert chosen(info((4, 5, 2), (1, 2), qt="u16", consumers=("Relu",))) == "dql-blocked"


def test_cast_sub_mul_reads_a_scale_past_the_cache_for_each_run_and_casts_a_fed_zero_point(monkeypatch):
    """Cast/Sub/Mul's broadcasting Sub and Mul read the zero point and scale once where they stay in a core's
    cache (``CACHE_BYTES``), else again for each run of the input over them; a constant zero point's Cast ORT
    folds when it loads the model, a fed one's runs. So a Scan over rows as large as the scale reads no more
    than the whole form: (15,32,14,440,5) {1,2,3,4} i8 -> f64 standalone takes it (Intel Xeon, over ORT's f32
    DequantizeLinear: the Scan 4.5-5.1x, Cast/Sub/Mul 6.5-7.2x; ``bench_forms.py 15,32,14,440,5:1,2,3,4:i8:f64
    --forms cast-sub-mul,scan-chunked --standalone``)."""
    from onnx_dequant.lowering.strategies import cast_sub_mul

    big = info((15, 32, 14, 440, 5), (1, 2, 3, 4), qt="i8", rt="f64", graph_output=True, model_output=True)
    assert chosen(big) == "scan-chunked"
    f64 = dtypes.parse("f64")
    n, params = big.size(), big.scale_size
    whole = cast_sub_mul.CastSubMul().cost(big, f64)
    monkeypatch.setattr(cast_sub_mul, "CACHE_BYTES", 16 * params)  # as if both fit
    assert whole - cast_sub_mul.CastSubMul().cost(big, f64) == pytest.approx((n - params) * 16)
    fed = dataclasses.replace(big, zp_const=False)
    cast = params * kernel_cost("cast_int_to_f32") * (1 + 8) / 5
    assert cast_sub_mul.CastSubMul().cost(fed, f64) - cast_sub_mul.CastSubMul().cost(big, f64) == pytest.approx(cast)


def test_a_scale_as_large_as_rows_of_whole_16_bit_vectors_is_blocked():
    """(2493718,8) {0,1} i16, the scale fed: a blocked DequantizeLinear over rows of 8 16-bit elements (whole
    vectors) against Cast/Mul (Intel Xeon, ORT 1.32, over ORT's per-tensor DequantizeLinear: in a graph 1.18-1.29x
    against 1.66-1.73x, standalone 1.45x against 2.53-2.55x; ``bench_forms.py 2493718,8:0,1:i16:nozp,input
    --forms cast-sub-mul,dql-blocked``)."""
    facts = {"qt": "i16", "zp": False, "scale_const": False, "fed": frozenset({"s"})}
    for where in ({}, {"graph_output": True, "model_output": True}):
        assert chosen(info((2493718, 8), (0, 1), **facts, **where)) == "dql-blocked"


def test_a_rows_cast_saving_counts_where_its_product_fits_the_cache(table):
    """The Cast's saving in a row was measured on rows of ``CHUNK_TARGET`` elements, whose f32 product stays
    in a core's cache: a row too large for it (a per-tensor input whose size has no divisor near
    ``CHUNK_TARGET``: 3 x 4118161) is credited its intermediate's traffic alone."""
    big = info((12354483,), qt="i16", rt="bf16", zp=False, graph_output=True, model_output=True)
    small = info((48, CHUNK_TARGET), qt="i16", rt="bf16", zp=False, graph_output=True, model_output=True)
    costs = {}
    for chunked in (kernel_cost("cast_to_bf16"), 0.0):  # no saving, then all of the Cast's cost
        table(cast_to_bf16_chunked=chunked)
        for name, i in (("big", big), ("small", small)):
            p = plan(i, ["scan-chunked"])
            costs[name, chunked] = p.cost / i.size()
    assert plan(big, ["scan-chunked"]).choice.shape == (3, 4118161)
    assert costs["big", 0.0] == pytest.approx(costs["big", kernel_cost("cast_to_bf16")])
    assert costs["small", 0.0] < costs["small", kernel_cost("cast_to_bf16")] - 10


def test_scan_chunked_for_f64_outputs():
    """An f64 output is Cast/Sub/Mul in float64 from any input type: its intermediates stay in cache in
    rows of 64K-4M elements, in a graph too (measured: (2048,2048) u8 feeding Relu 4.8x -> 3.6x ORT's f32
    DequantizeLinear); a per-tensor input is reshaped to such rows only where no final Reshape copies
    the 8-byte output (standalone, that copy cost what the chunks saved)."""
    p = plan(info((38, 1594, 84), qt="i16", rt="f64", zp=False, graph_output=True, model_output=True))
    assert p.strategy.name == "scan-chunked" and p.choice.row.strategy.name == "cast-sub-mul"
    assert p.choice.shape == (38, 1594, 84)  # axis-0 rows fit: no Reshape
    inside = plan(info((2048, 2048), qt="u8", rt="f64"))
    assert inside.strategy.name == "scan-chunked" and inside.choice.shape == (16, 262144)
    alone = plan(info((2048, 2048), qt="u8", rt="f64", graph_output=True, model_output=True))
    assert alone.strategy.name == "cast-sub-mul"
    assert "reshaping an f64 graph output to other rows copies it" in alone.refused["scan-chunked"]


def test_planner_refusals():
    assert plan(info(), ["cast-sub-mul"]).refused["dql-per-tensor"] == "not among the strategies asked for"
    assert plan(info(target="portable")).refused["dql-blocked"] == "not a portable form"
    with pytest.raises(
        odq.DequantizeError, match=r"node 'dq'.*No exact lowering for this node \(empty-output: .*; fold-weight: "
    ):
        plan(info(qt="i4", opset=13))
    with pytest.raises(odq.DequantizeError, match="Unknown target 'tpu'"):
        plan(info(target="tpu"))


@pytest.mark.parametrize(
    "facts,strategy,reason",
    [
        ({"axes": (1,)}, "dql-per-tensor", "the node has quantization axes"),
        ({"axes": (0, 1)}, "dql-per-axis", "needs exactly one quantization axis"),
        ({"axes": (1,), "shape": None}, "dql-per-axis", "the input's rank is unknown"),
        ({}, "dql-merged-axes", "the node has no quantization axes"),
        ({"axes": (0,), "shape": None}, "dql-merged-axes", "the input's rank is unknown"),
        ({"axes": (0, 2)}, "dql-merged-axes", "the quantization axes are not adjacent"),
        ({"axes": (1,)}, "dql-merged-axes", "nothing to merge (the per-axis form)"),
        ({"axes": (0, 1), "qt": "i4"}, "dql-merged-axes", "ORT has no Reshape for 4-bit types"),
        ({"axes": (0, 2), "opset": 20}, "dql-blocked", "blocked DequantizeLinear needs opset 21"),
        ({}, "dql-blocked", "the node has no quantization axes"),
        ({"axes": (0,), "shape": None}, "dql-blocked", "the input's rank is unknown"),
        ({"axes": (0,), "shape": (3,)}, "dql-blocked", "no broadcast axis to block along"),
        (
            {"axes": (0,), "qt": "i4", "zp_const": False},
            "dql-blocked",
            "a 4-bit zero point computed at run time (ORT has no Reshape or Expand for 4-bit types)",
        ),
        (
            {"axes": (0,), "qt": "i4", "shape": (4, None)},
            "dql-blocked",
            "no broadcast axis of known size to block along (ORT has no Slice for 4-bit types)",
        ),
        ({"qt": "i16", "opset": 20}, "dql-per-tensor", "DequantizeLinear-20 has no i16 input (needs opset 21)"),
        ({"opset": 28}, "dql-per-tensor", "ORT has no DequantizeLinear-28 kernel"),
        (
            {"qt": "i32", "int32_wrap": True, "zp": False, "opset": 13, "consumers": ("Relu", "Squeeze")}
            | {"shape": (4, None, 16)},
            "dql-per-tensor",
            "ORT 1.32 clamps an int32 per-tensor DequantizeLinear before Squeeze to [0, 255] * scale below opset 21 "
            "(a Flatten/Reshape pair after it "
            "needs known dims below opset 14)",
        ),
        (
            {"qt": "i32", "int32_wrap": True, "axes": (1,), "consumers": ("Transpose",), "opset": 13}
            | {"shape": (None, 8, 16)},
            "dql-per-axis",
            "ORT 1.32 cannot load an int32 DequantizeLinear with a zero point before Transpose (a Flatten/Reshape "
            "pair after it needs known dims below opset 14)",
        ),
        ({}, "sub-cast-mul", "only an i32 input with wrap_int32 (ORT's int32 arithmetic)"),
        (
            {"qt": "i32", "int32_wrap": True, "rt": "f64"},
            "sub-cast-mul",
            "ORT's int32 DequantizeLinear computes in f32 (no f64 output)",
        ),
        (
            {},
            "scan-chunked",
            "only an f16 or bf16 output (an f32 intermediate), an f64 output or an exact i32 input "
            "(float64 ones) has intermediates to keep in cache",
        ),
        (
            {"qt": "i32", "int32_wrap": True},
            "scan-chunked",
            "only an f16 or bf16 output (an f32 intermediate), an f64 output "
            "or an exact i32 input (float64 ones) has intermediates to keep in cache",
        ),
        (
            {"rt": "f16"},
            "scan-chunked",
            "the output is not a model output (ORT runs a Scan that feeds other ops 1.5x slower)",
        ),
        ({"rt": "f16", "model_output": True, "qt": "u4"}, "scan-chunked", "ORT's Scan does not slice 4-bit tensors"),
        ({"axes": (1,), "shape": (4, None)}, "cast-sub-mul-tiled", "needs the quantization axes' sizes"),
        ({"axes": (), "shape": (4, 8)}, "cast-sub-mul-tiled", "needs quantization axes and the input's rank"),
        (
            {"axes": (2,), "shape": (None, 6, 2), "opset": 13},
            "cast-sub-mul-tiled",
            "a Reshape to dims known only at run time needs allowzero (opset 14)",
        ),
        (
            {"axes": (1, 3), "shape": (None, 4, None, 2)},
            "cast-sub-mul-tiled",
            "joins rows known only at run time after other such dims (a Reshape has one -1)",
        ),
        (
            {"axes": (2,), "shape": (None, 1031, 2)},
            "cast-sub-mul-tiled",
            "the 1031 known rows before the scale's run have no divisor to join",
        ),
        ({"axes": (0, 1), "qt": "u4"}, "cast-sub-mul-tiled", "ORT has no Reshape for 4-bit types"),
        ({"axes": (0,)}, "cast-sub-mul-tiled", "the scale does not run along the last axes under broadcast ones"),
        (
            {"axes": (2,), "shape": (4, 8, 64)},
            "cast-sub-mul-tiled",
            "the scale already runs 64 elements (from 64 it is left as it is)",
        ),
        (
            {"axes": (1,), "shape": (4099, 2)},
            "cast-sub-mul-tiled",
            "the 4099 rows before the scale's run have no divisor to join",
        ),
        ({"rt": "bf16", "model_output": True, "opset": 15}, "scan-chunked", "Scan has no bf16 before opset 16"),
        ({"qt": "i32", "rt": "bf16", "opset": 15}, "i32-guarded", "If has no bf16 output before opset 16"),
        (
            {"rt": "f16", "model_output": True, "shape": (4, None)},
            "scan-chunked",
            "needs a known shape",
        ),
        (
            {"rt": "f16", "model_output": True},
            "scan-chunked",
            f"a row along axis 0 holds 128 elements (chunking pays from {CHUNK_MIN} to {CHUNK_MAX}), "
            "and 512 has no divisor in that range that leaves two rows",
        ),
        (
            {"rt": "f16", "model_output": True, "axes": (1,)},
            "scan-chunked",
            f"a row along axis 0 holds 128 elements (chunking pays from {CHUNK_MIN} to {CHUNK_MAX}), "
            "and 4 has no divisor that joins such rows into two or more in that range",
        ),
        ({"axes": (0,), "shape": None}, "cast-sub-mul", "the input's rank is unknown"),
        ({"qt": "u4", "opset": 20}, "cast-sub-mul", "Cast from u4 needs opset 21"),
        ({}, "fold-weight", "weights are kept quantized (weights='float' folds constant weights)"),
        ({}, "cast-sub-min-mul", "only for target 'openvino'"),
    ],
)
def test_every_refusal_says_why(facts, strategy, reason):
    facts = dict(facts)
    args = {k: facts.pop(k) for k in ("shape", "axes", "qt", "rt") if k in facts}
    i = info(**args, **facts)
    try:
        assert refused(i, strategy) == reason
    except odq.DequantizeError as e:  # nothing applies: the message lists every refusal
        assert f"{strategy}: {reason}" in str(e)


def test_a_choice_is_what_cost_and_emit_take():
    """``check`` gives the layout once; ``cost`` of that choice is what the planner recorded."""
    i = info((256, 256, 256), (2,))
    for s in STRATEGIES:
        decision = s.check(i)
        if isinstance(decision, Refusal):
            assert decision.reason == plan(i).refused[s.name]
        else:
            assert s.cost(i, decision) == plan(i).costs[s.name]


@pytest.mark.parametrize(
    "shape,axes,qt,rt,want",
    [
        # ORT's Mul runs its inner loop once per 2 elements: 32 ms against 4.2 for rows of 32 (f32), and no
        # DequantizeLinear takes an f64 output
        ((27, 7, 9808, 2), (0, 1, 3), "u16", "f64", "cast-sub-mul-tiled"),
        ((2048, 3), (1,), "i32", "f64", "cast-sub-mul-tiled"),  # an exact i32 input: no DequantizeLinear
        ((74, 7, 3, 8, 12, 3), (5,), "i8", "f32", "dql-tiled"),  # rows of 1008 (blocks of 74 rows of 6048 as fast)
    ],
)
def test_short_scale_runs_are_tiled_where_no_dequantizelinear_is_faster(shape, axes, qt, rt, want):
    assert chosen(info(shape, axes, qt, rt, scale_const=False, zp_const=False)) == want


def test_one_dimensional_full_scale_is_cut_into_rows():
    # a 1-D input with a scale as large as itself: blocks of one along rows of the largest divisor of its
    # length up to 4096 (42970336 = 2272 x 18913: rows of 2272), not Cast/Sub/Mul or a last-axis per-axis DQL
    p = plan(info((42970336,), (0,), "i8", scale_const=False, zp_const=False))
    assert p.strategy.name == "dql-blocked" and p.choice.split == 2272
    assert plan(info((4099,), (0,), "i8")).strategy.name != "dql-blocked"  # a prime length: no rows


def test_quantization_axes_of_size_one_are_planned_as_broadcast_ones():
    """One scale value along an axis of size 1: per-tensor for ``{3}`` on ``(6,7,5,1)`` (blocked before),
    per-axis for ``{0,1,2}`` on ``(1,40,1,30)``; the plan says which axes it dropped."""
    p = plan(info((6, 7, 5, 1), (3,)))
    assert (p.strategy.name, p.unit.dropped, p.unit.adopted) == ("dql-per-tensor", (3,), ())
    p = plan(info((1, 40, 1, 30), (0, 1, 2)))
    assert (p.strategy.name, p.unit.dropped) == ("dql-per-axis", (0, 2))
    assert not plan(info((6, 7, 5, 2), (3,))).unit
    assert not plan(info((6, 7, 5, None), (3,))).unit  # an unknown dim is not known to be 1
    assert not plan(info((6, 7, 5, 1), (3,), "u4", zp=True, zp_const=False)).unit  # no 4-bit Squeeze


@pytest.mark.parametrize(
    "shape,axes,adopted,dropped",
    [
        ((3, 14, 36001, 1), (0, 1, 2), (3,), ()),  # a scale as large as the input
        ((3, 14, 36001, 1), (0, 1, 2, 3), (), ()),  # (the axis of 1 stays a quantization axis)
        ((5000, 7, 1, 1), (1,), (2, 3), ()),
        ((5000, 1, 7, 1), (1, 2), (3,), (1,)),
        ((5000, 7, 1), (0,), (), ()),  # the last other axis is a broadcast one
        ((1, 1), (0,), (), (0,)),  # no axis of another size: per tensor
    ],
)
def test_trailing_broadcast_axes_of_size_one_are_planned_as_quantization_ones(shape, axes, adopted, dropped):
    """Broadcast axes of size 1 after a last quantization axis would make ORT's kernels walk runs of one
    element: they are planned as quantization axes (``(3,14,36001,1)`` with ``{0,1,2}`` u16 with a zero
    point took a blocked DequantizeLinear along its last axis, 12-13x ORT's per-tensor DequantizeLinear in
    a graph; its scale is as large as the input, blocks of one along axis 0)."""
    p = plan(info(shape, axes, "u16", zp=True))
    assert (p.unit.adopted, p.unit.dropped) == (adopted, dropped)
    if shape == (3, 14, 36001, 1):
        assert p.strategy.name == "dql-blocked" and (p.choice.axis, p.choice.mode) == (0, "blocked")
        assert p.choice.view[0] == (0,) and not p.choice.expand


def test_axes_apart_over_a_wide_run_take_a_per_axis_dequantizelinear_with_the_scale_expanded():
    """``{0,2,3}`` on ``(3,2,5,5,2286)``: the scale expanded over axis 1 to 150 values, one per-axis
    DequantizeLinear over a (150, 2286) view (ORT's blocked kernel along that last run: 1.5x its per-tensor
    DQL in a graph, this form 1.0x). As a graph output the final Reshape copies, and the blocked form,
    which needs none, stays; over short runs (rows of 16) the per-axis kernel's cost per row loses."""
    p = plan(info((3, 2, 5, 5, 2286), (0, 2, 3), "i16"))
    assert p.strategy.name == "dql-expanded" and (p.choice.dims, p.choice.axis) == ((150, 2286), 0)
    p = plan(info((7, 3, 27, 3, 4, 2055), (2, 4), "u8", scale_const=False, zp_const=False))
    assert p.strategy.name == "dql-expanded" and (p.choice.dims, p.choice.axis) == ((21, 324, 2055), 1)
    assert chosen(info((3, 2, 5, 5, 2286), (0, 2, 3), "i16", graph_output=True)) == "dql-blocked"
    assert chosen(info((4, 8, 16), (0, 2))) == "dql-blocked"
    assert refused(info((4, 8, 16), (0, 1)), "dql-expanded").startswith("the quantization axes are adjacent")
    assert refused(info((4, 8, 16), (0, 2), "u4"), "dql-expanded") == "ORT has no Reshape for 4-bit types"
    assert (
        refused(info((4, 8, 16), (0, 2), rt="bf16", scale_const=False), "dql-expanded")
        == "ORT has no bf16 Expand (for a scale computed at run time)"
    )


def test_exact_i32_to_f32_is_guarded():
    """An exact i32 input: ReduceMax/ReduceMin check at run time that the input (and a fed zero point) lies
    within +-2**23, where ORT's int32 DequantizeLinear computes what the float64 form does; an If runs it
    or the float64 form. A constant zero point is checked here; f64 outputs and wrap_int32 are not
    guarded."""
    p = plan(info((64, 1024), (1,), "i32", scale_const=False, zp_const=False))
    assert p.strategy.name == "i32-guarded" and p.choice.check_zp
    assert (p.choice.fast.strategy.name, p.choice.exact.strategy.name) == ("dql-blocked", "cast-sub-mul")
    # the check at the cheaper of its two calibrated forms from cache (256 KB of int32), over the input and
    # the fed zero point
    check = min(kernel_cost("check_i32_cached"), kernel_cost("check_f32_cached"))
    assert p.cost - p.choice.fast.cost == pytest.approx((64 * 1024 + 1024) * check)
    zp = info((64, 1024), (1,), "i32", read=lambda name: np.array([7, -9]) if name == "z" else None)
    assert not plan(zp).choice.check_zp and plan(zp).choice.known is None
    both = info((64, 1024), (1,), "i32", read=lambda name: np.array([7, -9]) if name == "z" else np.ones((64, 1024)))
    assert plan(both).choice.known is True  # a constant input: decided when lowering, no If
    big = info((64, 1024), (1,), "i32", read=lambda name: np.array([7, -(1 << 23)]))
    assert refused(big, "i32-guarded") == "the zero point reaches 2**23 (|zp| up to 8388608)"
    assert refused(info(qt="i32", rt="f64"), "i32-guarded") == "DequantizeLinear has no f64 output"
    small = info((8, 255), qt="i32")  # the check's nodes cost more than they save on 2040 elements
    assert refused(small, "i32-guarded") == "2040 elements: below 2048 the check costs more than it saves"
    assert chosen(small) == "cast-sub-mul" and chosen(info((8, 256), qt="i32")) == "i32-guarded"
    assert chosen(info((8, 16, 16), qt="i32", rt="bf16")) == "i32-guarded"
    assert refused(info(qt="i32", int32_wrap=True), "i32-guarded").startswith("only an exact i32 input")
    assert refused(info(), "i32-guarded").startswith("only an exact i32 input")


def test_an_empty_input_takes_the_empty_output():
    """An input known to hold no elements gets an empty constant; the forms that reshape or expand refuse
    it (ORT rejects a blocked DequantizeLinear whose scale was expanded to a dim of 0)."""
    empty = info((3, 0, 5, 7), (0, 2))
    assert chosen(empty) == "empty-output"
    for strategy in ("dql-blocked", "dql-expanded", "dql-tiled", "cast-sub-mul-tiled"):
        assert refused(empty, strategy) == "the input is empty (the empty-output form)"
    assert refused(info((3, 4, 5, 7), (0, 2)), "empty-output") == "the input is not known to be empty"
    assert refused(info((3, None, 5, 7), (0, 2)), "empty-output") == "the input is not known to be empty"


def test_short_last_runs_join_rows_for_a_blocked_dequantizelinear():
    """A per-channel scale on a last axis of 5 under 2M rows: ORT's blocked kernel would walk rows of 5, so
    k = 103 of them are joined (2048567 = 103 x 19889); rows with no divisor to join stay blocked."""
    p = plan(info((2048567, 5), (1,)))
    assert p.strategy.name == "dql-tiled" and (p.choice.dims, p.choice.k) == ((19889, 515), 103)
    assert chosen(info((30259, 14), (1,), "i16")) == "dql-blocked"
    assert (
        refused(info((30259, 14), (1,), "i16"), "dql-tiled")
        == "the 30259 rows before the scale's run have no divisor to join"
    )
    assert refused(info((2048567, 5), (1,), opset=19), "dql-tiled") == "blocked DequantizeLinear needs opset 21"
    assert refused(info((2048567, 5), (1,), "i32"), "dql-tiled").startswith("DequantizeLinear subtracts i32")
