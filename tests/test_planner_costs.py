"""The planner's choices on the cases the performance sweep (scripts/bench_sweep.py) measured, pinned:
each is the form that measured fastest beside the others, chosen from the calibrated kernel costs."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest
from helpers import guard_checks, one_node_model, random_case, run_ort
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.compare import same_bits
from onnx_dequant.lowering import LowerOptions, lower_model
from onnx_dequant.lowering.strategies import guarded, ort_costs
from onnx_dequant.lowering.strategies.costs import kernel_cost

M = 1 << 20


def _model(shape, axes, *, out=TensorProto.FLOAT, consumer=None, zero_point=True, x_type=TensorProto.INT8):
    """x, scale and zero point as graph inputs (no data needed: the plan depends on shapes and types)."""
    sshape = [shape[a] for a in axes]
    ins = [
        helper.make_tensor_value_info("x", x_type, list(shape)),
        helper.make_tensor_value_info("s", out, sshape),
    ]
    if zero_point:
        ins.append(helper.make_tensor_value_info("z", x_type, sshape))
    nodes = [odq.make_node(["x", "s"] + (["z"] if zero_point else []), ["t" if consumer else "y"], axes=axes)]
    if consumer:
        nodes.append(helper.make_node(consumer, ["t"], ["y"]))
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", out, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])
    m.ir_version = 10
    return m


def _calibrate_costs() -> types.ModuleType:
    """scripts/calibrate_costs.py as a module."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    try:
        import calibrate_costs
    finally:
        sys.path.pop(0)
    return calibrate_costs


def _chosen(model):
    result = lower_model(model, LowerOptions())
    return result.nodes[0].strategy, result.model


@pytest.mark.parametrize(
    "shape,axes,consumer,want",
    [
        # per-row scales over narrow rows: per-axis DQL (blocked on the last axis walks 8-element blocks)
        ((2 * M, 8), (0,), None, "dql-per-axis"),
        ((2 * M, 8), (0,), "Relu", "dql-per-axis"),
        # rows of 3: blocked on the last axis 6.5-7.7x ORT's per-tensor DQL, per-axis 3.6-4.6x
        ((526780, 3), (0,), "Relu", "dql-per-axis"),
        # per-channel on the last axis: ORT's per-axis kernel is slow there, blocked is not
        ((4096, 4096), (1,), None, "dql-blocked"),
        ((4096, 4096), (1,), "Relu", "dql-blocked"),
        # adjacent axes in a graph: Reshape -> per-axis DQL (threaded) beats the single-threaded blocked
        # kernel; standalone the Reshape to a graph output copies, and blocked wins
        ((8, 16, 256, 512), (1, 2), "Relu", "dql-merged-axes"),
        ((8, 16, 256, 512), (1, 2), None, "dql-blocked"),
        ((16, 64, 128, 128), (1, 3), None, "dql-blocked"),
        ((16, 64, 128, 128), (1, 3), "Relu", "dql-blocked"),
    ],
)
def test_planner_choice(shape, axes, consumer, want):
    assert _chosen(_model(shape, axes, consumer=consumer))[0] == want


@pytest.mark.parametrize(
    "rows,consumer,want",
    [
        (1024, "Relu", "i32-guarded"),  # 4 MiB of int32: the whole guard's three passes read it from cache
        (512, "Relu", "i32-guarded"),
        (8192, "Relu", "scan-chunked"),  # 32 MiB: a row's passes after its first from cache, the whole's from memory
        (1024, None, "i32-guarded"),  # a graph output: the Scan's final Reshape copies
    ],
)
def test_per_tensor_int32_is_chunked_where_it_outgrows_the_cache(rows, consumer, want):
    """Per-tensor int32 rows of 1024 feeding Relu, measured side by side (2-core AMD EPYC Zen 4, 32 MB L3):
    the whole guard against the Scan 2.26x / 2.40x ORT's DequantizeLinear at 0.5M elements, 2.23x / 2.39x
    at 1M, 1.95x / 1.44x at 8M (``CHECKED_CACHE_BYTES``)."""
    model = _model((rows, 1024), (), consumer=consumer, x_type=TensorProto.INT32)
    assert _chosen(model)[0] == want


@pytest.mark.parametrize("consumer", ["Relu", None])
@pytest.mark.parametrize("f32_from_memory", [True, False])
def test_a_16mb_int32_input_runs_whole_where_its_check_is_int32(f32_from_memory, consumer, monkeypatch):
    """16 MiB of int32 in rows of 256K: the int32 check reads the input alone, which fits the cache share
    (CHECKED_CACHE_BYTES), so the whole guard runs, in a graph and standalone (in a graph its time 0.90-1.0x
    the Scan's at 4M elements, standalone 0.80-0.92x in rows of 64K-256K, even in rows of 1M); the float32
    check writes a float32 copy beside it, which does not fit, and its passes stream: the Scan."""
    i32 = 7.0  # from cache or memory: only the float32 check's footprint (32 MiB) streams here
    table = {"check_f32": 5.0 if f32_from_memory else 9.0, "check_i32": i32, "check_i32_cached": i32}
    monkeypatch.setattr(guarded, "kernel_cost", lambda name: table.get(name) or kernel_cost(name))
    model = _model((16, 262144), (), consumer=consumer, x_type=TensorProto.INT32)
    assert _chosen(model)[0] == ("scan-chunked" if f32_from_memory else "i32-guarded")


@pytest.mark.parametrize("f32_cheaper", [("memory",), ("cache",)])
@pytest.mark.parametrize(
    "rows,consumer,f32_where,i32_where",
    [
        (512, "Relu", "cache", "cache"),  # 2 MiB of int32, guarded whole
        (1024, None, "cache", "cache"),  # 4 MiB, a graph output
        (2048, "Relu", "cache", "cache"),  # 8 MiB: with the float32 check's copy 16 MiB, which fits
        (2049, "Relu", "memory", "cache"),  # the float32 check's footprint no longer fits, the int32 one's does
        (8192, "Relu", "memory", "memory"),  # 32 MiB: the Scan's rows stream from memory
        (8192, None, "memory", "memory"),  # 32 MiB, guarded whole
    ],
)
def test_i32_check_is_the_cheaper_where_it_reads_the_input_from(
    rows, consumer, f32_where, i32_where, f32_cheaper, monkeypatch
):
    """Each check is priced where it reads the input from: the cache where its footprint (the input, and
    the float32 copy a float32 check writes) fits CHECKED_CACHE_BYTES (``check_*_cached``), memory where it
    does not (``check_*``), a Scan's rows by their whole input; the guard takes the cheaper. On a 2-core AMD
    EPYC Zen 4, the float32 check from cache measured 7.1 copy bytes an element against the int32 one's
    7.6, and 13.1 against 8.5 from memory."""
    prices = {"cache": 5.5, "memory": 6.5}  # the int32 check's; the float32 one's 1 less where f32_cheaper

    def price(t: str, where: str) -> float:
        return prices[where] - (1.0 if where in f32_cheaper else -1.0) * (t == "f32")

    table = {f"check_{t}{'_cached' if w == 'cache' else ''}": price(t, w) for t in ("f32", "i32") for w in prices}
    monkeypatch.setattr(guarded, "kernel_cost", lambda name: table.get(name) or kernel_cost(name))
    strategy, lowered = _chosen(_model((rows, 1024), (), consumer=consumer, x_type=TensorProto.INT32))
    want = price("f32", f32_where) < price("i32", i32_where)
    assert set(guard_checks(lowered.graph)) == {want}  # the exact branch's Scan may guard its rows again
    whole = consumer is None or rows * 1024 * 4 * (2 if want else 1) <= guarded.CHECKED_CACHE_BYTES
    assert strategy == ("i32-guarded" if whole else "scan-chunked")


@pytest.mark.parametrize("shape", [(1024, 16384), (4, 5, 19, 5, 6, 8)])
@pytest.mark.parametrize("consumer", [None, "Relu"])
def test_full_size_scale_is_blocked_by_one(shape, consumer):
    """A scale as large as the input: blocked DQL with block_size 1 along axis 0 (measured 3-4x faster than
    Cast/Sub/Mul and the per-axis form, which walks one-element rows), in the input's own shape: no
    Reshape, which copies a graph output or an If branch's (standalone (4,5,19,5,6,8) i8: 1.16x ORT's
    per-tensor DequantizeLinear against 1.65x through a 2-D view; i32 guarded in a graph 2.95x against
    3.61x)."""
    strategy, model = _chosen(_model(shape, tuple(range(len(shape))), consumer=consumer))
    assert strategy == "dql-blocked"
    dql = next(n for n in model.graph.node if n.op_type == "DequantizeLinear")
    assert dql.input[0] == "x" and dql.output[0] == ("t" if consumer else "y")  # no Reshape of x or y
    assert {a.name: a.i for a in dql.attribute} == {"axis": 0, "block_size": 1}


@pytest.mark.parametrize(
    "shape,axes,fed,want",
    [
        ((2000, 50, 3), (0, 2), False, "dql-tiled"),  # a constant scale tiled in the file
        ((2000, 50, 3), (0, 2), True, "dql-blocked"),  # fed: ORT tiles 100,000 runs of 3 each run
        ((2597, 103, 7, 2), (0, 1, 3), True, "dql-blocked"),
        ((100000, 8, 3), (2,), True, "dql-tiled"),  # one run of 3 tiled 8 times: nothing to pay
    ],
)
def test_a_scale_tiled_when_the_model_runs_is_priced(shape, axes, fed, want):
    """A tiled form tiles a scale (and zero point) that is not a constant when the model runs, where ORT's
    Tile copies each run of it on its own: measured side by side in a graph (``bench_forms.py``, AMD EPYC,
    ORT 1.32, over ORT's per-tensor DequantizeLinear), ``(2000,50,3)`` ``{0,2}`` int8 with a fed scale and
    zero point took ``dql-tiled`` at 7.7-11.4x against ``dql-blocked`` 3.4-4.5x (with constant ones
    ``dql-tiled`` 1.2-1.6x), ``(2597,103,7,2)`` ``{0,1,3}`` int16 6.7-7.4x against 2.4-2.5x."""
    x_type = TensorProto.INT16 if len(shape) == 4 else TensorProto.INT8
    m = _model(shape, axes, consumer="Relu", x_type=x_type)
    if not fed:  # the scale and zero point as initializers
        sshape = [shape[a] for a in axes]
        ins = {i.name: i for i in m.graph.input}
        for name, dtype in (("s", np.float32), ("z", np.int8)):
            m.graph.input.remove(ins[name])
            m.graph.initializer.append(numpy_helper.from_array(np.ones(sshape, dtype), name))
    assert _chosen(m)[0] == want


def test_costs_come_from_the_calibrated_table():
    """Each kernel's cost is the mean of its calibrated figures over thread counts, and the generator of the
    table writes a literal that reads back as the same table."""
    for name in ("dql_tensor", "dql_axis", "dql_axis_last", "dql_blocked", "dql_blocked_last", "cast_to_f16"):
        values = [by_threads[name] for by_threads in ort_costs.COSTS.values()]
        assert kernel_cost(name) == pytest.approx(sum(values) / len(values)) and kernel_cost(name) > 0
    assert kernel_cost("dql_axis_last") > kernel_cost("dql_axis")  # the slow path the planner avoids
    assert kernel_cost("cast_to_bf16") > kernel_cost("cast_to_f16")  # ORT rounds to bf16 element by element
    assert kernel_cost("cast_to_bf16_chunked") < kernel_cost("cast_to_bf16")  # its input read from cache
    calibrate_costs = _calibrate_costs()
    assert eval(calibrate_costs.literal(ort_costs.COSTS)) == ort_costs.COSTS
    # --only: the named entries from a new measurement, every other one as committed, partners together
    measured = {t: {k: v + 1 for k, v in by_name.items()} for t, by_name in ort_costs.COSTS.items()}
    n, version = ort_costs.ELEMENTS, ort_costs.ORT_VERSION
    pair = ["cast_to_bf16", "cast_to_bf16_chunked"]
    table, names = calibrate_costs.merged(measured, pair, ort_costs, n, version)
    for t, by_name in table.items():
        assert by_name == {**ort_costs.COSTS[t], **{k: ort_costs.COSTS[t][k] + 1 for k in pair}}
    assert set(names) == set(ort_costs.MERGED) | set(pair)
    refusals = [
        ([], n, version, "name the entries"),
        (["no_such_kernel"], n, version, "no such entries"),
        (["cast_to_bf16"], n, version, "merge them together"),  # its saving in a row is a difference
        (pair, n // 2, version, "recalibrate all"),
        (pair, n, "0.0.0", "recalibrate all"),
    ]
    for only, elements, ort_version, why in refusals:
        with pytest.raises(SystemExit, match=why):
            calibrate_costs.merged(measured, only, ort_costs, elements, ort_version)
    # the four checks are weighed against each other: from memory and from cache, int32 and float32
    with pytest.raises(SystemExit, match="merge them together"):
        calibrate_costs.merged(measured, ["check_i32", "check_f32"], ort_costs, n, version)
    checks = ["check_i32", "check_f32", "check_i32_cached", "check_f32_cached"]
    assert set(calibrate_costs.merged(measured, checks, ort_costs, n, version)[1]) >= set(checks)
    # the generator's MERGED literal is the committed one, as ruff formats it (one name a line past 120)
    text = calibrate_costs.TABLE.read_text()
    assert f"MERGED = {calibrate_costs.names_literal(ort_costs.MERGED)}\n" in text
    assert eval(calibrate_costs.names_literal(("a" * 130,))) == ("a" * 130,)
    lacking = types.SimpleNamespace(**{**vars(ort_costs), "COSTS": {t: {} for t in ort_costs.COSTS}})
    with pytest.raises(SystemExit, match="the table lacks"):  # a kernel measured now that the table never had
        calibrate_costs.merged(measured, pair, lacking, n, version)


def test_cached_checks_are_measured_on_a_part_of_the_input_run_as_many_times():
    """``check_*_cached``: the check over an input ``CACHED_PARTS`` times smaller, run that many times in a
    row after an untimed run, so that it reads its input from cache and its cost is per element of the
    others' input; the table's entry is that measurement as it is."""
    calibrate_costs = _calibrate_costs()
    n = 8 * 4096 * 2
    forms = calibrate_costs.forms(n)
    for t in ("i32", "f32"):
        assert forms[f"check_{t}@cached"][2] == (n // calibrate_costs.CACHED_PARTS,)
        assert forms[f"check_{t}"][2] == (n,)
    raw = {name: float(i + 1) for i, name in enumerate(forms)}
    derived = calibrate_costs.derive(raw, n)
    assert derived["check_i32_cached"] == raw["check_i32@cached"] and derived["check_f32"] == raw["check_f32"]
    assert not any("@" in k for k in derived)


def test_chunked_casts_are_a_rows_pair_less_the_whole_dequantize_linear():
    """``cast_to_*_chunked``: a DequantizeLinear and its Cast over a Scan's row (``CHUNKED_ROW`` elements),
    less the whole DequantizeLinear timed beside it (``@dql``): what the Cast adds where the f32 product
    between them stays in cache; never below 0."""
    calibrate_costs = _calibrate_costs()
    n = 4 * calibrate_costs.CHUNKED_ROW
    forms = calibrate_costs.forms(n)
    for cast in ("cast_to_f16", "cast_to_bf16"):
        m, xt, shape, _ = forms[f"{cast}@chunked"]
        assert [node.op_type for node in m.graph.node] == ["DequantizeLinear", "Cast"]
        assert shape == (calibrate_costs.CHUNKED_ROW,) and xt == np.int8
        assert forms[f"{cast}@dql"][2] == (n,)
    raw = {name: 10.0 for name in forms} | {"cast_to_f16@chunked": 12.5, "cast_to_bf16@chunked": 9.0}
    derived = calibrate_costs.derive(raw, n)
    assert derived["cast_to_f16_chunked"] == 2.5 and derived["cast_to_bf16_chunked"] == 0.0
    assert not any("@" in k for k in derived)


def test_a_chunked_form_runs_over_its_parts_of_an_input_and_an_output():
    """``Runner(parts=True)``: each run reads its own part of ``x`` and writes its own part of ``y`` (the
    Scan's input and output, in memory), in turn; a bf16 input is bound by its bits."""
    calibrate_costs = _calibrate_costs()
    m = calibrate_costs.dql_cast((8,), TensorProto.FLOAT16)
    x = np.arange(-12, 12, dtype=np.int8).reshape(3, 8)
    y = np.full((3, 8), np.nan, np.float16)
    runner = calibrate_costs.Runner(m, x, y, threads=1, runs=3, parts=True)
    runner()
    alone = calibrate_costs.Runner(m, x[0], np.empty(8, np.float16), threads=1)
    for i in range(3):
        alone.bindings[0].bind_cpu_input("x", x[i])
        alone()
        assert np.array_equal(y[i].view(np.uint16), alone.bindings[0].y.view(np.uint16))
    assert not np.array_equal(y[0], y[1])
    xb = np.array([1.5, -2.25, 3e38, 0.0], dtype=calibrate_costs.BF16)
    widen = calibrate_costs.unary("Cast", TensorProto.BFLOAT16, (4,), TensorProto.FLOAT, to=TensorProto.FLOAT)
    out = np.empty(4, np.float32)
    calibrate_costs.Runner(widen, xb, out, threads=1)()
    assert np.array_equal(out, xb.astype(np.float32))


def test_cached_checks_run_their_parts_after_an_untimed_run(monkeypatch):
    """``measure`` runs an ``@cached`` form ``CACHED_PARTS`` times a call, a ``node`` form ``NODE_RUNS`` times
    and the others once, and ``timed`` warms a form of several runs outside the timed window."""
    calibrate_costs = _calibrate_costs()
    n, events, built = 8 * 4096 * 2, [], []

    class Fake:
        def __init__(self, m, x, y, threads, runs=1, parts=False):
            self.runs, self.size = runs, x.size
            built.append(self)

        def __call__(self):
            events.append(("run", self.size, self.runs))

        def warm(self):
            if self.runs > 1:
                events.append(("warm", self.size))

    clock = iter(range(10**6))
    monkeypatch.setattr(calibrate_costs, "Runner", Fake)
    monkeypatch.setattr(calibrate_costs.time, "perf_counter", lambda: (events.append(("clock",)), next(clock))[1])
    calibrate_costs.measure(n, repeat=2, threads=1)
    cached = [f for f in built if f.runs == calibrate_costs.CACHED_PARTS]
    assert len(cached) == 2 and all(f.size == n // calibrate_costs.CACHED_PARTS for f in cached)
    nodes = [f for f in built if f.size == 1]
    assert len(nodes) == 2 and all(f.runs == calibrate_costs.NODE_RUNS for f in nodes)
    assert all(f.runs == 1 for f in built if f not in cached + nodes)
    runs = [i for i, e in enumerate(events) if e[0] == "run" and e[2] > 1]
    assert len(runs) == 4 * (1 + 2)  # two cached and two node forms: a first untimed call, then two timed rounds
    warms = [i for i, e in enumerate(events) if e[0] == "warm"]
    assert len(warms) == 4 * 2
    for i in warms:  # each timed call: warmed, then alone between clocks
        assert (
            events[i + 1] == ("clock",) and events[i + 2][:2] == ("run", events[i][1]) and events[i + 3] == ("clock",)
        )


def test_calibration_rounds_keep_each_entrys_median_and_its_spread():
    """``--rounds``: an entry is its median over whole measurements, so one round on a loaded machine does
    not set it, and its spread says how far a single round could be trusted."""
    calibrate_costs = _calibrate_costs()
    table, spread = calibrate_costs.summarize({"1": [{"k": 1.0}, {"k": 3.0}, {"k": 2.0}], "2": [{"k": 4.0}]})
    assert table == {"1": {"k": 2.0}, "2": {"k": 4.0}} and spread == {"1": {"k": 1.0}, "2": {"k": 0.0}}
    quiet = [{"k": v} for v in (10.0, 10.2, 9.9, 10.1, 10.0, 10.3)]
    table, spread = calibrate_costs.summarize({"1": [*quiet, {"k": 40.0}]})  # one round under load
    assert table["1"]["k"] == 10.1 and spread["1"]["k"] < 0.05
    assert calibrate_costs.summarize({"1": quiet})[1]["1"]["k"] < 0.05


@pytest.mark.parametrize("shape", [(3, 4), (3, 4, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("rt", ["f32", "f16"])
def test_full_size_scale_form_is_exact(shape, rt):
    """The block_size 1 form gives the reference's bits (f16: through the f32 DQL and a Cast)."""
    axes = tuple(range(len(shape)))
    x, s, z = random_case(np.random.default_rng(7), shape, axes, "i8", rt)
    result = lower_model(one_node_model(x, s, z, axes), LowerOptions(strategies=["dql-blocked"]))
    (y,) = run_ort(result.model, {"x": x})
    assert same_bits(y, odq.dequantize(x, s, z, axes=axes))


def test_vector_rows_are_measured_against_the_wide_rows_of_the_same_kernel():
    """``dql_axis_row_vec`` and ``dql_blocked_row_vec``: the per-axis and blocked kernels over rows of
    ``VECTOR_ROW`` int8 elements (one vector of their loop, no scalar rest) against the same kernel's wide rows,
    per row; never below 0. The scalar rows' entries still come from rows of 8."""
    calibrate_costs = _calibrate_costs()
    n = 4096 * 64
    forms = calibrate_costs.forms(n)
    vec = calibrate_costs.VECTOR_ROW
    for kernel in ("dql_axis", "dql_blocked"):
        m, xt, shape, _ = forms[f"{kernel}@vec"]
        assert shape == (n // vec, vec) and xt == np.int8 and m.graph.node[0].op_type == "DequantizeLinear"
    raw = {name: 10.0 for name in forms} | {"dql_axis@vec": 10.5, "dql_blocked@vec": 9.0, "dql_axis@narrow": 12.0}
    derived = calibrate_costs.derive(raw, n)
    assert derived["dql_axis_row_vec"] == pytest.approx(0.5 * n / (n // vec - n // 4096))
    assert derived["dql_blocked_row_vec"] == 0.0
    assert derived["dql_axis_row"] == pytest.approx(2.0 * n / (n // 8 - n // 4096))
