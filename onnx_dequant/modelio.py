"""Reading and writing model files as untrusted input: corrupt or truncated files and external data that
points outside the model's folder are refused (``DequantizeError``); outputs are written atomically,
with external data streamed from the input's files, never read whole, and never outside the output's
folder.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError, EncodeError
from onnx import ModelProto, TensorProto, numpy_helper

from . import fileio
from .errors import DequantizeError
from .graphs import iter_graphs, subgraphs, without_large_initializers

__all__ = [
    "PROTOBUF_LIMIT",
    "load",
    "save",
    "check_model",
    "iter_tensors",
    "read_external",
    "external_info",
    "external_files",
    "data_path",
    "EXTERNAL_THRESHOLD",
]

EXTERNAL_THRESHOLD = 1024
"""Tensors of at least this many bytes go to the external data file when a model is saved with one."""
_CHUNK = 16 << 20
PROTOBUF_LIMIT = (2 << 30) - (64 << 20)
"""The bytes of tensors a model may hold in itself: protobuf's 2 GB limit, with room for the graph."""


def _attribute_tensors(node: onnx.NodeProto) -> Iterator[TensorProto]:
    for a in node.attribute:
        if a.type == onnx.AttributeProto.TENSOR:
            yield a.t
        elif a.type == onnx.AttributeProto.TENSORS:
            yield from a.tensors


def iter_tensors(model: ModelProto) -> Iterator[TensorProto]:
    """Every tensor of the model: initializers and Constant/attribute tensors, in subgraphs and functions."""

    def in_graph(g: onnx.GraphProto) -> Iterator[TensorProto]:
        yield from g.initializer
        for s in g.sparse_initializer:
            yield s.values
            yield s.indices
        for n in g.node:
            yield from _attribute_tensors(n)

    for g in iter_graphs(model.graph):
        yield from in_graph(g)
    for f in model.functions:
        for n in f.node:
            yield from _attribute_tensors(n)
            for sg in subgraphs(n):
                for g in iter_graphs(sg):
                    yield from in_graph(g)


def external_info(t: TensorProto) -> dict[str, str]:
    """The external-data fields of a tensor (location, offset, length)."""
    return {e.key: e.value for e in t.external_data}


def _resolve(base_dir: str, t: TensorProto, path: str | None) -> tuple[Path, int, int | None]:
    info = external_info(t)
    loc = info.get("location", "")
    where = f"tensor '{t.name}'"
    if "\0" in loc:
        raise DequantizeError(f"External data location {loc!r} of {where} contains a NUL byte", path=path)
    if not loc or os.path.isabs(loc) or loc.startswith(("/", "\\")) or ":" in loc:
        raise DequantizeError(
            f"External data location '{loc}' of {where} is not a relative path in the model's folder", path=path
        )
    base = Path(base_dir).resolve()
    full = (base / loc).resolve()
    if base != full.parent and base not in full.parents:
        raise DequantizeError(f"External data location '{loc}' of {where} points outside the model's folder", path=path)
    try:
        offset = int(info.get("offset", "0") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        raise DequantizeError(f"External data of {where} has a bad offset or length", path=path) from None
    if offset < 0 or (length is not None and length < 0):
        raise DequantizeError(f"External data of {where} has a negative offset or length", path=path)
    if not full.exists():
        raise DequantizeError(f"External data file '{loc}' of {where} does not exist", path=path)
    if not full.is_file():
        raise DequantizeError(f"External data file '{loc}' of {where} is not a regular file", path=path)
    size = full.stat().st_size
    end = offset + (length if length is not None else 0)
    if offset > size or end > size:
        raise DequantizeError(f"External data file '{loc}' is too short for {where} (truncated?)", path=path)
    return full, offset, length if length is not None else size - offset


def external_files(model: ModelProto, base_dir: str | os.PathLike[str]) -> set[Path]:
    """The files (resolved, checked) that the model's external tensors read, relative to ``base_dir``."""
    return {
        _resolve(os.fspath(base_dir), t, None)[0]
        for t in iter_tensors(model)
        if t.data_location == TensorProto.EXTERNAL
    }


def data_path(path: str | os.PathLike[str]) -> Path:
    """The external data file ``save`` writes beside ``path`` when that name is free: ``<name>.data``."""
    path = Path(os.fspath(path))
    return path.with_name(path.name + ".data")


def read_external(t: TensorProto, base_dir: str | os.PathLike[str]) -> np.ndarray:
    """The value of a tensor whose data lives in an external file under ``base_dir`` (checked)."""
    full, offset, length = _resolve(os.fspath(base_dir), t, None)
    with fileio.open_input(full) as f:
        f.seek(offset)
        raw = f.read(length)
    copy = TensorProto()
    copy.CopyFrom(t)
    copy.ClearField("external_data")
    copy.data_location = TensorProto.DEFAULT
    copy.raw_data = raw
    return numpy_helper.to_array(copy)


def load(path: str | os.PathLike[str], *, load_external: bool = True) -> ModelProto:
    """The model in ``path``, checked as untrusted input.

    With ``load_external=False`` external tensors stay references (checked to exist, to lie inside the
    model's folder and to fit their files), so a pass that does not touch the weights never reads them.
    """
    path = os.fspath(path)
    try:
        data = fileio.read_input(path)  # a FIFO or a device is refused, never read
    except OSError as e:
        raise DequantizeError(f"cannot read the model: {e.strerror or e}", path=path) from None
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        hint = (
            " (an nGraph JSON graph? convert it first: onnx-dequant convert)" if path.lower().endswith(".json") else ""
        )
        raise DequantizeError(f"Not a valid ONNX model (corrupt or truncated file): {e}{hint}", path=path) from None
    if not data or not model.HasField("graph") or model.ir_version <= 0 or not model.opset_import:
        raise DequantizeError(
            "Not a valid ONNX model (corrupt or truncated file: no graph, IR version or opset)", path=path
        )
    base_dir = os.path.dirname(os.path.abspath(path))
    for t in iter_tensors(model):
        if t.data_location == TensorProto.EXTERNAL:
            full, offset, length = _resolve(base_dir, t, path)
            if load_external:
                with fileio.open_input(full) as f:
                    f.seek(offset)
                    t.raw_data = f.read(length)
                t.ClearField("external_data")
                t.data_location = TensorProto.DEFAULT
    return model


def _copy_range(src: Path, offset: int, length: int, dst) -> None:  # type: ignore[no-untyped-def]
    """Copy ``length`` bytes at ``offset`` of ``src`` into the open file ``dst`` through one reused buffer."""
    buf = memoryview(bytearray(min(_CHUNK, length)))
    with fileio.open_input(src) as f:
        f.seek(offset)
        left = length
        while left > 0:
            n = f.readinto(buf[: min(len(buf), left)])
            if not n:
                raise DequantizeError(f"External data file '{src.name}' ended early (truncated?)")
            dst.write(buf[:n])
            left -= n


def _data_names(real: Path) -> re.Pattern[str]:
    """Names of the data files ``save`` gives a model at ``real``: ``<name>.data``, ``<name>.<8 hex>.data``."""
    return re.compile(re.escape(real.name) + r"(\.[0-9a-f]{8})?\.data")


def _own_data_files(real: Path) -> set[Path]:
    """The data files (named by ``save``) that the model now at ``real`` references."""
    pattern = _data_names(real)
    try:
        candidates = [real.parent / n for n in os.listdir(real.parent) if pattern.fullmatch(n)]
    except OSError:
        return set()
    if not candidates or not real.is_file():
        return set()
    try:
        with open(real, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return {c for c in candidates if m.find(c.name.encode()) >= 0}
    except (OSError, ValueError):  # empty or unreadable: it references nothing
        return set()


def _fresh_data_file(real: Path) -> Path:
    """A data-file name for a new model at ``real`` that no file has (called under the folder lock)."""
    first = real.with_name(real.name + ".data")
    name = first
    while name.exists() or name.is_symlink():
        name = real.with_name(f"{real.name}.{secrets.token_hex(4)}.data")
    return name


def check_model(model: ModelProto, path: str | os.PathLike[str] | None = None, *, full: bool = False) -> None:
    """``DequantizeError`` unless the model is one to write: ONNX's checker accepts it (weights left
    out; ``full``: with its shape inference too), and its graph has outputs, each name once."""
    where = None if path is None else os.fspath(path)
    names = [o.name for o in model.graph.output]
    if not names:
        raise DequantizeError("the model has no graph outputs", path=where)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DequantizeError(f"graph output(s) {', '.join(map(repr, twice))} declared more than once", path=where)
    try:
        onnx.checker.check_model(without_large_initializers(model, external=True), full_check=full)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        message = " ".join(str(e).split())
        raise DequantizeError(f"the model fails the ONNX checker: {message}", path=where) from None


def _serialize(model: ModelProto, path: Path) -> bytes:
    try:
        return model.SerializeToString()
    except (EncodeError, ValueError) as e:  # over protobuf's 2 GB, or a field that cannot be encoded
        raise DequantizeError(f"the model cannot be serialized: {e}", path=str(path)) from None


def save(
    model: ModelProto,
    path: str | os.PathLike[str],
    *,
    source_dir: str | os.PathLike[str] | None = None,
    external: bool | None = None,
    checked: bool = False,
) -> list[str]:
    """Write ``model`` to ``path`` with its external data, as one pair installed together; returns the
    files written.

    External references (relative to ``source_dir``, the input's folder) are streamed into one new data
    file beside ``path``, with every in-memory tensor of at least ``EXTERNAL_THRESHOLD`` bytes.
    ``external=None`` writes external data when the model has external references or would exceed
    protobuf's 2 GB. The model's tensors are modified to point at the new file.

    The one write path for a model and its data: the data file gets a name no file has (``<name>.data``,
    or ``<name>.<8 hex>.data`` while that name is taken) and is complete before the model that references
    it is renamed into place; the data files of the model replaced (only those named as ``save`` names
    them) are removed after that. Killed at any moment, ``path`` holds the old pair or the new pair,
    never a mix; at worst an unreferenced data file is left. Writers of this package in one folder take
    ``fileio.folder_lock`` while they install, so concurrent writers to one target leave one of the pairs.
    A model that ``check_model`` refuses is not written (``DequantizeError``); ``checked=True``: the caller
    has run ``check_model`` on it already (it is not repeated).
    """
    real = fileio.output_path(path)
    if not checked:
        check_model(model)
    tensors = list(iter_tensors(model))
    has_ext = any(t.data_location == TensorProto.EXTERNAL for t in tensors)
    if external is None:
        external = has_ext or sum(len(t.raw_data) for t in tensors) > PROTOBUF_LIMIT
    if has_ext and source_dir is None:
        raise DequantizeError("The model has external data: its folder (source_dir) is needed to copy it")
    with contextlib.ExitStack() as stack:
        locations: list[onnx.StringStringEntryProto] = []
        tmp_data = stack.enter_context(fileio.temporary(real, ".data")) if external else None
        if tmp_data is not None:
            sources = [
                (t, _resolve(os.fspath(source_dir), t, None)) if t.data_location == TensorProto.EXTERNAL else (t, None)
                for t in tensors
            ]  # type: ignore[arg-type]
            with open(tmp_data, "wb") as out:
                pos = 0
                for t, src in sources:
                    if src is None and len(t.raw_data) < EXTERNAL_THRESHOLD:
                        continue
                    pad = (-pos) % 64
                    out.write(b"\0" * pad)
                    pos += pad
                    if src is not None:
                        full, offset, length = src
                        _copy_range(full, offset, length, out)
                    else:
                        length = len(t.raw_data)
                        out.write(t.raw_data)
                        t.ClearField("raw_data")
                    del t.external_data[:]
                    for k, v in (("location", ""), ("offset", str(pos)), ("length", str(length))):
                        e = t.external_data.add()
                        e.key, e.value = k, v
                    locations.append(t.external_data[0])
                    t.data_location = TensorProto.EXTERNAL
                    pos += length
        tmp_model = stack.enter_context(fileio.temporary(real, ""))
        with fileio.folder_lock(real.parent):
            replaced = _own_data_files(real)
            data_file = _fresh_data_file(real) if tmp_data is not None else None
            for e in locations:
                e.value = data_file.name  # type: ignore[union-attr]
            tmp_model.write_bytes(_serialize(model, real))
            if tmp_data is not None and data_file is not None:
                fileio.finish(tmp_data, data_file)
            try:
                fileio.finish(tmp_model, real)  # the commit: the new pair is in place
            except BaseException:
                if data_file is not None:
                    with contextlib.suppress(OSError):
                        data_file.unlink()
                raise
            for old in replaced - {data_file}:
                with contextlib.suppress(OSError):
                    old.unlink()
    return [str(path)] if data_file is None else [str(path), str(Path(os.fspath(path)).with_name(data_file.name))]
