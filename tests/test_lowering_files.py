"""The lowering pass from file to file (``lower_file``, ``onnx-dequant lower``): external data streamed,
outputs written whole or not at all, inputs never overwritten, bad files refused with one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import domain_nodes, one_node_model, random_case, run_ort, vi
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import modelio
from onnx_dequant.cli import main as cli_main
from onnx_dequant.compare import same_bits
from onnx_dequant.schema import opset_import

RNG = np.random.default_rng(11)


# ---- files, external data, the command line ----


def _external_model(folder: Path, location: str = "weights.bin") -> tuple[Path, np.ndarray, np.ndarray, np.ndarray]:
    w, s, z = random_case(RNG, (64, 32), (0,), "i8", "f32")
    nodes = [odq.make_node(["w", "s", "z"], ["y"], axes=[0], name="dq_ext")]
    g = helper.make_graph(
        nodes,
        "g",
        [],
        [vi("y", TensorProto.FLOAT, [64, 32])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), opset_import()])
    m.ir_version = 10
    path = folder / "model.onnx"
    onnx.save(
        m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=location, size_threshold=0
    )
    return path, w, s, z


def _run_file(path: Path) -> np.ndarray:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {})[0]


def test_cli_external_data(tmp_path, capsys):
    src, w, s, z = _external_model(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "lowered.onnx"
    assert cli_main(["lower", str(src), "-o", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["lowered"] == 1 and result["opset"] == 21
    assert result["nodes"][0]["strategy"] == "dql-per-axis"
    assert result["nodes"][0]["refused"]["dql-per-tensor"] == "the node has quantization axes"
    assert result["nodes"][0]["dropped_axes"] == []  # (its axis 0 is not of size 1)
    assert (out_dir / "lowered.onnx.data").is_file()
    stored = onnx.load(str(out), load_external_data=False)
    assert any(t.data_location == TensorProto.EXTERNAL for t in stored.graph.initializer)
    assert domain_nodes(stored) == 0
    onnx.checker.check_model(str(out), full_check=True)
    assert same_bits(_run_file(out), odq.dequantize(w, s, z, axes=(0,)))
    assert sorted(p.name for p in out_dir.iterdir()) == ["lowered.onnx", "lowered.onnx.data"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.onnx",
        "out",
        "weights.bin",
    ]  # nothing beside the input
    umask = os.umask(0)
    os.umask(umask)
    assert all((p.stat().st_mode & 0o777) == 0o666 & ~umask for p in out_dir.iterdir())  # not mkstemp's 0600


def test_cli_lower_shows_progress_of_a_slow_run_unless_quiet(tmp_path, capsys, monkeypatch):
    """A lowering that runs past ``SLOW_AFTER`` (0 here) is shown on stderr, and how long it took; ``-q``
    shows nothing."""
    from onnx_dequant.validation import progress

    monkeypatch.setattr(progress, "SLOW_AFTER", 0.0)
    src, *_ = _external_model(tmp_path)
    out = tmp_path / "low.onnx"
    assert cli_main(["lower", str(src), "-o", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    step = f"lower: lowering {src} into {out}"
    assert err[0] == f"{step} ..." and err[1].startswith(f"{step}: ")
    assert cli_main(["lower", str(src), "-o", str(out), "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_output_equals_input(tmp_path, capsys):
    src, w, s, z = _external_model(tmp_path, location="model.onnx.data")
    assert cli_main(["lower", str(src), "-o", str(src), "--target", "portable"]) == 0
    assert "lowered 1 node" in capsys.readouterr().out
    assert same_bits(_run_file(src), odq.dequantize(w, s, z, axes=(0,)))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_lower_path_api(tmp_path):
    src, w, s, z = _external_model(tmp_path)
    lowered = odq.lower(src)
    (y,) = run_ort(lowered, {})
    assert same_bits(y, odq.dequantize(w, s, z, axes=(0,)))


def _bad(tmp_path: Path, capsys, src: Path, pattern: str) -> None:
    out = tmp_path / "out.onnx"
    before = src.read_bytes()
    assert cli_main(["lower", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "onnx-dequant lower: error:" in err and "Traceback" not in err
    assert pattern in err, err
    assert not out.exists()
    assert src.read_bytes() == before
    with pytest.raises(odq.DequantizeError):
        odq.lower(src)


def test_truncated_and_corrupt_files(tmp_path, capsys):
    x, s, z = random_case(RNG, (4, 5), (1,), "u8", "f32")
    data = one_node_model(x, s, z, (1,)).SerializeToString()
    for name, content in (
        ("trunc.onnx", data[: len(data) // 2]),
        ("garbage.onnx", b"\xff\x00not a model" * 7),
        ("empty.onnx", b""),
    ):
        p = tmp_path / name
        p.write_bytes(content)
        _bad(tmp_path, capsys, p, "Not a valid ONNX model")


def test_external_data_outside_folder_refused(tmp_path, capsys):
    inner = tmp_path / "m"
    inner.mkdir()
    src, *_ = _external_model(inner)
    m = onnx.load(str(src), load_external_data=False)
    (tmp_path / "secret.bin").write_bytes((inner / "weights.bin").read_bytes())
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../secret.bin"
    src.write_bytes(m.SerializeToString())
    _bad(tmp_path, capsys, src, "outside the model's folder")


def test_external_data_through_a_symlink_out_of_the_folder_refused(tmp_path, capsys):
    inner = tmp_path / "m"
    inner.mkdir()
    src, *_ = _external_model(inner)
    (tmp_path / "weights.bin").write_bytes((inner / "weights.bin").read_bytes())
    (inner / "weights.bin").unlink()
    (inner / "weights.bin").symlink_to(tmp_path / "weights.bin")  # the location is relative, its target is not inside
    _bad(tmp_path, capsys, src, "outside the model's folder")


def test_truncated_external_data_refused(tmp_path, capsys):
    src, *_ = _external_model(tmp_path)
    data = tmp_path / "weights.bin"
    data.write_bytes(data.read_bytes()[:100])
    _bad(tmp_path, capsys, src, "too short")


def test_contract_violation_cli(tmp_path, capsys):
    x = np.zeros((2, 3), np.int8)
    m = one_node_model(x, np.ones((4,), np.float32), None, (1,))
    src = tmp_path / "bad.onnx"
    src.write_bytes(m.SerializeToString())
    _bad(tmp_path, capsys, src, "node 'dq'")


def test_unsupported_opset_cli(tmp_path, capsys):
    x, s, z = random_case(RNG, (2, 3), (), "u8", "f32")
    src = tmp_path / "m.onnx"
    src.write_bytes(one_node_model(x, s, z, ()).SerializeToString())
    out = tmp_path / "o.onnx"
    assert cli_main(["lower", str(src), "-o", str(out), "--opset", "28"]) == 2
    assert "Unsupported target opset 28" in capsys.readouterr().err and not out.exists()


def test_save_never_leaves_partial_output(tmp_path, monkeypatch):
    src, *_ = _external_model(tmp_path)
    m = modelio.load(src, load_external=False)
    out = tmp_path / "o.onnx"

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(modelio, "_copy_range", boom)
    with pytest.raises(OSError):
        modelio.save(m, out, source_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "weights.bin"]


def test_cli_opset_conversion_with_external_data(tmp_path, capsys):
    w, s, z = random_case(RNG, (64, 32), (0, 1), "u8", "f32")
    nodes = [odq.make_node(["w", "s", "z"], ["t"], axes=[0, 1], name="dq_ext"), helper.make_node("Relu", ["t"], ["y"])]
    g = helper.make_graph(
        nodes,
        "g",
        [],
        [vi("y", TensorProto.FLOAT, [64, 32])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), opset_import()])
    m.ir_version = 8
    src = tmp_path / "m17.onnx"
    onnx.save(m, str(src), save_as_external_data=True, location="w.bin", size_threshold=0)
    out = tmp_path / "m21.onnx"
    assert cli_main(["lower", str(src), "-o", str(out), "--opset", "21", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["opset"] == 21
    stored = onnx.load(str(out), load_external_data=False)
    assert [o.version for o in stored.opset_import if o.domain == ""] == [21] and stored.ir_version >= 10
    assert np.array_equal(_run_file(out), np.maximum(odq.dequantize(w, s, z, axes=(0, 1)), 0))


# ---- files: what the pass may overwrite, what it reads ----


def test_output_over_an_input_data_file_refused(tmp_path, capsys):
    """a.onnx reads b.onnx.data: writing b.onnx (whose data file is b.onnx.data) or over the data itself
    would break the input; refused, nothing written, the input intact."""
    src, *_ = _external_model(tmp_path, location="b.onnx.data")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for out in ("b.onnx", "b.onnx.data"):
        assert cli_main(["lower", str(src), "-o", str(tmp_path / out)]) == 2
        assert "would overwrite a file the input model reads" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_output_equals_input_failure_leaves_input_intact(tmp_path, monkeypatch):
    src, w, s, z = _external_model(tmp_path, location="model.onnx.data")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(modelio, "_copy_range", boom)
    with pytest.raises(OSError):
        odq.lowering.lower_file(src, src)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary files either
    (y,) = run_ort(odq.lower(src), {})  # and it still reads whole
    assert same_bits(y, odq.dequantize(w, s, z, axes=(0,)))


def test_lower_file_does_not_load_untouched_weights(tmp_path):
    """A 32 MiB external weight is streamed to the output in chunks, never read whole."""
    import tracemalloc

    w = RNG.integers(-128, 128, (4096, 8192), dtype=np.int8)
    s = np.float32(0.5)
    g = helper.make_graph(
        [odq.make_node(["w", "s"], ["y"], name="dq_big")],
        "g",
        [],
        [vi("y", TensorProto.FLOAT, list(w.shape))],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(s), "s")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), opset_import()])
    m.ir_version = 10
    src = tmp_path / "big.onnx"
    onnx.save(m, str(src), save_as_external_data=True, location="big.bin", size_threshold=1024)
    del m, g
    tracemalloc.start()
    try:
        files = odq.lowering.lower_file(src, tmp_path / "out.onnx").files
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20, peak  # a whole copy of the weight would be 32 MiB
    assert files[1].endswith("out.onnx.data")
    stored = onnx.load(str(tmp_path / "out.onnx"), load_external_data=False)
    assert next(t for t in stored.graph.initializer if t.name == "w").data_location == TensorProto.EXTERNAL
    y = _run_file(tmp_path / "out.onnx")
    assert same_bits(y[:7], odq.dequantize(w[:7], np.array(s)))


def test_over_2gb_goes_to_external_data(tmp_path, monkeypatch):
    """A model whose tensors exceed protobuf's 2 GB limit is written with external data (limit scaled down)."""
    x, s, z = random_case(RNG, (64, 32), (0,), "i8", "f32")
    m = one_node_model(x, s, z, (0,), x_const=True)
    monkeypatch.setattr(modelio, "PROTOBUF_LIMIT", 1000)
    files = modelio.save(odq.lower(m), tmp_path / "m.onnx")
    assert [Path(f).name for f in files] == ["m.onnx", "m.onnx.data"]
    assert same_bits(_run_file(tmp_path / "m.onnx"), odq.dequantize(x, s, z, axes=(0,)))
