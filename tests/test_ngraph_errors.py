"""nGraph importer, bad input: every malformed graph is a DequantizeError naming the file, the op and the
rule; the command exits 2 without a traceback and writes nothing; a fuzz test mutating valid graphs shows
that nothing else escapes (and that whatever converts is checker-clean)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.ngraph.writer import FunctionWriter, dumps

MODELS = Path(__file__).resolve().parents[1] / "models"


def small_graph() -> list[dict]:
    w = FunctionWriter("f", era="v0.26")
    x = w.parameter("f32", [2, 3])
    q = w.constant(np.array([[1, -2, 3], [4, 5, -6]], np.int8))
    s = w.constant(np.float32([0.5, 0.25, 2.0]))
    z = w.constant(np.int8([0, 1, -1]))
    d = w.op("Dequantize", q, s, z, type="f32", axes=[1])
    a = w.binary("Add", x, d, broadcast="none")
    w.result(w.op("Relu", a))
    return [w.to_json()]


def expect_error(tmp_path, graph, match: str, node: str | None = None, **kw) -> odq.DequantizeError:
    p = tmp_path / "graph.json"
    p.write_text(graph if isinstance(graph, str) else json.dumps(graph))
    with pytest.raises(odq.DequantizeError) as info:
        odq.ngraph.convert(p, **kw)
    e = info.value
    msg = str(e)
    assert msg.startswith(str(p)), msg
    assert e.path == str(p)
    if node is not None:
        assert f"node '{node}'" in msg and e.node == node, msg
    assert match in msg, msg
    return e


def op(g: list[dict], name: str) -> dict:
    return next(o for o in g[0]["ops"] if o["name"] == name)


# ---------------------------------------------------------------- file and function structure


@pytest.mark.parametrize(
    "text,match",
    [
        ('[{"name": "f"', "malformed JSON"),
        ("\xff\xfe", "malformed JSON"),
        ("[]", "no functions"),
        ("42", "expected a JSON array of functions"),
        ("[42]", "function #0 must be a JSON object"),
        ('[{"parameters": [], "result": [], "ops": []}]', "function #0 has no 'name'"),
        ('[{"name": "f", "result": ["R"], "ops": []}]', "has no 'parameters' list"),
        ('[{"name": "f", "parameters": [], "ops": []}]', "has no 'result' list"),
        ('[{"name": "f", "parameters": [], "result": ["R"]}]', "has no 'ops' list"),
        ('[{"name": "f", "parameters": [], "result": [], "ops": []}]', "has no results"),
    ],
)
def test_structure(tmp_path, text, match):
    expect_error(tmp_path, text, match)


def test_not_utf8(tmp_path):
    p = tmp_path / "g.json"
    p.write_bytes(b"[\xff]")
    with pytest.raises(odq.DequantizeError, match="malformed JSON: not UTF-8"):
        odq.ngraph.convert(p)


def test_huge_integer_literal_is_malformed_json(tmp_path):
    """An integer literal past Python's int-from-text limit (4300 digits) is malformed JSON naming the file,
    not a bare ValueError; in a folder it is that graph's refusal, not an internal error."""
    text = '[{"name": "f", "x": ' + "9" * 100_000 + ', "parameters": [], "result": [], "ops": []}]'
    e = expect_error(tmp_path, text, "malformed JSON: an integer literal longer than")
    assert type(e) is odq.DequantizeError
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "big.json").write_text(text)
    report = odq.ngraph.convert_tree(folder, tmp_path / "out", jobs=1)
    (r,) = report.results
    assert r.status == "refused" and r.error.startswith("malformed JSON: an integer literal"), r


def _surrogate_in(g: list[dict], where: str) -> None:
    """Put a lone surrogate (JSON ``\\ud800``) into one name of ``small_graph()``."""
    ops = g[0]["ops"]
    if where == "function":
        g[0]["name"] = "q\ud800"
    elif where == "op name":
        ops[0]["name"] = "q\ud800"
        g[0]["parameters"] = ["q\ud800"]
        for o in ops:
            o["inputs"] = ["q\ud800" if i == "Parameter_0" else i for i in o.get("inputs", [])]
    elif where == "op type":
        op(g, "Relu_6")["op"] = "Relu\udfff"
    elif where == "input":
        op(g, "Relu_6")["inputs"] = ["Add_5\ud800"]
    elif where == "output name":
        op(g, "Relu_6")["outputs"] = ["r\ud800"]
    elif where == "result":
        g[0]["result"] = g[0]["result"] + ["r\udcff"]


@pytest.mark.parametrize(
    "where,node,match",
    [
        ("function", None, "the function's name 'q\\ud800' holds a lone surrogate"),
        ("op name", "q\\ud800", "op #0: the op's name 'q\\ud800' holds a lone surrogate"),
        ("op type", "Relu_6", "the op's type 'Relu\\udfff' holds a lone surrogate"),
        ("output name", "Relu_6", "the op's output name 'r\\ud800' holds a lone surrogate"),
        ("result", None, "the result 'r\\udcff' holds a lone surrogate"),
        # an input names an op: op names are what is checked; one naming none is a missing op
        ("input", "Relu_6", "input 0 names op 'Add_5\\ud800', which does not exist"),
    ],
)
def test_lone_surrogate_in_a_name_is_refused(tmp_path, where, node, match):
    """A JSON string escape outside a surrogate pair is no Unicode text: ONNX's names (protobuf strings)
    cannot hold it. The reader refuses it naming the file and the op, the name shown escaped."""
    g = small_graph()
    _surrogate_in(g, where)
    e = expect_error(tmp_path, g, match, node=node)
    assert where == "input" or e.rule.endswith("names must be valid Unicode text")
    str(e).encode("utf-8")  # the message itself is valid text: the name is shown as its escape


def test_cli_lone_surrogate_function_name_exits_2(tmp_path, capsys):
    g = small_graph()
    _surrogate_in(g, "function")
    src = tmp_path / "sur_fn.json"
    src.write_text(json.dumps(g))
    out = tmp_path / "x.onnx"
    assert main(["convert", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{src}: the function's name 'q\\ud800' holds a lone surrogate" in err, err
    assert "UnicodeEncodeError" not in err and not out.exists()


def _undecodable_name(tmp_path: Path) -> Path:
    """A copy of qdq_chain.json named with bytes that are not UTF-8 (``g\\xff\\xfe.json``)."""
    src = tmp_path / os.fsdecode(b"g\xff\xfe.json")
    try:
        src.write_bytes((MODELS / "qdq_chain.json").read_bytes())
    except (OSError, UnicodeEncodeError):  # a file system that takes only UTF-8 names
        pytest.skip("this file system refuses a name that is not UTF-8")
    return src


def _valid_json_text(out: str) -> dict:
    """The command's JSON, checked to hold no lone surrogate (which strict JSON parsers reject)."""
    doc = json.loads(out)
    json.dumps(doc, ensure_ascii=False).encode("utf-8")
    return doc


def test_undecodable_file_name_converts(tmp_path, capsys):
    """A graph file named with bytes that are not UTF-8 converts: the model's doc string (a protobuf string,
    UTF-8 only) and the command's output show those bytes as \\xff escapes."""
    src = _undecodable_name(tmp_path)
    model = odq.ngraph.convert(src)
    assert "from g\\xff\\xfe.json" in model.doc_string
    out = tmp_path / "ok.onnx"
    assert main(["convert", str(src), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "g\\xff\\xfe.json" in text and onnx.load(out).doc_string == model.doc_string
    assert main(["convert", str(src), "-o", str(out), "--json"]) == 0
    assert _valid_json_text(capsys.readouterr().out)["graph"] == str(tmp_path / "g\\xff\\xfe.json")
    assert main(["validate", str(src), "-q", "--json", "--path", "kernel", "--level", "off"]) == 0
    assert _valid_json_text(capsys.readouterr().out)["model"].endswith("g\\xff\\xfe.json")


def test_undecodable_file_name_in_a_folder(tmp_path, capsys):
    """Folder mode: the report's JSON and text show the undecodable bytes as escapes too."""
    (tmp_path / "tree").mkdir()
    src = _undecodable_name(tmp_path / "tree")
    (src.parent / "bad.json").write_text("[")
    assert main(["convert", str(src.parent), "-o", str(tmp_path / "out"), "--jobs", "1", "--json"]) == 1
    doc = _valid_json_text(capsys.readouterr().out)
    assert [r["graph"] for r in doc["results"]] == ["bad.json", "g\\xff\\xfe.json"]
    assert doc["results"][1]["output"] == "g\\xff\\xfe.onnx"
    assert (tmp_path / "out" / os.fsdecode(b"g\xff\xfe.onnx")).is_file()
    assert main(["convert", str(src.parent), "-o", str(tmp_path / "out"), "--jobs", "1"]) == 1
    out, err = capsys.readouterr()
    assert "converted  g\\xff\\xfe.json" in out and "converted g\\xff\\xfe.json" in err


def test_missing_file(tmp_path):
    with pytest.raises(odq.DequantizeError, match="cannot read the graph"):
        odq.ngraph.convert(tmp_path / "nope.json")


def test_bad_source_type():
    with pytest.raises(odq.DequantizeError, match="expected a path, JSON text or parsed JSON"):
        odq.ngraph.convert(3.5)


def test_op_keys(tmp_path):
    g = small_graph()
    del op(g, "Relu_6")["op"]
    expect_error(tmp_path, g, "has no 'op' string", "Relu_6")
    g = small_graph()
    del g[0]["ops"][1]["name"]
    expect_error(tmp_path, g, "op #1 has no 'name' string")
    g = small_graph()
    g[0]["ops"][2] = "oops"
    expect_error(tmp_path, g, "op #2 must be a JSON object")


def test_duplicate_names(tmp_path):
    g = small_graph()
    op(g, "Constant_2")["name"] = "Constant_1"
    expect_error(tmp_path, g, "duplicate op name: op #2 and op #1 are both named 'Constant_1'", "Constant_1")


def test_input_naming_missing_op(tmp_path):
    g = small_graph()
    op(g, "Add_5")["inputs"][1] = "Nowhere_9"
    expect_error(tmp_path, g, "input 1 names op 'Nowhere_9', which does not exist", "Add_5")


def test_input_naming_later_op(tmp_path):
    g = small_graph()
    op(g, "Add_5")["inputs"][1] = "Relu_6"
    expect_error(tmp_path, g, "the ops' inputs form a cycle: Add_5 -> Relu_6 -> Add_5", "Add_5")
    g = small_graph()
    ops = g[0]["ops"]
    ops.insert(0, ops.pop(4))  # Dequantize first: its inputs come later, no cycle
    expect_error(tmp_path, g, "input 0 names op 'Constant_1', which comes later in 'ops'", "Dequantize_4")


def test_control_dependency_naming_missing_op(tmp_path):
    g = small_graph()
    op(g, "Relu_6")["control_deps"] = ["Add_5", "Ghost"]
    expect_error(tmp_path, g, "control dependency names op 'Ghost', which does not exist", "Relu_6")


def test_self_cycle(tmp_path):
    g = small_graph()
    op(g, "Relu_6")["inputs"] = ["Relu_6"]
    expect_error(tmp_path, g, "cycle: Relu_6 -> Relu_6", "Relu_6")


def test_bad_input_reference_and_index(tmp_path):
    g = small_graph()
    op(g, "Relu_6")["inputs"] = [{"node": 5}]
    expect_error(tmp_path, g, "input 0 must be an op name or", "Relu_6")
    g = small_graph()
    op(g, "Relu_6")["inputs"] = [{"node": "Add_5", "index": 1}]
    expect_error(tmp_path, g, "input 0 refers to output 1 of 'Add_5', which has 1 output", "Relu_6")


def test_parameters_and_results(tmp_path):
    g = small_graph()
    g[0]["parameters"] = ["Constant_1"]
    expect_error(tmp_path, g, "parameter 'Constant_1' is a Constant, not a Parameter", "Constant_1")
    g = small_graph()
    g[0]["parameters"] = []
    expect_error(tmp_path, g, "Parameter is used but not listed in the function's 'parameters'", "Parameter_0")
    g = small_graph()
    g[0]["result"] = ["Result_7", "Relu_6"]
    expect_error(tmp_path, g, "some Result ops appear to be missing")
    g = small_graph()
    g[0]["result"] = ["Gone"]
    expect_error(tmp_path, g, "result 'Gone' names no op")


def test_function_choice(tmp_path):
    expect_error(tmp_path, small_graph(), "no function named 'g' (the file holds: 'f')", function="g")


def test_opset_range(tmp_path):
    expect_error(tmp_path, small_graph(), "Unsupported target opset 7: supported are 13 to 27", opset=7)


# ---------------------------------------------------------------- ops and values


def test_unknown_op_and_version(tmp_path):
    g = small_graph()
    op(g, "Relu_6")["op"] = "Frobnicate"
    expect_error(tmp_path, g, "unknown or unsupported op type 'Frobnicate'", "Relu_6")
    g = small_graph()
    op(g, "Add_5")["op_version"] = 7
    expect_error(tmp_path, g, "Add op_version 7 is not supported (supported: 0, 1)", "Add_5")


@pytest.mark.parametrize(
    "backend_op", ["QuantizedMatmul", "ConvolutionRelu", "QuantizedMaxPool", "ConvertLayout", "MatmulBias"]
)
def test_backend_internal_ops(tmp_path, backend_op):
    g = small_graph()
    op(g, "Relu_6")["op"] = backend_op
    e = expect_error(tmp_path, g, f"op type '{backend_op}' is internal to nGraph's backends", "Relu_6")
    assert "serialized after nGraph's backend optimization passes" in str(e)


@pytest.mark.parametrize("et", ["float128", "uint1_t", "", "f33"])
def test_unknown_element_type(tmp_path, et):
    g = small_graph()
    op(g, "Parameter_0")["element_type"] = et
    expect_error(tmp_path, g, f"unknown element type '{et}'", "Parameter_0")


@pytest.mark.parametrize(
    "ctype,values,match",
    [
        ("float", ["1.5", "abc", "2"], "Constant value #1 'abc' does not parse as f32"),
        ("int8_t", ["1", "300", "2"], "Constant value #1 '300' is out of the range of i8 [-128, 127]"),
        ("int32_t", ["1", "1.5", "2"], "Constant value #1 '1.5' does not parse as i32"),
        ("uint8_t", ["-1", "2", "3"], "Constant value #0 '-1' is out of the range of u8"),
        ("char", ["1", "2", "0"], "Constant value #1 '2' does not parse as boolean"),
        ("float", ["1", "2"], "Constant has 2 values for shape {3} (3 elements)"),
        ("float", [1, [2], 3], "Constant values must be strings"),
    ],
)
def test_constant_values(tmp_path, ctype, values, match):
    g = small_graph()
    c = op(g, "Constant_2")
    c["element_type"], c["value"] = ctype, values
    expect_error(tmp_path, g, match, "Constant_2")


@pytest.mark.parametrize(
    "name,key,value,match",
    [
        ("Dequantize_4", "axes", "1", "'axes' must be a list of integers"),
        ("Dequantize_4", "axes", [-1], "'axes' must be a list of integers in [0,"),
        ("Dequantize_4", "type", None, "Dequantize has no 'type' attribute"),
        ("Dequantize_4", "type", "int8_t", "Output element type (i8) must be a floating point type"),
        (
            "Dequantize_4",
            "axes",
            [0],
            "Scale / zero point shape ({3}) must match input shape ({2,3}) at the quantization axes (AxisSet{0})",
        ),
        (
            "Dequantize_4",
            "axes",
            [0, 1],
            "Scale / zero point rank (1) does not match the number of quantization axes (2)",
        ),
        ("Dequantize_4", "axes", [4], "Quantization axis (4) must be less than input shape rank (2)"),
        ("Add_5", "auto_broadcast", {"type": 9, "axis": 0}, "'auto_broadcast' must be NONE, NUMPY or PDPD"),
        ("Parameter_0", "shape", [2, -3], "'shape' dimension 1 must be a non-negative integer"),
    ],
)
def test_attribute_and_shape_rules(tmp_path, name, key, value, match):
    g = small_graph()
    if value is None:
        del op(g, name)[key]
    else:
        op(g, name)[key] = value
    expect_error(tmp_path, g, match, name)


def _one(w: FunctionWriter) -> list[dict]:
    return [w.to_json()]


def test_op_rules(tmp_path):
    g = small_graph()
    op(g, "Parameter_0")["shape"] = [3, 2]
    expect_error(tmp_path, g, "Argument shapes are inconsistent ({3,2} and {2,3}; broadcasting: none)", "Add_5")
    w = FunctionWriter()
    a, b = w.parameter("f32", [2, 3]), w.parameter("f32", [4, 5])
    w.result(w.op("Dot", a, b, reduction_axes_count=1))
    expect_error(tmp_path, _one(w), "Paired axes (axis 1 from arg0, axis 0 from arg1) do not have same length", "Dot_2")
    w = FunctionWriter()
    w.result(w.op("Reshape", w.parameter("f32", [2, 3]), input_order=[0, 1], output_shape=[4]))
    expect_error(tmp_path, _one(w), "Product of output shape dimensions does not match", "Reshape_1")
    w = FunctionWriter()
    w.result(w.op("Reshape", w.parameter("f32", [2, 3]), input_order=[0, 0], output_shape=[6]))
    expect_error(tmp_path, _one(w), "Input axis order is not a permutation", "Reshape_1")
    w = FunctionWriter()
    x = w.parameter("f32", [2, 3])
    w.result(w.op("Concat", x, x, axis=2))
    expect_error(tmp_path, _one(w), "Concatenation axis (2) is out of bounds for argument rank (2)", "Concat_1")
    w = FunctionWriter()
    w.result(w.op("Slice", w.parameter("f32", [2, 3]), lower_bounds=[0, 0], upper_bounds=[2, 4], strides=[1, 1]))
    expect_error(tmp_path, _one(w), "Upper bound for slice at axis 1 is out of range", "Slice_1")
    w = FunctionWriter()
    w.result(w.op("Broadcast", w.parameter("f32", [3]), shape=[2, 4], axes=[0]))
    expect_error(
        tmp_path, _one(w), "Broadcast argument shape, specified output shape, and axes are incompatible", "Broadcast_1"
    )
    w = FunctionWriter()
    w.result(
        w.op(
            "Convolution",
            w.parameter("f32", [1, 3, 5, 5]),
            w.parameter("f32", [2, 4, 3, 3]),
            window_movement_strides=[1, 1],
            window_dilation_strides=[1, 1],
            padding_below=[0, 0],
            padding_above=[0, 0],
        )
    )
    expect_error(
        tmp_path, _one(w), "Data batch channel count (3) does not match filter input channel count (4)", "Convolution_2"
    )
    w = FunctionWriter()
    w.result(
        w.op(
            "Quantize",
            w.parameter("f32", [3]),
            w.parameter("f64", []),
            w.parameter("i8", []),
            type="i8",
            axes=[],
            round_mode=4,
        )
    )
    expect_error(tmp_path, _one(w), "Scale element type (f64) must match input element type (f32)", "Quantize_3")
    w = FunctionWriter()
    w.result(
        w.op(
            "Quantize",
            w.parameter("f32", [3]),
            w.parameter("f32", []),
            w.parameter("i8", []),
            type="i8",
            axes=[],
            round_mode=12,
        )
    )
    expect_error(tmp_path, _one(w), "'round_mode' must be 0..8", "Quantize_3")
    w = FunctionWriter()
    a, b = w.parameter("f32", [2**40, 2**40]), w.parameter("f32", [2**40, 2**40, 3])
    w.result(w.op("Dot", a, b, reduction_axes_count=2))
    expect_error(tmp_path, _one(w), "a shape or index does not fit in 64 bits", "Dot_2")
    w = FunctionWriter()
    a = w.parameter("boolean", [2])
    w.result(w.binary("Add", a, a))
    expect_error(tmp_path, _one(w), "Arguments cannot have boolean element type", "Add_1")
    w = FunctionWriter()
    a, b = w.parameter("f32", [2]), w.parameter("f64", [2])
    w.result(w.binary("Multiply", a, b))
    expect_error(tmp_path, _one(w), "Argument element types are inconsistent (f32 and f64)", "Multiply_2")


# ---------------------------------------------------------------- the command


def test_cli_converts_and_reports(tmp_path, capsys):
    out = tmp_path / "m.onnx"
    assert main(["convert", str(MODELS / "quantized_mlp.json"), "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dequantize_nodes"] == 2 and report["outputs"] == ["Result_18", "Result_19"]
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    assert any(odq.schema.is_dequantize(n) for n in m.graph.node)
    assert main(["convert", str(MODELS / "conv_block.json"), "-o", str(out), "--lower", "--opset", "19"]) == 0
    assert "wrote" in capsys.readouterr().out
    m = onnx.load(out)
    assert not any(n.domain for n in m.graph.node)
    assert {o.domain or "": o.version for o in m.opset_import}[""] == 19


def test_cli_function_choice(tmp_path, capsys):
    a = FunctionWriter("first")
    a.result(a.op("Negative", a.parameter("f32", [2])))
    b = FunctionWriter("second")
    b.result(b.op("Abs", b.parameter("f32", [2])))
    g = tmp_path / "g.json"
    g.write_text(dumps([a, b]))
    assert main(["convert", str(g), "-o", str(tmp_path / "m.onnx"), "--function", "first"]) == 0
    assert onnx.load(tmp_path / "m.onnx").graph.name == "first"


def test_cli_bad_input_exits_2_writes_nothing(tmp_path):
    g = small_graph()
    op(g, "Relu_6")["op"] = "ConvolutionRelu"
    src = tmp_path / "g.json"
    src.write_text(json.dumps(g))
    before = src.read_bytes()
    out = tmp_path / "m.onnx"
    r = subprocess.run(
        [sys.executable, "-m", "onnx_dequant.cli", "convert", str(src), "-o", str(out)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert f"onnx-dequant convert: error: {src}: node 'Relu_6': op type 'ConvolutionRelu'" in r.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]
    assert src.read_bytes() == before


def test_cli_failure_keeps_existing_output(tmp_path):
    out = tmp_path / "m.onnx"
    out.write_bytes(b"old")
    src = tmp_path / "g.json"
    src.write_text("[")
    assert main(["convert", str(src), "-o", str(out)]) == 2
    assert out.read_bytes() == b"old"


# ---------------------------------------------------------------- fuzz

SEEDS = [small_graph()] + [
    json.loads((MODELS / name).read_text()) for name in ("qdq_chain.json", "conv_block.json", "quantized_mlp.json")
]
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(["float", "int8_t", "NAN", "Parameter_0", "Add", "Result", "-1", "1e999", "char"]),
    st.lists(st.integers(-3, 70), max_size=5),
    st.dictionaries(st.sampled_from(["node", "index", "type", "axis"]), st.integers(-2, 3), max_size=2),
)


OP_TYPES = sorted(odq.ngraph.supported_ops()) + ["QuantizedConvolution", "Gather"]
CTYPES = [t.ctype for t in odq.dtypes.TABLE]


def _paths(v, prefix=()):
    yield prefix
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, prefix + (i,))


def _mutate(doc, data) -> None:
    kind = data.draw(
        st.sampled_from(["replace", "delete", "swap_ops", "drop_op", "dup_name", "int_nudge", "op_type", "elem_type"])
    )
    ops = doc[0]["ops"]
    if kind == "op_type" and ops:  # another op type with the same inputs and attributes
        data.draw(st.sampled_from(ops))["op"] = data.draw(st.sampled_from(OP_TYPES))
        return
    if kind == "elem_type" and ops:
        target = data.draw(st.sampled_from(ops))
        key = data.draw(st.sampled_from(["element_type", "type", "target_type"]))
        target[key] = data.draw(st.sampled_from(CTYPES))
        return
    if kind == "swap_ops" and len(ops) > 1:
        i, j = data.draw(st.integers(0, len(ops) - 1)), data.draw(st.integers(0, len(ops) - 1))
        ops[i], ops[j] = ops[j], ops[i]
        return
    if kind == "drop_op" and ops:
        ops.pop(data.draw(st.integers(0, len(ops) - 1)))
        return
    if kind == "dup_name" and len(ops) > 1:
        i, j = data.draw(st.integers(0, len(ops) - 1)), data.draw(st.integers(0, len(ops) - 1))
        ops[i]["name"] = ops[j]["name"]
        return
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    if kind == "delete":
        del parent[key]
    elif kind == "int_nudge" and isinstance(parent[key], int) and not isinstance(parent[key], bool):
        parent[key] += data.draw(st.sampled_from([-1, 1, 2, -100, 10**6]))
    else:
        parent[key] = data.draw(JUNK)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_only_dequantize_error_escapes(data):
    doc = copy.deepcopy(SEEDS[data.draw(st.integers(0, len(SEEDS) - 1))])
    for _ in range(data.draw(st.integers(1, 3))):
        try:
            _mutate(doc, data)
        except (KeyError, IndexError, TypeError, AttributeError):  # the mutation itself did not apply
            pass
    source: object = doc
    if data.draw(st.integers(0, 9)) == 0:  # the text itself damaged: cut short, or a byte replaced
        text = json.dumps(doc).encode()
        at = data.draw(st.integers(0, len(text) - 1))
        source = (
            text[:at]
            if data.draw(st.booleans())
            else text[:at] + bytes([data.draw(st.integers(0, 255))]) + text[at + 1 :]
        )
    opset = data.draw(st.sampled_from([13, 17, 21]))
    try:
        model = odq.ngraph.convert(source, opset=opset)
    except odq.DequantizeError as e:
        assert e.rule and str(e)
        return
    onnx.checker.check_model(model, full_check=True)
