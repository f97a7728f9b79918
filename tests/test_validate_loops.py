"""Validation of models with Loop and Scan: the oracle's control flow follows the ONNX spec (scan outputs
stacked along a new first axis, empty ones after zero iterations), in the main graph and in subgraphs.

Expected values are computed by hand here, and ONNX Runtime runs every model too: none is onnx's own
kernel's output, so these stay right when onnx fixes its Loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.graphs import iter_graphs
from onnx_dequant.validation import validate
from onnx_dequant.validation.inputs import TRIP_COUNTS, generate, graph_inputs
from onnx_dequant.validation.runners import ReferenceRunner

vi = helper.make_tensor_value_info
X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
S = np.array([0.5, 0.25, 2.0], np.float32)


def _body(*, with_dq: bool = False, static: bool = True) -> onnx.GraphProto:
    """Carries ``acc`` (acc + i), emits ``x`` (or our op's dequantized ``q``) as a scan output."""
    nodes = [
        helper.make_node("Identity", ["c_in"], ["c_out"]),
        helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["acc_in", "fi"], ["acc_out"]),
    ]
    if with_dq:
        nodes.append(odq.make_node(["q", "s"], ["ys_out"], axes=(1,), name="dq"))
    else:
        nodes.append(helper.make_node("Identity", ["x"], ["ys_out"]))
    return helper.make_graph(
        nodes,
        "body",
        [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("acc_in", TensorProto.FLOAT, [])],
        [
            vi("c_out", TensorProto.BOOL, []),
            vi("acc_out", TensorProto.FLOAT, []),
            vi("ys_out", TensorProto.FLOAT, [2, 3] if static else None),
        ],
    )


def loop_model(*, with_dq: bool = False, static: bool = True, cond: bool = True) -> onnx.ModelProto:
    loop = helper.make_node(
        "Loop",
        ["M", "cond" if cond else "", "acc0"],
        ["acc", "ys"],
        body=_body(with_dq=with_dq, static=static),
        name="loop",
    )
    inputs = [vi("M", TensorProto.INT64, []), vi("x", TensorProto.FLOAT, [2, 3])]
    inits = [
        numpy_helper.from_array(np.array(True), "cond"),
        numpy_helper.from_array(np.array(0.5, np.float32), "acc0"),
    ]
    if with_dq:
        inputs.append(vi("q", TensorProto.INT8, [2, 3]))
        inits.append(numpy_helper.from_array(S, "s"))
    g = helper.make_graph(
        [loop], "g", inputs, [vi("acc", TensorProto.FLOAT, []), vi("ys", TensorProto.FLOAT, ["T", 2, 3])], inits
    )
    opsets = [helper.make_opsetid("", 21)] + ([odq.schema.opset_import()] if with_dq else [])
    return helper.make_model(g, opset_imports=opsets)


def _feeds(m: int, with_dq: bool = False) -> dict[str, np.ndarray]:
    feeds = {"M": np.array(m, np.int64), "x": X}
    if with_dq:
        feeds["q"] = np.array([[-128, 127, 0], [1, -1, 5]], np.int8)
    return feeds


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("trips", [0, 1, 2, 3])
def test_loop_scan_outputs_stack_along_a_new_axis(trips):
    model = loop_model()
    got = ReferenceRunner(model).run(_feeds(trips))
    assert got["ys"].shape == (trips, 2, 3) and got["ys"].dtype == np.float32
    np.testing.assert_array_equal(got["ys"], np.stack([X] * trips) if trips else np.empty((0, 2, 3), np.float32))
    assert got["acc"] == np.float32(0.5 + sum(range(trips)))
    acc, ys = _ort(model, _feeds(trips))
    assert ys.shape == got["ys"].shape and acc == got["acc"]
    report = validate(model, _feeds(trips))
    assert report.ok, report.to_text()


def test_loop_with_our_op_in_the_body_validates_on_every_path():
    model = loop_model(with_dq=True)
    feeds = _feeds(2, with_dq=True)
    report = validate(model, feeds)
    assert report.ok, report.to_text()
    assert {p.path for p in report.paths} == {"lowered", "kernel"}
    ys = ReferenceRunner(model).run(feeds)["ys"]
    one = feeds["q"].astype(np.float32) * S
    np.testing.assert_array_equal(ys, np.stack([one, one]))


def test_loop_in_a_subgraph_uses_the_corrected_kernel():
    """The Loop inside an If branch: the evaluator of the branch gets our kernels too."""
    loop = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc", "ys"], body=_body(), name="inner_loop")
    then_g = helper.make_graph(
        [loop], "then", [], [vi("acc", TensorProto.FLOAT, []), vi("ys", TensorProto.FLOAT, ["T", 2, 3])]
    )
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["acc0"], ["a"]), helper.make_node("Unsqueeze", ["x", "zero"], ["e"])],
        "else",
        [],
        [vi("a", TensorProto.FLOAT, []), vi("e", TensorProto.FLOAT, ["T", 2, 3])],
    )
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["acc", "ys"], then_branch=then_g, else_branch=else_g, name="if")],
        "g",
        [vi("M", TensorProto.INT64, []), vi("x", TensorProto.FLOAT, [2, 3]), vi("c", TensorProto.BOOL, [])],
        [vi("acc", TensorProto.FLOAT, []), vi("ys", TensorProto.FLOAT, ["T", 2, 3])],
        [
            numpy_helper.from_array(np.array(True), "cond"),
            numpy_helper.from_array(np.array(0.5, np.float32), "acc0"),
            numpy_helper.from_array(np.array([0], np.int64), "zero"),
        ],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    feeds = {**_feeds(3), "c": np.array(True)}
    ys = ReferenceRunner(model).run(feeds)["ys"]
    np.testing.assert_array_equal(ys, np.stack([X, X, X]))
    report = validate(model, feeds)
    assert report.ok, report.to_text()


def test_loop_condition_stops_it_early():
    """With ``cond`` given, the body's condition ends the loop (here after the iteration where i == 1)."""
    model = loop_model()
    body = model.graph.node[0].attribute[0].g
    body.node[0].CopyFrom(helper.make_node("Less", ["i", "one"], ["c_out"]))
    body.initializer.append(numpy_helper.from_array(np.array(1, np.int64), "one"))
    got = ReferenceRunner(model).run(_feeds(5))
    assert got["ys"].shape == (2, 2, 3) and got["acc"] == np.float32(0.5 + 0 + 1)
    report = validate(model, _feeds(5))
    assert report.ok, report.to_text()


def test_zero_trips_without_a_static_body_shape_is_bad_input_naming_the_node(tmp_path, capsys):
    model = loop_model(static=False)
    with pytest.raises(odq.DequantizeError, match="ran zero times") as e:
        validate(model, _feeds(0))
    assert e.value.node == "loop"
    path = tmp_path / "loop.onnx"
    onnx.save(model, path)
    np.savez(tmp_path / "in.npz", **_feeds(0))
    assert main(["validate", str(path), "--inputs", str(tmp_path / "in.npz"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(path) in err and "node 'loop'" in err and "ran zero times" in err and "Traceback" not in err
    assert validate(model, _feeds(2)).ok  # one iteration or more: its values give the shape


def test_scan_outputs_agree():
    """onnx's Scan stacks its scan outputs along a new axis already (checked here against ONNX Runtime and
    a hand-computed running sum)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "r"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["o"])],
        "b",
        [vi("s_in", TensorProto.FLOAT, [3]), vi("r", TensorProto.FLOAT, [3])],
        [vi("s_out", TensorProto.FLOAT, [3]), vi("o", TensorProto.FLOAT, [3])],
    )
    scan = helper.make_node("Scan", ["s0", "xs"], ["sf", "os"], body=body, num_scan_inputs=1, name="scan")
    g = helper.make_graph(
        [scan],
        "g",
        [vi("s0", TensorProto.FLOAT, [3]), vi("xs", TensorProto.FLOAT, ["T", 3])],
        [vi("sf", TensorProto.FLOAT, [3]), vi("os", TensorProto.FLOAT, ["T", 3])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    feeds = {"s0": np.zeros(3, np.float32), "xs": np.arange(12, dtype=np.float32).reshape(4, 3)}
    got = ReferenceRunner(model).run(feeds)
    np.testing.assert_array_equal(got["os"], np.cumsum(feeds["xs"], axis=0))
    report = validate(model, feeds)
    assert report.ok, report.to_text()


def test_generated_trip_counts_are_small():
    """An input that is a Loop's trip count gets values in TRIP_COUNTS (the whole int64 range ran the
    reference's loop forever); other int64 inputs still span their range."""
    model = loop_model()
    g = model.graph
    g.input.append(vi("n", TensorProto.INT64, [4]))
    g.output.append(vi("n_out", TensorProto.INT64, [4]))
    g.node.append(helper.make_node("Identity", ["n"], ["n_out"]))
    specs = graph_inputs(model)
    assert [s.trip_count for s in specs] == [True, False, False]
    low, high = TRIP_COUNTS
    assert 0 <= low <= high <= 4
    seen = set()
    for seed in range(20):
        feeds = generate(specs, seed=seed)
        assert feeds["M"].dtype == np.int64 and feeds["M"].shape == ()
        seen.add(int(feeds["M"]))
        assert feeds["n"][0] == np.iinfo(np.int64).min and feeds["n"][1] == np.iinfo(np.int64).max
    assert seen == set(range(low, high + 1))
    report = validate(model, seed=1)
    assert report.ok, report.to_text()
    assert report.paths[0].outputs[1].name == "ys"


def test_trip_count_of_a_loop_in_a_subgraph_is_small():
    """The graph input read as the trip count of a Loop inside an If branch."""
    loop = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=_body(), name="inner")
    body = loop.attribute[0].g
    del body.output[2]  # no scan output
    body.node.pop()
    then_g = helper.make_graph([loop], "then", [], [vi("acc", TensorProto.FLOAT, [])])
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["acc0"], ["a"])], "else", [], [vi("a", TensorProto.FLOAT, [])]
    )
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["acc"], then_branch=then_g, else_branch=else_g)],
        "g",
        [vi("M", TensorProto.INT64, [1]), vi("c", TensorProto.BOOL, [])],
        [vi("acc", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(np.array(True), "cond"), numpy_helper.from_array(np.array(0.5, np.float32), "acc0")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    (m, _) = graph_inputs(model)
    assert m.trip_count
    assert TRIP_COUNTS[0] <= generate([m], seed=3)["M"][0] <= TRIP_COUNTS[1]


def test_inputs_a_trip_count_is_computed_from_are_small():
    """A trip count computed from graph inputs (``M = Cast(n32) + k``) keeps those inputs in TRIP_COUNTS: drawn
    from int32's whole range, ``M`` ran the loop for ever. An input that only feeds the loop's body spans its
    range still."""
    model = loop_model()
    g = model.graph
    m_input = g.input[0]
    m_input.CopyFrom(vi("n32", TensorProto.INT32, []))
    g.input.extend([vi("k", TensorProto.INT64, [1]), vi("w", TensorProto.INT64, [4])])
    g.node.insert(0, helper.make_node("Cast", ["n32"], ["n64"], to=TensorProto.INT64))
    g.node.insert(1, helper.make_node("Squeeze", ["k"], ["k0"]))
    g.node.insert(2, helper.make_node("Add", ["n64", "k0"], ["M"]))
    g.node.append(helper.make_node("Identity", ["w"], ["w_out"]))
    g.output.append(vi("w_out", TensorProto.INT64, [4]))
    specs = {s.name: s for s in graph_inputs(model)}
    assert {n for n, s in specs.items() if s.trip_count} == {"n32", "k"}
    low, high = TRIP_COUNTS
    for seed in range(10):
        feeds = generate(list(specs.values()), seed=seed)
        assert low <= int(feeds["n32"]) <= high and low <= int(feeds["k"][0]) <= high
        assert feeds["w"][0] == np.iinfo(np.int64).min and feeds["w"][1] == np.iinfo(np.int64).max
    report = validate(model, seed=2)
    assert report.ok, report.to_text()
    trips = int(feeds["n32"]) + int(feeds["k"][0])
    assert ReferenceRunner(model).run(feeds)["ys"].shape == (trips, 2, 3)


def test_a_trip_count_computed_inside_an_if_marks_what_the_branches_read():
    """``M`` is an If's output: every value the branches read is kept small (the If's condition is a
    bool, drawn as ever)."""
    then_g = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["t"])], "then", [], [vi("t", TensorProto.INT64, [])]
    )
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["b"], ["e"])], "else", [], [vi("e", TensorProto.INT64, [])]
    )
    model = loop_model()
    g = model.graph
    g.input[0].CopyFrom(vi("a", TensorProto.INT64, []))
    g.input.extend([vi("b", TensorProto.INT64, []), vi("c", TensorProto.BOOL, [])])
    g.node.insert(0, helper.make_node("If", ["c"], ["M"], then_branch=then_g, else_branch=else_g))
    specs = {s.name: s for s in graph_inputs(model)}
    assert {n for n, s in specs.items() if s.trip_count} == {"a", "b", "c"}
    feeds = generate(list(specs.values()), seed=0)
    assert TRIP_COUNTS[0] <= int(feeds["a"]) <= TRIP_COUNTS[1] and TRIP_COUNTS[0] <= int(feeds["b"]) <= TRIP_COUNTS[1]
    assert validate(model, seed=0).ok


def _scan_model(in_axis: int, in_dir: int, out_axis: int, out_dir: int, length: int = 4) -> onnx.ModelProto:
    """A running sum of the slices of ``xs`` (2 x ``length`` x 3, sliced along ``in_axis``): the state, and
    each partial sum as a scan output stacked along ``out_axis``."""
    shape = [2, length, 3]
    part = [d for i, d in enumerate(shape) if i != in_axis % 3]
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "r"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["o"])],
        "b",
        [vi("s_in", TensorProto.FLOAT, part), vi("r", TensorProto.FLOAT, part)],
        [vi("s_out", TensorProto.FLOAT, part), vi("o", TensorProto.FLOAT, part)],
    )
    scan = helper.make_node(
        "Scan",
        ["s0", "xs"],
        ["sf", "os"],
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[in_axis],
        scan_input_directions=[in_dir],
        scan_output_axes=[out_axis],
        scan_output_directions=[out_dir],
        name="scan",
    )
    stacked = list(part)
    stacked.insert(out_axis % 3, shape[in_axis % 3])
    g = helper.make_graph(
        [scan],
        "g",
        [vi("s0", TensorProto.FLOAT, part), vi("xs", TensorProto.FLOAT, shape)],
        [vi("sf", TensorProto.FLOAT, part), vi("os", TensorProto.FLOAT, stacked)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize(
    ("in_axis", "in_dir", "out_axis", "out_dir"),
    [(1, 0, 0, 0), (1, 1, 0, 0), (0, 0, 1, 1), (-1, 1, -1, 0), (2, 0, 2, 1)],
)
def test_scan_at_any_axis_and_direction(in_axis, in_dir, out_axis, out_dir):
    """onnx's Scan refused scan axes other than 0 and the reverse direction ("the reference cannot run the
    model"), which onnx_dequant's own nGraph importer writes (CumSum in f16, GatherTree)."""
    model = _scan_model(in_axis, in_dir, out_axis, out_dir)
    xs = np.arange(24, dtype=np.float32).reshape(2, 4, 3) * 0.5 - 3
    ax = in_axis % 3
    part = tuple(d for i, d in enumerate(xs.shape) if i != ax)
    feeds = {"s0": np.full(part, 0.25, np.float32), "xs": xs}
    slices = np.moveaxis(xs, ax, 0)
    slices = slices[::-1] if in_dir else slices
    sums = feeds["s0"] + np.cumsum(slices, axis=0, dtype=np.float32)
    stacked = sums[::-1] if out_dir else sums
    expected = np.moveaxis(stacked, 0, out_axis)
    got = ReferenceRunner(model).run(feeds)
    np.testing.assert_array_equal(got["sf"], sums[-1])
    np.testing.assert_array_equal(got["os"], expected)
    _, os_ort = _ort(model, feeds)
    np.testing.assert_array_equal(os_ort, expected)
    report = validate(model, feeds)
    assert report.ok, report.to_text()


def test_a_scan_that_runs_zero_times_is_bad_input_naming_the_node(tmp_path, capsys):
    """ONNX Runtime 1.32 dies of SIGFPE on a Scan of length 0 along axis 1 (and fails along axis 0): the
    reference, which validation runs first, refuses it with exit 2, so the process never gets there."""
    model = _scan_model(1, 0, 1, 0, length=0)
    feeds = {"s0": np.ones((2, 3), np.float32), "xs": np.zeros((2, 0, 3), np.float32)}
    with pytest.raises(odq.DequantizeError, match="runs zero times") as e:
        validate(model, feeds)
    assert e.value.node == "scan"
    path = tmp_path / "scan.onnx"
    onnx.save(model, path)
    np.savez(tmp_path / "in.npz", **feeds)
    assert main(["validate", str(path), "--inputs", str(tmp_path / "in.npz"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "node 'scan'" in err and "at least once" in err, err


def test_scan_inputs_of_different_lengths_are_bad_input_naming_the_node():
    model = _scan_model(1, 0, 0, 0)
    scan = model.graph.node[0]
    scan.input.append("ys")
    del scan.attribute[:]
    body = _scan_model(1, 0, 0, 0).graph.node[0].attribute[0].g
    body.input.append(vi("r2", TensorProto.FLOAT, [2, 3]))
    scan.attribute.extend([helper.make_attribute("body", body), helper.make_attribute("num_scan_inputs", 2)])
    scan.attribute.append(helper.make_attribute("scan_input_axes", [1, 1]))
    model.graph.input.append(vi("ys", TensorProto.FLOAT, [2, 5, 3]))
    feeds = {
        "s0": np.zeros((2, 3), np.float32),
        "xs": np.zeros((2, 4, 3), np.float32),
        "ys": np.zeros((2, 5, 3), np.float32),
    }
    with pytest.raises(
        odq.DequantizeError, match=r"scan inputs of different lengths along their scan axes \(4, 5\)"
    ) as e:
        ReferenceRunner(model).run(feeds)
    assert e.value.node == "scan"


@pytest.mark.parametrize("graph", ["ops_data/cumsum_f16.json", "ops_detect/gather_tree_f32.json"])
def test_imported_graphs_with_scans_validate(graph, tmp_path, capsys):
    """What onnx_dequant's nGraph importer writes for these ops validates on every path."""
    src = Path(__file__).parent / "golden" / graph
    out = tmp_path / "m.onnx"
    assert main(["convert", str(src), "-o", str(out)]) == 0
    model = onnx.load(out)
    scans = [n for g in iter_graphs(model.graph) for n in g.node if n.op_type == "Scan"]
    assert scans and any(
        a.name in ("scan_input_axes", "scan_input_directions") and any(a.ints) for n in scans for a in n.attribute
    )
    capsys.readouterr()
    assert main(["validate", str(out), "-q"]) == 0, capsys.readouterr()


def test_an_input_a_trip_count_is_computed_from_that_indexes_stays_within_the_axis():
    """An input both indexing a Gather and feeding a Loop's trip count (M = counts[i]) was drawn from the
    trip counts' 1..3 alone: i = 2 or 3 into an axis of 2, and the reference failed ('index 2 is out of
    bounds for axis 0 with size 2')."""
    from onnx import TensorProto as T
    from onnx import helper as h

    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = h.make_tensor_value_info
    body = h.make_graph(
        [h.make_node("Add", ["acc", "one"], ["acc2"]), h.make_node("Identity", ["c"], ["c2"])],
        "body",
        [vi("it", T.INT64, []), vi("c", T.BOOL, []), vi("acc", T.FLOAT, [])],
        [vi("c2", T.BOOL, []), vi("acc2", T.FLOAT, [])],
    )
    nodes = [
        h.make_node("Constant", [], ["one"], value=h.make_tensor("one", T.FLOAT, [], [1.0])),
        h.make_node("Gather", ["counts", "i"], ["M"], axis=0),
        h.make_node("Loop", ["M", "", "a0"], ["acc_out"], body=body),
    ]
    g = h.make_graph(
        nodes,
        "g",
        [vi("counts", T.INT64, [2]), vi("i", T.INT64, []), vi("a0", T.FLOAT, [])],
        [vi("acc_out", T.FLOAT, [])],
    )
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    specs = graph_inputs(model)
    for seed in range(8):
        feeds = generate(specs, seed=seed)
        assert 0 <= feeds["i"] < 2, (seed, feeds["i"])
        assert 1 <= feeds["counts"].min() and feeds["counts"].max() <= 3
    report = odq.validate(model, seed=0)
    assert report.ok, report.to_text()
