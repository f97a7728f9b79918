"""The lowering pass: exact results in ORT for each strategy, ``only=``, opsets, the contract's errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import domain_nodes, guard_checks, model_of, one_node_model, random_case, run_ort, vi
from onnx import helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import opsets
from onnx_dequant.compare import same_bits, ulp_distance
from onnx_dequant.lowering import LowerOptions, lower_model
from onnx_dequant.lowering.strategies import chunked, guarded

ROOT = Path(__file__).resolve().parents[1]

PATTERNS = [
    ((4, 5, 6), ()),
    ((4, 5, 6), (0,)),
    ((4, 5, 6), (2,)),
    ((4, 5, 6), (0, 2)),
    ((3, 4, 5, 6), (1, 3)),
    ((3, 4, 5, 6), (0, 1, 2)),
    ((3, 4, 5, 6), (1, 2)),
    ((3, 4), (0, 1)),
    ((), ()),
]


def _check(model, x, s, z, axes, *, fed=False, consumer=None, x_fed=True, ulps=0):
    """``model`` passes ONNX's full check and computes the reference in ORT: the same bits (``ulps``: at
    most that far). ``fed``: the scale and zero point are graph inputs; ``x_fed=False``: x is a constant;
    ``consumer="Relu"``: the reference through Relu (ORT's keeps -0.0, so signs of zeros are not compared)."""
    onnx.checker.check_model(model, full_check=True)
    feeds = ({"x": x} if x_fed else {}) | ({"s": s} | ({"z": z} if z is not None else {}) if fed else {})
    ref = odq.dequantize(x, s, z, axes=axes)
    (y,) = run_ort(model, feeds)
    if ref.dtype != y.dtype:  # bf16 read through a Cast to f32 (exact)
        ref = ref.astype(np.float32)
    if consumer == "Relu":
        y, ref = np.abs(y), np.maximum(ref, 0)
    if ulps == 0:
        assert same_bits(y, ref), f"max ULP {np.max(ulp_distance(y, ref)) if y.size else 0}"
    else:
        assert np.max(ulp_distance(y, ref), initial=0) <= ulps


@pytest.mark.parametrize("shape,axes", PATTERNS)
@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("target", ["ort", "portable"])
@pytest.mark.parametrize("consumer", [None, "Relu"])
def test_patterns_exact(shape, axes, opset, target, consumer):
    rng = np.random.default_rng(len(shape) * 100 + len(axes))
    x, s, z = random_case(rng, shape, axes, "i8", "f32")
    m = one_node_model(x, s, z, axes, opset=opset, consumer=consumer)
    result = lower_model(m, LowerOptions(target=target))
    lowered, report = result.model, result.nodes
    assert domain_nodes(lowered) == 0
    assert all(o.domain != odq.DOMAIN for o in lowered.opset_import)
    onnx.checker.check_model(lowered, full_check=True)
    if target == "portable":
        assert report[0].strategy != "dql-blocked"
    if consumer == "Relu":
        ref = np.maximum(odq.dequantize(x, s, z, axes=axes), 0)
        (y,) = run_ort(lowered, {"x": x})
        assert np.array_equal(y, ref)  # ORT's Relu keeps -0.0
    else:
        _check(lowered, x, s, z, axes)


ALL_PAIRS = [(q.name, r.name) for q in odq.dtypes.QUANTIZED for r in odq.dtypes.REAL]


@pytest.mark.parametrize("qt,rt", ALL_PAIRS)
@pytest.mark.parametrize("opset", [13, 21])
def test_every_type_pair(qt, rt, opset):
    """All 28 type pairs, three axes patterns: bit-identical, or <= 1 ULP where ORT rounds twice."""
    rng = np.random.default_rng(7)
    small = odq.dtypes.parse(qt).bits < 8
    for shape, axes in (((4, 5, 6), ()), ((4, 5, 6), (1,)), ((3, 4, 5, 6), (1, 3))):
        x, s, z = random_case(rng, shape, axes, qt, rt)
        m = one_node_model(x, s, z, axes, opset=opset, x_const=small)
        if small and opset < 21:
            with pytest.raises(odq.DequantizeError, match=r"node 'dq'.*No exact lowering"):
                odq.lower(m)
            continue
        lowered = odq.lower(m)
        onnx.checker.check_model(lowered, full_check=True)
        ref = odq.dequantize(x, s, z, axes=axes)
        (y,) = run_ort(lowered, {} if small else {"x": x})
        if ref.dtype != y.dtype:  # bf16 read through an exact Cast to f32: compare in bf16
            y = y.astype(ref.dtype)
        if rt in ("f16", "bf16") and odq.dtypes.parse(qt).bits >= 16:
            assert np.max(ulp_distance(y, ref), initial=0) <= 1
        else:
            assert same_bits(y, ref), (shape, axes)


def test_only_keeps_other_nodes_and_domain():
    rng = np.random.default_rng(1)
    x, s, z = random_case(rng, (2, 3), (1,), "u8", "f32")
    m = one_node_model(x, s, z, (1,))
    second = odq.make_node(["x", "s", "z"], ["y2"], axes=[1], name="keep_me")
    m.graph.node.append(second)
    m.graph.output.append(onnx.helper.make_tensor_value_info("y2", onnx.TensorProto.FLOAT, [2, 3]))
    lowered = odq.lower(m, only=lambda n: n.name != "keep_me")
    kept = [n for n in lowered.graph.node if n.domain == odq.DOMAIN]
    assert [n.name for n in kept] == ["keep_me"]
    assert any(o.domain == odq.DOMAIN for o in lowered.opset_import)
    assert odq.lower(lowered).graph.node[-1].domain == ""  # the rest lowers later
    assert domain_nodes(m) == 2  # the caller's model is untouched


def test_keeps_node_name_and_doc():
    rng = np.random.default_rng(2)
    x, s, z = random_case(rng, (2, 3), (), "i8", "f32")
    m = one_node_model(x, s, z, ())
    m.graph.node[0].doc_string = "the doc"
    lowered = odq.lower(m)
    last = [n for n in lowered.graph.node if "y" in n.output][0]
    assert last.name == "dq" and last.doc_string == "the doc"


def test_contract_violation_names_node_and_rule():
    x = np.zeros((2, 3), np.int8)
    s = np.ones((4,), np.float32)
    m = one_node_model(x, s, None, (1,))
    with pytest.raises(odq.DequantizeError, match=r"node 'dq'.*must match input shape"):
        odq.lower(m)


@pytest.mark.parametrize(
    "opset,message",
    [
        (12, "Unsupported target opset 12: supported are 13 to 27"),
        (np.int64(28), "Unsupported target opset 28: supported"),
        ("17", "The target opset must be an integer, got '17' (str)"),
        (17.0, "must be an integer, got 17.0 (float)"),
        (True, "must be an integer, got True (bool)"),
    ],
)
def test_unsupported_opset(opset, message):
    m = one_node_model(np.zeros((2,), np.int8), np.ones((), np.float32), None, ())
    with pytest.raises(odq.DequantizeError) as e:
        odq.lower(m, opset=opset)
    assert message in str(e.value)


@pytest.mark.parametrize("opset", [np.int64(17), np.int32(19), np.uint8(21)])
def test_an_opset_of_a_numpy_integer_type_is_taken(opset):
    m = one_node_model(np.zeros((2,), np.int8), np.ones((), np.float32), None, ())
    lowered = odq.lower(m, opset=opset)
    assert [(o.domain, type(o.version), o.version) for o in lowered.opset_import] == [("", int, int(opset))]
    converted = odq.ngraph.convert(ROOT / "models" / "qdq_chain.json", opset=opset)
    assert opsets.default_opset(converted.opset_import) == int(opset)


def test_unknown_target():
    m = one_node_model(np.zeros((2,), np.int8), np.ones((), np.float32), None, ())
    with pytest.raises(odq.DequantizeError, match="target"):
        odq.lower(m, target="tensorrt")


def test_i32_never_wraps_unless_asked():
    x = np.array([2**31 - 1, -(2**31), 5], np.int32)
    z = np.array(-(2**31), np.int32)
    s = np.array(0.5, np.float32)
    m = one_node_model(x, s, z, ())
    exact, report = (r := lower_model(onnx.ModelProto.FromString(m.SerializeToString()))).model, r.nodes
    assert report[0].strategy == "cast-sub-mul"
    (y,) = run_ort(exact, {"x": x})
    assert same_bits(y, odq.dequantize(x, s, z))
    assert y[0] == np.float32((2**32 - 1) * 0.5)
    r = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), LowerOptions(wrap_int32=True))
    wrapped, report = r.model, r.nodes
    assert report[0].strategy == "dql-per-tensor"
    (w,) = run_ort(wrapped, {"x": x})
    # ORT 1.32's int32 DequantizeLinear wraps ((2^31-1) - (-2^31) = -1); a later ORT may not: both are accepted,
    # since with wrap_int32 the user asked for whatever ORT's int32 arithmetic gives
    wrapped_diff = (x.astype(np.int64) - int(z)).astype(np.int32)  # two's complement wrap
    as_wrapped = (wrapped_diff.astype(np.float32) * s).astype(np.float32)
    assert all(same_bits(w[i], as_wrapped[i]) or same_bits(w[i], y[i]) for i in range(len(x)))


@pytest.mark.parametrize("rt", ["f32", "f16"])
@pytest.mark.parametrize("axes,zp", [((), True), ((), False), ((1,), True), ((0, 2), True)])
def test_sub_cast_mul_is_ort_int32_dequantize_linear_bit_for_bit(axes, zp, rt):
    """``sub-cast-mul`` (wrap_int32, where ORT breaks the DequantizeLinear) computes what ORT's int32
    DequantizeLinear computes, over the whole int32 range: the difference wraps, and rounds to f32 beyond
    2**24 (the DequantizeLinear run with optimizations off, then cast as the DQL form casts)."""
    rng = np.random.default_rng(len(axes) + 2 * zp)
    x, s, z = random_case(rng, (6, 5, 7), axes, "i32", rt, zp=zp)  # any int32 values, extremes included
    x.flat[:2], z = [2**31 - 1, -(2**31)], None if z is None else z.astype(np.int32)
    if z is not None:
        z.flat[0] = -(2**31)
    m = one_node_model(x, s, z, axes, const=False)
    lowered = lower_model(m, LowerOptions(wrap_int32=True, strategies=["sub-cast-mul"])).model
    feeds = {"x": x, "s": s} | ({} if z is None else {"z": z})
    (y,) = run_ort(lowered, feeds)
    # ORT's own kernel, per axis after merging axes {0, 2}: its scale along one axis of a transposed view
    xt, st, zt = x, s.astype(np.float32), z
    if axes == (0, 2):
        xt, st, zt = x.transpose(1, 0, 2).reshape(5, 42), st.reshape(-1), None if z is None else z.reshape(-1)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s"] + ([] if zt is None else ["z"]), ["y"], axis=len(axes) and 1)
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [vi("x", "i32", xt.shape), vi("s", "f32", st.shape)] + ([] if zt is None else [vi("z", "i32", zt.shape)]),
        [vi("y", "f32", xt.shape)],
    )
    ref_model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    (want,) = run_ort(
        ref_model,
        {"x": xt, "s": st} | ({} if zt is None else {"z": zt}),
        level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    )
    if axes == (0, 2):
        want = want.reshape(5, 6, 7).transpose(1, 0, 2)
    with np.errstate(over="ignore"):  # large values overflow f16, in both
        assert same_bits(y, want.astype(y.dtype))
    if z is not None and rt == "f32":  # the wrapped differences give other values than the exact ones
        assert not same_bits(y, odq.dequantize(x, s, z, axes=axes))


@pytest.mark.parametrize("target", ["ort", "portable"])
def test_symbolic_dims_and_fed_scale(target):
    rng = np.random.default_rng(5)
    for shape, axes in (((3, 4, 5, 6), (1, 3)), ((3, 4, 5, 6), (1, 2)), ((3, 4, 5), (2,))):
        x, s, z = random_case(rng, shape, axes, "u8", "f32")
        m = one_node_model(x, s, z, axes, const=False, symbolic=True, consumer="Relu")
        lowered = lower_model(m, LowerOptions(target=target)).model
        onnx.checker.check_model(lowered, full_check=True)
        (y,) = run_ort(lowered, {"x": x, "s": s, "z": z})
        assert np.array_equal(y, np.maximum(odq.dequantize(x, s, z, axes=axes), 0))


CHUNKED = [
    ((2, 256, 256), ()),
    ((2, 256, 256), (0, 2)),
    ((2, 16, 64, 64), (1, 3)),
    ((3, 16, 64, 64), (0, 1)),
    ((4, 128, 512), (2,)),
    ((4, 128, 512), (0,)),
]


@pytest.mark.parametrize("shape,axes", CHUNKED)
@pytest.mark.parametrize(
    "rt,opset,const", [("f16", 13, True), ("f16", 21, False), ("f16", 25, True), ("bf16", 21, True)]
)
def test_f16_chunked_scan_exact(shape, axes, rt, opset, const):
    """f16/bf16 output with 64K-element slices along axis 0: a Scan whose body is the f32 DQL + Cast form,
    bit-identical to the reference, also when the scale and zero point are scanned (0 in axes) or fed."""
    rng = np.random.default_rng(sum(shape) + len(axes))
    x, s, z = random_case(rng, shape, axes, "i8", rt)
    m = one_node_model(x, s, z, axes, opset=opset, const=const)
    result = lower_model(m)
    lowered, report = result.model, result.nodes
    assert report[0].strategy == "scan-chunked"
    assert [n.op_type for n in lowered.graph.node][-1] == "Scan"
    onnx.checker.check_model(lowered, full_check=True)
    feeds = {"x": x} if const else {"x": x, "s": s, "z": z}
    for level in (None, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        (y,) = run_ort(lowered, feeds, level=level)
        ref = odq.dequantize(x, s, z, axes=axes)
        assert same_bits(y.astype(ref.dtype), ref)


@pytest.mark.parametrize("shape,axes", [((2, 256, 256), ()), ((3, 16, 64, 64), (0, 1)), ((4, 128, 512), (2,))])
@pytest.mark.parametrize("rt,consumer,const", [("f32", "Relu", True), ("f32", None, False), ("f64", None, True)])
def test_i32_chunked_scan_exact(shape, axes, rt, consumer, const):
    """An exact i32 input with 64K-element slices along axis 0: a Scan whose body is Cast/Sub/Mul in
    float64 (its intermediates stay in cache), in a graph too, bit-identical to the reference at the
    type's extremes (differences beyond int32 included)."""
    rng = np.random.default_rng(sum(shape) + len(axes))
    x, s, z = random_case(rng, shape, axes, "i32", rt)
    x.reshape(-1)[:4] = [2**31 - 1, -(2**31), 0, 1]
    m = one_node_model(x, s, z, axes, const=const, consumer=consumer)
    result = lower_model(m)
    # to f32 with a fed zero point, each row is guarded at run time (the first row's extremes take its
    # float64 form, the others its DequantizeLinear); a constant zero point of full range is beyond the bound
    assert result.nodes[0].strategy == "scan-chunked"
    assert "Scan" in _op_types(result.model.graph)
    (scan,) = [n for n in result.model.graph.node if n.op_type == "Scan"]
    guarded = "If" in {n.op_type for n in scan.attribute[0].g.node}
    assert guarded if rt == "f32" and not const else (not guarded or rt == "f32")  # f64: DQL has no f64
    _check(result.model, x, s, z, axes, fed=not const, consumer=consumer)


@pytest.mark.parametrize("as_f32", [True, False])
@pytest.mark.parametrize("consumer", ["Relu", None])
def test_i32_scan_rows_check_either_way_exact(as_f32, consumer, monkeypatch):
    """A Scan's guarded rows check each row as int32 or through float32 (whichever the table says for an
    input of that size): either way the row holding the extremes takes its float64 form and the others their
    DequantizeLinear, bit-identical to the reference."""
    monkeypatch.setattr(guarded, "checks_as_f32", lambda info: as_f32)
    rng = np.random.default_rng(5)
    shape, axes = (3, 65536), ()
    x, s, z = random_case(rng, shape, axes, "i32", "f32")
    x = rng.integers(-1000, 1000, size=shape).astype(np.int32)
    x[1, :2] = [2**31 - 1, -(2**31)]
    m = one_node_model(x, s, z, axes, const=False, consumer=consumer)
    result = lower_model(m, LowerOptions(strategies=["scan-chunked"]))
    (scan,) = [n for n in result.model.graph.node if n.op_type == "Scan"]
    assert set(guard_checks(scan.attribute[0].g)) == {as_f32}
    _check(result.model, x, s, z, axes, fed=True, consumer=consumer)


@pytest.mark.parametrize(
    "shape,qt,rt,consumer",
    [
        ((786432,), "i32", "f32", "Relu"),  # rank 1: reshaped to (3, 262144)
        ((3, 65536), "i32", "f32", None),  # axis-0 rows fit as they are: no Reshape
        ((32, 3, 8192), "i8", "f16", None),  # axis-0 rows of 24576: reshaped to (3, 262144)
        ((12, 3, 8192), "i32", "bf16", None),  # to rows of 98304: (3, 98304) is nearest to 256K (two rows at least)
        ((2, 4, 32768), "u8", "f64", None),  # f64: Cast/Sub/Mul in float64 per row, rows as they are
        ((196608,), "i16", "f64", "Relu"),  # reshaped inside a graph (no copy there)
    ],
)
def test_per_tensor_chunked_rows_reshaped_exact(shape, qt, rt, consumer):
    """A per-tensor input (to f16/bf16, or with float64 work: from i32, or to f64) whose rows along axis 0
    do not fit 64K-4M elements is scanned in rows of the divisor of its size nearest 256K (Reshape -> Scan
    -> Reshape), bit-identical to the reference (i32 to bf16: within 1 ULP); an i32 row is guarded (the
    extremes in the first row take its float64 form)."""
    rng = np.random.default_rng(len(shape) + shape[0])
    x, s, z = random_case(rng, shape, (), qt, rt)
    if qt == "i32":
        x.reshape(-1)[:4] = [2**31 - 1, -(2**31), 0, 1]
        z = np.array(-5, np.int32)
    const = rt == "bf16"  # ORT takes no bf16 array as a feed
    m = one_node_model(x, s, z, (), const=const, consumer=consumer)
    result = lower_model(onnx.ModelProto.FromString(m.SerializeToString()))  # lowering rewrites its model
    if qt == "i32" and consumer:  # 3 MB of int32: the whole guard reads it from cache (CHECKED_CACHE_BYTES)
        assert result.nodes[0].strategy == "i32-guarded"
        result = lower_model(m, LowerOptions(strategies=["scan-chunked"]))
    assert result.nodes[0].strategy == "scan-chunked"
    top = [n.op_type for n in result.model.graph.node if n.op_type != "Relu"]
    reshaped = len(shape) == 1 or shape[1] * (shape[2] if len(shape) > 2 else 1) < 65536
    assert top == (["Reshape", "Scan", "Reshape"] if reshaped else ["Scan"])
    # i32 to bf16: ORT's Cast rounds f64 to bf16 twice (through f32), as precision.md allows
    _check(result.model, x, s, z, (), fed=not const, consumer=consumer, ulps=int(qt == "i32" and rt == "bf16"))


@pytest.mark.parametrize("axes", [(0,), (2,), (0, 2)])
@pytest.mark.parametrize("qt,rt,consumer", [("i32", "f32", "Relu"), ("i8", "f16", None)])
def test_chunked_joins_short_rows_along_axis_0_exact(axes, qt, rt, consumer):
    """Rows along axis 0 too short to chunk (800 elements) are joined ``k`` at a time: axis 0 split into
    (rows, k) by a Reshape (the scale and zero point too when 0 is an axis, scanned with the input),
    then the Scan, then a Reshape back; bit-identical to the reference. (An input whose f32 intermediate
    fits a core's cache whole is not reshaped into rows: nothing would pay for the final Reshape.)"""
    rng = np.random.default_rng(len(axes) * 7 + len(qt))
    shape = (1200, 5, 160)
    x, s, z = random_case(rng, shape, axes, qt, rt)
    if qt == "i32":
        x.reshape(-1)[:4] = [2**31 - 1, -(2**31), 0, 1]  # the first row takes its float64 form
    m = one_node_model(x, s, z, axes, const=False, consumer=consumer)
    result = lower_model(onnx.ModelProto.FromString(m.SerializeToString()))  # lowering rewrites its model
    if qt == "i32":  # 3.8 MB of int32 feeding Relu: the whole guard reads it from cache (CHECKED_CACHE_BYTES)
        assert result.nodes[0].strategy == "i32-guarded"
        result = lower_model(m, LowerOptions(strategies=["scan-chunked"]))
    assert result.nodes[0].strategy == "scan-chunked"
    (scan,) = [n for n in result.model.graph.node if n.op_type == "Scan"]
    assert scan.attribute[0].g.input[0].type.tensor_type.shape.dim[0].dim_value == 300  # (4, 300, 5, 160)
    _check(result.model, x, s, z, axes, fed=True, consumer=consumer)


@pytest.mark.parametrize(
    "shape,axes,view",
    [
        ((3, 4, 5, 300), (2,), (12, 5, 300)),  # rows along axes 0 and 1 merged
        ((2, 3, 2, 2, 1500), (3, 4), (12, 2, 1500)),  # along axes 0-2 (0-1 leave rows too long)
        ((3, 4, 5, 300), (1, 3), None),  # axis 1 quantized: nothing before it to merge into rows
    ],
)
@pytest.mark.parametrize(
    "qt,rt,consumer", [("i8", "f16", None), ("u16", "bf16", None), ("i32", "f32", "Relu"), ("i16", "f64", "Relu")]
)
def test_chunked_merges_leading_axes_into_rows_exact(shape, axes, view, qt, rt, consumer, monkeypatch):
    """Rows along axis 0 longer than ``CHUNK_MAX`` are rows along the leading axes before the first
    quantization axis, merged by a Reshape (the scale and zero point as they are), then the Scan and a
    Reshape back; bit-identical to the reference (i32 to f32 guarded a row at a time). The chunk bounds are
    made small here so that a small tensor has such rows."""
    monkeypatch.setattr(chunked, "CHUNK_MIN", 256)
    monkeypatch.setattr(chunked, "CHUNK_MAX", 4096)
    rng = np.random.default_rng(len(shape) * 10 + len(axes) + len(qt))
    x, s, z = random_case(rng, shape, axes, qt, rt)
    if qt == "i32":
        x.reshape(-1)[:2] = [2**31 - 1, -(2**31)]  # the first row takes its float64 form
    fed = rt != "bf16"  # ORT's NumPy bridge takes no bf16 scale
    m = one_node_model(x, s, z, axes, const=not fed, consumer=consumer)
    if view is None:
        with pytest.raises(odq.DequantizeError, match="no leading axes before the first quantization axis"):
            lower_model(m, LowerOptions(strategies=["scan-chunked"]))
        return
    result = lower_model(m, LowerOptions(strategies=["scan-chunked"]))
    g = result.model.graph
    (scan,) = [n for n in g.node if n.op_type == "Scan"]
    dims = [d.dim_value for d in scan.attribute[0].g.input[0].type.tensor_type.shape.dim]
    assert dims == list(view[1:]) and len(scan.input) == 1  # the scale is not scanned
    assert [n.op_type for n in g.node if n.op_type not in ("Relu", "Cast")] == ["Reshape", "Scan", "Reshape"]
    _check(result.model, x, s, z, axes, fed=fed, consumer=consumer)


def test_chunked_rows_ignore_model_constants_named_like_the_row():
    """The Scan's row inputs are never the model's constants, whatever those are named: an unrelated
    initializer called ``x`` once decided the rows' i32 guard when lowering (its values, not the row's), so
    a row beyond 2**23 took the DequantizeLinear and wrapped."""
    shape = (4, 65536)
    q = np.random.default_rng(21).integers(-1000, 1000, shape).astype(np.int32)
    q[1, :2] = [2**31 - 1, -(2**31)]
    s, z = np.array(0.37, np.float32), np.array(3, np.int32)
    nodes = [odq.make_node(["q", "s", "z"], ["y"], axes=(), name="dq"), helper.make_node("Identity", ["x"], ["o"])]
    inits = [numpy_helper.from_array(v, n) for n, v in (("s", s), ("z", z), ("x", np.zeros(2, np.int32)))]
    m = model_of(nodes, [vi("q", "i32", shape)], [vi("y", "f32", shape), vi("o", "i32", (2,))], inits)
    result = lower_model(m)
    assert result.nodes[0].strategy == "scan-chunked"
    (scan,) = [n for n in result.model.graph.node if n.op_type == "Scan"]
    assert "If" in {n.op_type for n in scan.attribute[0].g.node}  # each row checked when the model runs
    y, _ = run_ort(result.model, {"q": q})
    assert same_bits(y, odq.dequantize(q, s, z, axes=()))


def test_an_initializer_the_caller_may_override_is_not_a_constant():
    """An initializer that is also a graph input is a default: the lowering neither decides the i32 guard
    from it nor folds it into a new constant, so what the caller feeds is what is computed."""
    shape = (4096,)
    s, z = np.array(0.37, np.float32), np.array(-5, np.int32)
    inits = [numpy_helper.from_array(np.zeros(shape, np.int32), "x"), numpy_helper.from_array(s, "s")]
    inits.append(numpy_helper.from_array(z, "z"))
    m = model_of(
        [odq.make_node(["x", "s", "z"], ["y"], name="dq")], [vi("x", "i32", shape)], [vi("y", "f32", shape)], inits
    )
    result = lower_model(m)
    assert result.nodes[0].strategy == "i32-guarded" and "If" in _op_types(result.model.graph)
    fed = np.full(shape, 2**31 - 1, np.int32)
    (y,) = run_ort(result.model, {"x": fed})
    assert same_bits(y, odq.dequantize(fed, s, z))
    # a per-axis scale that is also an input: a blocked form would fold it into a constant of its view
    x = np.random.default_rng(22).integers(-128, 128, (6, 5, 4)).astype(np.int8)
    s2 = np.linspace(0.5, 2, 30, dtype=np.float32).reshape(6, 5)
    m = model_of(
        [odq.make_node(["x", "s"], ["y"], axes=(0, 1), name="dq")],
        [vi("x", "i8", (6, 5, 4)), vi("s", "f32", (6, 5))],
        [vi("y", "f32", (6, 5, 4))],
        [numpy_helper.from_array(s2, "s")],
    )
    lowered = lower_model(m).model
    other = (s2 * 3).astype(np.float32)
    (y,) = run_ort(lowered, {"x": x, "s": other})
    assert same_bits(y, odq.dequantize(x, other, axes=(0, 1)))


def test_chunked_only_where_it_pays():
    rng = np.random.default_rng(3)
    for shape, rt, opset, why in (
        ((4, 8, 8), "f16", 21, "holds 64 elements"),  # rows too small
        ((2, 256, 256), "f32", 21, "only an f16 or bf16 output (an f32 intermediate), an f64 output"),
        ((2, 256, 256), "bf16", 13, "no bf16 before opset 16"),
    ):
        x, s, z = random_case(rng, shape, (), "u8", rt)
        report = lower_model(one_node_model(x, s, z, (), opset=opset), LowerOptions(target="ort")).nodes
        assert report[0].strategy != "scan-chunked" and why in report[0].refused["scan-chunked"]
    x, s, z = random_case(rng, (2, 256, 256), (), "u8", "f16")
    report = lower_model(one_node_model(x, s, z, ()), LowerOptions(target="portable")).nodes
    assert report[0].strategy == "dql-per-tensor" and report[0].refused["scan-chunked"] == "not a portable form"
    # a Scan whose output feeds another op measured slower in ORT than DQL + Cast
    report = lower_model(one_node_model(x, s, z, (), consumer="Relu")).nodes
    assert report[0].strategy == "dql-per-tensor" and "not a model output" in report[0].refused["scan-chunked"]


@pytest.mark.parametrize(
    "shape,axes",
    [
        ((27, 7, 48, 2), (0, 1, 3)),  # per-pixel scales over 2 channels under a broadcast axis
        ((6, 30, 3), (2,)),  # a per-channel scale on a last axis of 3
        ((4, 5, 12, 2, 3), (1, 3, 4)),  # leading runs of both kinds before the tiled one
    ],
)
@pytest.mark.parametrize(
    "qt,rt", [("u8", "f32"), ("i16", "f64"), ("i32", "f32"), ("i8", "f16"), ("u16", "f64"), ("i8", "bf16")]
)
@pytest.mark.parametrize("const", [True, False])
def test_tiled_cast_sub_mul_exact(shape, axes, qt, rt, const):
    """The scale's short trailing run tiled k times over a reshaped input (folded when constant, a Tile
    when fed): the same bits as the reference, the input's shape restored."""
    _check_tiled("cast-sub-mul-tiled", np.random.default_rng(len(shape) + len(axes)), shape, axes, qt, rt, const)


def _check_tiled(strategy, rng, shape, axes, qt, rt, const):
    """``strategy`` (a tiled form) forced on a random node: Reshape first and last, rows joining k runs,
    a Tile only for a fed scale (none for bf16, which ORT cannot Tile), the reference's bits in ORT."""
    x, s, z = random_case(rng, shape, axes, qt, rt)
    m = one_node_model(x, s, z, axes, const=const)
    if rt == "bf16" and not const:
        with pytest.raises(odq.DequantizeError, match="ORT has no bf16 Tile"):
            lower_model(m, LowerOptions(strategies=[strategy]))
        return
    result = lower_model(m, LowerOptions(strategies=[strategy]))
    g = result.model.graph
    ops = [n.op_type for n in g.node]
    assert result.nodes[0].strategy == strategy and ops[0] == "Reshape" and ops[-1] == "Reshape"
    assert ("Tile" in ops) != const
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in g.initializer}
    row = int(consts[g.node[0].input[1]][-1])
    assert row > shape[-1] and row % shape[-1] == 0  # k runs joined into each row
    _check(result.model, x, s, z, axes, fed=not const)


@pytest.mark.parametrize("const", [True, False])
def test_per_tensor_scale_gets_the_inputs_rank(const):
    """Cast/Sub/Mul hands Sub and Mul a per-tensor scale and zero point of the input's rank (folded when
    constant, a Reshape when fed): ONNX Runtime broadcasts a lower-rank one element by element against a
    trailing dim of 1. Exact either way."""
    rng = np.random.default_rng(9)
    x, s, z = random_case(rng, (3, 4099, 1), (), "i32", "f32")
    result = lower_model(one_node_model(x, s, z, (), const=const), LowerOptions(strategies=["cast-sub-mul"]))
    g = result.model.graph
    shapes = {i.name: list(i.dims) for i in g.initializer}
    made = {n.output[0]: n for n in g.node}
    for n in g.node:
        if n.op_type in ("Sub", "Mul"):
            operand = n.input[1]
            while operand in made and made[operand].op_type == "Cast":
                operand = made[operand].input[0]
            if const:
                assert shapes[operand] == [1, 1, 1]
            else:
                assert made[operand].op_type == "Reshape" and shapes[made[operand].input[1]] == [3]
    _check(result.model, x, s, z, (), fed=not const)


@pytest.mark.parametrize(
    "qt,shape,const,consumer",
    [
        ("i8", (3, 4, 5, 6), True, None),
        ("u16", (3, 4, 5, 6), False, "Relu"),
        ("i32", (4, 5, 19, 5, 6, 8), True, "Relu"),  # guarded: the fast branch reshapes nothing
        ("i4", (3, 4, 5), True, None),  # a 4-bit input: no Reshape needed, so the form applies
        ("u4", (2, 3, 4, 6), True, None),
    ],
)
def test_full_size_scale_blocked_in_the_inputs_own_shape(qt, shape, const, consumer):
    """A scale (and zero point) as large as the input: a blocked DequantizeLinear with one-element blocks
    along axis 0 of the input as it is (no Reshape of x or of the result), the reference's bits."""
    rng = np.random.default_rng(len(shape) + len(qt))
    axes = tuple(range(len(shape)))
    x, s, z = random_case(rng, shape, axes, qt, "f32")
    if qt == "i32":  # within the guard's bound: the DequantizeLinear branch runs
        x, z = (x % 100000).astype(np.int32), (z % 1000).astype(np.int32)
    four_bit = qt in ("i4", "u4")  # ORT's Python API takes no 4-bit array: a constant input
    result = lower_model(one_node_model(x, s, z, axes, const=const, consumer=consumer, x_const=four_bit))
    assert result.nodes[0].strategy == ("i32-guarded" if qt == "i32" else "dql-blocked")
    dqls = [n for n in _nodes(result.model.graph) if n.op_type == "DequantizeLinear"]
    assert len(dqls) == 1 and {a.name: onnx.helper.get_attribute_value(a) for a in dqls[0].attribute} == {
        "axis": 0,
        "block_size": 1,
    }
    assert dqls[0].input[0] == "x"  # no Reshape of the input (nor, so, of the result)
    _check(result.model, x, s, z, axes, fed=not const, consumer=consumer, x_fed=not four_bit)


@pytest.mark.parametrize("n", [96, 4099 * 4, 40000])
@pytest.mark.parametrize("const", [True, False])
@pytest.mark.parametrize("consumer", [None, "Relu"])
def test_one_dimensional_full_scale_as_rows(n, const, consumer):
    """A 1-D input with a scale (and zero point) as large as itself: reshaped into rows of its length's
    largest divisor up to 4096 for a blocked DequantizeLinear of one-element blocks (ORT's per-axis
    kernel on that last axis walks one-element rows): the reference's bits. The planner takes it where
    the rows are long (40000: rows of 4000); rows of 4 (4099 * 4, 4099 prime) cost ORT's blocked kernel
    more per element than Cast/Sub/Mul standalone (measured 4.2-4.7x against 1.8-2.2x ORT's per-tensor
    DequantizeLinear, ``bench_forms.py 16396:0:i8 --forms dql-blocked,cast-sub-mul --standalone``)."""
    rng = np.random.default_rng(n)
    x, s, z = random_case(rng, (n,), (0,), "i8", "f32")
    model = one_node_model(x, s, z, (0,), const=const, consumer=consumer)
    if n == 40000:
        assert lower_model(onnx.ModelProto.FromString(model.SerializeToString())).nodes[0].strategy == "dql-blocked"
    result = lower_model(model, LowerOptions(strategies=["dql-blocked"]))
    ops = [n.op_type for n in result.model.graph.node]
    assert result.nodes[0].strategy == "dql-blocked" and "DequantizeLinear" in ops
    dql = next(node for node in result.model.graph.node if node.op_type == "DequantizeLinear")
    assert {a.name: onnx.helper.get_attribute_value(a) for a in dql.attribute} == {"axis": 0, "block_size": 1}
    _check(result.model, x, s, z, (0,), fed=not const, consumer=consumer)


@pytest.mark.parametrize(
    "shape,axes,want,form",
    [
        ((6, 7, 5, 1), (3,), (), "dql-per-tensor"),  # the only axis has size 1
        ((3, 1, 5, 6), (0, 1), (0,), "dql-per-axis"),  # a one-channel axis beside a per-row one
        ((1, 40, 1, 30), (0, 1, 2), (1,), "dql-per-axis"),
    ],
)
@pytest.mark.parametrize("qt,rt", [("i8", "f32"), ("u4", "f32"), ("u8", "f16"), ("i32", "f64")])
@pytest.mark.parametrize("const", [True, False])
def test_quantization_axes_of_size_one_are_dropped(shape, axes, want, form, qt, rt, const):
    """A quantization axis of size 1 holds one scale value: the node is planned without it (a per-tensor
    or per-axis DequantizeLinear where one applies), its scale and zero point reshaped in the file or
    Squeezed when fed; the reference's bits. A fed 4-bit zero point keeps its axes (ORT has no 4-bit
    Squeeze)."""
    rng = np.random.default_rng(len(shape) * 10 + len(axes))
    x, s, z = random_case(rng, shape, axes, qt, rt)
    small = qt == "u4"
    m = one_node_model(x, s, z, axes, const=const, x_const=small)
    result = lower_model(m)
    g = result.model.graph
    ops = [n.op_type for n in g.node]
    if small and not const:  # (ORT's Python API takes no 4-bit array to run it with)
        assert "Squeeze" not in ops and result.nodes[0].strategy != form and result.nodes[0].dropped_axes == ()
        return
    assert result.nodes[0].dropped_axes == tuple(a for a in axes if a not in want)
    if qt == "i32":
        assert result.nodes[0].strategy.startswith("cast-sub-mul") and ops.count("Squeeze") == (0 if const else 2)
    else:
        assert result.nodes[0].strategy == form
        made = {n.output[0]: n for n in g.node}
        scale = next(n for n in g.node if n.op_type == "DequantizeLinear").input[1]
        while scale in made and made[scale].op_type == "Cast":  # an f16 scale's Cast to f32
            scale = made[scale].input[0]
        dims = {t.name: list(t.dims) for t in g.initializer}
        if const:
            assert dims[scale] == [shape[a] for a in want] and "Squeeze" not in ops
        else:
            assert ops.count("Squeeze") == 2
    _check(result.model, x, s, z, axes, fed=not const, x_fed=not small)


@pytest.mark.parametrize(
    "shape,axes,adopted,dropped",
    [
        ((3, 14, 361, 1), (0, 1, 2), (3,), ()),  # a scale as large as the input
        ((400, 7, 1, 1), (1,), (2, 3), ()),
        ((40, 1, 7, 1), (1, 2), (3,), (1,)),
        ((60, 1, 1), (0, 2), (1,), ()),  # a trailing quantization axis of 1 stays one
    ],
)
@pytest.mark.parametrize("qt,rt", [("i8", "f32"), ("u16", "f16"), ("i32", "f32"), ("u4", "f32")])
@pytest.mark.parametrize("const", [True, False])
def test_trailing_broadcast_axes_of_size_one_are_adopted(shape, axes, adopted, dropped, qt, rt, const):
    """Broadcast axes of size 1 after a last quantization axis are planned as quantization axes: the
    report says which, a constant scale and zero point get the dims in the file, fed ones an Unsqueeze;
    the reference's bits."""
    rng = np.random.default_rng(sum(shape) + len(axes))
    x, s, z = random_case(rng, shape, axes, qt, rt)
    small = qt == "u4"
    if small and not const:  # a fed 4-bit zero point keeps its shape (ORT has no 4-bit Unsqueeze)
        result = lower_model(one_node_model(x, s, z, axes, const=False, x_const=True))
        assert result.nodes[0].adopted_axes == () and not any("_unit" in n.output[0] for n in result.model.graph.node)
        return
    result = lower_model(one_node_model(x, s, z, axes, const=const, x_const=small))
    assert (result.nodes[0].adopted_axes, result.nodes[0].dropped_axes) == (adopted, dropped)
    reshaped = [n.op_type for n in result.model.graph.node if "_unit" in n.output[0]]
    assert reshaped == ([] if const else (["Squeeze"] if dropped else []) + ["Unsqueeze"]) * 2
    _check(result.model, x, s, z, axes, fed=not const, x_fed=not small)


@pytest.mark.parametrize("shape,axes", [((0, 1), (0,)), ((1, 1, 0), (1,)), ((0, 5, 1, 1), (0, 1))])
@pytest.mark.parametrize("zp", [False, True])
def test_an_empty_input_keeps_its_unit_axes(shape, axes, zp):
    """An input known to be empty computes nothing (``empty-output``): no axis of size 1 changes kind, so no
    Squeeze or Unsqueeze of a fed scale or zero point is left without a reader (it crashed the pipeline)."""
    rng = np.random.default_rng(len(shape))
    x, s, z = random_case(rng, shape, axes, "u8", "f32", zp=zp)
    result = lower_model(one_node_model(x, s, z, axes, const=False))
    got = result.nodes[0]
    assert (got.strategy, got.dropped_axes, got.adopted_axes) == ("empty-output", (), ())
    _check(result.model, x, s, z, axes, fed=True)


def test_a_fused_weight_keeps_its_per_axis_form():
    """A constant Conv weight ``(C,1,1,1)`` with a scale per output channel takes the per-axis
    DequantizeLinear ORT fuses: its trailing axes of 1 stay broadcast ones."""
    rng = np.random.default_rng(5)
    w, s, z = random_case(rng, (32, 1, 1, 1), (0,), "u8", "f32")
    nodes = [
        odq.make_node(["w", "s", "z"], ["wd"], axes=[0], name="dq"),
        onnx.helper.make_node("Conv", ["x", "wd"], ["y"], group=32),
    ]
    inits = [onnx.numpy_helper.from_array(a, n) for a, n in ((w, "w"), (s, "s"), (z, "z"))]
    g = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 32, 8, 8])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 32, 8, 8])],
        inits,
    )
    m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 21), odq.schema.opset_import()])
    result = lower_model(m)
    got = result.nodes[0]
    assert (got.strategy, got.weight, got.adopted_axes) == ("dql-per-axis", True, ())
    assert [n.op_type for n in result.model.graph.node] == ["DequantizeLinear", "Conv"]


@pytest.mark.parametrize(
    "shape,axes",
    [
        ((30, 6, 5), (2,)),  # a per-channel scale on a last axis of 5 under broadcast rows
        ((4, 21, 3), (0, 2)),  # a leading quantization axis before the tiled run
        ((4, 5, 12, 2, 3), (1, 3, 4)),  # leading runs of both kinds before the tiled one
    ],
)
@pytest.mark.parametrize("qt,rt", [("u8", "f32"), ("i16", "f32"), ("i8", "f16"), ("i8", "bf16"), ("u16", "bf16")])
@pytest.mark.parametrize("const", [True, False])
def test_tiled_dequantizelinear_exact(shape, axes, qt, rt, const):
    """The scale's short trailing run tiled k times over a reshaped input, then a blocked DequantizeLinear
    (the scale folded when constant, a Tile when fed): the reference's bits, the input's shape restored."""
    _check_tiled("dql-tiled", np.random.default_rng(len(shape) * 7 + len(axes)), shape, axes, qt, rt, const)


@pytest.mark.parametrize(
    "shape,axes,named",
    [
        ((6, 8, 4, 3), (3,), (0,)),  # a batch before a per-channel last axis of 3 (NHWC)
        ((6, 8, 4, 3), (3,), (0, 2)),  # several dims of the joined rows known only at run time
        ((5, 4, 6, 2), (1, 3), (0, 2)),  # a quantization axis between: the batch is a leading run
    ],
)
@pytest.mark.parametrize("strategy", ["dql-tiled", "cast-sub-mul-tiled"])
@pytest.mark.parametrize("qt,rt", [("u8", "f32"), ("i16", "f16")])
@pytest.mark.parametrize("const", [True, False])
def test_tiled_forms_join_rows_known_only_at_run_time(shape, axes, named, strategy, qt, rt, const):
    """Rows whose dims are known only at run time are joined by a divisor of their known dims: the input
    reshaped to ``(-1, k * run)`` (a leading run from its Shape), the output to the input's Shape; the
    reference's bits at the declared size, at another batch and at an empty one."""
    rng = np.random.default_rng(len(shape) + len(named) + len(axes))
    x, s, z = random_case(rng, shape, axes, qt, rt)
    m = one_node_model(x, s, z, axes, const=const)
    for value in (m.graph.input[0], m.graph.output[0]):
        for i in named:
            value.type.tensor_type.shape.dim[i].dim_param = f"n{i}"
    if len(axes) == 2:  # a leading run and the joined rows known only at run time: one -1 is not enough
        with pytest.raises(odq.DequantizeError, match="joins rows known only at run time after other such dims"):
            lower_model(m, LowerOptions(strategies=[strategy]))
        m = one_node_model(x, s, z, axes, const=const)
        for value in (m.graph.input[0], m.graph.output[0]):
            value.type.tensor_type.shape.dim[0].dim_param = "n"
    result = lower_model(m, LowerOptions(strategies=[strategy]))
    g = result.model.graph
    rows = next(n for n in g.node if n.op_type == "Reshape" and n.input[0] == "x")
    assert result.nodes[0].strategy == strategy
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in g.initializer}
    if len(axes) == 1:  # joined rows known only at run time: a -1
        assert -1 in consts[rows.input[1]].tolist()
    else:  # the leading run read from the input's Shape
        assert rows.input[1] not in consts
    for batch in (shape[0], 3, 0):
        xb = np.resize(x, (batch, *shape[1:]))
        _check(result.model, xb, s, z, axes, fed=not const)


@pytest.mark.parametrize(
    "shape,axes,view,axis",
    [
        ((3, 2, 5, 5, 7), (0, 2, 3), [150, 7], 0),  # a broadcast axis between the axes, a run after them
        ((4, 3, 2, 5, 6), (1, 3), [4, 30, 6], 1),  # and a leading broadcast run, kept outside the span
        ((2, 3, 4, 5), (1, 3), [2, 60], 1),  # no run after the span: the axis is the view's last
    ],
)
@pytest.mark.parametrize("qt,rt", [("u8", "f32"), ("i16", "f32"), ("i8", "f16"), ("i8", "bf16")])
@pytest.mark.parametrize("const", [True, False])
def test_expanded_per_axis_dequantizelinear_exact(shape, axes, view, axis, qt, rt, const):
    """Axes apart: the input viewed as (leading run, span, trailing run), the scale and zero point expanded
    over the span's broadcast axes (folded when constant, Reshape -> Expand -> Reshape when fed), one
    per-axis DequantizeLinear along the span: the reference's bits, the input's shape restored."""
    rng = np.random.default_rng(len(shape) * 11 + len(axes))
    x, s, z = random_case(rng, shape, axes, qt, rt)
    m = one_node_model(x, s, z, axes, const=const)
    if rt == "bf16" and not const:
        with pytest.raises(odq.DequantizeError, match="ORT has no bf16 Expand"):
            lower_model(m, LowerOptions(strategies=["dql-expanded"]))
        return
    result = lower_model(m, LowerOptions(strategies=["dql-expanded"]))
    g = result.model.graph
    ops = [n.op_type for n in g.node]
    assert result.nodes[0].strategy == "dql-expanded" and ops[0] == "Reshape" and ops[-1] == "Reshape"
    assert ("Expand" in ops) != const
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in g.initializer}
    assert consts[g.node[0].input[1]].tolist() == view
    (dql,) = [n for n in g.node if n.op_type == "DequantizeLinear"]
    assert [(a.name, a.i) for a in dql.attribute] == [("axis", axis)]
    _check(result.model, x, s, z, axes, fed=not const)


@pytest.mark.parametrize("const", [True, False])
def test_expanded_rows_in_a_scan(const):
    """An f16 model output of 64K-4M-element rows is chunked by a Scan over axis 0, each row lowered by the
    best other form: here the expanded per-axis DequantizeLinear, whose scale is the row's own (scanned
    when 0 is an axis). The reference's bits."""
    shape, axes = (4, 3, 2, 5, 5, 2286), (0, 1, 3, 4)
    x, s, z = random_case(np.random.default_rng(3), shape, axes, "u8", "f16")
    result = lower_model(one_node_model(x, s, z, axes, const=const))
    (scan,) = result.model.graph.node
    body = [n.op_type for n in next(a.g for a in scan.attribute if a.name == "body").node]
    assert result.nodes[0].strategy == "scan-chunked" and "Expand" in body and "DequantizeLinear" in body
    _check(result.model, x, s, z, axes, fed=not const)


@pytest.mark.parametrize(
    "shape,axes,qt,rt,const",
    [
        ((0,), (0,), "i8", "f32", True),
        ((3, 0, 5), (0, 1), "u8", "f32", True),
        ((3, 0, 5, 7), (0, 2), "i16", "f16", False),
        ((0, 4, 5, 7), (1, 3), "u8", "bf16", True),
        ((2, 0), (), "i32", "f64", False),
    ],
)
def test_an_empty_input_gives_an_empty_output(shape, axes, qt, rt, const):
    """An input known to hold no elements: its output is an empty constant of the output's shape and type
    (no Reshape, whose 0 would mean "copy that dim"); ORT returns it as the reference does."""
    x, s, z = random_case(np.random.default_rng(1), shape, axes, qt, rt)
    result = lower_model(one_node_model(x, s, z, axes, const=const))
    assert [n.strategy for n in result.nodes] == ["empty-output"] and not result.model.graph.node
    onnx.checker.check_model(result.model, full_check=True)
    (y,) = run_ort(result.model, {"x": x} if const else {"x": x, "s": s, "z": z})
    ref = odq.dequantize(x, s, z, axes=axes)
    assert y.shape == ref.shape and y.dtype == (np.float32 if rt == "bf16" else ref.dtype)


def test_reshaping_forms_keep_a_dim_of_zero():
    """The forms that reshape the input mark every Reshape ``allowzero`` (opset 14+): a dim of 0 stays 0
    where it would otherwise copy the input's dim, known at lowering (a form forced on an empty input) or
    only at run time (symbolic dims, shapes computed by Shape -> ... -> Reshape, a batch of 0)."""
    x, s, z = random_case(np.random.default_rng(2), (3, 0, 5, 7), (0, 1), "u8", "f32")
    result = lower_model(one_node_model(x, s, z, (0, 1)), LowerOptions(strategies=["dql-merged-axes"]))
    reshapes = [n for n in result.model.graph.node if n.op_type == "Reshape"]
    assert reshapes and all([(a.name, a.i) for a in n.attribute] == [("allowzero", 1)] for n in reshapes)
    (y,) = run_ort(result.model, {"x": x})
    assert y.shape == (3, 0, 5, 7)
    x, s, z = random_case(np.random.default_rng(3), (0, 4, 5), (1, 2), "i8", "f32")
    result = lower_model(one_node_model(x, s, z, (1, 2), symbolic=True), LowerOptions(strategies=["dql-merged-axes"]))
    assert any(n.op_type == "Shape" for n in result.model.graph.node)
    (y,) = run_ort(result.model, {"x": x})
    assert y.shape == (0, 4, 5)


def _nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Every node of ``graph`` and its subgraphs."""
    out = []
    for n in graph.node:
        out.append(n)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out.extend(_nodes(a.g))
    return out


def _op_types(graph: onnx.GraphProto) -> list[str]:
    """Every node's op type in ``graph`` and its subgraphs."""
    out = []
    for n in graph.node:
        out.append(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out += _op_types(a.g)
    return out


B = 1 << 23


@pytest.mark.parametrize(
    "x_range,zp_range,fast",
    [
        ((-(B - 1), B - 1), (-(B - 1), B - 1), True),  # |x - zp| up to 2**24 - 2: the DequantizeLinear branch
        ((B - 8, B + 8), (-(B - 1), -(B - 8)), False),  # x reaches 2**23: float64 (x - zp) > 2**24
        ((-1000, 1000), (B - 4, B + 4), False),  # a fed zero point reaches 2**23
        ((-(2**31), 2**31 - 1), (-(2**31), 2**31 - 1), False),  # the type's extremes: int32 would wrap
    ],
)
@pytest.mark.parametrize("shape,axes", [((3, 70, 50), ()), ((64, 129), (1,)), ((8, 26, 10), (0, 2))])
def test_i32_guard_exact_on_both_branches(shape, axes, x_range, zp_range, fast):
    """The run-time guard (ReduceMax/ReduceMin of x and of the fed zero point cast to f32, an If): where both lie within
    +-2**23 ORT's int32 DequantizeLinear runs, where not the float64 form; the reference's bits either way
    (near the bound an int32 subtraction cast to f32 would round, beyond it wrap)."""
    rng = np.random.default_rng(len(shape) + int(fast))
    x, s, z = random_case(rng, shape, axes, "i32", "f32")
    x = rng.integers(*x_range, size=shape, endpoint=True, dtype=np.int64).astype(np.int32)
    z = rng.integers(*zp_range, size=z.shape, endpoint=True, dtype=np.int64).astype(np.int32)
    result = lower_model(one_node_model(x, s, z, axes, const=False, consumer="Relu"))
    assert result.nodes[0].strategy == "i32-guarded"
    assert [n.op_type for n in result.model.graph.node][-2:] == ["If", "Relu"]
    onnx.checker.check_model(result.model, full_check=True)
    (y,) = run_ort(result.model, {"x": x, "s": s, "z": z})
    assert same_bits(y, np.maximum(odq.dequantize(x, s, z, axes=axes), 0))
    # the same through the DequantizeLinear alone (ORT's int32 semantics): exact only within the bound
    wrapped = lower_model(one_node_model(x, s, z, axes, const=False), LowerOptions(wrap_int32=True))
    (w,) = run_ort(wrapped.model, {"x": x, "s": s, "z": z})
    assert same_bits(w, odq.dequantize(x, s, z, axes=axes)) or not fast


@pytest.mark.parametrize(
    "x_edge,zp_edge,within",
    [
        ((-(B - 1), B - 1), 0, True),
        ((0, B), 0, False),
        ((-B, 0), 0, False),
        ((0, 2**24 + 1), 0, False),  # float32 rounds it to 2**24: still not below 2**23
        ((0, 2**31 - 1), 0, False),
        ((0, 1), B, False),  # the fed zero point
        ((0, 1), -(B - 1), True),
    ],
)
@pytest.mark.parametrize("as_f32", [True, False])
def test_i32_guard_checks_the_bound_as_int32_or_through_float32(x_edge, zp_edge, within, as_f32, monkeypatch):
    """The guard reduces the input as it is or cast to float32, whichever the calibrated table says is
    cheaper (ORT reduces float32 with vector instructions, int32 an element at a time): the cast rounds
    monotonically and 2**23 is a float32, so either way the If takes the DequantizeLinear branch exactly
    where every value lies strictly within +-2**23."""
    monkeypatch.setattr(guarded, "checks_as_f32", lambda info: as_f32)
    rng = np.random.default_rng(9)
    shape, axes = (16, 300), (1,)
    x, s, z = random_case(rng, shape, axes, "i32", "f32")
    x = rng.integers(-1000, 1000, size=shape).astype(np.int32)
    x.reshape(-1)[[7, 4000]] = x_edge
    z = np.full(z.shape, 5, np.int32)
    z[3] = zp_edge
    result = lower_model(one_node_model(x, s, z, axes, const=False))
    g = result.model.graph
    (guard,) = [n for n in g.node if n.op_type == "If"]
    reduced = {n.input[0] for n in g.node if n.op_type in ("ReduceMax", "ReduceMin")}
    casts = {n.output[0] for n in g.node if n.op_type == "Cast"}
    assert reduced <= casts if as_f32 else reduced == {"x", "z"}
    g.output.append(helper.make_tensor_value_info(guard.input[0], onnx.TensorProto.BOOL, []))
    y, cond = run_ort(result.model, {"x": x, "s": s, "z": z})
    assert bool(cond) == within
    assert same_bits(y, odq.dequantize(x, s, z, axes=axes))


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("shape,axes", [((3, 70, 50), ()), ((64, 129), (1,))])
def test_i32_guard_to_f16_gives_the_float64_forms_bits(shape, axes, fast):
    """To f16 the guard's DequantizeLinear and Cast round twice (through f32), as the float64 form's Cast
    does (precision.md allows 1 ULP there): the same bits as Cast/Sub/Mul in float64 on either branch."""
    rng = np.random.default_rng(len(shape))
    x, s, z = random_case(rng, shape, axes, "i32", "f16")
    if fast:
        x = rng.integers(-(B - 1), B, size=shape).astype(np.int32)
        z = rng.integers(-(B - 1), B, size=z.shape).astype(np.int32)
    m = one_node_model(x, s, z, axes, const=False)
    guarded = lower_model(onnx.ModelProto.FromString(m.SerializeToString()))
    exact = lower_model(m, LowerOptions(strategies=["cast-sub-mul"]))
    assert guarded.nodes[0].strategy == "i32-guarded"
    feeds = {"x": x, "s": s, "z": z}
    assert same_bits(run_ort(guarded.model, feeds)[0], run_ort(exact.model, feeds)[0])


@pytest.mark.parametrize("small", [True, False])
def test_i32_guard_on_a_constant_input_is_decided_when_lowering(small):
    """A constant i32 input (a bias, say) with a constant zero point: the check is made when lowering, and
    only the chosen form is emitted (no ReduceMax, no If): the DequantizeLinear for small values, the
    float64 form for large ones; the reference's bits."""
    rng = np.random.default_rng(4)
    x, s, z = random_case(rng, (64, 129), (1,), "i32", "f32")
    bound = B if small else 2**31 - 1
    x = rng.integers(-(bound - 1), bound, size=x.shape).astype(np.int32)
    z = rng.integers(-1000, 1000, size=z.shape).astype(np.int32)
    result = lower_model(one_node_model(x, s, z, (1,), x_const=True))
    ops = [n.op_type for n in result.model.graph.node]
    assert result.nodes[0].strategy == "i32-guarded" and "If" not in ops and "ReduceMax" not in ops
    assert ("DequantizeLinear" in ops) == small
    (y,) = run_ort(result.model, {})
    assert same_bits(y, odq.dequantize(x, s, z, axes=(1,)))


@pytest.mark.parametrize(
    "dims,axes,zp,rt,const",
    [
        (("n", "t", 6), (2,), True, "f32", True),  # a scale per channel after dims known at run time
        (("n", 6), (1,), False, "f32", True),
        (("n", "t", 6), (2,), True, "f16", False),  # an f16 output, the scale and zero point fed
        (("n", 3, 6), (1,), True, "f32", True),  # the open block next to a quantized axis
    ],
)
def test_an_open_block_over_dims_known_at_run_time(dims, axes, zp, rt, const):
    """A per-channel scale over dims of sizes known only at run time is one blocked DequantizeLinear whose
    block (``OPEN_BLOCK``) holds the whole axis, its scale sliced to that axis's size (1, or 0 when empty):
    exact for every size, an empty input included, under ORT and the validation's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    from onnx_dequant.lowering.strategies.dql import OPEN_BLOCK
    from onnx_dequant.validation.standard_ops import OPS

    rng = np.random.default_rng(len(dims) + len(axes))
    known = tuple(d if isinstance(d, int) else 3 for d in dims)
    x, s, z = random_case(rng, known, axes, "i8", rt, zp=zp)
    m = one_node_model(x, s, z, axes, const=const)
    m.graph.input[0].CopyFrom(vi("x", "i8", list(dims)))
    result = lower_model(m)
    assert result.nodes[0].strategy == "dql-blocked"
    (dql,) = [n for n in result.model.graph.node if n.op_type == "DequantizeLinear"]
    assert helper.get_attribute_value(next(a for a in dql.attribute if a.name == "block_size")) == OPEN_BLOCK
    onnx.checker.check_model(result.model, full_check=True)
    evaluator = ReferenceEvaluator(result.model, new_ops=OPS)
    for size in (0, 1, 2, 5):
        shape = tuple(d if isinstance(d, int) else size + i for i, d in enumerate(dims))
        xs = random_case(rng, shape, (), "i8", rt)[0]
        feeds = {"x": xs} | ({} if const else {"s": s} | ({} if z is None else {"z": z}))
        want = odq.dequantize(xs, s, z, axes=axes)
        (got,) = run_ort(result.model, feeds)
        assert got.shape == shape and same_bits(got, want), shape
        assert same_bits(evaluator.run(None, feeds)[0], want), shape


def test_shape_arithmetic_is_computed_once_per_node():
    """Over dims known at run time, the input's view and the scale's and zero point's (reshaped to the same
    merged dims) read one Shape/ReduceProd, and equal int64 constants are one initializer."""
    rng = np.random.default_rng(8)
    x, s, z = random_case(rng, (3, 4, 6), (0, 1), "u8", "f32")
    m = one_node_model(x, s, z, (0, 1), const=False, symbolic=True)
    result = lower_model(m)
    assert result.nodes[0].strategy == "dql-merged-axes"
    ops = [n.op_type for n in result.model.graph.node]
    assert ops.count("ReduceProd") == 1 and ops.count("Reshape") == 4, ops
    values = [tuple(numpy_helper.to_array(t).tolist()) for t in result.model.graph.initializer]
    assert len(values) == len(set(values)), values
    (got,) = run_ort(result.model, {"x": x, "s": s, "z": z})
    assert same_bits(got, odq.dequantize(x, s, z, axes=(0, 1)))


@pytest.mark.parametrize(
    "dims,axes,zp",
    [
        (("n", 4, 8), (0, 1), False),  # the scale, fed along a symbolic axis, reshaped by its own dims
        (("n", 4, 8, 6), (1, 3), False),  # a blocked form would Expand the scale to the input's Shape
        (("n", 4, 8), (0, 1), True),
    ],
)
def test_a_4_bit_input_over_symbolic_dims_reads_no_shape_of_it(dims, axes, zp):
    """ORT 1.32 has no Shape kernel for 4-bit types: no form over dims known at run time reads the input's."""
    from onnx import TensorProto

    rng = np.random.default_rng(len(dims) + zp)
    shape = tuple(3 if isinstance(d, str) else d for d in dims)
    x, s, z = random_case(rng, shape, axes, "i4", "f32", zp=zp)
    sdims = [dims[a] for a in axes]
    nodes = [helper.make_node("Cast", ["x8"], ["x"], to=TensorProto.INT4)]
    inputs, feeds = [vi("x8", "i8", list(dims)), vi("s", "f32", sdims)], {"x8": x.astype(np.int8), "s": s}
    names = ["x", "s"]
    if zp:
        inputs.append(vi("z8", "i8", sdims))
        nodes.append(helper.make_node("Cast", ["z8"], ["z"], to=TensorProto.INT4))
        feeds["z8"], names = z.astype(np.int8), [*names, "z"]
    nodes.append(odq.make_node(names, ["y"], axes=list(axes), name="dq"))
    m = model_of(nodes, inputs, [vi("y", "f32", list(dims))])
    result = lower_model(m)
    shapes_of = {n.input[0] for n in result.model.graph.node if n.op_type == "Shape"}
    assert not shapes_of & {"x", "z"}, (result.nodes[0].strategy, shapes_of)
    (got,) = run_ort(result.model, feeds)
    assert same_bits(got, odq.dequantize(x, s, z, axes=axes))


def test_below_opset_14_no_reshape_merges_dims_known_at_run_time():
    """Below opset 14 a Reshape has no ``allowzero``: a merged dim of 0 at run time would be read as "copy
    the input's dim". Such layouts are refused (``tests/test_planner.py`` pins which)."""
    rng = np.random.default_rng(15)
    x, s, z = random_case(rng, (3, 2, 6), (0, 1), "u8", "f32")
    m = one_node_model(x, s, z, (0, 1), const=False, opset=13)
    m.graph.input[0].CopyFrom(vi("x", "u8", ["a", "b", 6]))
    for i, t in ((1, "f32"), (2, "u8")):
        m.graph.input[i].CopyFrom(vi(m.graph.input[i].name, t, ["a", "b"]))
    result = lower_model(m)
    assert "misread an empty input" in result.nodes[0].refused["dql-merged-axes"]
    for shape in ((3, 2, 6), (3, 0, 6)):
        xs, ss, zs = random_case(rng, shape, (0, 1), "u8", "f32")
        (got,) = run_ort(result.model, {"x": xs, "s": ss, "z": zs})
        assert got.shape == shape and same_bits(got, odq.dequantize(xs, ss, zs, axes=(0, 1)))


@pytest.mark.parametrize("x_range", [(-1000, 1000), (-(2**31), 2**31 - 1)])
def test_i32_guard_leaves_its_dequantizelinears_view_to_one_reshape_after_the_if(x_range):
    """The guard's DequantizeLinear branch over merged axes ends at its DequantizeLinear (a Reshape inside an
    If branch copies into the If's output); one Reshape after the If gives the input's shape, on both
    branches."""
    rng = np.random.default_rng(11)
    shape, axes = (4, 30, 20, 12), (1, 2)  # rows of whole vectors: the merged view beats a blocked layout
    x, s, z = random_case(rng, shape, axes, "i32", "f32")
    x = rng.integers(*x_range, size=shape, endpoint=True, dtype=np.int64).astype(np.int32)
    result = lower_model(one_node_model(x, s, z, axes, const=False, consumer="Relu"))
    assert result.nodes[0].strategy == "i32-guarded"
    assert [n.op_type for n in result.model.graph.node][-3:] == ["If", "Reshape", "Relu"]
    (guard,) = [n for n in result.model.graph.node if n.op_type == "If"]
    then = next(a.g for a in guard.attribute if a.name == "then_branch")
    assert then.node[-1].op_type == "DequantizeLinear"
    (y,) = run_ort(result.model, {"x": x, "s": s, "z": z})
    assert y.shape == shape and same_bits(y, np.maximum(odq.dequantize(x, s, z, axes=axes), 0))


def test_an_input_empty_along_a_known_dim_and_others_known_at_run_time_takes_no_expanded_scale():
    """(0, 64, t): no empty constant can be made (t is known only at run time), and a blocked DequantizeLinear
    whose scale is expanded to a dim of 0 fails in ORT 1.32 at its default level (a review found it); a form
    without Expand computes the empty output."""
    rng = np.random.default_rng(12)
    x, s, z = random_case(rng, (0, 64, 3), (1,), "u8", "f32")
    m = one_node_model(x, s, z, (1,))
    m.graph.input[0].CopyFrom(vi("x", "u8", [0, 64, "t"]))
    result = lower_model(m)
    assert "Expand" not in [n.op_type for n in result.model.graph.node]
    for t in (0, 3):
        xs = np.zeros((0, 64, t), np.uint8)
        (got,) = run_ort(result.model, {"x": xs})
        assert got.shape == (0, 64, t) and got.dtype == np.float32
