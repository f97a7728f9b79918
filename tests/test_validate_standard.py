"""Validation of standard ONNX models at opsets 13-27: ONNX Runtime's quantization tool's outputs (made
here), our lowered models at early opsets, models mixing our op with QDQ nodes, and the exact kernels
the reference uses for DequantizeLinear/QuantizeLinear at every version."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from ort_quantized import KINDS, quantized

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.validation.standard_ops import OPS

OPSETS = (13, 17, 21)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ort-quantized"))


def _statuses(report):
    return {p.label: p.status for p in report.paths}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("kind", KINDS)
def test_ort_quantization_tool_models_validate(folder, opset, kind):
    path = quantized(folder, opset, kind, reduce_range=kind == "qdq-per-channel")
    model = onnx.load(path)
    assert model.opset_import[0].version == opset
    report = odq.validate(path)
    if kind == "qoperator":
        # com.microsoft QLinearAdd: no reference; ORT's optimized graph is compared with its plain one
        assert "com.microsoft.QLinearAdd" in report.no_reference
        assert _statuses(report) == {"ort/default": "pass", "ort/off": "skipped"}
        assert report.verdict.startswith("AGREE WITHOUT A REFERENCE")
        assert "NO REFERENCE RAN" in report.to_text()
    else:
        assert not report.no_reference
        assert _statuses(report) == {"ort/default": "pass", "ort/off": "pass"}, report.to_text()
        assert report.verdict.startswith("AGREE: 2 path(s)")


def test_per_channel_without_reduce_range_runs_the_reference(folder):
    """Without reduce_range, ORT's u8s8 QLinearConv may saturate on CPUs without VNNI: either way the
    reference runs, the unoptimized ORT graph agrees with it bit for bit, and the verdict follows ORT."""
    report = odq.validate(quantized(folder, 17, "qdq-per-channel"))
    by = {p.label: p for p in report.paths}
    assert by["ort/off"].status == "pass" and by["ort/off"].outputs[0].max_ulp == 0
    assert by["ort/default"].status in ("pass", "fail")
    assert report.ok == (by["ort/default"].status == "pass")


def test_cli_on_a_qoperator_model_says_no_reference_ran(folder, capsys):
    assert main(["validate", quantized(folder, 13, "qoperator"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "NO REFERENCE RAN" in out and "com.microsoft.QLinearAdd" in out


def _dql_model(opset, x, s, z, **attrs):
    inits = [numpy_helper.from_array(s, "s")] + ([numpy_helper.from_array(z, "z")] if z is not None else [])
    node = helper.make_node("DequantizeLinear", ["x", "s"] + (["z"] if z is not None else []), ["y"], **attrs)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", (10, 13, 17, 19, 21, 23, 25))
def test_dequantize_linear_every_version_is_the_exact_reference(opset):
    rng = np.random.default_rng(opset)
    x = rng.integers(-128, 128, (3, 4, 5)).astype(np.int8)
    cases = [(np.float32(0.37), np.int8(-3), {})]
    if opset >= 13:
        cases.append((rng.random(4).astype(np.float32), rng.integers(-9, 9, 4).astype(np.int8), {"axis": 1}))
    if opset >= 21:
        cases.append((rng.random((3, 4, 3)).astype(np.float32), None, {"axis": 2, "block_size": 2}))
    for s, z, attrs in cases:
        s, z = np.asarray(s), None if z is None else np.asarray(z)
        got = ReferenceEvaluator(_dql_model(opset, x, s, z, **attrs), new_ops=OPS).run(None, {"x": x})[0]
        if "block_size" in attrs:
            full = np.repeat(s, 2, axis=2)[:, :, :5]
            want = odq.dequantize(x, full, None, axes=(0, 1, 2))
        elif s.ndim:
            want = odq.dequantize(x, s, z, axes=(1,))
        else:
            want = odq.dequantize(x, s, z)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint32), want.view(np.uint32)), attrs


def test_dequantize_linear_int32_does_not_round_before_subtracting():
    """onnx's own kernel casts an int32 input to float32 first; the exact one subtracts in integers."""
    x = np.array([2**31 - 1, 16777217], np.int32)
    s, z = np.float32(1.0), np.int32(-(2**31))
    got = ReferenceEvaluator(_dql_model(21, x, np.asarray(s), np.asarray(z)), new_ops=OPS).run(None, {"x": x})[0]
    want = np.array([2**32 - 1, 16777217 + 2**31], np.float64).astype(np.float32)
    assert np.array_equal(got, want)


def test_quantize_linear_rounds_half_even_and_saturates_without_overflow():
    x = np.array([0.5, 1.5, 2.5, -0.5, 1e10, -1e10, 3e9, np.nan], np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [8])],
        [numpy_helper.from_array(np.float32(1.0), "s"), numpy_helper.from_array(np.int8(3), "z")],
    )
    for opset in (13, 21):
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        got = ReferenceEvaluator(m, new_ops=OPS).run(None, {"x": x})[0]
        assert got.tolist() == [3, 5, 5, 3, 127, -128, 127, 3]


@pytest.mark.parametrize("opset", (13, 17))
def test_lowered_models_and_mixed_qdq_models_at_early_opsets(opset):
    """Our op next to a standard QuantizeLinear/DequantizeLinear pair, and the lowered model alone."""
    rng = np.random.default_rng(0)
    s = rng.random(4).astype(np.float32) + 0.5
    z = rng.integers(-5, 5, 4).astype(np.int8)
    nodes = [
        odq.make_node(["x", "s", "z"], ["d"], axes=(1,), name="dq"),
        helper.make_node("QuantizeLinear", ["d", "qs", "qz"], ["q"], name="q"),
        helper.make_node("DequantizeLinear", ["q", "qs", "qz"], ["y"], name="dql"),
    ]
    g = helper.make_graph(
        nodes,
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [2, 4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3])],
        [
            numpy_helper.from_array(s, "s"),
            numpy_helper.from_array(z, "z"),
            numpy_helper.from_array(np.float32(0.25), "qs"),
            numpy_helper.from_array(np.uint8(128), "qz"),
        ],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(odq.DOMAIN, 1)])
    report = odq.validate(model)
    assert report.ok and set(_statuses(report).values()) == {"pass"}, report.to_text()
    lowered = odq.lower(model)
    assert lowered.opset_import[0].version == opset
    report = odq.validate(lowered)
    assert _statuses(report) == {"ort/default": "pass", "ort/off": "pass"}, report.to_text()


def _gather_div_model() -> onnx.ModelProto:
    """Token ids into an embedding table (a constant), a per-row GatherND on a graph input with a symbolic
    dim, and an integer division by an input that is cast first."""
    vi = helper.make_tensor_value_info
    table = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4), "table")
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
        helper.make_node("GatherND", ["data", "where"], ["picked"]),
        helper.make_node("Cast", ["b16"], ["b32"], to=TensorProto.INT32),
        helper.make_node("Div", ["a", "b32"], ["q"]),
        helper.make_node("Mod", ["a", "b32"], ["r"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [
            vi("ids", TensorProto.INT64, [6]),
            vi("data", TensorProto.FLOAT, ["N", 7]),
            vi("where", TensorProto.INT64, [4, 2]),
            vi("a", TensorProto.INT32, [64]),
            vi("b16", TensorProto.INT16, [64]),
        ],
        [
            vi("emb", TensorProto.FLOAT, [6, 4]),
            vi("picked", TensorProto.FLOAT, [4]),
            vi("q", TensorProto.INT32, [64]),
            vi("r", TensorProto.INT32, [64]),
        ],
        [table],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def test_generated_indices_stay_within_the_axes_they_index_and_divisors_are_never_0_or_minus_1():
    """Drawn from their types' whole range, token ids into an embedding table made the reference fail
    ('index -9223372036854775808 is out of bounds', exit 2), and integer divisors of 0 gave false
    disagreements (what ORT and NumPy give is undefined)."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    model = _gather_div_model()
    specs = {s.name: s for s in graph_inputs(model)}
    assert specs["ids"].indexes == (5,) and specs["where"].indexes == (("data", 0), 7)
    assert specs["b16"].divisor and not specs["a"].divisor and not specs["a"].indexes
    for seed in range(5):
        feeds = generate(list(specs.values()), seed=seed, dims={"N": 3})
        assert feeds["ids"].min() >= -5 and feeds["ids"].max() < 5 and feeds["ids"].dtype == np.int64
        assert feeds["where"].min() >= -3 and feeds["where"].max() < 3  # the smaller of N = 3 and 7
        assert not np.isin(feeds["b16"], [0, -1]).any()
        assert feeds["a"][0] == np.iinfo(np.int32).min and feeds["a"][1] == np.iinfo(np.int32).max
    report = odq.validate(model, seed=3, dims={"N": 3})
    assert report.ok, report.to_text()


@pytest.mark.parametrize(
    "elem, to",
    [
        (TensorProto.INT64, TensorProto.INT32),
        (TensorProto.INT64, TensorProto.INT8),
        (TensorProto.FLOAT, TensorProto.INT32),
    ],
)
def test_generated_divisors_are_not_0_or_minus_1_after_a_cast(elem, to):
    """A divisor traced back through a Cast was kept from 0 and -1 before the cast only: int64's extremes
    cast to int32 are 0 and -1, and reals in [-1, 1] cast to int32 are 0, so validate reported ONNX
    Runtime's 'Integer division by zero' as a disagreement. An input that indexes a Gather and divides
    too was drawn from [-n, n) with 0 and -1 left in."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    np_to = helper.tensor_dtype_to_np_dtype(to)
    nodes = [
        helper.make_node("Cast", ["d"], ["dc"], to=to),
        helper.make_node("Div", ["a", "dc"], ["y"]),
        helper.make_node("Gather", ["data", "i"], ["g"]),
        helper.make_node("Div", ["a64", "i"], ["z"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [
            vi("a", to, [16]),
            vi("d", elem, [16]),
            vi("data", TensorProto.FLOAT, [5]),
            vi("i", TensorProto.INT64, [16]),
            vi("a64", TensorProto.INT64, [16]),
        ],
        [vi("y", to, [16]), vi("g", TensorProto.FLOAT, [16]), vi("z", TensorProto.INT64, [16])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    specs = graph_inputs(model)
    for seed in range(5):
        feeds = generate(specs, seed=seed)
        with np.errstate(invalid="ignore"):
            divisor = feeds["d"].astype(np_to)
        assert not np.isin(divisor, [0, -1]).any(), (seed, feeds["d"][:4], divisor[:4])
        assert not np.isin(feeds["i"], [0, -1]).any() and feeds["i"].min() >= -5 and feeds["i"].max() < 5
    report = odq.validate(model)
    assert report.ok, report.to_text()


@pytest.mark.parametrize("size", [2, 3, 4])
def test_lrn_sums_over_the_channels(size):
    """onnx's LRN kernel looped over the batch instead of the channels: with 5 channels and 2 images,
    channels 2-4 got no sum, and validate reported ONNX Runtime as disagreeing (the converted golden
    lrn_channels graph)."""
    from onnx_dequant.validation.runners import ReferenceRunner

    vi = helper.make_tensor_value_info
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.1, beta=0.75, bias=1.0)
    g = helper.make_graph(
        [node], "g", [vi("x", TensorProto.FLOAT, [2, 5, 3, 3])], [vi("y", TensorProto.FLOAT, [2, 5, 3, 3])]
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    x = np.random.default_rng(size).standard_normal((2, 5, 3, 3)).astype(np.float32)
    sq = x.astype(np.float64) ** 2
    lo, hi = (size - 1) // 2, size // 2
    sums = np.stack([sq[:, max(0, c - lo) : c + hi + 1].sum(axis=1) for c in range(5)], axis=1)
    alpha = float(np.float32(0.1))  # as the attribute holds it
    expected = (x / (1.0 + alpha / size * sums) ** 0.75).astype(np.float32)
    np.testing.assert_array_equal(ReferenceRunner(model).run({"x": x})["y"], expected)
    if size % 2:  # ONNX Runtime 1.32 takes odd sizes only
        report = odq.validate(model, {"x": x})
        assert report.ok, report.to_text()


@pytest.mark.parametrize(
    "graph",
    [
        "ops_detect/nms_padded.json",  # thresholds in 1-D tensors, as onnx's reference reads them
        "ops_normalize/lrn_channels.json",  # the oracle's LRN sums over the channels
        "ops_layout/gather_nd.json",  # generated indices within the axes they index
        "ops_index/embedding_lookup.json",
        "elementwise/divide_i8_floor.json",  # generated divisors never 0 or -1
        "ops_index/reverse_sequence_batch1.json",  # generated lengths within the time axis
        "ops_rnn/lstm_sequence_bidirectional.json",  # an RNN's lengths within the time axis, honoured
        "training/group_convolution_backprop.json",  # the oracle's grouped ConvTranspose
        "ops_data_more/scatter_nd_rows_repeated.json",  # scatter indices in range, none written twice
        "ops_layers/crop_and_resize_nearest_5x4.json",  # box indices joined by a Concat
        "ops_math/power_i32.json",  # an integer Pow's exponents never negative
        "ops_detect/gather_tree_i32.json",  # parents that become indices through a Scan's state
    ],
)
def test_converted_golden_graphs_validate(graph, tmp_path, capsys):
    """nGraph graphs our importer converts validate with generated inputs: each of these was exit 2 ('the
    reference cannot run the model') or a false DISAGREE before."""
    from pathlib import Path

    out = tmp_path / "m.onnx"
    assert main(["convert", str(Path(__file__).parent / "golden" / graph), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["validate", str(out), "-q"]) == 0, capsys.readouterr()
    assert "RuntimeWarning" not in capsys.readouterr().err


def test_generated_sequence_lengths_stay_within_the_time_axis():
    """ReverseSequence's lengths over int64's whole range made ONNX Runtime and the reference differ (a
    length past the time axis is undefined); so did an LSTM's (the converted golden lstm_sequence
    graphs). Both are drawn in [1, T], and the oracle's LSTM honours them."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((1, 8, 3)).astype(np.float32), "w")
    r = numpy_helper.from_array(rng.standard_normal((1, 8, 2)).astype(np.float32), "r")
    zero = numpy_helper.from_array(np.array(0, np.int32), "zero")
    nodes = [
        helper.make_node("ReverseSequence", ["seq", "lens"], ["rev"], time_axis=1, batch_axis=0),
        helper.make_node("Max", ["steps", "zero"], ["clamped"]),
        helper.make_node("LSTM", ["x", "w", "r", "", "clamped"], ["y"], hidden_size=2),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [
            vi("seq", TensorProto.FLOAT, [3, "T"]),
            vi("lens", TensorProto.INT64, [3]),
            vi("x", TensorProto.FLOAT, [5, 4, 3]),
            vi("steps", TensorProto.INT32, [4]),
        ],
        [vi("rev", TensorProto.FLOAT, [3, "T"]), vi("y", TensorProto.FLOAT, [5, 1, 4, 2])],
        [w, r, zero],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    specs = {s.name: s for s in graph_inputs(model)}
    assert specs["lens"].lengths == (("seq", 1),) and specs["steps"].lengths == (5,)
    seen, steps = set(), set()
    for seed in range(6):
        feeds = generate(list(specs.values()), seed=seed, dims={"T": 6})
        assert feeds["lens"].min() >= 1 and feeds["lens"].max() <= 6
        assert feeds["steps"].min() >= 1 and feeds["steps"].max() <= 5
        seen |= set(feeds["lens"].tolist())
        steps |= set(feeds["steps"].tolist())
    assert len(seen) > 2 and len(steps) > 2
    report = odq.validate(model, seed=1, dims={"T": 6})
    assert report.ok, report.to_text()


@pytest.mark.parametrize("bias", [False, True])
def test_grouped_conv_transpose_takes_each_groups_weight_and_bias(bias):
    """onnx's ConvTranspose with group > 1 slices the weight by output channels and adds the whole bias to
    each group: the converted golden group_convolution_backprop graph was exit 2 ('cannot reshape')."""
    import onnxruntime as ort

    from onnx_dequant.validation.runners import ReferenceRunner

    vi = helper.make_tensor_value_info
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 4, 4)).astype(np.float32)
    w = numpy_helper.from_array(rng.standard_normal((6, 2, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")
    node = helper.make_node(
        "ConvTranspose", ["x", "w", *(["b"] if bias else [])], ["y"], group=3, strides=[2, 1], pads=[1, 0, 0, 1]
    )
    g = helper.make_graph(
        [node], "g", [vi("x", TensorProto.FLOAT, [2, 6, 4, 4])], [vi("y", TensorProto.FLOAT, [2, 6, 8, 5])], [w, b]
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    got = ReferenceRunner(model).run({"x": x})["y"]
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert got.shape == want.shape == (2, 6, 8, 5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    report = odq.validate(model, {"x": x})
    assert report.ok, report.to_text()


def test_an_rnns_lengths_follow_a_computed_inputs_time_axis():
    """X computed by another node (a Relu here): its time axis comes from ONNX shape inference, a size or a
    dim's name; where shape inference finds none, the lengths are 1 (the only length sure to be within
    it), which the oracle's RNN honours as ONNX Runtime does."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((1, 5, 3)).astype(np.float32), "w")
    r = numpy_helper.from_array(rng.standard_normal((1, 5, 5)).astype(np.float32) * 0.3, "r")

    def model(time: int | str):
        nodes = [
            helper.make_node("Relu", ["x"], ["xr"]),
            helper.make_node("RNN", ["xr", "w", "r", "", "lens"], ["y", "yh"], hidden_size=5),
        ]
        g = helper.make_graph(
            nodes,
            "g",
            [vi("x", TensorProto.FLOAT, [time, 2, 3]), vi("lens", TensorProto.INT32, [2])],
            [vi("yh", TensorProto.FLOAT, [1, 2, 5])],
            [w, r],
        )
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])

    fixed = {s.name: s for s in graph_inputs(model(4))}
    assert fixed["lens"].lengths == (4,)
    assert {v for seed in range(6) for v in generate(list(fixed.values()), seed=seed)["lens"].tolist()} == {1, 2, 3, 4}
    assert odq.validate(model(4)).ok
    named = {s.name: s for s in graph_inputs(model("T"))}
    assert named["lens"].lengths == ("T",)
    feeds = generate(list(named.values()), dims={"T": 6})
    assert feeds["x"].shape == (6, 2, 3) and feeds["lens"].min() >= 1 and feeds["lens"].max() <= 6
    report = odq.validate(model("T"), dims={"T": 6})
    assert report.ok, report.to_text()
    unknown = model(4)  # X reshaped to a fed shape: no time axis shape inference can find
    unknown.graph.node[0].CopyFrom(helper.make_node("Reshape", ["x", "to"], ["xr"]))
    unknown.graph.input.append(vi("to", TensorProto.INT64, [3]))
    spec = {s.name: s for s in graph_inputs(unknown)}["lens"]
    assert spec.lengths == (1,) and (generate([spec])["lens"] == 1).all()
    feeds = {"x": np.ones((4, 2, 3), np.float32), "lens": np.array([1, 3], np.int32), "to": np.array([4, 2, 3])}
    report = odq.validate(unknown, feeds)
    assert report.ok, report.to_text()


def test_a_gather_inside_an_if_branch_keeps_the_main_graph_input_it_reads_in_range():
    """A body's node that reads a main-graph input by its name (token ids gathered in an If branch) keeps
    it within the axis, as a main-graph node does (the review's last finding); a body's own values are not
    followed (the Loop's iteration number here)."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    table = numpy_helper.from_array(np.arange(10, dtype=np.float32), "table")
    then_g = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["o"]), helper.make_node("Div", ["k", "d"], ["kd"])],
        "then",
        [],
        [vi("o", TensorProto.FLOAT, [4]), vi("kd", TensorProto.INT32, [4])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["zeros"], ["o2"]), helper.make_node("Identity", ["k"], ["k2"])],
        "else",
        [],
        [vi("o2", TensorProto.FLOAT, [4]), vi("k2", TensorProto.INT32, [4])],
    )
    g = helper.make_graph(
        [helper.make_node("If", ["flag"], ["y", "q"], then_branch=then_g, else_branch=else_g)],
        "g",
        [
            vi("flag", TensorProto.BOOL, []),
            vi("ids", TensorProto.INT64, [4]),
            vi("zeros", TensorProto.FLOAT, [4]),
            vi("k", TensorProto.INT32, [4]),
            vi("d", TensorProto.INT32, [4]),
        ],
        [vi("y", TensorProto.FLOAT, [4]), vi("q", TensorProto.INT32, [4])],
        [table],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    specs = {s.name: s for s in graph_inputs(model)}
    assert specs["ids"].indexes == (10,) and specs["d"].divisor and not specs["k"].divisor
    for seed in range(4):
        feeds = generate(list(specs.values()), seed=seed)
        assert feeds["ids"].min() >= -10 and feeds["ids"].max() < 10
        assert not np.isin(feeds["d"], [0, -1]).any()
        feeds["flag"] = np.array(True)
        report = odq.validate(model, feeds)
        assert report.ok, report.to_text()


def _scatter_model() -> onnx.ModelProto:
    """A KV-cache style ScatterND (rows written at fed positions), a ScatterElements along axis 1, a
    ScatterND that adds (repeated indices are defined there), a GatherND whose indices a Concat joins
    from a cast input and a constant, and nGraph's ScatterND (zeros written, then the updates added)."""
    vi = helper.make_tensor_value_info
    col = numpy_helper.from_array(np.zeros((4, 1), np.int64), "col")
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    rows3 = numpy_helper.from_array(np.array([3, 3], np.int64), "rows3")
    nodes = [
        helper.make_node("ScatterND", ["cache", "rows", "new"], ["cache2"]),
        helper.make_node("ScatterElements", ["grid", "cols", "vals"], ["grid2"], axis=1),
        helper.make_node("Cast", ["at32"], ["at32_64"], to=TensorProto.INT64),
        helper.make_node("ScatterND", ["acc", "at32_64", "adds"], ["acc2"], reduction="add"),
        helper.make_node("Cast", ["box16"], ["box"], to=TensorProto.INT64),
        helper.make_node("Concat", ["box", "col"], ["where"], axis=1),
        helper.make_node("GatherND", ["image", "where"], ["picked"]),
        # nGraph's ScatterND: zeros where it adds, then the adds (repeated rows add their updates)
        helper.make_node("Expand", ["zero", "rows3"], ["zeros"]),
        helper.make_node("ScatterND", ["base", "rep", "zeros"], ["base2"]),
        helper.make_node("ScatterND", ["base2", "rep", "upd"], ["base3"], reduction="add"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [
            vi("cache", TensorProto.FLOAT, [6, 8]),
            vi("rows", TensorProto.INT64, [5, 1]),
            vi("new", TensorProto.FLOAT, [5, 8]),
            vi("grid", TensorProto.FLOAT, [3, 7]),
            vi("cols", TensorProto.INT32, [3, 7]),
            vi("vals", TensorProto.FLOAT, [3, 7]),
            vi("acc", TensorProto.FLOAT, [4, 3]),
            vi("at32", TensorProto.INT32, [9, 1]),
            vi("adds", TensorProto.FLOAT, [9, 3]),
            vi("image", TensorProto.FLOAT, [2, 5]),
            vi("box16", TensorProto.INT16, [4, 1]),
            vi("base", TensorProto.FLOAT, [4, 3]),
            vi("rep", TensorProto.INT64, [3, 1]),
            vi("upd", TensorProto.FLOAT, [3, 3]),
        ],
        [
            vi("cache2", TensorProto.FLOAT, [6, 8]),
            vi("grid2", TensorProto.FLOAT, [3, 7]),
            vi("acc2", TensorProto.FLOAT, [4, 3]),
            vi("picked", TensorProto.FLOAT, [4]),
            vi("base3", TensorProto.FLOAT, [4, 3]),
        ],
        [col, zero, rows3],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_generated_scatter_indices_stay_in_range_and_write_no_element_twice():
    """Scatter indices spanned their type's range (the reference refused them, exit 2: the converted
    golden scatter graphs); kept in range only, a ScatterND or ScatterElements with no reduction that
    writes an element twice is undefined (ONNX Runtime and the reference may keep different writes).
    Indices a Concat joins were not traced (the converted crop_and_resize graphs)."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    model = _scatter_model()
    specs = {s.name: s for s in graph_inputs(model)}
    assert specs["rows"].distinct == ("nd",) and specs["cols"].distinct == (1,)
    assert specs["at32"].indexes == (4,) and not specs["at32"].distinct  # reduction="add": repeats allowed
    assert specs["box16"].indexes == (2, 5)
    assert specs["rep"].indexes == (4, 4) and not specs["rep"].distinct  # one value written: defined
    repeats = 0
    for seed in range(6):
        feeds = generate(list(specs.values()), seed=seed)
        rows = feeds["rows"] % 6
        assert feeds["rows"].min() >= -6 and feeds["rows"].max() < 6 and len(set(rows[:, 0])) == 5
        cols = feeds["cols"] % 7
        assert feeds["cols"].min() >= -7 and all(sorted(r) == list(range(7)) for r in cols.tolist())
        assert feeds["at32"].min() >= -4 and feeds["at32"].max() < 4 and feeds["at32"].dtype == np.int32
        assert feeds["box16"].min() >= -2 and feeds["box16"].max() < 2
        assert feeds["rep"].min() >= -4 and feeds["rep"].max() < 4
        repeats += len(set((feeds["rep"] % 4).ravel().tolist())) < 3
        report = odq.validate(model, feeds)
        assert report.ok, report.to_text()
    assert repeats  # nGraph's ScatterND is tested with the repeats it is for
    assert any((generate(list(specs.values()), seed=s)["rows"] < 0).any() for s in range(6))  # both ends


def test_generated_scatter_nd_tuples_differ_where_the_axes_allow():
    """ScatterND's tuples (the indices' last axis) differ as tuples: with 8 writes into a 3 x 3 grid of
    rows of 4, each component repeats, the pair does not; with 10, no draw can differ, and the indices
    are only kept in range."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    for count in (8, 10):
        node = helper.make_node("ScatterND", ["d", "i", "u"], ["y"])
        g = helper.make_graph(
            [node],
            "g",
            [vi("d", TensorProto.FLOAT, [3, 3, 4]), vi("i", TensorProto.INT64, [count, 2]), vi("u", 1, [count, 4])],
            [vi("y", TensorProto.FLOAT, [3, 3, 4])],
        )
        specs = graph_inputs(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
        for seed in range(4):
            i = generate(specs, seed=seed)["i"]
            assert i.min() >= -3 and i.max() < 3
            pairs = {tuple(p) for p in (i % 3).tolist()}
            assert len(pairs) == count if count <= 9 else len(pairs) <= 9


@pytest.mark.parametrize("elem", [TensorProto.INT32, TensorProto.INT64])
def test_generated_integer_pow_operands_are_defined(elem):
    """An integer Pow's exponents were drawn over their type's range: NumPy refuses negative ones ('Integers
    to negative integer powers are not allowed', exit 2: the converted golden power_i32 graph), and large
    bases overflow, which is undefined (ONNX Runtime computes in float64). Exponents are in POWERS and
    bases' cubes fit; a float base's integer exponent keeps its whole range."""
    from onnx_dequant.validation.inputs import POWERS, InputSpec, generate, graph_inputs

    vi = helper.make_tensor_value_info

    def pow_model(*float_pow: onnx.NodeProto) -> onnx.ModelProto:
        extra = [vi("f", TensorProto.FLOAT, [64]), vi("e2", TensorProto.INT32, [64])] if float_pow else []
        g = helper.make_graph(
            [helper.make_node("Pow", ["b", "e"], ["y"]), *float_pow],
            "g",
            [vi("b", elem, [64]), vi("e", elem, [64]), *extra],
            [vi("y", elem, [64]), *([vi("z", TensorProto.FLOAT, [64])] if float_pow else [])],
        )
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])

    specs = {s.name: s for s in graph_inputs(pow_model(helper.make_node("Pow", ["f", "e2"], ["z"])))}
    assert specs["b"].power == ("base",) and specs["e"].power == ("exponent",) and not specs["e2"].power
    for seed in range(4):
        feeds = generate(list(specs.values()), seed=seed)
        assert POWERS[0] <= feeds["e"].min() and feeds["e"].max() <= POWERS[1]
        assert feeds["e2"][0] == np.iinfo(np.int32).min  # not an integer Pow's: the whole range
    for t in (elem, TensorProto.INT8, TensorProto.UINT8, TensorProto.UINT16):  # Pow takes int32, int64 only
        info = np.iinfo(helper.tensor_dtype_to_np_dtype(t))
        b = generate([InputSpec("b", t, (4096,), power=("base",))])["b"]
        cubes = np.abs(b.astype(np.float64)) ** 3
        assert cubes.max() <= min(info.max, 2**53) and (b.min() < 0) == (info.min < 0)
        assert np.abs(b.astype(np.float64)).max() >= 0.95 * min(info.max, 2**53) ** (1 / 3) - 1  # not needlessly small
    report = odq.validate(pow_model(), seed=1)
    assert report.ok, report.to_text()


def _recurrent_model(op: str, direction: str, layout: int, opset: int, states: bool) -> onnx.ModelProto:
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    d = 2 if direction == "bidirectional" else 1
    vi = helper.make_tensor_value_info
    xs, ss = ([4, 5, 3], [4, d, 2]) if layout else ([5, 4, 3], [d, 4, 2])
    names = ["h0", "c0"][: 2 if op == "LSTM" else 1]
    attrs = {"layout": layout} if opset >= 14 else {}
    node = helper.make_node(
        op,
        ["x", "w", "r", "b", "lens", *(names if states else [""] * len(names))],
        ["y", "yh", *(["yc"] if op == "LSTM" else [])],
        hidden_size=2,
        direction=direction,
        **attrs,
    )
    ins = [
        vi("x", TensorProto.FLOAT, xs),
        vi("w", TensorProto.FLOAT, [d, gates * 2, 3]),
        vi("r", TensorProto.FLOAT, [d, gates * 2, 2]),
        vi("b", TensorProto.FLOAT, [d, gates * 4]),
        vi("lens", TensorProto.INT32, [4]),
    ] + ([vi(n, TensorProto.FLOAT, ss) for n in names] if states else [])
    y = [4, 5, d, 2] if layout else [5, d, 4, 2]
    outs = [vi("y", TensorProto.FLOAT, y)] + [vi(o, TensorProto.FLOAT, ss) for o in node.output[1:]]
    return helper.make_model(helper.make_graph([node], "g", ins, outs), opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("states", [False, True])
def test_the_oracles_recurrent_ops_honour_sequence_lens(op, direction, states):
    """onnx's RNN, GRU and LSTM kernels ignore ``sequence_lens``: lengths shorter than the time axis, given
    or generated, were reported as ONNX Runtime disagreeing. The oracle runs each batch entry for its own
    length (the reverse direction from its last step), zeros past it, its last states at it: ONNX
    Runtime's outputs within float rounding, and with ``layout=1`` (which ONNX Runtime 1.32 does not run)
    the same bits as the transposed ``layout=0`` case."""
    from onnx_dequant.validation.standard_ops import OPS

    rng = np.random.default_rng(7)
    model = _recurrent_model(op, direction, 0, 14, states)
    feeds = {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input
        if i.name != "lens"
    }
    feeds["lens"] = np.array([1, 5, 3, 2], np.int32)
    got = ReferenceEvaluator(model, new_ops=OPS).run(None, feeds)
    assert np.all(got[0][3:, :, 3] == 0) and np.all(got[0][1:, :, 0] == 0)  # past each entry's length
    report = odq.validate(model, feeds)
    assert report.ok, report.to_text()
    full = dict(feeds, lens=np.full(4, 5, np.int32))  # the whole axis: onnx's own kernel, unchanged
    np.testing.assert_array_equal(
        ReferenceEvaluator(model, new_ops=OPS).run(None, full)[1], ReferenceEvaluator(model).run(None, full)[1]
    )
    batchwise = dict(feeds, x=feeds["x"].transpose(1, 0, 2).copy())
    for name in ("h0", "c0"):
        if name in feeds:
            batchwise[name] = feeds[name].transpose(1, 0, 2).copy()
    by_batch = ReferenceEvaluator(_recurrent_model(op, direction, 1, 14, states), new_ops=OPS).run(None, batchwise)
    np.testing.assert_array_equal(by_batch[0], got[0].transpose(2, 0, 1, 3))
    for a, b in zip(by_batch[1:], got[1:]):
        np.testing.assert_array_equal(a, b.transpose(1, 0, 2))


def test_a_sequence_length_of_0_or_past_the_time_axis_is_refused_naming_the_node():
    """A length of 0 is undefined (ONNX Runtime 1.32 gives zero last states, not the initial ones), and one
    past the time axis out of range: the oracle refuses both, and validate exits 2 naming the node."""
    from onnx_dequant.validation.standard_ops import OPS

    model = _recurrent_model("GRU", "forward", 0, 7, False)
    model.graph.node[0].name = "encoder_gru"
    feeds = {
        i.name: np.ones([d.dim_value for d in i.type.tensor_type.shape.dim], np.float32)
        for i in model.graph.input
        if i.name != "lens"
    }
    for lens in ([0, 5, 3, 2], [1, 6, 3, 2]):
        with pytest.raises(odq.DequantizeError, match="encoder_gru.*1..5"):
            ReferenceEvaluator(model, new_ops=OPS).run(None, dict(feeds, lens=np.array(lens, np.int32)))


def test_generated_scatter_indices_counted_from_the_end_stay_apart_in_a_longer_axis():
    """n is the smallest size the indices address: a ScatterND's tuples span a 3 x 5 data's axes (n = 3),
    a ScatterElements' indices also index a Gather's axis of 4 (n = 4) in an axis of 6. A sign drawn per
    index wrote elements twice there (x and y - n meet where x - y == S - n)."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [
            helper.make_node("ScatterND", ["d", "i", "u"], ["y"]),
            helper.make_node("ScatterElements", ["e", "j", "v"], ["z"], axis=1),
            helper.make_node("Gather", ["w", "j"], ["x"]),
        ],
        "g",
        [
            vi("d", TensorProto.FLOAT, [3, 5]),
            vi("i", TensorProto.INT64, [6, 2]),
            vi("u", TensorProto.FLOAT, [6]),
            vi("e", TensorProto.FLOAT, [3, 6]),
            vi("j", TensorProto.INT64, [3, 4]),
            vi("v", TensorProto.FLOAT, [3, 4]),
            vi("w", TensorProto.FLOAT, [4]),
        ],
        [vi("y", TensorProto.FLOAT, [3, 5]), vi("z", TensorProto.FLOAT, [3, 6]), vi("x", TensorProto.FLOAT, [3, 4])],
    )
    specs = graph_inputs(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
    negative = 0
    for seed in range(30):
        feeds = generate(specs, seed=seed)
        i, j = feeds["i"], feeds["j"]
        assert i.min() >= -3 and i.max() < 3 and j.min() >= -4 and j.max() < 4
        assert len({tuple(p) for p in (i % [3, 5]).tolist()}) == 6
        assert all(len(set(line)) == 4 for line in (j % 6).tolist())
        negative += int((i < 0).any() and (j < 0).any())
    assert negative >= 15  # still from either end


def test_a_scatter_index_or_an_integer_pow_operand_that_divides_is_never_0_or_minus_1():
    """Scatter indices written once, and an integer Pow's operands, were returned before the divisor rule
    applied: a Div by them divided by 0 (ONNX Runtime: 'Integer division by zero', a false DISAGREE)."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [
            helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0),
            helper.make_node("Div", ["a", "i"], ["q"]),
            helper.make_node("Pow", ["b", "e"], ["p"]),
            helper.make_node("Div", ["c", "b"], ["r"]),
            helper.make_node("Mod", ["c", "e"], ["s"]),
        ],
        "g",
        [
            vi("d", TensorProto.FLOAT, [5, 3]),
            vi("i", TensorProto.INT64, [5, 3]),
            vi("u", TensorProto.FLOAT, [5, 3]),
            vi("a", TensorProto.INT64, [5, 3]),
            vi("b", TensorProto.INT32, [64]),
            vi("e", TensorProto.INT32, [64]),
            vi("c", TensorProto.INT32, [64]),
        ],
        [
            vi("y", TensorProto.FLOAT, [5, 3]),
            vi("q", TensorProto.INT64, [5, 3]),
            vi("p", TensorProto.INT32, [64]),
            vi("r", TensorProto.INT32, [64]),
            vi("s", TensorProto.INT32, [64]),
        ],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    specs = graph_inputs(model)
    for seed in range(4):
        feeds = generate(specs, seed=seed)
        for name in ("i", "b", "e"):
            assert not np.isin(feeds[name], [0, -1]).any(), name
        assert feeds["i"].min() >= -5 and feeds["i"].max() < 5 and 1 <= feeds["e"].min() and feeds["e"].max() <= 3
    report = odq.validate(model, seed=0)
    assert report.ok, report.to_text()


def test_generated_nd_indices_are_bounded_by_the_axes_their_tuples_span():
    """A ScatterND's or GatherND's tuples span as many axes as the indices' last dim: rows (tuples of 1)
    of a 6 x 2 data were bounded by min(6, 2) = 2, so 3 rows could not differ and only 4 of 6 were
    reached; a computed data's rank was not looked up, so only its axis 0 bounded pairs (the reference
    refused index 5 in an axis of 2, exit 2)."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [
            helper.make_node("ScatterND", ["d", "rows", "u"], ["y"]),
            helper.make_node("Relu", ["x"], ["c"]),
            helper.make_node("ScatterND", ["c", "pairs", "v"], ["z"]),
            helper.make_node("GatherND", ["c", "at"], ["w"]),
        ],
        "g",
        [
            vi("d", TensorProto.FLOAT, [6, 2]),
            vi("rows", TensorProto.INT64, [3, 1]),
            vi("u", TensorProto.FLOAT, [3, 2]),
            vi("x", TensorProto.FLOAT, [6, 2]),
            vi("pairs", TensorProto.INT64, [3, 2]),
            vi("v", TensorProto.FLOAT, [3]),
            vi("at", TensorProto.INT64, [4, 2]),
        ],
        [vi("y", TensorProto.FLOAT, [6, 2]), vi("z", TensorProto.FLOAT, [6, 2]), vi("w", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    specs = {s.name: s for s in graph_inputs(model)}
    assert specs["rows"].indexes == (6,) and specs["pairs"].indexes == (6, 2) and specs["at"].indexes == (6, 2)
    for seed in range(4):
        feeds = generate(list(specs.values()), seed=seed)
        assert len(set((feeds["rows"] % 6).ravel().tolist())) == 3
        assert len({tuple(p) for p in (feeds["pairs"] % [6, 2]).tolist()}) == 3
        assert feeds["pairs"].min() >= -2 and feeds["pairs"].max() < 2
        report = odq.validate(model, feeds)
        assert report.ok, report.to_text()


def test_scatter_indices_moved_or_joined_on_the_way_are_only_kept_in_range():
    """The no-repeat rule was kept in the input's own layout, not in the indices the Scatter reads: a
    transposed input's lines, an unsqueezed vector's rows and two Concat-joined inputs' tuples repeated.
    Such indices are now only kept in range (a Scatter that reads an input as it is or cast keeps the rule)."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    ax = numpy_helper.from_array(np.array([1], np.int64), "ax")
    g = helper.make_graph(
        [
            helper.make_node("Transpose", ["t"], ["tt"], perm=[1, 0]),
            helper.make_node("ScatterElements", ["d", "tt", "u"], ["y"], axis=0),
            helper.make_node("Unsqueeze", ["r", "ax"], ["r2"]),
            helper.make_node("ScatterND", ["e", "r2", "v"], ["z"]),
            helper.make_node("Concat", ["i", "j"], ["ij"], axis=0),
            helper.make_node("ScatterND", ["e", "ij", "w"], ["x"]),
            helper.make_node("Cast", ["c"], ["c64"], to=TensorProto.INT64),
            helper.make_node("ScatterND", ["e", "c64", "v"], ["q"]),
        ],
        "g",
        [
            vi("d", TensorProto.FLOAT, [4, 4]),
            vi("t", TensorProto.INT64, [4, 3]),
            vi("u", TensorProto.FLOAT, [3, 4]),
            vi("e", TensorProto.FLOAT, [8, 8]),
            vi("r", TensorProto.INT64, [5]),
            vi("v", TensorProto.FLOAT, [5, 8]),
            vi("i", TensorProto.INT64, [3, 1]),
            vi("j", TensorProto.INT64, [3, 1]),
            vi("w", TensorProto.FLOAT, [6, 8]),
            vi("c", TensorProto.INT32, [5, 1]),
        ],
        [vi(o, TensorProto.FLOAT, None) for o in ("y", "z", "x", "q")],
        [ax],
    )
    specs = {s.name: s for s in graph_inputs(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))}
    assert [specs[n].distinct for n in ("t", "r", "i", "j")] == [()] * 4
    assert specs["c"].distinct == ("nd",)  # cast in place: the rule holds
    assert specs["t"].indexes == (4,) and specs["r"].indexes == (8,) and specs["i"].indexes == (8,)
    for seed in range(4):
        feeds = generate(list(specs.values()), seed=seed)
        assert len(set((feeds["c"] % 8).ravel().tolist())) == 5 and feeds["r"].min() >= -8 and feeds["r"].max() < 8


def test_a_divisor_concat_joins_cast_and_not_is_checked_as_each_path_reads_it():
    """A Concat that joins a value cast to int8 and the value itself: the value was followed once, by the
    path without the cast, so an int64 divisor of 256 reached the Div as 0 ('Integer division by zero')."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [
            helper.make_node("Identity", ["x"], ["t"]),
            helper.make_node("Cast", ["t"], ["t8"], to=TensorProto.INT8),
            helper.make_node("Cast", ["t8"], ["t64"], to=TensorProto.INT64),
            helper.make_node("Concat", ["t64", "t"], ["d"], axis=0),
            helper.make_node("Div", ["a", "d"], ["q"]),
        ],
        "g",
        [vi("x", TensorProto.INT64, [256]), vi("a", TensorProto.INT64, [512])],
        [vi("q", TensorProto.INT64, [512])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    specs = {s.name: s for s in graph_inputs(model)}
    assert set(specs["x"].casts) == {(), (TensorProto.INT8, TensorProto.INT64)}
    for seed in range(4):
        x = generate(list(specs.values()), seed=seed)["x"]
        assert not np.isin(x, [0, -1]).any() and not np.isin(x.astype(np.int8), [0, -1]).any()
    report = odq.validate(model, seed=0)
    assert report.ok, report.to_text()


@pytest.mark.parametrize(("shape", "n"), [((3, 600_000), 3), ((40, 120_000), 50), ((600, 8000), 700)])
def test_generated_scatter_elements_lines_differ_past_the_argsort_bound(shape, n):
    """Past 2**22 lines x n, lines are drawn at random and redrawn where two meet; where a line is unlikely
    to draw none (t * t > 2n) they were redrawn 8 times for nothing and then one by one in a Python loop
    (3 x 2M into an axis of 3: 2.5 s; 4096 x 4096 into 5000: 5 s). They are now ordered at random a
    chunk of lines at a time."""
    from onnx_dequant.validation.inputs import InputSpec, generate

    i = generate([InputSpec("i", TensorProto.INT64, shape, indexes=(n,), distinct=(0,))], seed=3)["i"]
    assert i.min() >= -n and i.max() < n and (i < 0).any()
    ordered = np.sort(i % n, axis=0)
    assert not (ordered[1:] == ordered[:-1]).any()


@pytest.mark.parametrize(
    "op, attrs, name",
    [
        ("LSTM", {"clip": 2.0}, "clip"),
        ("LSTM", {"input_forget": 1}, "input_forget"),
        ("GRU", {"activations": ["HardSigmoid", "Tanh"]}, "activations"),
        ("RNN", {"activations": ["Relu"]}, "activations"),
    ],
)
def test_recurrent_attributes_the_reference_ignores_are_refused_naming_the_node(op, attrs, name, tmp_path, capsys):
    """onnx's recurrent kernels compute the default activations, no clip and no coupled input and forget
    gates whatever the node says: such a node was reported as ONNX Runtime disagreeing (an LSTM with
    clip=2: 0.16 apart). The oracle refuses it (exit 2, the node and the attribute named); the defaults
    spelled out are taken."""
    model = _recurrent_model(op, "forward", 0, 14, False)
    node = model.graph.node[0]
    node.name = "decoder"
    default = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[op]
    node.attribute.extend([helper.make_attribute("activations", default)])
    assert odq.validate(model).ok
    del node.attribute[-1]
    node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "decoder" in err and f"'{name}'" in err and "Traceback" not in err


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_an_rnns_affine_activation_onnx_computes_is_checked_and_one_it_does_not_refused(direction):
    """onnx's RNN kernel computes Tanh or Affine (its first activation, alpha and beta, in every direction):
    an Affine RNN validated, and was then refused as if its activations were ignored (exit 2). It is taken
    where every direction's alpha and beta agree; where they differ, or beta is missing (onnx's kernel
    fails), or the name is one it cannot load (``TANH``: an AttributeError naming no node), refused."""
    from onnx_dequant.validation.standard_ops import OPS

    d = 2 if direction == "bidirectional" else 1
    model = _recurrent_model("RNN", direction, 0, 14, True)
    node = model.graph.node[0]
    node.name = "affine_rnn"
    node.attribute.extend(
        [
            helper.make_attribute("activations", ["Affine"] * d),
            helper.make_attribute("activation_alpha", [0.5] * d),
            helper.make_attribute("activation_beta", [0.25] * d),
        ]
    )
    report = odq.validate(model, seed=0)
    assert report.ok, report.to_text()
    feeds = {
        i.name: np.ones([dim.dim_value for dim in i.type.tensor_type.shape.dim], np.float32)
        for i in model.graph.input
        if i.name != "lens"
    }
    feeds["lens"] = np.array([1, 5, 3, 2], np.int32)
    bad = []
    if d == 2:
        bad.append(("activation_alpha", [0.5, 0.75]))
    bad += [("activation_beta", None), ("activations", ["TANH"] * d)]
    for name, value in bad:
        broken = onnx.ModelProto()
        broken.CopyFrom(model)
        attrs = broken.graph.node[0].attribute
        kept = [a for a in attrs if a.name != name]
        del attrs[:]
        attrs.extend(kept + ([helper.make_attribute(name, value)] if value is not None else []))
        with pytest.raises(odq.DequantizeError, match=f"affine_rnn.*'{name}'"):
            ReferenceEvaluator(broken, new_ops=OPS).run(None, feeds)


def test_a_sequence_length_that_indexes_too_satisfies_both():
    """Lengths that a Gather also reads as indices were drawn as indices, in [-n, n): 0 and negative
    lengths, which ReverseSequence and the oracle's RNNs refuse (found by a review). They are drawn in
    [1, min(T, n - 1)]."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    table = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(4, 2), "table")
    g = helper.make_graph(
        [
            helper.make_node("ReverseSequence", ["seq", "lens"], ["rev"], time_axis=1, batch_axis=0),
            helper.make_node("Gather", ["table", "lens"], ["rows"]),
        ],
        "g",
        [vi("seq", TensorProto.FLOAT, [5, 6]), vi("lens", TensorProto.INT64, [5])],
        [vi("rev", TensorProto.FLOAT, [5, 6]), vi("rows", TensorProto.FLOAT, [5, 2])],
        [table],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    specs = graph_inputs(model)
    seen = set()
    for seed in range(6):
        lens = generate(specs, seed=seed)["lens"]
        assert lens.min() >= 1 and lens.max() <= 3
        seen |= set(lens.tolist())
        report = odq.validate(model, seed=seed)
        assert report.ok, report.to_text()
    assert seen == {1, 2, 3}


def test_values_are_traced_through_control_flow_and_selections():
    """An input's values that reach an index through a Scan body (the parents of GatherTree: a scan input,
    gathered into the state that indexes the next step) were drawn over int32's range, and the converted
    golden gather_tree_i32 graph disagreed. Values are now followed into a Scan's or Loop's body (what
    its node passes in, what the body carries), out of a body (a control-flow node's outputs), and
    through Where and a Gather's data; a body's value's shape is what the body declares."""
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("GatherElements", ["par", "p"], ["nxt"], axis=1),
            helper.make_node("Where", ["keep", "p", "nxt"], ["np_"]),
            helper.make_node("Identity", ["np_"], ["out"]),
        ],
        "body",
        [vi("p", TensorProto.INT64, [2, 4]), vi("par", TensorProto.INT64, [2, 4])],
        [vi("np_", TensorProto.INT64, [2, 4]), vi("out", TensorProto.INT64, [2, 4])],
    )
    loop_body = helper.make_graph(
        [helper.make_node("Div", ["acc", "d"], ["acc2"]), helper.make_node("Identity", ["c"], ["c2"])],
        "loop",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("acc", TensorProto.INT32, [3])],
        [vi("c2", TensorProto.BOOL, []), vi("acc2", TensorProto.INT32, [3])],
    )
    table = numpy_helper.from_array(np.arange(6, dtype=np.float32), "table")
    three = numpy_helper.from_array(np.array(3, np.int64), "three")
    g = helper.make_graph(
        [
            helper.make_node("Scan", ["start", "parents"], ["last", "trace"], body=body, num_scan_inputs=1),
            helper.make_node("Loop", ["three", "", "acc0"], ["acc_n"], body=loop_body),
            helper.make_node("Where", ["pick", "ids_a", "ids_b"], ["ids"]),
            helper.make_node("Gather", ["table", "ids"], ["emb"]),
        ],
        "g",
        [
            vi("start", TensorProto.INT64, [2, 4]),
            vi("parents", TensorProto.INT64, [5, 2, 4]),
            vi("keep", TensorProto.BOOL, [2, 4]),
            vi("acc0", TensorProto.INT32, [3]),
            vi("d", TensorProto.INT32, [3]),
            vi("pick", TensorProto.BOOL, [4]),
            vi("ids_a", TensorProto.INT64, [4]),
            vi("ids_b", TensorProto.INT64, [4]),
        ],
        [vi("trace", TensorProto.INT64, [5, 2, 4]), vi("acc_n", TensorProto.INT32, [3]), vi("emb", 1, [4])],
        [table, three],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    specs = {s.name: s for s in graph_inputs(model)}
    assert specs["parents"].indexes == (4,) and specs["start"].indexes == (4,)  # the state's initial value too
    assert specs["d"].divisor and not specs["acc0"].divisor  # a main-graph value read in the body; acc is divided
    assert specs["ids_a"].indexes == (6,) and specs["ids_b"].indexes == (6,) and not specs["pick"].indexes
    for seed in range(4):
        feeds = generate(list(specs.values()), seed=seed)
        assert feeds["parents"].min() >= -4 and feeds["parents"].max() < 4
        assert feeds["ids_a"].min() >= -6 and feeds["ids_b"].max() < 6 and not np.isin(feeds["d"], [0, -1]).any()
        report = odq.validate(model, feeds)
        assert report.ok, report.to_text()


def test_casts_joined_round_a_loop_are_followed_in_bounded_time():
    """A Loop body that joins its carried value cast to several types (Casts to each, back to int64, joined
    by Wheres) gave ``choices ** rounds`` cast sequences to follow (``MAX_CASTS`` allows 8 rounds of 2):
    5 choices, 390,625 sequences, 37 s to build the specs and 488,280 ``casts`` that generation checks one
    by one. A value is now followed with at most ``MAX_VARIANTS`` sequences, fewest casts first."""
    from onnx_dequant.validation import tracing
    from onnx_dequant.validation.inputs import generate, graph_inputs

    vi = helper.make_tensor_value_info
    types = (TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT8, TensorProto.UINT16)
    nodes = [helper.make_node("Identity", ["c"], ["c2"])]
    for k, to in enumerate(types):
        nodes += [
            helper.make_node("Cast", ["x"], [f"t{k}"], to=to),
            helper.make_node("Cast", [f"t{k}"], [f"b{k}"], to=TensorProto.INT64),
        ]
    joined = "b0"
    for k in range(1, len(types)):
        nodes.append(helper.make_node("Where", ["sel", joined, f"b{k}"], [f"w{k}"]))
        joined = f"w{k}"
    nodes += [helper.make_node("Identity", [joined], ["xn"]), helper.make_node("Div", ["num", "xn"], ["q"])]
    body = helper.make_graph(
        nodes,
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("x", TensorProto.INT64, [2])],
        [vi("c2", TensorProto.BOOL, []), vi("xn", TensorProto.INT64, [2]), vi("q", TensorProto.INT64, [2])],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["three", "", "x0"], ["xf", "qs"], body=body)],
        "g",
        [vi("x0", TensorProto.INT64, [2]), vi("num", TensorProto.INT64, [2]), vi("sel", TensorProto.BOOL, [2])],
        [vi("xf", TensorProto.INT64, [2]), vi("qs", TensorProto.INT64, [3, 2])],
        [numpy_helper.from_array(np.array(3, np.int64), "three")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    specs = {s.name: s for s in graph_inputs(model)}
    x0 = specs["x0"]
    assert x0.divisor and len(x0.casts) <= tracing.MAX_VARIANTS
    assert {(to, TensorProto.INT64) for to in types} <= set(x0.casts)  # one round through each, kept
    feeds = generate(list(specs.values()), seed=0)
    assert not np.isin(feeds["x0"].astype(np.int8), [0, -1]).any()
    report = odq.validate(model, feeds)
    assert report.ok, report.to_text()


def test_a_long_chain_of_selections_is_traced_once(monkeypatch):
    """Each Div of a chain of Wheres (a Gather's rows selected into the running value, which a Div reads at
    each step) traced the whole chain back: quadratic, 37 s at 10,000 nodes and 168 s at 20,000 (0.35 s
    before values were followed through Where). A trace reuses the paths of a value an earlier trace
    started from, and the main graph's values are not looked for among its inputs at each step: the steps
    taken grow with the chain, not with its square."""
    from onnx_dequant.validation import tracing
    from onnx_dequant.validation.inputs import graph_inputs

    steps = []
    sources = tracing._Flow._sources
    monkeypatch.setattr(tracing._Flow, "_sources", lambda self, *a: steps.append(1) or sources(self, *a))

    vi = helper.make_tensor_value_info
    nodes, inputs, prev = [], [vi("sel", TensorProto.BOOL, [4]), vi("num", TensorProto.INT32, [4])], "c_init"
    inputs.append(vi(prev, TensorProto.INT32, [4]))
    for k in range(1500):
        inputs.append(vi(f"ids{k}", TensorProto.INT64, [4]))
        nodes += [
            helper.make_node("Gather", ["table", f"ids{k}"], [f"g{k}"]),
            helper.make_node("Reshape", [f"g{k}", "shape"], [f"r{k}"]),
            helper.make_node("Where", ["sel", f"r{k}", prev], [f"w{k}"]),
            helper.make_node("Concat", [f"w{k}"], [f"c{k}"], axis=0),
            helper.make_node("Div", ["num", f"c{k}"], [f"d{k}"]),
        ]
        prev = f"c{k}"
    table = numpy_helper.from_array(np.arange(1, 11, dtype=np.int32), "table")
    shape = numpy_helper.from_array(np.array([4], np.int64), "shape")
    g = helper.make_graph(nodes, "g", inputs, [vi(f"d{k}", TensorProto.INT32, [4])], [table, shape])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    specs = {s.name: s for s in graph_inputs(model)}
    assert len(steps) < 10 * len(nodes)  # each value's sources looked up about once (quadratic: 4.5M)
    assert specs["c_init"].divisor and specs["c_init"].casts == ((),) and not specs["num"].divisor
    assert all(specs[f"ids{k}"].indexes == (10,) for k in range(1500))


def test_sparse_initializers_and_a_custom_ops_bodies_are_read():
    """A sparse initializer made the input specs fail (``SparseTensorProto`` has no ``name``: its values
    do), and the bodies a custom op holds in a GRAPHS attribute were no longer read as scopes: a Div there
    by a main-graph input did not keep it from 0 (both found by a review)."""
    from onnx_dequant.validation.inputs import graph_inputs

    vi = helper.make_tensor_value_info
    sub = helper.make_graph([helper.make_node("Div", ["n", "d"], ["q"])], "sub", [], [vi("q", TensorProto.INT32, [2])])
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5], np.int32), "w"), numpy_helper.from_array(np.array([1])), [2]
    )
    g = helper.make_graph(
        [helper.make_node("Bar", ["n"], ["y"], domain="my", bodies=[sub]), helper.make_node("Add", ["n", "w"], ["z"])],
        "g",
        [vi("n", TensorProto.INT32, [2]), vi("d", TensorProto.INT32, [2])],
        [vi("y", TensorProto.INT32, [2]), vi("z", TensorProto.INT32, [2])],
        sparse_initializer=[sparse],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my", 1)])
    specs = {s.name: s for s in graph_inputs(model)}
    assert set(specs) == {"n", "d"} and specs["d"].divisor and not specs["n"].divisor
