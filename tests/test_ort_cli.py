"""``onnx-dequant run``: inputs by name from npz, clear errors (exit 2), outputs written atomically."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.compare import same_bits


@pytest.fixture
def model_path(tmp_path):
    nodes = [
        odq.make_node(["x", "s", "z"], ["y"], axes=[0, 2], name="dq"),
        helper.make_node("Relu", ["y"], ["file"]),  # an output named like numpy.savez's own argument
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TP.INT8, [2, 3, 4]),
            helper.make_tensor_value_info("s", TP.FLOAT, None),  # no shape: checked at run time
            helper.make_tensor_value_info("z", TP.INT8, [2, 4]),
        ],
        [
            helper.make_tensor_value_info("y", TP.FLOAT, [2, 3, 4]),
            helper.make_tensor_value_info("file", TP.FLOAT, [2, 3, 4]),
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)], ir_version=10
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return path


def _inputs(rng):
    return {
        "x": rng.integers(-128, 128, (2, 3, 4)).astype(np.int8),
        "s": rng.standard_normal((2, 4)).astype(np.float32),
        "z": rng.integers(-128, 128, (2, 4)).astype(np.int8),
    }


def test_run_writes_outputs_by_name(model_path, tmp_path, capsys):
    feed = _inputs(np.random.default_rng(0))
    np.savez(tmp_path / "in.npz", **feed)
    out = tmp_path / "out.npz"
    assert main(["run", str(model_path), "--inputs", str(tmp_path / "in.npz"), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "y: float32 (2, 3, 4)" in printed and "Python kernel: 1" in printed
    want = odq.dequantize(feed["x"], feed["s"], feed["z"], axes=[0, 2])
    with np.load(out) as got:
        assert sorted(got.files) == ["file", "y"]
        assert same_bits(got["y"], want) and same_bits(got["file"], np.maximum(want, 0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npz", "m.onnx", "out.npz"]


def test_run_json(model_path, tmp_path, capsys):
    np.savez(tmp_path / "in.npz", **_inputs(np.random.default_rng(1)))
    code = main(
        [
            "run",
            str(model_path),
            "--inputs",
            str(tmp_path / "in.npz"),
            "-o",
            str(tmp_path / "o.npz"),
            "--json",
            "--no-optimizations",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["kernel_nodes"] == ["dq"] and result["lowered_nodes"] == {}
    assert result["outputs"]["y"] == {"dtype": "float32", "shape": [2, 3, 4]}


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda f: f.pop("z"), r"in\.npz: missing input\(s\) 'z'"),
        (
            lambda f: f.update(extra=np.zeros(1)),
            r"unknown input name\(s\) 'extra'; the model's inputs are 's', 'x', 'z'",
        ),
        (lambda f: f.update(x=f["x"].astype(np.int16)), "input 'x' must have element type int8, got int16"),
        (lambda f: f.update(x=np.zeros((2, 3, 5), np.int8)), r"input 'x' dim 2 must be 4, got shape \(2, 3, 5\)"),
        (lambda f: f.update(z=np.zeros((2,), np.int8)), r"input 'z' must have rank 2 .*got shape \(2,\)"),
        (
            lambda f: f.update(s=np.ones((3, 4), np.float32)),
            r"m\.onnx: node 'dq'.*Scale shape \(\{3,4\}\) and zero point shape",
        ),
    ],
    ids=["missing", "extra", "dtype", "shape", "rank", "runtime"],
)
def test_bad_inputs_exit_2_and_leave_output_alone(model_path, tmp_path, capsys, change, message):
    feed = _inputs(np.random.default_rng(2))
    change(feed)
    np.savez(tmp_path / "in.npz", **feed)
    out = tmp_path / "out.npz"
    out.write_bytes(b"previous")
    assert main(["run", str(model_path), "--inputs", str(tmp_path / "in.npz"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("onnx-dequant run: error:")
    assert re.search(message, err), err
    assert "Traceback" not in err
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npz", "m.onnx", "out.npz"]


def test_missing_files_and_non_npz_exit_2(model_path, tmp_path, capsys):
    assert main(["run", str(model_path), "--inputs", str(tmp_path / "nope.npz"), "-o", str(tmp_path / "o.npz")]) == 2
    np.save(tmp_path / "single.npy", np.zeros(3))
    assert main(["run", str(model_path), "--inputs", str(tmp_path / "single.npy"), "-o", str(tmp_path / "o.npz")]) == 2
    assert (
        main(
            [
                "run",
                str(tmp_path / "none.onnx"),
                "--inputs",
                str(tmp_path / "single.npy"),
                "-o",
                str(tmp_path / "o.npz"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("onnx-dequant run: error:") == 3 and "Traceback" not in err
    assert not (tmp_path / "o.npz").exists()


def test_console_script_runs(model_path, tmp_path):
    np.savez(tmp_path / "in.npz", **_inputs(np.random.default_rng(3)))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "onnx_dequant.cli",
            "run",
            str(model_path),
            "--inputs",
            str(tmp_path / "in.npz"),
            "-o",
            str(tmp_path / "o.npz"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o.npz").exists()


@pytest.mark.parametrize("x_type,out_type", [("i4", "f32"), ("u4", "f16"), ("u8", "bf16"), ("i4", "bf16")])
def test_run_carries_4_bit_inputs_and_bf16_outputs(tmp_path, capsys, x_type, out_type):
    """ONNX Runtime's Python API exchanges no bf16 or 4-bit tensor with NumPy: ``run`` carries them through
    exact Casts, as ``validate`` does; the outputs are the reference's, bit for bit, in their own type."""
    xt, ot = odq.dtypes.parse(x_type), odq.dtypes.parse(out_type)
    x = np.array([[1, -2, 3], [7, -8, 0]] if xt.signed else [[1, 2, 3], [15, 0, 9]]).astype(xt.numpy)
    s = np.array([0.5, 3.25], ot.numpy)
    graph = helper.make_graph(
        [odq.make_node(["x", "s"], ["y"], axes=(0,), name="dq")],
        "g",
        [helper.make_tensor_value_info("x", xt.onnx, [2, 3])],
        [helper.make_tensor_value_info("y", ot.onnx, [2, 3])],
        [onnx.numpy_helper.from_array(s, "s")],
    )
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()]), model)
    np.savez(tmp_path / "in.npz", x=x)
    assert main(["run", str(model), "--inputs", str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")]) == 0
    assert f"y: {ot.numpy.name} (2, 3)" in capsys.readouterr().out
    y = np.load(tmp_path / "out.npz")["y"]  # bf16 comes back as its bits (|V2): NumPy has no bf16 of its own
    assert y.dtype.itemsize == ot.bits // 8 and same_bits(y.view(ot.numpy), odq.dequantize(x, s, axes=(0,)))


def test_run_carries_a_bf16_input_that_is_also_an_output(tmp_path, capsys):
    """A carried input listed as a graph output too gets one carrier each way (their Casts were named
    alike: ONNX Runtime refused the model, and validate blamed ONNX Runtime)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["Y"])],
        "g",
        [helper.make_tensor_value_info("X", TP.BFLOAT16, [2])],
        [helper.make_tensor_value_info("Y", TP.BFLOAT16, [2]), helper.make_tensor_value_info("X", TP.BFLOAT16, [2])],
    )
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), model)
    x = np.array([1.5, -2.0], odq.dtypes.parse("bf16").numpy)
    np.savez(tmp_path / "in.npz", X=x)
    assert main(["run", str(model), "--inputs", str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")]) == 0
    out = np.load(tmp_path / "out.npz")
    assert all(same_bits(out[n].view(x.dtype), x) for n in ("X", "Y"))
    assert main(["validate", str(model), "-q", "--inputs", str(tmp_path / "in.npz")]) == 0
