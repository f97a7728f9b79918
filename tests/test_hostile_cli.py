"""Hostile use of the command and the API: every failure is exit 2 with one line (ONNX Runtime's own
exception types, MemoryError-sized inputs, bad options), invalid models are never written, the API
raises DequantizeError where it promises it, and ``out=`` may alias an input."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _save(path: Path, nodes, inputs, outputs, inits=(), ir: int = 10) -> Path:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])
    m.ir_version = ir
    path.write_bytes(m.SerializeToString())
    return path


S = numpy_helper.from_array(np.full(4, 0.5, np.float32), "s")
X = _vi("x", TensorProto.INT8, [4, 3])
Y = _vi("y", TensorProto.FLOAT, [4, 3])


def _dq(inputs=("x", "s"), out="y", name=None):
    return odq.make_node(list(inputs), [out], axes=(0,), name=name)


def _bad_models(folder: Path) -> dict[str, Path]:
    short = numpy_helper.from_array(np.full(4, 0.5, np.float32), "s")
    short.raw_data = short.raw_data[:8]
    return {
        "output twice": _save(folder / "twice.onnx", [_dq(name="a"), _dq(name="b")], [X], [Y], [S]),
        "ir_version 99": _save(folder / "ir99.onnx", [_dq()], [X], [Y], [S], ir=99),
        "no outputs": _save(folder / "noout.onnx", [_dq()], [X], [], [S]),
        "duplicate outputs": _save(folder / "dupout.onnx", [_dq()], [X], [Y, Y], [S]),
        "short raw data": _save(folder / "short.onnx", [_dq()], [X], [Y], [short]),
        "missing function": _save(
            folder / "fn.onnx",
            [_dq(), helper.make_node("Nope", ["y"], ["w"], domain="local")],
            [X],
            [_vi("w", 1, [4, 3])],
            [S],
        ),
    }


def _one_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith(f"onnx-dequant {command}: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_run_turns_onnx_runtime_exceptions_into_one_line(tmp_path, capsys):
    """ORT's Fail / InvalidGraph / InvalidArgument are not RuntimeErrors: they leaked as tracebacks."""
    models = _bad_models(tmp_path)
    np.savez(tmp_path / "in.npz", x=np.ones((4, 3), np.int8))
    for what in ("output twice", "ir_version 99", "no outputs"):
        argv = ["run", str(models[what]), "--inputs", str(tmp_path / "in.npz"), "-o", str(tmp_path / "o.npz")]
        assert main(argv) == 2, what
        assert str(models[what]) in _one_line(capsys, "run")
    assert not (tmp_path / "o.npz").exists()


def test_run_time_error_in_onnx_runtime_is_one_line(tmp_path, capsys):
    """A broadcast error inside ORT at run time (its error log included) is the command's one line."""
    add = helper.make_node("Add", ["y", "z"], ["w"])
    path = _save(tmp_path / "m.onnx", [_dq(), add], [X, _vi("z", TensorProto.FLOAT, [None])], [_vi("w", 1, None)], [S])
    np.savez(tmp_path / "in.npz", x=np.ones((4, 3), np.int8), z=np.ones(5, np.float32))
    assert main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "-o", str(tmp_path / "o.npz")]) == 2
    assert "ONNX Runtime failed" in _one_line(capsys, "run")


def test_session_raises_dequantize_error_for_models_ort_refuses(tmp_path):
    models = _bad_models(tmp_path)
    for what in ("output twice", "ir_version 99"):
        with pytest.raises(odq.DequantizeError, match="ONNX Runtime refused the model"):
            odq.session(str(models[what]))


def test_lower_never_writes_an_invalid_model(tmp_path, capsys):
    models = _bad_models(tmp_path)
    for what in ("output twice", "no outputs", "duplicate outputs", "short raw data", "missing function"):
        out = tmp_path / "out.onnx"
        assert main(["lower", str(models[what]), "-o", str(out)]) == 2, what
        assert str(models[what]) in _one_line(capsys, "lower"), what
        assert not out.exists(), what


def _npz_bomb(path: Path, shape: tuple[int, ...]) -> Path:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x.npy", header.getvalue() + bytes(64))
    return path


def test_memory_bombs_are_refused_before_allocating(tmp_path, capsys):
    model = _save(tmp_path / "m.onnx", [_dq()], [_vi("x", TensorProto.INT8, ["N", 3])], [_vi("y", 1, ["N", 3])], [S])
    bomb = _npz_bomb(tmp_path / "bomb.npz", (1 << 42,))
    assert main(["run", str(model), "--inputs", str(bomb), "-o", str(tmp_path / "o.npz")]) == 2
    assert "more than this machine's memory" in _one_line(capsys, "run")
    assert main(["validate", str(model), "--dim", f"N={1 << 42}", "-q"]) == 2
    assert "more than this machine's memory" in _one_line(capsys, "validate")


def test_memory_error_anywhere_is_one_line(tmp_path, capsys, monkeypatch):
    from onnx_dequant import modelio

    def oom(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(modelio, "load", oom)
    assert main(["lower", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o.onnx")]) == 2
    assert "out of memory" in _one_line(capsys, "lower")


@pytest.mark.parametrize(
    ("argv", "command", "text"),
    [
        (["validate", "{m}", "--seed", "-1", "-q"], "validate", "seed must be >= 0"),
        (["lower", "{m}"], "lower", "required: -o/--output"),
        (["lower", "{m}", "-o", "{d}/o.onnx", "--opset", "x"], "lower", "invalid int value"),
        (["bogus"], "", "invalid choice"),
        (["convert", "{d}/missing.json", "-o", "{d}/o.onnx"], "convert", "missing.json"),
    ],
)
def test_errors_are_one_line(tmp_path, capsys, argv, command, text):
    """Usage errors are one line too (no argparse usage block), with no progress line before."""
    m = _save(tmp_path / "m.onnx", [_dq()], [X], [Y], [S])
    assert main([a.format(m=m, d=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and text in err, err
    assert err.startswith(f"onnx-dequant {command}".rstrip() + ": error: "), err


_TERMINATED = textwrap.dedent(
    """
    import os, signal, sys
    from onnx_dequant import fileio
    from onnx_dequant.cli import main
    real = fileio.finish
    def finish(tmp, target):
        os.kill(os.getpid(), signal.SIGTERM)  # SIGTERM while the temporary file is written
        real(tmp, target)
    fileio.finish = finish
    sys.exit(main(sys.argv[1:]))
    """
)


def test_sigterm_exits_143_and_removes_temporary_files(tmp_path):
    src = _save(tmp_path / "m.onnx", [_dq()], [X], [Y], [S])
    out = tmp_path / "out" / "o.onnx"
    out.parent.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", _TERMINATED, "lower", str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert proc.stderr == "onnx-dequant lower: terminated\n"
    assert list(out.parent.iterdir()) == []  # neither the output nor a .o.onnx.*.tmp


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """``onnx-dequant validate ... | head``: the pipe closed before the report is written is exit 141 (as
    a Unix tool killed by SIGPIPE), with no error line."""
    reader_gone = "import os, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1); "
    code = reader_gone + "from onnx_dequant.cli import main; sys.exit(main(sys.argv[1:]))"
    graph = str(ROOT / "models" / "qdq_chain.json")
    proc = subprocess.run([sys.executable, "-c", code, "validate", graph, "--json"], capture_output=True, text=True)
    assert (proc.returncode, proc.stderr) == (141, "")


@pytest.mark.parametrize(
    "argv,error",
    [
        (["validate", "/nonexistent/m.onnx", "--json"], "/nonexistent/m.onnx: model file not found"),
        (
            ["lower", "--json"],
            "the following arguments are required: IN.onnx, -o/--output (see onnx-dequant lower --help)",
        ),
    ],
)
def test_a_failure_with_json_asked_for_is_json_on_stdout_too(argv, error, capsys):
    """A program reading ``--json`` output reads every outcome there, failures included; the person
    still gets the one line on stderr."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert json.loads(out) == {"ok": False, "exit_code": 2, "error": error}
    assert err.endswith(f"error: {error}\n") and err.count("\n") == 1
    assert main(argv[:-1]) == 2 and capsys.readouterr().out == ""  # without --json: stdout stays empty


def test_json_is_asked_for_as_argparse_reads_it(capsys):
    """An abbreviation argparse takes (``--js``) asks for JSON; a file named ``--json`` after ``--`` does not."""
    assert main(["validate", "/nonexistent/m.onnx", "--js"]) == 2
    assert json.loads(capsys.readouterr().out)["error"] == "/nonexistent/m.onnx: model file not found"
    assert main(["validate", "--", "--json"]) == 2
    assert capsys.readouterr().out == ""


def test_negative_numbers_in_scientific_notation_are_values_not_options(capsys):
    graph = str(ROOT / "models" / "qdq_chain.json")
    assert main(["validate", graph, "--json", "--real-range", "-1e3", "-5E-1"]) == 0
    assert '"ok": true' in capsys.readouterr().out.replace("\n", " ")
    assert main(["validate", graph, "--real-range", "-1e3"]) == 2  # still two values
    assert "expected 2 arguments" in capsys.readouterr().err


# ---- the API ----


def test_out_aliasing_an_input_gives_the_right_result():
    x = np.arange(-6, 6, dtype=np.int8).reshape(4, 3)
    s = np.linspace(0.25, 3, 12, dtype=np.float32).reshape(4, 3)
    expected = odq.dequantize(x, s, None, axes=(0, 1))
    alias = s.copy()
    y = odq.dequantize(x, alias, None, axes=(0, 1), out=alias)
    assert y is alias and odq.same_bits(y, expected)  # was x * s * s: s overwritten while read
    wide = np.arange(12, dtype=np.int32).reshape(4, 3)
    overlap = wide.view(np.float32)
    assert odq.same_bits(
        odq.dequantize(wide.copy(), s, None, axes=(0, 1)), odq.dequantize(wide, s, None, axes=(0, 1), out=overlap)
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda: odq.dequantize(np.zeros((2, 3), np.int8), np.ones(3, np.float32), axes=np.array(2)),
        lambda: odq.lower(5),
        lambda: odq.lower(b"model bytes"),
        lambda: odq.lower("/no/such/model.onnx"),
        lambda: odq.lower(onnx.ModelProto(), only=5),
        lambda: odq.make_node(None, ["y"]),
        lambda: odq.make_node(["x", "s"], None),
        lambda: odq.make_node(["x", 5], ["y"]),
        lambda: odq.ngraph.convert("a\0b"),
        lambda: odq.session("/no/such/model.onnx"),
    ],
    ids=[
        "axes-0d",
        "lower-int",
        "lower-bytes",
        "lower-missing",
        "lower-only",
        "make_node-None",
        "make_node-outputs",
        "make_node-name-type",
        "convert-nul",
        "session-missing",
    ],
)
def test_api_raises_dequantize_error(call):
    with pytest.raises(odq.DequantizeError):
        call()


# ---- smaller items ----


def _graph(ops: list[dict], results: list[str]) -> list[dict]:
    return [
        {"name": "f", "parameters": [o["name"] for o in ops if o["op"] == "Parameter"], "result": results, "ops": ops}
    ]


def _op(name: str, op: str, inputs: list[str], **attrs) -> dict:
    return {"name": name, "op": op, "op_version": 0, "inputs": inputs, "outputs": [f"{name}_0"], **attrs}


def test_parameter_constant_result_refuse_other_op_versions():
    p = _op("p", "Parameter", [], shape=[2], element_type="float")
    c = _op("c", "Constant", [], shape=[2], element_type="float", value=["1", "2"])
    add = _op("a", "Add", ["p", "c"])
    r = _op("r", "Result", ["a"])
    assert odq.ngraph.convert(_graph([p, c, add, r], ["r"])).graph.output[0].name == "r"
    for bad in (p, c, r):
        bad["op_version"] = 7
        with pytest.raises(odq.DequantizeError, match=f"{bad['op']} op_version 7 is not supported"):
            odq.ngraph.convert(_graph([p, c, add, r], ["r"]))
        bad["op_version"] = 0


def test_huge_single_value_constant_is_refused_not_allocated():
    c = _op("c", "Constant", [], shape=[1 << 40, 3], element_type="int4_t", value=["1"])
    with pytest.raises(odq.DequantizeError, match="more than this machine's memory"):
        odq.ngraph.convert(_graph([c, _op("r", "Result", ["c"])], ["r"]))


def test_loop_without_cond_agrees(tmp_path):
    """A Loop whose optional cond is omitted runs M times; onnx's evaluator ran it zero times, so
    validation reported a false DISAGREE."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("v_in", TensorProto.FLOAT, [4, 3])],
        [vi("c_out", TensorProto.BOOL, []), vi("v_out", TensorProto.FLOAT, [4, 3])],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one")],
    )
    loop = helper.make_node("Loop", ["M", "", "y"], ["z"], body=body)
    m = numpy_helper.from_array(np.array(3, np.int64), "M")
    path = _save(tmp_path / "loop.onnx", [_dq(), loop], [X], [_vi("z", TensorProto.FLOAT, [4, 3])], [S, m])
    report = odq.validate(str(path), progress=False)
    assert report.ok, report.to_text()


def test_empty_output_name_is_refused(tmp_path, capsys):
    m = _save(tmp_path / "m.onnx", [_dq()], [X], [Y], [S])
    assert main(["lower", str(m), "-o", ""]) == 2
    assert "output file name is empty" in _one_line(capsys, "lower")


_ENDING_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a foreground shell
    from onnx_dequant import cli

    def interrupted():
        raise {exc}

    cli.build_parser = interrupted  # Ctrl-C (or SIGTERM) while the command runs
    sys.argv[1:] = ["validate", "m.onnx"]
    status = cli.main()
    os.kill(os.getpid(), signal.{second})  # a second one while the command exits
    sys.exit(status)
    """
)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize(
    "exc,second,status,line",
    [
        ("KeyboardInterrupt", "SIGINT", 130, "interrupted"),
        ("KeyboardInterrupt", "SIGTERM", 130, "interrupted"),
        ("cli._Terminated", "SIGINT", 143, "terminated"),
    ],
)
def test_a_second_signal_while_the_command_exits_keeps_its_status(exc, second, status, line):
    """Once the command ends for Ctrl-C or SIGTERM, another one is ignored: before, a second Ctrl-C while
    Python finalized killed the process (exit -2 after the 'interrupted' line) or raised a traceback."""
    child = _ENDING_CHILD.format(exc=exc, second=second)
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == status, (r.returncode, r.stderr[-2000:])
    assert r.stderr == f"onnx-dequant: {line}\n", r.stderr
