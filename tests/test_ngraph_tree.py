"""Folder conversion: ``odq.ngraph.convert_tree`` and ``onnx-dequant convert DIR -o OUTDIR``: the tree kept,
each graph converted or refused on its own (nothing written for a refused one), the migration report,
exit codes 0 / 1 / 2, the same results on one or several processes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest

import onnx_dequant as odq
from onnx_dequant.cli import main
from onnx_dequant.graphs import count_dequantize

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
SEND = [{"name": "f", "ops": [{"name": "Send_1", "op": "Send", "inputs": []}], "parameters": [], "result": ["Send_1"]}]


def _tree(root: Path, bad: bool = True) -> Path:
    src = root / "src"
    (src / "nets" / "deep").mkdir(parents=True)
    shutil.copy(MODELS / "qdq_chain.json", src / "qdq_chain.json")
    shutil.copy(MODELS / "conv_block.json", src / "nets" / "conv_block.json")
    shutil.copy(MODELS / "quantized_mlp.json", src / "nets" / "deep" / "mlp.json")
    (src / "nets" / "notes.txt").write_text("not a graph")
    (src / ".hidden").mkdir()
    (src / ".hidden" / "skipped.json").write_text("[]")
    if bad:
        (src / "nets" / "send.json").write_text(json.dumps(SEND))
        (src / "broken.json").write_text("[{")
    return src


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("jobs", [1, 2])
def test_convert_tree_keeps_the_tree_and_reports_each_graph(tmp_path, jobs):
    src = _tree(tmp_path)
    before = _snapshot(src)
    seen = []
    report = odq.ngraph.convert_tree(src, tmp_path / "out", jobs=jobs, progress=lambda d, t, r: seen.append((d, t)))
    assert _snapshot(src) == before  # inputs untouched
    assert [r.graph for r in report.results] == [
        "broken.json",
        "nets/conv_block.json",
        "nets/deep/mlp.json",
        "nets/send.json",
        "qdq_chain.json",
    ]
    assert sorted(seen) == [(i, 5) for i in range(1, 6)]
    by = {r.graph: r for r in report.results}
    assert [r.graph for r in report.converted] == ["nets/conv_block.json", "nets/deep/mlp.json", "qdq_chain.json"]
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written == ["nets/conv_block.onnx", "nets/deep/mlp.onnx", "qdq_chain.onnx"]  # none for refused graphs
    for r in report.converted:
        model = onnx.load(tmp_path / "out" / r.output)
        onnx.checker.check_model(model, full_check=True)
        assert r.nodes == len(model.graph.node)
        assert r.ops == len(json.loads((src / r.graph).read_text())[-1]["ops"])
    send = by["nets/send.json"]
    assert (send.status, send.node, send.op_type) == ("refused", "Send_1", "Send")
    assert "Send" in send.error and "nets/send.json: node 'Send_1'" in send.message
    broken = by["broken.json"]
    assert broken.status == "refused" and broken.op_type is None and "malformed JSON" in broken.error
    assert report.stopped_by == [("(file)", 1), ("Send", 1)]
    assert not report.ok
    d = report.to_dict()
    assert (d["graphs"], d["converted"], d["refused"]) == (5, 3, 2)
    assert d["stopped_by"] == {"(file)": 1, "Send": 1}


def test_convert_tree_same_models_on_one_or_two_processes(tmp_path):
    src = _tree(tmp_path, bad=False)
    one = odq.ngraph.convert_tree(src, tmp_path / "one", jobs=1)
    two = odq.ngraph.convert_tree(src, tmp_path / "two", jobs=2, lower=True)
    assert one.ok and two.ok and two.jobs == 2
    assert _snapshot(tmp_path / "one").keys() == _snapshot(tmp_path / "two").keys()
    for r in two.converted:  # --lower: standard ONNX only
        assert not odq.graphs.has_dequantize(onnx.load(tmp_path / "two" / r.output))


def test_convert_tree_bad_usage(tmp_path):
    with pytest.raises(odq.DequantizeError, match="not a folder"):
        odq.ngraph.convert_tree(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(odq.DequantizeError, match=r"no \*.json graphs"):
        odq.ngraph.convert_tree(tmp_path / "empty", tmp_path / "out")
    src = _tree(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(odq.DequantizeError, match="exists and is not a folder"):
        odq.ngraph.convert_tree(src, tmp_path / "file")
    with pytest.raises(odq.DequantizeError, match="jobs must be at least 1"):
        odq.ngraph.convert_tree(src, tmp_path / "out", jobs=0)


def test_cli_folder_report_exit_codes_and_json(tmp_path, capsys):
    src = _tree(tmp_path)
    assert main(["convert", str(src), "-o", str(tmp_path / "out"), "--jobs", "2"]) == 1
    out, err = capsys.readouterr()
    assert "migration report: 5 graph(s)" in out
    assert "refused    nets/send.json" in out and "node 'Send_1' (Send)" in out
    assert "converted 3, refused 2" in out and "ops that stopped graphs" in out
    assert "[5/5]" in err  # progress while it runs
    assert main(["convert", str(src), "-o", str(tmp_path / "out2"), "--json", "--jobs", "1"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["refused"] == 2 and report["stopped_by"]["Send"] == 1
    good = _tree(tmp_path / "good", bad=False)
    assert main(["convert", str(good), "-o", str(tmp_path / "out3")]) == 0
    capsys.readouterr()
    assert main(["convert", str(tmp_path / "nowhere"), "-o", str(tmp_path / "x")]) == 2
    assert main(["convert", str(MODELS / "qdq_chain.json"), "-o", str(tmp_path / "m.onnx"), "--jobs", "2"]) == 2
    err = capsys.readouterr().err
    assert "--jobs applies to a folder" in err and "Traceback" not in err


def test_save_converted_checks_shapes_and_writes_nothing_on_failure(tmp_path):
    """The importer's write path runs ONNX's shape inference (Add of [2] and [3] passes the plain checker)
    and leaves no file behind when the model fails it; a good model is written through modelio."""
    from onnx import TensorProto, helper

    from onnx_dequant.ngraph.export import save_converted

    bad = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["a", "b"], ["c"])],
            "g",
            [
                helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
                helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
            ],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [3])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    onnx.checker.check_model(bad)  # the plain checker accepts it
    out = tmp_path / "m.onnx"
    with pytest.raises(odq.DequantizeError) as e:
        save_converted(bad, out, path="g.json")
    assert e.value.path == "g.json" and "checker" in e.value.rule
    assert list(tmp_path.iterdir()) == []

    model = odq.ngraph.convert(str(MODELS / "qdq_chain.json"))
    written = save_converted(model, out, lower=True)
    assert count_dequantize(model) > 0 and count_dequantize(written) == 0
    assert onnx.load(str(out)).graph.node == written.graph.node


# Each child starts as a command typed at a shell in the foreground does, Ctrl-C raising KeyboardInterrupt
# (a harness running the tests in the background starts them with SIGINT ignored, which Python keeps).
_FOREGROUND = "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
_CLI = _FOREGROUND + "from onnx_dequant.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def _interrupt_folder_run(tmp_path: Path, sig: int, n: int = 300) -> tuple[subprocess.Popen, str, Path]:
    """Start ``convert SRC -o OUT --jobs 2`` in a process group of its own, send ``sig`` to the whole group
    (as a terminal's Ctrl-C does) once the first model is written, and wait for the command to end."""
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    text = (MODELS / "quantized_conv_net.json").read_bytes()
    for i in range(n):
        (src / f"g{i:03}.json").write_bytes(text)
    cmd = [sys.executable, "-c", _CLI, "convert", str(src), "-o", str(out), "--jobs", "2"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 120  # a generous bound on a loaded machine, not a timing assertion
        while not (out.is_dir() and any(p.suffix == ".onnx" for p in out.iterdir())):
            assert proc.poll() is None and time.monotonic() < deadline, "no model written"
            time.sleep(0.005)
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=120)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc, err, out


def _check_outputs(out: Path, n: int) -> None:
    """Every file in ``out`` is a whole model (no temporary file left), and far from all were converted."""
    names = sorted(p.name for p in out.iterdir())
    assert names and all(not name.startswith(".") and name.endswith(".onnx") for name in names), names
    for name in names:
        onnx.checker.check_model(onnx.load(out / name))
    assert len(names) < n // 2, f"{len(names)} of {n} converted: the queued graphs were not cancelled"


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals and process groups")
def test_ctrl_c_on_a_folder_run_stops_the_workers_exits_130(tmp_path):
    """Ctrl-C reaches the parent and its workers (one process group): the workers ignore it, the parent
    cancels the queued graphs, stops the workers (each finishes the graph under way, written whole) and
    exits 130 with one line. Before, the workers' KeyboardInterrupt could deadlock the pool's shutdown."""
    proc, err, out = _interrupt_folder_run(tmp_path, signal.SIGINT)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    lines = [line for line in err.splitlines() if not line.startswith("[")]  # less the progress lines
    assert lines == ["onnx-dequant convert: interrupted"], err[-2000:]
    _check_outputs(out, 300)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals and process groups")
def test_sigterm_on_a_folder_run_exits_143(tmp_path):
    proc, err, out = _interrupt_folder_run(tmp_path, signal.SIGTERM)
    assert proc.returncode == 143, (proc.returncode, err[-2000:])
    lines = [line for line in err.splitlines() if not line.startswith("[")]
    assert lines == ["onnx-dequant convert: terminated"], err[-2000:]
    _check_outputs(out, 300)


def test_a_worker_that_dies_fails_only_the_graph_it_was_converting(tmp_path, monkeypatch):
    """A worker killed mid-graph (the out-of-memory killer's SIGKILL) broke the pool: every graph not yet
    reported was refused as 'the worker failed', written or not. Now the graphs left are converted again
    (the one under way alone, in a worker of its own), only the graph that kills its worker is refused,
    with how the worker ended, and it leaves no temporary file."""
    from onnx_dequant.ngraph import tree

    src = _tree(tmp_path)
    shutil.copy(MODELS / "qdq_chain.json", src / "nets" / "crash.json")
    real = tree._convert_one

    def converting(s, rel, out, options):
        if rel.endswith("crash.json"):  # the workers are forked: they run this
            Path(out, "nets").mkdir(parents=True, exist_ok=True)
            Path(out, "nets", ".crash.onnx.half.tmp").write_bytes(b"half")  # as a writer killed midway leaves
            os.kill(os.getpid(), signal.SIGKILL)
        return real(s, rel, out, options)

    monkeypatch.setattr(tree, "_convert_one", converting)
    report = odq.ngraph.convert_tree(src, tmp_path / "out", jobs=2)
    status = {r.graph: r.status for r in report.results}
    assert status == {
        "broken.json": "refused",
        "nets/conv_block.json": "converted",
        "nets/crash.json": "refused",
        "nets/deep/mlp.json": "converted",
        "nets/send.json": "refused",
        "qdq_chain.json": "converted",
    }
    errors = {r.graph: r.error for r in report.refused}
    assert errors["nets/crash.json"] == "the worker converting it was killed by SIGKILL"
    assert "worker" not in errors["broken.json"] and "worker" not in errors["nets/send.json"]
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written == ["nets/conv_block.onnx", "nets/deep/mlp.onnx", "qdq_chain.onnx"]
    for name in written:
        onnx.checker.check_model(onnx.load(tmp_path / "out" / name))
