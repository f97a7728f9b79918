"""Generated inputs: symbolic dims sized from the constant scales and zero points of the Dequantize nodes
that read the input, and clear errors where the sizes still do not fit."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.validation import validate
from onnx_dequant.validation.inputs import DEFAULT_DIM, generate, graph_inputs

vi = helper.make_tensor_value_info
SCALE = np.linspace(0.125, 2.0, 64).astype(np.float32)


def dyn_model(*, via_identity: bool = False, zp_only: bool = False, second: int | None = None) -> onnx.ModelProto:
    """x ("N", "C") int8 -> Dequantize axes (1,) with a constant scale of 64 -> + b ("C",) -> y."""
    inputs = [vi("x", TensorProto.INT8, ["N", "C"]), vi("b", TensorProto.FLOAT, ["C"])]
    inits = []
    nodes = []
    x = "x"
    if via_identity:
        nodes.append(helper.make_node("Identity", ["x"], ["xi"]))
        x = "xi"
    if zp_only:  # the scale a graph input with the symbolic dim, the zero point the constant
        inputs.append(vi("s", TensorProto.FLOAT, ["C"]))
        inits.append(numpy_helper.from_array(np.zeros(64, np.int8), "z"))
        nodes.append(odq.make_node([x, "s", "z"], ["d"], axes=(1,), name="dq"))
    else:
        inits.append(numpy_helper.from_array(SCALE, "s"))
        nodes.append(odq.make_node([x, "s"], ["d"], axes=(1,), name="dq"))
    nodes.append(helper.make_node("Add", ["d", "b"], ["y"]))
    outputs = [vi("y", TensorProto.FLOAT, ["N", "C"])]
    if second is not None:
        inits.append(numpy_helper.from_array(np.ones(second, np.float32), "s2"))
        nodes.append(odq.make_node(["x", "s2"], ["y2"], axes=(1,), name="dq2"))
        outputs.append(vi("y2", TensorProto.FLOAT, ["N", "C"]))
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])


@pytest.mark.parametrize("zp_only", [False, True])
def test_symbolic_dim_takes_the_size_the_constant_scale_fixes(zp_only):
    model = dyn_model(zp_only=zp_only)
    feeds = generate(graph_inputs(model), seed=0)
    assert feeds["x"].shape == (DEFAULT_DIM, 64) and feeds["b"].shape == (64,)  # one size for "C" everywhere
    if zp_only:
        assert feeds["s"].shape == (64,)
    report = validate(model)
    assert report.ok, report.to_text()
    assert report.inputs[0]["shape"] == [DEFAULT_DIM, 64]
    assert validate(model, dims=["N=5"]).inputs[0]["shape"] == [5, 64]


def test_explicit_dim_that_contradicts_the_scale_names_the_node_and_the_size(tmp_path, capsys):
    model = dyn_model()
    with pytest.raises(odq.DequantizeError, match="must match input shape") as e:  # --dim wins: C=3 is used
        validate(model, dims=["C=3"])
    assert e.value.node == "dq" and "C=3" in str(e.value) and "give --dim C=64" in str(e.value)
    path = tmp_path / "dynC.onnx"
    onnx.save(model, path)
    assert main(["validate", str(path), "--dim", "C=3", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "node 'dq'" in err and "--dim C=64" in err, err
    assert main(["validate", str(path), "--dim", "C=64", "-q"]) == 0


def test_a_size_no_scale_fixes_fails_naming_the_file_the_node_and_dim(tmp_path, capsys):
    """x reaches the Dequantize through an Identity: nothing sizes "C" from the scale, the generated C=3
    breaks the op's contract in the reference, and the error says where and what to give."""
    path = tmp_path / "via.onnx"
    onnx.save(dyn_model(via_identity=True), path)
    assert main(["validate", str(path), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(path) in err and "node 'dq'" in err and "C=3" in err and "--dim NAME=SIZE" in err, err
    assert "Traceback" not in err
    assert main(["validate", str(path), "--dim", "C=64", "-q"]) == 0


def test_two_nodes_fixing_one_dim_differently_is_bad_input():
    with pytest.raises(odq.DequantizeError, match="dim 'C' must be 64 for node 'dq'") as e:
        generate(graph_inputs(dyn_model(second=32)))
    assert e.value.node == "dq2"


def test_a_subgraphs_own_value_named_like_the_input_fixes_nothing():
    """A Loop body's input named ``x`` (another value, 6 wide) read by a Dequantize with a scale of 6: the
    main graph's ``x`` is sized by the main graph's node alone (C=64), not refused as fixed twice."""
    model = dyn_model()
    body = helper.make_graph(
        [odq.make_node(["x", "s6"], ["bd"], axes=(1,), name="dq_body"), helper.make_node("Identity", ["c"], ["co"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("x", TensorProto.INT8, [2, 6])],
        [
            vi("co", TensorProto.BOOL, []),
            vi("bd_carried", TensorProto.INT8, [2, 6]),
            vi("bd", TensorProto.FLOAT, [2, 6]),
        ],
        [numpy_helper.from_array(np.ones(6, np.float32), "s6")],
    )
    body.node.append(helper.make_node("Identity", ["x"], ["bd_carried"]))
    g = model.graph
    g.initializer.extend(
        [numpy_helper.from_array(np.array(2, np.int64), "m"), numpy_helper.from_array(np.ones((2, 6), np.int8), "x0")]
    )
    g.node.append(helper.make_node("Loop", ["m", "", "x0"], ["xl", "ys"], body=body, name="loop"))
    g.output.append(vi("ys", TensorProto.FLOAT, [2, 2, 6]))
    feeds = generate(graph_inputs(model), seed=0)
    assert feeds["x"].shape == (DEFAULT_DIM, 64)
    report = validate(model)
    assert report.ok, report.to_text()
