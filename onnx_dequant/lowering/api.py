"""The lowering pass's entry points: ``lower`` (a model or a path, in memory) and ``lower_file`` (file to
file, streaming external weights)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

from onnx import ModelProto, NodeProto

from .. import modelio
from ..errors import DequantizeError
from ..fileio import atomic_path
from .options import LowerOptions
from .pipeline import lower_model
from .result import LowerResult

__all__ = ["lower", "lower_file"]


def lower(
    model: ModelProto | str | os.PathLike[str],
    *,
    opset: int | None = None,
    target: str = "ort",
    only: Callable[[NodeProto], bool] | None = None,
    wrap_int32: bool = False,
    weights: str = "quantized",
) -> ModelProto:
    """The model with every Dequantize node (or those where ``only(node)`` is true) in standard ONNX.

    ``model`` is a ``ModelProto`` (not modified) or a path (external data is loaded). ``opset=None``
    keeps the model's default-domain opset; otherwise the model is converted to ``opset`` (13 to 27).
    ``target``: "ort" (the fastest exact forms for ONNX Runtime) or "portable" (per-tensor/per-axis
    DequantizeLinear and Cast/Sub/Mul/Reshape only). ``wrap_int32=True`` lets i32 nodes use ORT's
    wrapping int32 arithmetic. ``weights``: "quantized" (default) keeps a constant weight's
    DequantizeLinear, which ONNX Runtime fuses with its MatMul/Conv (fast; at ORT's default MatMulNBits
    accuracy level not exact), "float" folds it into a float initializer with the exact reference (exact
    in every runtime, four times the bytes of an 8-bit weight). Raises ``DequantizeError`` for a node that
    breaks the contract, an unsupported opset or target, or an unreadable file. (``LowerOptions`` holds the
    same choices.)
    """
    options = LowerOptions(opset=opset, target=target, only=only, wrap_int32=wrap_int32, weights=weights)
    if isinstance(model, ModelProto):
        work = ModelProto()
        work.CopyFrom(model)
        return lower_model(work, options).model
    if not isinstance(model, (str, os.PathLike)):
        raise DequantizeError(f"model must be an onnx.ModelProto or a path, got {type(model).__name__}")
    path = os.fspath(model)
    work = modelio.load(path, load_external=True)
    try:
        return lower_model(work, options, base_dir=os.path.dirname(os.path.abspath(path))).model
    except DequantizeError as e:
        raise e.at(path=path) from None


def _check_outputs(model: ModelProto, src: Any, dst: Any, base_dir: str) -> None:
    """Refuse an output that would replace a file the input reads, unless it replaces the input itself."""
    src_path, dst_path = os.path.realpath(os.fspath(src)), os.path.realpath(os.fspath(dst))
    if src_path == dst_path:
        return  # -o names the input: the model and its data are replaced, atomically
    inputs = {str(p) for p in modelio.external_files(model, base_dir)} | {src_path}
    for out in (dst_path, os.path.realpath(modelio.data_path(dst_path))):
        if out in inputs:
            raise DequantizeError(
                f"Writing {out} would overwrite a file the input model reads: choose another output name"
            )


def lower_file(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], options: LowerOptions | None = None
) -> LowerResult:
    """Lower the model file ``src`` into ``dst`` without loading its external weights.

    External data is checked, streamed into ``<dst>.data`` beside ``dst``, and both files are written
    atomically (``dst`` may equal ``src``); a model with nothing to change and no external data is copied
    byte for byte. The result holds the lowered nodes, the model-level changes, the files written and the
    lowered model (its tensors pointing at the new data file). ``weights="float"`` reads the constant
    weights it folds.
    """
    out_dir = os.path.dirname(os.path.abspath(os.fspath(dst)))
    if not os.path.isdir(out_dir):
        raise DequantizeError(f"The output's folder does not exist: {out_dir}")
    base_dir = os.path.dirname(os.path.abspath(os.fspath(src)))
    model = modelio.load(src, load_external=False)
    _check_outputs(model, src, dst, base_dir)
    try:
        result = lower_model(model, options, base_dir=base_dir)
    except DequantizeError as e:
        raise e.at(path=os.fspath(src)) from None
    if not result.nodes and not result.changes and not modelio.external_files(result.model, base_dir):
        result.files = _copy(src, dst)
        return result
    try:
        result.files = modelio.save(result.model, dst, source_dir=base_dir)
    except DequantizeError as e:  # the model breaks a rule of ONNX: the input's fault
        raise e.at(path=os.fspath(src)) from None
    return result


def _copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> list[str]:
    """``src``'s bytes written to ``dst`` whole or not at all (nothing to write when they are one file)."""
    if os.path.realpath(os.fspath(src)) != os.path.realpath(os.fspath(dst)):
        with open(src, "rb") as f, atomic_path(dst) as tmp, open(tmp, "wb") as out:
            shutil.copyfileobj(f, out)
    return [os.fspath(dst)]
