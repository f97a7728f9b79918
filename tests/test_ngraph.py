"""nGraph importer: sample models, format eras, names, Constant values, and each op's nGraph semantics.

Every converted model passes ``onnx.checker`` (full check) and runs; results are compared with
``ngraph_oracle`` (an independent NumPy transcription of nGraph's reference kernels): bit for bit where
the computation is exact, in ULPs where a runtime may round differently (math functions, sums).
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from ngraph_oracle import evaluate, ngraph_quantize
from onnx.reference import ReferenceEvaluator

import onnx_dequant as odq
from onnx_dequant.compare import same_bits, ulp_distance
from onnx_dequant.ngraph.writer import ERAS, FunctionWriter, dumps

MODELS = Path(__file__).resolve().parents[1] / "models"


def convert(w: FunctionWriter | list, **kw) -> onnx.ModelProto:
    text = dumps(w if isinstance(w, list) else [w])
    model = odq.ngraph.convert(text, **kw)
    onnx.checker.check_model(model, full_check=True)
    return model


def ort_run(model: onnx.ModelProto, feeds: dict, level: str = "ORT_ENABLE_ALL", **config: str) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    for k, v in config.items():
        so.add_session_config_entry(k, v)
    so.log_severity_level = 3
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def check(
    w: FunctionWriter, feeds: dict, *, ulps: int = 0, levels=("ORT_ENABLE_ALL", "ORT_DISABLE_ALL")
) -> onnx.ModelProto:
    """Convert, run in ORT at each level, compare every result with the oracle."""
    model = convert(w)
    expected = evaluate(w.to_json(), feeds)
    for level in levels:
        got = ort_run(model, feeds, level)
        for (name, e), g in zip(expected.items(), got):
            assert g.dtype == e.dtype and g.shape == e.shape, (name, g.dtype, g.shape, e.dtype, e.shape)
            if ulps == 0:
                assert same_bits(g, e), (name, level, g, e)
            else:
                # sums of products may cancel: then the ULP distance of the result says little
                close = np.max(ulp_distance(g, e), initial=0) <= ulps or np.allclose(g, e, rtol=1e-5, atol=1e-5)
                assert close, (name, level, g, e)
    return model


# ---------------------------------------------------------------- sample models

RNG = np.random.default_rng(7)
SAMPLE_FEEDS = {
    "quantized_mlp.json": lambda: {"Parameter_0": RNG.standard_normal((5, 64)).astype(np.float32)},
    "qdq_chain.json": lambda: {
        "Parameter_0": (RNG.standard_normal((4, 6, 8)) * 3).astype(np.float32),
        "Parameter_1": RNG.uniform(0.02, 0.1, 6).astype(np.float32),
    },
    "conv_block.json": lambda: {"Parameter_0": RNG.standard_normal((1, 3, 12, 12)).astype(np.float32)},
}


def test_sample_models_are_current_and_small(tmp_path):
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, str(MODELS.parent / "scripts" / "make_models.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for name in SAMPLE_FEEDS:
        assert (tmp_path / name).read_bytes() == (MODELS / name).read_bytes(), (
            f"{name} differs from make_models.py's output"
        )
        assert (MODELS / name).stat().st_size < 1 << 20


@pytest.mark.parametrize("name", sorted(SAMPLE_FEEDS))
def test_sample_model_converts_and_runs(name):
    path = MODELS / name
    model = odq.ngraph.convert(path)
    onnx.checker.check_model(model, full_check=True)
    assert any(odq.schema.is_dequantize(n) for n in model.graph.node)
    feeds = SAMPLE_FEEDS[name]()
    expected = evaluate(json.loads(path.read_text()), feeds)
    # 1. the model as converted, keeping our op, under onnx's reference evaluator
    got_ref = ReferenceEvaluator(model, new_ops=[odq.DequantizeOp]).run(None, feeds)
    # 2. the model as converted, our op running as the Python kernel in ORT
    got_kernel = odq.session(model).run(None, feeds)
    # 3. lowered to standard ONNX, in ORT: basic optimizations, and all of them with MatMulNBits keeping f32
    #    activations (its default accuracy level quantizes them: see docs/ngraph.md)
    lowered = odq.lower(model)
    got_basic = ort_run(lowered, feeds, "ORT_ENABLE_BASIC")
    got_all = ort_run(lowered, feeds, "ORT_ENABLE_ALL", **{"session.qdq_matmulnbits_accuracy_level": "0"})
    for got in (got_ref, got_kernel, got_basic, got_all):
        assert len(got) == len(expected)
        for (rname, e), g in zip(expected.items(), got):
            assert g.dtype == e.dtype and g.shape == e.shape
            if e.dtype.kind == "f":
                # f32 matrix products and softmax: the oracle sums in f64, runtimes in f32
                assert np.max(ulp_distance(g, e)) <= 64 or np.allclose(g, e, rtol=1e-5, atol=1e-6), (name, rname)
            else:
                assert same_bits(g, e), (name, rname)


def test_sample_qdq_chain_is_exact():
    path = MODELS / "qdq_chain.json"
    feeds = SAMPLE_FEEDS["qdq_chain.json"]()
    expected = evaluate(json.loads(path.read_text()), feeds)
    got = odq.session(odq.ngraph.convert(path)).run(None, feeds)
    for (rname, e), g in zip(expected.items(), got):
        assert same_bits(g, e), rname


def test_names_inputs_outputs_and_dynamic_dims():
    model = odq.ngraph.convert(MODELS / "quantized_mlp.json")
    g = model.graph
    assert [i.name for i in g.input] == ["Parameter_0"]
    dims = g.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and not dims[0].HasField("dim_value") and dims[1].dim_value == 64
    js = json.loads((MODELS / "quantized_mlp.json").read_text())[0]
    assert [o.name for o in g.output] == js["result"]
    consts = {op["name"] for op in js["ops"] if op["op"] == "Constant"}
    assert consts <= {t.name for t in g.initializer}
    nodes = {n.name for n in g.node}
    for op in js["ops"]:
        if op["op"] not in ("Parameter", "Constant", "Result"):
            assert op["name"] in nodes
    dq = [n for n in g.node if odq.schema.is_dequantize(n)]
    assert [n.name for n in dq] == [op["name"] for op in js["ops"] if op["op"] == "Dequantize"]
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 21), (odq.DOMAIN, 1)}
    # the output of an op also read by other ops keeps the Result's name
    assert g.output[1].name in {o for n in g.node for o in n.output}


@pytest.mark.parametrize("opset", [13, 17, 21, 23, 27])
@pytest.mark.parametrize("name", sorted(SAMPLE_FEEDS))
def test_opset_choice(opset, name):
    model = odq.ngraph.convert(MODELS / name, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    assert {o.domain: o.version for o in model.opset_import}[""] == opset
    if opset == 13:  # the oldest opset runs too
        feeds = SAMPLE_FEEDS[name]()
        expected = evaluate(json.loads((MODELS / name).read_text()), feeds)
        got = ReferenceEvaluator(model, new_ops=[odq.DequantizeOp]).run(None, feeds)
        for e, g in zip(expected.values(), got):
            assert np.allclose(g, e, rtol=1e-5, atol=1e-5)  # f32 sums in another order


def test_function_choice_default_last():
    a = FunctionWriter("first")
    x = a.parameter("f32", [2])
    a.result(a.op("Negative", x))
    b = FunctionWriter("second")
    y = b.parameter("f32", [2])
    b.result(b.op("Sqrt", y))
    assert [n.op_type for n in convert([a, b]).graph.node] == ["Sqrt"]
    assert [n.op_type for n in convert([a, b], function="first").graph.node] == ["Neg"]
    assert convert([a, b], function="second").graph.name == "second"


def test_sources_path_text_parsed(tmp_path):
    w = FunctionWriter()
    w.result(w.op("Relu", w.parameter("f32", [3])))
    text = dumps([w])
    p = tmp_path / "g.json"
    p.write_text(text)
    models = [
        odq.ngraph.convert(p),
        odq.ngraph.convert(str(p)),
        odq.ngraph.convert(text),
        odq.ngraph.convert(json.loads(text)),
        odq.ngraph.convert(text.encode()),
    ]
    for m in models:
        assert m.graph.SerializeToString() == models[0].graph.SerializeToString()
    assert p.read_text() == text  # input untouched


# ---------------------------------------------------------------- format eras


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("kind", ["none", "numpy", "pdpd"])
def test_broadcast_spellings_by_era(era, kind):
    w = FunctionWriter(era=era)
    a = w.parameter("f32", [2, 3, 4])
    # PDPD: b (3,) placed at axis 1; the string spelling has no axis (-1: b's dims end a's), so (3, 4)
    shape = {"none": [2, 3, 4], "numpy": [3, 1], "pdpd": [3, 4] if era == "v0.29" else [3]}[kind]
    b = w.parameter("f32", shape)
    w.result(w.binary("Add", a, b, broadcast=kind, axis=1 if kind == "pdpd" and era != "v0.29" else -1))
    feeds = {
        "Parameter_0": RNG.standard_normal((2, 3, 4)).astype(np.float32),
        "Parameter_1": RNG.standard_normal(shape).astype(np.float32),
    }
    check(w, feeds)


def test_oldest_spellings_value_type_and_legacy_result():
    js = [
        {
            "name": "old",
            "parameters": ["Parameter_0"],
            "result": ["Multiply_2"],  # names the last op, no Result ops
            "ops": [
                {
                    "name": "Parameter_0",
                    "op": "Parameter",
                    "inputs": [],
                    "value_type": {"element_type": "float", "shape": [2]},
                },
                {
                    "name": "Constant_1",
                    "op": "Constant",
                    "inputs": [],
                    "value_type": {"element_type": {"c_type_string": "float", "bitwidth": 32}, "shape": [2]},
                    "value": ["2"],
                },
                {"name": "Multiply_2", "op": "Multiply", "inputs": ["Parameter_0", {"node": "Constant_1", "index": 0}]},
            ],
        }
    ]
    model = odq.ngraph.convert(js)
    onnx.checker.check_model(model, full_check=True)
    x = np.array([1.5, -3], np.float32)
    (y,) = ort_run(model, {"Parameter_0": x})
    assert same_bits(y, x * 2)
    assert [o.name for o in model.graph.output] == ["Multiply_2_0"]


def test_legacy_result_naming_a_parameter_twice():
    js = [
        {
            "name": "f",
            "parameters": ["P"],
            "result": ["P", "P"],
            "ops": [{"name": "P", "op": "Parameter", "element_type": "int8_t", "shape": [3]}],
        }
    ]
    model = odq.ngraph.convert(js)
    onnx.checker.check_model(model, full_check=True)
    x = np.array([1, -2, 3], np.int8)
    a, b = ort_run(model, {"P": x})
    assert same_bits(a, x) and same_bits(b, x)


def test_two_results_of_one_tensor_and_result_of_a_constant():
    w = FunctionWriter()
    x = w.parameter("f32", [2])
    n = w.op("Negative", x)
    w.result(n)
    w.result(n)
    w.result(w.constant(np.array([1, 2], np.float32)))
    w.result(x)
    model = convert(w)
    xv = np.array([1, 2], np.float32)
    a, b, c, d = ort_run(model, {"Parameter_0": xv})
    assert same_bits(a, -xv) and same_bits(b, -xv) and same_bits(c, np.array([1, 2], np.float32)) and same_bits(d, xv)
    assert len({o.name for o in model.graph.output}) == 4


def test_unknown_rank_parameter_is_refused():
    w = FunctionWriter()
    w.result(w.op("Tanh", w.parameter("f32", None)))
    with pytest.raises(odq.DequantizeError, match="node 'Parameter_0': Parameter has an unknown rank"):
        convert(w)


def test_dead_ops_are_dropped():
    w = FunctionWriter()
    x = w.parameter("f32", [2])
    w.op("Exp", x)  # feeds no result
    w.result(w.op("Sqrt", x))
    assert [n.op_type for n in convert(w).graph.node] == ["Sqrt"]


# ---------------------------------------------------------------- Constant values


def test_constant_single_special_value():
    js = [
        {
            "name": "f",
            "parameters": [],
            "result": ["R", "S"],
            "ops": [
                {"name": "C", "op": "Constant", "element_type": "float", "shape": [2, 2], "value": ["NAN"]},
                {"name": "D", "op": "Constant", "element_type": "float16", "shape": [3], "value": ["-INFINITY"]},
                {"name": "R", "op": "Result", "inputs": ["C"]},
                {"name": "S", "op": "Result", "inputs": ["D"]},
            ],
        }
    ]
    model = odq.ngraph.convert(js)
    onnx.checker.check_model(model, full_check=True)
    c, d = ort_run(model, {})
    assert c.shape == (2, 2) and np.isnan(c).all() and same_bits(d, np.full(3, -np.inf, np.float16))


@pytest.mark.parametrize("et", ["f32", "f64", "f16", "bf16"])
def test_constant_special_values(et):
    js = [
        {
            "name": "f",
            "parameters": [],
            "result": ["R"],
            "ops": [
                {
                    "name": "C",
                    "op": "Constant",
                    "element_type": odq.dtypes.parse(et).ctype,
                    "shape": [5],
                    "value": ["NAN", "INFINITY", "-INFINITY", "-0", "0.1"],
                },
                {"name": "R", "op": "Result", "inputs": ["C"]},
            ],
        }
    ]
    model = odq.ngraph.convert(js)
    onnx.checker.check_model(model, full_check=True)
    t = onnx.numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "C"))
    want = np.array([np.nan, np.inf, -np.inf, -0.0, 0.1]).astype(odq.dtypes.parse(et).numpy)
    assert same_bits(t, want)


@pytest.mark.parametrize(
    "et,values",
    [
        ("i8", ["-128", "127"]),
        ("u8", ["0", "255"]),
        ("i16", ["-32768", "32767"]),
        ("u16", ["0", "65535"]),
        ("i32", ["-2147483648", "2147483647"]),
        ("i64", ["-9223372036854775808", "9223372036854775807"]),
        ("u32", ["0", "4294967295"]),
        ("u64", ["0", "18446744073709551615"]),
        ("boolean", ["0", "1"]),
        ("i4", ["-8", "7"]),
        ("u4", ["0", "15"]),
    ],
)
def test_constant_integer_ranges(et, values):
    dt = odq.dtypes.parse(et)
    js = [
        {
            "name": "f",
            "parameters": [],
            "result": ["R"],
            "ops": [
                {"name": "C", "op": "Constant", "element_type": dt.ctype, "shape": [2], "value": values},
                {"name": "R", "op": "Result", "inputs": ["C"]},
            ],
        }
    ]
    model = odq.ngraph.convert(js)
    onnx.checker.check_model(model, full_check=True)
    t = onnx.numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "C"))
    assert t.dtype == dt.numpy and [int(v) for v in t.tolist()] == [int(v) for v in values]


def test_constant_single_value_form_small_and_large():
    w = FunctionWriter()
    w.result(w.constant(np.full((3, 4), 2.5, np.float32)))
    w.result(w.constant(np.full((300, 300), 7, np.int8)))  # above the expand threshold: a scalar and Expand
    model = convert(w)
    js = w.to_json()
    assert all(len(op["value"]) == 1 for op in js["ops"] if op["op"] == "Constant")
    a, b = ort_run(model, {})
    assert same_bits(a, np.full((3, 4), 2.5, np.float32)) and same_bits(b, np.full((300, 300), 7, np.int8))
    assert model.ByteSize() < 10_000
    w = FunctionWriter()  # Expand takes no int4: the values are written out
    w.result(w.constant(np.full((300, 300), -3, ml_dtypes.int4)))
    model = convert(w)
    assert "Expand" not in {n.op_type for n in model.graph.node}
    (c,) = ReferenceEvaluator(model).run(None, {})
    assert c.dtype == ml_dtypes.int4 and c.shape == (300, 300) and (c.astype(np.int8) == -3).all()


# ---------------------------------------------------------------- op semantics


def _unary_graph(op: str, et: str, shape, **attrs) -> FunctionWriter:
    w = FunctionWriter()
    w.result(w.op(op, w.parameter(et, shape), **attrs))
    return w


SPECIALS = np.array([np.nan, -0.0, 0.0, -1.5, 2.25, -np.inf, np.inf, 1e-30], np.float32)


def test_relu_maps_nan_and_negative_zero_to_zero():
    w = _unary_graph("Relu", "f32", [8])
    check(w, {"Parameter_0": SPECIALS})
    for et in ("i8", "i32", "u8"):
        x = (
            np.array([-5, 0, 7, 100], odq.dtypes.parse(et).numpy)
            if et != "u8"
            else np.array([0, 5, 200, 255], np.uint8)
        )
        check(_unary_graph("Relu", et, [4]), {"Parameter_0": x})


@pytest.mark.parametrize("op", ["Maximum", "Minimum"])
def test_maximum_minimum_nan_order(op):
    """Exact under ONNX semantics (onnx.reference); ORT 1.32's Where turns a selected -0.0 into +0.0
    (onnxruntime issue #32191), so ORT is compared by value there."""
    w = FunctionWriter()
    a, b = w.parameter("f32", [8]), w.parameter("f32", [8])
    w.result(w.binary(op, a, b, broadcast="none"))
    model = convert(w)
    for av, bv in ((SPECIALS, SPECIALS[::-1].copy()), (SPECIALS[::-1].copy(), SPECIALS)):
        feeds = {"Parameter_0": av, "Parameter_1": bv}
        (want,) = evaluate(w.to_json(), feeds).values()
        assert same_bits(want, np.where(av > bv, av, bv) if op == "Maximum" else np.where(av < bv, av, bv))
        (got,) = ReferenceEvaluator(model).run(None, feeds)
        assert same_bits(got, want)
        (got,) = ort_run(model, feeds)
        assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("et", ["i8", "i32", "i64", "u8", "u32"])
@pytest.mark.parametrize("pythondiv", [True, False])
def test_integer_divide_floor_or_truncate(et, pythondiv):
    dt = odq.dtypes.parse(et).numpy
    w = FunctionWriter()
    a, b = w.parameter(et, [12]), w.parameter(et, [12])
    w.result(w.binary("Divide", a, b, broadcast="none", pythondiv=pythondiv))
    if np.dtype(dt).kind == "u":
        av, bv = (
            np.array([7, 6, 0, 9, 1, 100, 13, 14, 15, 200, 255, 3], dt),
            np.array([2, 3, 5, 4, 7, 9, 13, 2, 4, 7, 1, 255], dt),
        )
    else:
        av = np.array([7, -7, 7, -7, 6, -6, 0, 1, -1, 100, -100, 13], dt)
        bv = np.array([2, 2, -2, -2, 3, 4, 5, -3, 3, 7, 7, -13], dt)
    model = check(w, {"Parameter_0": av, "Parameter_1": bv})
    (y,) = ort_run(model, {"Parameter_0": av, "Parameter_1": bv})
    if pythondiv:
        assert same_bits(y, (av.astype(np.int64) // bv.astype(np.int64)).astype(dt))
    else:
        assert same_bits(y, np.trunc(av.astype(np.float64) / bv.astype(np.float64)).astype(dt))


def test_float_divide():
    w = FunctionWriter()
    a, b = w.parameter("f32", [8]), w.parameter("f32", [8])
    w.result(w.binary("Divide", a, b, broadcast="none"))
    check(w, {"Parameter_0": SPECIALS, "Parameter_1": np.array([3, 0, -0.0, 7, 0.1, 2, -3, 1e-10], np.float32)})


@pytest.mark.parametrize("et", ["f32", "f64"])
@pytest.mark.parametrize("op", ["Add", "Subtract", "Multiply"])
def test_arithmetic_exact(et, op):
    w = FunctionWriter()
    a, b = w.parameter(et, [3, 4]), w.parameter(et, [4])
    w.result(w.binary(op, a, b))
    dt = odq.dtypes.parse(et).numpy
    check(w, {"Parameter_0": RNG.standard_normal((3, 4)).astype(dt), "Parameter_1": RNG.standard_normal(4).astype(dt)})


def test_integer_arithmetic_wraps():
    w = FunctionWriter()
    a, b = w.parameter("i8", [4]), w.parameter("i8", [4])
    w.result(w.binary("Add", a, b, broadcast="none"))
    w.result(w.binary("Multiply", a, b, broadcast="none"))
    w.result(w.op("Negative", a))
    w.result(w.op("Abs", a))
    check(
        w, {"Parameter_0": np.array([127, -128, 100, 5], np.int8), "Parameter_1": np.array([1, -1, 100, -7], np.int8)}
    )
    w = FunctionWriter()
    w.result(w.op("Negative", w.parameter("u8", [3])))
    check(w, {"Parameter_0": np.array([0, 1, 255], np.uint8)})


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh", "Exp", "Log", "Sqrt"])
def test_real_math(op):
    x = np.concatenate([RNG.uniform(0.01, 5, 20), RNG.uniform(-5, 5, 20)]).astype(np.float32)
    if op in ("Log", "Sqrt"):
        x = np.abs(x) + np.float32(0.01)
    # ORT's Sigmoid and Tanh are vectorized approximations (tens of ULPs); the others are within a few
    check(_unary_graph(op, "f32", [40]), {"Parameter_0": x}, ulps=128 if op in ("Sigmoid", "Tanh") else 4)


@pytest.mark.parametrize(
    "src,dst",
    [
        ("f32", "i32"),
        ("f32", "i8"),
        ("f64", "i64"),
        ("f32", "u8"),
        ("f32", "boolean"),
        ("i32", "f32"),
        ("i64", "f32"),
        ("f64", "f32"),
        ("i8", "u8"),
        ("i32", "i8"),
        ("boolean", "f32"),
        ("f32", "f16"),
        ("f32", "f32"),
    ],
)
def test_convert_truncates_and_wraps(src, dst):
    s = odq.dtypes.parse(src).numpy
    if np.dtype(s).kind == "f":
        x = np.array([2.7, -2.7, 0.5, -0.5, 0.0, 100.9, -99.99, 1.0], s)
        if dst in ("u8",):
            x = np.abs(x)
    elif s == np.bool_:
        x = np.array([True, False, True, False, True, True, False, False])
    elif s == np.int64:
        x = np.array([2**40 + 1, -(2**53) - 1, 3, 0, -1, 7, 2**62, 16777217], s)
    else:
        x = (
            np.array([200, -200, 300, 0, -1, 127, -128, 16777217 if s == np.int32 else 1], s)
            if s != np.int8
            else np.array([-1, -128, 127, 0, 5, -5, 1, 2], s)
        )
    check(_unary_graph("Convert", src, [8], target_type=dst), {"Parameter_0": x})


def test_reshape_input_order_transposes():
    w = FunctionWriter()
    x = w.parameter("f32", [2, 3, 4])
    w.result(w.op("Reshape", x, input_order=[2, 0, 1], output_shape=[4, 6]))
    w.result(w.op("Reshape", x, input_order=[1, 0, 2], output_shape=[3, 2, 4]))  # a pure transpose
    w.result(w.op("Reshape", x, input_order=[0, 1, 2], output_shape=[24]))
    w.result(w.op("Reshape", x, input_order=[0, 1, 2], output_shape=[2, 3, 4]))
    model = check(w, {"Parameter_0": RNG.standard_normal((2, 3, 4)).astype(np.float32)})
    kinds = [n.op_type for n in model.graph.node]
    assert kinds.count("Transpose") == 2 and kinds.count("Identity") == 1


def test_broadcast_concat_slice():
    w = FunctionWriter()
    x = w.parameter("f32", [3])
    b = w.op("Broadcast", x, shape=[2, 3, 4], axes=[0, 2])
    y = w.parameter("f32", [2, 3, 2])
    c = w.op("Concat", b, y, axis=2)
    w.result(c)
    w.result(w.op("Slice", c, lower_bounds=[1, 0, 1], upper_bounds=[2, 3, 6], strides=[1, 2, 2]))
    w.result(w.op("Slice", c, lower_bounds=[0, 0, 0], upper_bounds=[2, 3, 6]))
    check(w, {x: RNG.standard_normal(3).astype(np.float32), y: RNG.standard_normal((2, 3, 2)).astype(np.float32)})


@pytest.mark.parametrize(
    "shapes,n",
    [
        (((3, 4), (4, 5)), 1),
        (((4,), (4, 5)), 1),
        (((3, 4), (4,)), 1),
        (((4,), (4,)), 1),
        (((2, 3, 4), (4, 5)), 1),
        (((2, 3, 4), (3, 4, 5)), 2),
        (((2, 3), (3, 4, 5)), 1),
        (((2, 3), (4, 5)), 0),
        (((), (2, 3)), 0),
        (((2, 3, 4), (2, 3, 4)), 3),
        (((2, 3, 4), (4, 2, 5)), 1),
    ],
)
def test_dot_contracts_like_ngraph_not_batched_matmul(shapes, n):
    w = FunctionWriter()
    a, b = w.parameter("f64", list(shapes[0])), w.parameter("f64", list(shapes[1]))
    w.result(w.op("Dot", a, b, reduction_axes_count=n))
    feeds = {"Parameter_0": RNG.standard_normal(shapes[0]), "Parameter_1": RNG.standard_normal(shapes[1])}
    model = check(w, feeds, ulps=8)
    (y,) = ort_run(model, feeds)
    assert y.shape == np.tensordot(feeds["Parameter_0"], feeds["Parameter_1"], axes=n).shape


def test_dot_default_count_dynamic_batch_and_integers():
    w = FunctionWriter()
    a, b = w.parameter("f32", [None, 3, 4]), w.parameter("f32", [4, 2])
    w.result(w.op("Dot", a, b))  # no reduction_axes_count: 1
    feeds = {
        "Parameter_0": RNG.standard_normal((5, 3, 4)).astype(np.float32),
        "Parameter_1": RNG.standard_normal((4, 2)).astype(np.float32),
    }
    check(w, feeds, ulps=16)
    w = FunctionWriter()
    a, b = w.parameter("i8", [2, 3]), w.parameter("i8", [3, 2])
    w.result(w.op("Dot", a, b, reduction_axes_count=1))
    check(
        w,
        {
            "Parameter_0": np.array([[100, 100, 100], [-128, 1, 2]], np.int8),
            "Parameter_1": np.array([[100, 1], [2, 3], [4, -5]], np.int8),
        },
    )


def test_sum_and_softmax():
    w = FunctionWriter()
    x = w.parameter("f32", [2, 3, 4])
    w.result(w.op("Sum", x, reduction_axes=[0, 2]))
    w.result(w.op("Sum", x, reduction_axes=[]))
    w.result(w.op("Softmax", x, softmax_axes=[2]))
    w.result(w.op("Softmax", x, softmax_axes=[0, 2]))
    check(w, {"Parameter_0": RNG.standard_normal((2, 3, 4)).astype(np.float32)}, ulps=8)
    w = FunctionWriter()
    w.result(w.op("Sum", w.parameter("i8", [3, 2]), reduction_axes=[0]))
    check(w, {"Parameter_0": np.array([[100, -128], [100, -128], [100, 5]], np.int8)})


def test_convolution_padding_strides_dilation_negative_padding():
    w = FunctionWriter()
    x = w.parameter("f32", [2, 3, 9, 8])
    f = w.parameter("f32", [4, 3, 3, 2])
    w.result(
        w.op(
            "Convolution",
            x,
            f,
            window_movement_strides=[2, 1],
            window_dilation_strides=[1, 2],
            padding_below=[1, -1],
            padding_above=[2, 0],
            data_dilation_strides=[1, 1],
        )
    )
    w.result(
        w.op(
            "Convolution",
            x,
            f,
            window_movement_strides=[1, 1],
            window_dilation_strides=[1, 1],
            padding_below=[0, 0],
            padding_above=[0, 0],
        )
    )
    feeds = {
        "Parameter_0": RNG.standard_normal((2, 3, 9, 8)).astype(np.float32),
        "Parameter_1": RNG.standard_normal((4, 3, 3, 2)).astype(np.float32),
    }
    check(w, feeds, ulps=64)


def test_convolution_same_padding_and_v1_names():
    w = FunctionWriter()
    x = w.parameter("f32", [1, 2, 7, 7])
    f = w.parameter("f32", [3, 2, 3, 3])
    w.result(
        w.op(
            "Convolution",
            x,
            f,
            window_movement_strides=[2, 2],
            window_dilation_strides=[1, 1],
            padding_below=[0, 0],
            padding_above=[0, 0],
            data_dilation_strides=[1, 1],
            pad_type=2,
        )
    )
    w.result(
        w.op(
            "Convolution",
            x,
            f,
            version=1,
            strides=[1, 1],
            dilations=[1, 1],
            pads_begin=[1, 1],
            pads_end=[1, 1],
            auto_pad="explicit",
        )
    )
    model = convert(w)
    xv, fv = RNG.standard_normal((1, 2, 7, 7)).astype(np.float32), RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    a, b = ort_run(model, {"Parameter_0": xv, "Parameter_1": fv})
    assert a.shape == (1, 3, 4, 4) and b.shape == (1, 3, 7, 7)
    w2 = FunctionWriter()  # SAME_UPPER with stride 2 on 7: total padding 2, one each side
    x2, f2 = w2.parameter("f32", [1, 2, 7, 7]), w2.parameter("f32", [3, 2, 3, 3])
    w2.result(
        w2.op(
            "Convolution",
            x2,
            f2,
            window_movement_strides=[2, 2],
            window_dilation_strides=[1, 1],
            padding_below=[1, 1],
            padding_above=[1, 1],
        )
    )
    (ref,) = ort_run(convert(w2), {"Parameter_0": xv, "Parameter_1": fv})
    assert same_bits(a, ref)


def test_pools():
    w = FunctionWriter()
    x = w.parameter("f32", [2, 3, 7, 6])
    w.result(
        w.op(
            "MaxPool",
            x,
            window_shape=[3, 2],
            window_movement_strides=[2, 2],
            padding_below=[1, 0],
            padding_above=[1, 1],
        )
    )
    w.result(w.op("MaxPool", x, window_shape=[2, 2], window_movement_strides=[1, 1]))
    for include in (True, False):
        w.result(
            w.op(
                "AvgPool",
                x,
                window_shape=[3, 3],
                window_movement_strides=[2, 1],
                padding_below=[1, 1],
                padding_above=[1, 1],
                include_padding_in_avg_computation=include,
            )
        )
    check(w, {"Parameter_0": RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)}, ulps=4)


# ---------------------------------------------------------------- Dequantize and Quantize


@pytest.mark.parametrize(
    "qt,rt,axes,shape",
    [
        ("i8", "f32", [1], (4, 5, 6)),
        ("u8", "f32", [0, 2], (4, 5, 6)),
        ("i32", "f64", [], (3, 4)),
        ("i16", "f32", [0, 1], (3, 4)),
        ("u8", "f16", [1], (2, 3)),
        ("u16", "bf16", [1], (4, 2)),
        ("i4", "f32", [0], (4, 2)),
        ("u4", "f16", [], (3,)),
        ("i4", "bf16", [0, 1], (2, 3)),
    ],
)
def test_dequantize_matches_reference(qt, rt, axes, shape):
    q, r = odq.dtypes.parse(qt), odq.dtypes.parse(rt)
    sshape = tuple(shape[a] for a in axes)
    x = RNG.integers(q.min, q.max + 1, shape).astype(q.numpy)
    s = RNG.uniform(0.01, 2, sshape).astype(r.numpy)
    z = RNG.integers(q.min, q.max + 1, sshape).astype(q.numpy)
    w = FunctionWriter()
    w.result(
        w.op(
            "Dequantize",
            w.parameter(qt, list(shape)),
            w.parameter(rt, list(sshape)),
            w.parameter(qt, list(sshape)),
            type=rt,
            axes=axes,
        )
    )
    model = convert(w)
    feeds = {"Parameter_0": x, "Parameter_1": s, "Parameter_2": z}
    (y,) = ReferenceEvaluator(model, new_ops=[odq.DequantizeOp]).run(None, feeds)
    assert same_bits(y, odq.dequantize(x, s, z, axes=axes, dtype=rt))


def _ties(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    """Inputs whose quotient by ``scale`` lands on, next to, and between halves, and where ``q +- 0.5``
    does not fit f32 (just below 0.5, and integers from 2^23 on)."""
    k = rng.integers(-300, 300, n).astype(np.float64)
    base = ((k + 0.5) * scale).astype(np.float32)
    near = np.concatenate([base, np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))])
    below_half = np.nextafter(np.float32(0.5), np.float32(0)) * np.float32(scale)
    big = np.float32([2**23 + 1, 2**23 + 3, 2**24 - 1, 2**24 + 2]) * np.float32(scale)
    edges = np.concatenate([[below_half, -below_half], big, -big]).astype(np.float32)
    return np.concatenate(
        [near, edges, (rng.standard_normal(n) * 200 * scale).astype(np.float32), np.float32([0, -0.0, 1e9, -1e9])]
    )


@pytest.mark.parametrize("mode", range(9))
@pytest.mark.parametrize("out", ["i8", "u8", "i32"])
def test_quantize_all_round_modes_exact(mode, out):
    rng = np.random.default_rng(mode)
    x = _ties(rng, 200, 0.5)
    qt = odq.dtypes.parse(out)
    w = FunctionWriter()
    p = w.parameter("f32", [x.size])
    s = w.constant(np.float32(0.5))
    z = w.constant(np.array(3 if out != "u8" else 100, qt.numpy))
    w.result(w.op("Quantize", p, s, z, type=out, axes=[], round_mode=mode))
    model = check(w, {"Parameter_0": x})
    kinds = {n.op_type for n in model.graph.node}
    assert ("QuantizeLinear" in kinds) == (mode == 4 and out != "i32")


@pytest.mark.parametrize("mode", [0, 1, 4, 6])
def test_quantize_multi_axis_and_other_real_types(mode):
    rng = np.random.default_rng(10 + mode)
    x = (rng.standard_normal((3, 4, 5)) * 40).astype(np.float64)
    s = rng.uniform(0.1, 1.0, (3, 5))
    z = rng.integers(-5, 5, (3, 5)).astype(np.int8)
    w = FunctionWriter()
    w.result(
        w.op(
            "Quantize",
            w.parameter("f64", [3, 4, 5]),
            w.parameter("f64", [3, 5]),
            w.parameter("i8", [3, 5]),
            type="i8",
            axes=[0, 2],
            round_mode=mode,
        )
    )
    feeds = {"Parameter_0": x, "Parameter_1": s, "Parameter_2": z}
    check(w, feeds)
    (y,) = ort_run(convert(w), feeds)
    assert same_bits(y, ngraph_quantize(x, s, z, [0, 2], np.dtype(np.int8), mode))


def test_quantize_per_axis_quantize_linear_and_saturation():
    x = np.array([[1000, -1000, 0.75, -0.75], [3.5, 2.5, -2.5, 1.25]], np.float32)
    w = FunctionWriter()
    w.result(
        w.op(
            "Quantize",
            w.parameter("f32", [2, 4]),
            w.constant(np.float32([0.5, 0.25])),
            w.constant(np.int8([1, -1])),
            type="i8",
            axes=[0],
            round_mode="ROUND_NEAREST_TOWARD_EVEN",
        )
    )
    model = check(w, {"Parameter_0": x})
    assert [n.op_type for n in model.graph.node] == ["QuantizeLinear"]


@pytest.mark.parametrize("out", ["i16", "u16", "i4", "u4"])
def test_quantize_other_output_types(out):
    """Every round mode with clamping into 16- and 4-bit outputs (ONNX semantics: onnx.reference)."""
    qt = odq.dtypes.parse(out)
    x = np.concatenate([_ties(np.random.default_rng(3), 20, 0.5) / 40, np.float32([1e6, -1e6])])
    for mode in range(9):
        w = FunctionWriter()
        w.result(
            w.op(
                "Quantize",
                w.parameter("f32", [x.size]),
                w.constant(np.float32(0.5)),
                w.constant(np.array(1, qt.numpy)),
                type=out,
                axes=[],
                round_mode=mode,
            )
        )
        model = convert(w)
        (got,) = ReferenceEvaluator(model).run(None, {"Parameter_0": x})
        (want,) = evaluate(w.to_json(), {"Parameter_0": x}).values()
        assert got.dtype == qt.numpy and same_bits(got, want), (out, mode)
        assert int(want.min()) == qt.min and int(want.max()) == qt.max  # both clamps reached


@pytest.mark.parametrize("real", ["f16", "bf16"])
def test_quantize_half_precision_inputs(real):
    """f16 / bf16 inputs: ``q +- 0.5`` in double as nGraph's C++, where the half type would round it
    (onnx.reference; ORT lacks half-precision kernels for several of the ops)."""
    rt = odq.dtypes.parse(real)
    below_half = float(np.nextafter(np.float16(0.5), np.float16(0))) if real == "f16" else 0.498046875
    x = np.array([below_half, -below_half, 0.5, -0.5, 1.5, 2.5, -2.5, 100.25, -37.75, 1000], rt.numpy)
    converted = 0
    for mode in range(9):
        w = FunctionWriter()
        w.result(
            w.op(
                "Quantize",
                w.parameter(real, [x.size]),
                w.constant(np.array(1, rt.numpy)),
                w.constant(np.int8(0)),
                type="i8",
                axes=[],
                round_mode=mode,
            )
        )
        try:
            model = convert(w)
        except odq.DequantizeError as e:  # Round has no bfloat16 version before opset 22
            assert (real, mode) == ("bf16", 4) and "ONNX Round does not take bfloat16" in str(e)
            continue
        (got,) = ReferenceEvaluator(model).run(None, {"Parameter_0": x})
        (want,) = evaluate(w.to_json(), {"Parameter_0": x}).values()
        assert same_bits(got, want), (real, mode, got, want)
        converted += 1
    assert converted == (8 if real == "bf16" else 9)


def test_quantize_i32_clamps_inside_the_range():
    """nGraph clamps to float(INT32_MAX) = 2^31, which does not fit; we clamp to the largest f32 below it."""
    x = np.float32([1e10, -1e10, 2147483520, 2147483648, -2147483648, 0.5])
    for mode in range(9):
        w = FunctionWriter()
        w.result(
            w.op(
                "Quantize",
                w.parameter("f32", [6]),
                w.constant(np.float32(1)),
                w.constant(np.int32(0)),
                type="i32",
                axes=[],
                round_mode=mode,
            )
        )
        model = convert(w)
        for got in (ort_run(model, {"Parameter_0": x})[0], ReferenceEvaluator(model).run(None, {"Parameter_0": x})[0]):
            assert got.dtype == np.int32
            assert got[:5].tolist() == [2147483520, -2147483648, 2147483520, 2147483520, -2147483648], (mode, got)


def test_docs_table_lists_every_supported_op():
    """docs/ngraph.md's table of supported ops names exactly the op types and versions the op table has."""
    text = (MODELS.parent / "docs" / "ngraph.md").read_text()
    section = text.split("## Supported ops", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[1] and cells[1][0].isdigit():
            for name in cells[0].split(","):
                table[name.strip()] = tuple(int(v) for v in cells[1].split(","))
    assert table == odq.ngraph.supported_ops()


def test_quantize_bf16_graph_converts():
    w = FunctionWriter()
    w.result(
        w.op(
            "Quantize",
            w.parameter("bf16", [4]),
            w.constant(np.array(0.5, ml_dtypes.bfloat16)),
            w.constant(np.int8(0)),
            type="i8",
            axes=[],
            round_mode=0,
        )
    )
    convert(w)  # checker-clean; ORT has no bf16 kernels for this


def test_quantize_16_bit_uses_quantize_linear_from_opset_21():
    w = FunctionWriter()
    w.result(
        w.op(
            "Quantize",
            w.parameter("f32", [6]),
            w.constant(np.float32(0.01)),
            w.constant(np.int16(-3)),
            type="i16",
            axes=[],
            round_mode=4,
        )
    )
    x = np.float32([1.005, -1.005, 300.0, -400.0, 0.025, 1e9])
    for opset, fused in ((19, False), (21, True)):
        model = odq.ngraph.convert(dumps([w]), opset=opset)
        onnx.checker.check_model(model, full_check=True)
        assert ("QuantizeLinear" in {n.op_type for n in model.graph.node}) == fused
        (y,) = ort_run(model, {"Parameter_0": x})
        (want,) = evaluate(w.to_json(), {"Parameter_0": x}).values()
        assert same_bits(y, want)


def test_pool_op_version_1_names():
    w = FunctionWriter(era="v0.29")
    x = w.parameter("f32", [1, 2, 6, 6])
    w.result(
        w.op(
            "MaxPool",
            x,
            version=1,
            kernel=[2, 2],
            strides=[2, 2],
            pads_begin=[0, 0],
            pads_end=[0, 0],
            rounding_type="floor",
            auto_pad="explicit",
        )
    )
    w.result(
        w.op(
            "AvgPool",
            x,
            version=1,
            kernel=[3, 3],
            strides=[1, 1],
            pads_begin=[1, 1],
            pads_end=[1, 1],
            exclude_pad=True,
            rounding_type="floor",
        )
    )
    w.result(w.op("Softmax", x, version=1, axis=3))
    model = convert(w)
    xv = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
    a, b, c = ort_run(model, {"Parameter_0": xv})
    v0 = FunctionWriter()
    y = v0.parameter("f32", [1, 2, 6, 6])
    v0.result(v0.op("MaxPool", y, window_shape=[2, 2], window_movement_strides=[2, 2]))
    v0.result(
        v0.op(
            "AvgPool",
            y,
            window_shape=[3, 3],
            window_movement_strides=[1, 1],
            padding_below=[1, 1],
            padding_above=[1, 1],
            include_padding_in_avg_computation=False,
        )
    )
    v0.result(v0.op("Softmax", y, softmax_axes=[3]))
    want = evaluate(v0.to_json(), {"Parameter_0": xv})
    for g, e in zip((a, b, c), want.values()):
        assert np.allclose(g, e, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- every element type


def _values(dt: odq.dtypes.DType, shape, *, nonzero: bool = False) -> np.ndarray:
    """Small values of ``dt`` (exact in every type, sums included); negative ones for signed types."""
    if dt.kind == "boolean":
        return RNG.integers(0, 2, shape).astype(bool)
    lo = -3 if dt.signed else 0
    v = RNG.integers(lo, 4, shape)
    if nonzero:
        v = np.where(v == 0, 2, v)
    if dt.kind == "real":
        v = v + RNG.integers(0, 2, shape) * 0.5
    return v.astype(dt.numpy)


ELEMENTWISE = ("Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum")
ARITHMETIC = (*ELEMENTWISE, "Negative", "Abs", "Relu", "Sum", "Dot")
STRUCTURAL = ("Reshape", "Broadcast", "Concat", "Slice", "ConvertTo", "ConvertFrom")


def _type_graph(op: str, et: str) -> tuple[FunctionWriter, dict]:
    dt = odq.dtypes.parse(et)
    w = FunctionWriter()
    feeds = {"Parameter_0": _values(dt, (2, 3))}
    if op in ELEMENTWISE:
        a, b = w.parameter(et, [2, 3]), w.parameter(et, [2, 3])
        feeds["Parameter_1"] = _values(dt, (2, 3), nonzero=op == "Divide")
        w.result(w.binary(op, a, b, broadcast="none"))
    elif op in ("Negative", "Abs", "Relu"):
        w.result(w.op(op, w.parameter(et, [2, 3])))
    elif op == "Sum":
        w.result(w.op(op, w.parameter(et, [2, 3]), reduction_axes=[1]))
    elif op == "Dot":
        a, b = w.parameter(et, [2, 3]), w.parameter(et, [3, 2])
        feeds["Parameter_1"] = _values(dt, (3, 2))
        w.result(w.op(op, a, b, reduction_axes_count=1))
    elif op == "Reshape":
        w.result(w.op(op, w.parameter(et, [2, 3]), input_order=[1, 0], output_shape=[6]))
    elif op == "Broadcast":
        feeds["Parameter_0"] = _values(dt, (3,))
        w.result(w.op(op, w.parameter(et, [3]), shape=[2, 3], axes=[0]))
    elif op == "Concat":
        x = w.parameter(et, [2, 3])
        w.result(w.op(op, x, x, axis=0))
    elif op == "Slice":
        w.result(w.op(op, w.parameter(et, [2, 3]), lower_bounds=[0, 1], upper_bounds=[2, 3], strides=[1, 1]))
    elif op == "ConvertTo":
        f32 = odq.dtypes.parse("f32")
        feeds["Parameter_0"] = (
            _values(dt, (2, 3)) if dt.kind != "boolean" else _values(dt, (2, 3)).astype(np.int8)
        ).astype(np.float32)
        w.result(w.op("Convert", w.parameter(f32, [2, 3]), target_type=et))
    else:  # ConvertFrom
        w.result(w.op("Convert", w.parameter(et, [2, 3]), target_type="f32"))
    return w, feeds


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("et", [t.name for t in odq.dtypes.TABLE])
def test_every_element_type(et, opset):
    """Every op on every element type either converts checker-clean and computes nGraph's result bit for
    bit, or is refused by name; which ones are refused is fixed below."""
    dt = odq.dtypes.parse(et)
    refused = set()
    for op in ARITHMETIC + STRUCTURAL:
        w, feeds = _type_graph(op, et)
        try:
            model = odq.ngraph.convert(dumps([w]), opset=opset)
        except odq.DequantizeError as e:
            assert e.node in {o["name"] for o in w.to_json()["ops"]} and e.rule, str(e)
            refused.add(op)
            continue
        onnx.checker.check_model(model, full_check=True)
        got = ReferenceEvaluator(model).run(None, feeds)
        want = list(evaluate(w.to_json(), feeds).values())
        for g, e in zip(got, want):
            assert g.dtype == e.dtype and same_bits(g, e), (op, et, g, e)
    if dt.bits < 8:  # 4-bit tensors from opset 21, and then only for moving data around
        expected = (
            set(ARITHMETIC + STRUCTURAL)
            if opset < 21
            else {*ELEMENTWISE, "Negative", "Abs", "Broadcast", "Concat", "Slice"}
        )
        if opset >= 21 and dt.signed:
            expected.add("Relu")  # Max
    elif dt.kind == "boolean":  # nGraph refuses arithmetic on boolean
        expected = set(ARITHMETIC)
    elif dt.kind != "real" and dt.bits <= 16 and opset < 14:  # Add/Sub/Mul/Div take 8/16-bit integers from opset 14
        expected = {"Add", "Subtract", "Multiply", "Divide"} | (set() if dt.signed else {"Negative"})  # 0 - x
    elif dt.name == "bf16" and opset < 16:  # Where takes bfloat16 from opset 16
        expected = {"Maximum", "Minimum", "Relu", "Abs"}
    else:
        expected = set()
    assert refused == expected, (sorted(refused), sorted(expected))
