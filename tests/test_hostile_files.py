"""Hostile use of files: torn model/data pairs (fault injection between the renames, a killed writer,
concurrent writers), special files as inputs and outputs, outputs that name an input."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import modelio
from onnx_dequant.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _model(value: float, n: int = 4096) -> onnx.ModelProto:
    """y = w * 1 with w filled with ``value``: a model whose output tells which data file it read."""
    w = numpy_helper.from_array(np.full(n, value, np.float32), "w")
    one = numpy_helper.from_array(np.ones(n, np.float32), "one")
    g = helper.make_graph(
        [helper.make_node("Mul", ["w", "one"], ["y"])],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        [w, one],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def _value(path: Path) -> set[float]:
    so = ort.SessionOptions()
    so.log_severity_level = 4
    (y,) = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {})
    return set(np.unique(y).tolist())


def _data_files(folder: Path, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if re.fullmatch(re.escape(name) + r"(\.[0-9a-f]{8})?\.data", p.name))


def test_failure_between_the_renames_keeps_the_old_pair(tmp_path, monkeypatch):
    """The second rename (the model) fails: the target still holds the old model with the old data."""
    target = tmp_path / "m.onnx"
    modelio.save(_model(0.25), target, external=True)
    real_replace, calls = os.replace, []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device (injected)")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError):
        modelio.save(_model(0.5), target, external=True)
    monkeypatch.undo()
    assert len(calls) == 2
    assert _value(target) == {0.25}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    assert _data_files(tmp_path, "m.onnx") == ["m.onnx.data"]


_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from onnx_dequant import modelio
    sys.path.insert(0, sys.argv[2])
    from test_hostile_files import _model
    real = os.replace
    calls = []
    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)  # killed between the data file's rename and the model's
        real(src, dst)
    os.replace = replace
    modelio.save(_model(0.5), sys.argv[1], external=True)
    """
)


def test_killed_between_the_renames_keeps_the_old_pair(tmp_path):
    target = tmp_path / "m.onnx"
    modelio.save(_model(0.25), target, external=True)
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED, str(target), str(Path(__file__).parent)], capture_output=True, timeout=120
    )
    assert proc.returncode == -9, proc.stderr
    assert _value(target) == {0.25}  # the old model reads the old data; the new data file is an orphan
    modelio.save(_model(0.75), target, external=True)  # the next write replaces the pair whole
    assert _value(target) == {0.75}


def test_concurrent_writers_leave_one_whole_pair(tmp_path, monkeypatch):
    """Writers of different models to one target, slowed down around every rename so that they
    interleave: the target ends as one writer's model with that writer's data (the models differ in
    size, so a model paired with another's data would read the wrong bytes or fail to load)."""
    target = tmp_path / "m.onnx"
    sizes = {4096 + 256 * i: 0.125 * (i + 1) for i in range(4)}
    real_replace = os.replace

    def slow_replace(src, dst):
        time.sleep(0.01)
        real_replace(src, dst)
        time.sleep(0.01)

    monkeypatch.setattr(os, "replace", slow_replace)
    errors: list[BaseException] = []

    def writer(n: int, v: float) -> None:
        try:
            for _ in range(3):
                modelio.save(_model(v, n), target, external=True)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=item) for item in sizes.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.undo()
    assert not errors
    so = ort.SessionOptions()
    so.log_severity_level = 4
    (y,) = ort.InferenceSession(str(target), so, providers=["CPUExecutionProvider"]).run(None, {})
    assert set(np.unique(y).tolist()) == {sizes[y.size]}
    assert len(_data_files(tmp_path, "m.onnx")) == 1  # the replaced pairs' data files are gone


def _external_dq(folder: Path) -> Path:
    w = np.arange(-64, 64, dtype=np.int8).reshape(8, 16)
    s = np.linspace(0.5, 4, 8, dtype=np.float32)
    g = helper.make_graph(
        [odq.make_node(["w", "s"], ["y"], axes=(0,), name="dq")],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])
    m.ir_version = 10
    path = folder / "ext.onnx"
    onnx.save(m, str(path), save_as_external_data=True, location="ext.onnx.data", size_threshold=0)
    return path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_output_that_is_a_folder_leaves_nothing(tmp_path, capsys):
    src = _external_dq(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["lower", str(src), "-o", str(out)]) == 2
    assert "is a folder" in _one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no out.data beside it


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_special_files_refused_as_outputs(tmp_path, capsys):
    src = _external_dq(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["lower", str(src), "-o", str(fifo)]) == 2
    assert "is a FIFO" in _one_error_line(capsys)
    assert fifo.is_fifo()


def test_symlinked_output_is_written_through(tmp_path, capsys):
    src = _external_dq(tmp_path)
    real = tmp_path / "real" / "lowered.onnx"
    real.parent.mkdir()
    real.write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to(real)
    assert main(["lower", str(src), "-o", str(link)]) == 0
    assert link.is_symlink() and link.resolve() == real  # the link stays, the file it names is replaced
    y = ort.InferenceSession(str(real), providers=["CPUExecutionProvider"]).run(None, {})[0]
    w = np.arange(-64, 64, dtype=np.int8).reshape(8, 16)
    assert odq.same_bits(y, odq.dequantize(w, np.linspace(0.5, 4, 8, dtype=np.float32), axes=(0,)))


def test_run_output_naming_an_input_file_is_refused(tmp_path, capsys):
    """``run -o`` on the model's own weights, the model or the inputs: refused, every file intact."""
    src = _external_dq(tmp_path)
    np.savez(tmp_path / "in.npz")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for out in ("ext.onnx.data", "ext.onnx", "in.npz"):
        assert main(["run", str(src), "--inputs", str(tmp_path / "in.npz"), "-o", str(tmp_path / out)]) == 2
        assert "is a file the input reads" in _one_error_line(capsys)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_convert_output_naming_its_graph_is_refused(tmp_path, capsys):
    """``convert GRAPH.json -o GRAPH.json`` (or a link to it) would put ONNX bytes where the nGraph graph
    was: refused, the graph intact."""
    graph = tmp_path / "g.json"
    graph.write_bytes((ROOT / "models" / "qdq_chain.json").read_bytes())
    (tmp_path / "link.onnx").symlink_to(graph)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for out in ("g.json", "link.onnx"):
        assert main(["convert", str(graph), "-o", str(tmp_path / out)]) == 2
        assert "is a file the input reads" in _one_error_line(capsys)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert main(["convert", str(graph), "-o", str(tmp_path / "g.onnx")]) == 0


def _finishes(argv: list[str], seconds: float = 60) -> int:
    """main(argv) in a daemon thread; fails (instead of hanging the suite) when it does not return."""
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(main(argv)), daemon=True)
    t.start()
    t.join(seconds)
    assert result, f"{argv} hangs"
    return result[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_fifo_inputs_are_refused_not_read(tmp_path, capsys):
    src = _external_dq(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv in (
        ["lower", str(fifo), "-o", str(tmp_path / "o.onnx")],
        ["convert", str(fifo), "-o", str(tmp_path / "o.onnx")],
        ["run", str(src), "--inputs", str(fifo), "-o", str(tmp_path / "o.npz")],
        ["validate", str(src), "--inputs", str(fifo), "-q"],
    ):
        assert _finishes(argv) == 2, argv
        assert "is a FIFO" in _one_error_line(capsys)
    assert not (tmp_path / "o.onnx").exists() and not (tmp_path / "o.npz").exists()


def test_nul_in_an_external_location_is_bad_input(tmp_path, capsys):
    m = _model(0.25, n=8)
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "a\0b"
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(odq.DequantizeError, match="NUL"):
        modelio.load(path)
    assert main(["lower", str(path), "-o", str(tmp_path / "o.onnx")]) == 2
    assert "NUL" in _one_error_line(capsys)


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="the umask read from /proc")
def test_a_new_files_mode_comes_from_the_umask_which_is_never_set(tmp_path, monkeypatch):
    """A new output gets the umask's default mode (not mkstemp's 0600), read without ``os.umask``: two
    threads setting and putting it back at once could leave the process's umask at 0."""
    from onnx_dequant import fileio

    old = os.umask(0o027)
    try:

        def refused(mask):
            raise AssertionError("os.umask called")

        monkeypatch.setattr(fileio.os, "umask", refused)
        threads = []
        for k in range(8):

            def write(k=k):
                with fileio.atomic_path(tmp_path / f"out{k}.bin") as tmp:
                    tmp.write_bytes(b"x")

            threads.append(threading.Thread(target=write))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        monkeypatch.undo()
        assert os.umask(0o027) == 0o027
        assert sorted((p.name, p.stat().st_mode & 0o777) for p in tmp_path.iterdir()) == [
            (f"out{k}.bin", 0o640) for k in range(8)
        ]
    finally:
        os.umask(old)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and /dev/stdout as Linux has them")
def test_a_write_the_system_refuses_names_the_output_not_a_temporary_file(tmp_path):
    """A file size limit (as a full disk) stops the write: one line naming the output, exit 2, the old
    output and no temporary file left; ``-o /dev/stdout`` on a pipe is refused as a FIFO."""
    src = _external_dq(tmp_path)
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old")
    cli = [sys.executable, "-m", "onnx_dequant.cli", "lower", str(src)]
    limit = "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)); "
    limited = [
        sys.executable,
        "-c",
        limit + "sys.argv = sys.argv[1:]; runpy.run_module('onnx_dequant.cli', run_name='__main__')",
    ]
    proc = subprocess.run([*limited, "x", "lower", str(src), "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr == f"onnx-dequant lower: error: File too large: {out}\n"
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    proc = subprocess.run([*cli, "-o", "/dev/stdout"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout[:200]
    assert (
        proc.stderr == "onnx-dequant lower: error: /dev/stdout: is a FIFO: refused as an output (name a regular file)\n"
    )
