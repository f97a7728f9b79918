"""Models for validation: read (ONNX or nGraph JSON), checked with the ONNX checker and our op's contract,
with functions inlined for the reference evaluator and value types inferred for the policy.

Checking and type inference run on a copy without the large initializers' data (declared as graph
inputs of the same type and shape instead): they look at types and shapes only, and a model with a
400 MB weight is not serialized and parsed for them.
"""

from __future__ import annotations

import os
from typing import Any

import onnx

from .. import modelio
from ..errors import DequantizeError
from ..graphs import without_large_initializers

__all__ = ["for_reference", "load_model", "serialized", "with_types"]

_LIMIT = 2**31 - 2**20
"""Models over this size cannot be one protobuf message (2 GiB), so not one in-memory ONNX Runtime model."""


def load_model(source: Any, *, what: str = "model") -> tuple[onnx.ModelProto, str]:
    """A ModelProto from a ModelProto, an ``.onnx`` path or an nGraph ``.json`` path (converted), and a
    name for the report. Checks the model with the ONNX checker (full check, our op's contract included)."""
    if isinstance(source, onnx.ModelProto):
        model, label, path = source, source.graph.name or "<model>", None
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        label = path
        if not os.path.exists(path):
            raise DequantizeError(f"{what} file not found", path=path)
        if path.lower().endswith(".json"):
            try:
                from ..ngraph import convert
            except ImportError as e:
                raise DequantizeError(
                    f"nGraph JSON input needs onnx_dequant.ngraph, which is not available: {e}", path=path
                ) from None
            try:
                model = convert(path)
            except DequantizeError as e:
                raise e.at(path=path) from None
        else:
            model = modelio.load(path)
    else:
        raise DequantizeError(f"{what} must be an onnx.ModelProto or a file path, got {type(source).__name__}")
    _check(model, path)
    if not model.graph.output:
        raise DequantizeError(f"the {what} has no outputs: there is nothing to compare", path=path or label)
    return model, label


def _check(model: onnx.ModelProto, path: str | None) -> None:
    try:
        onnx.checker.check_model(without_large_initializers(model), full_check=True)
    except DequantizeError as e:
        raise e.at(path=path) from None
    except Exception as e:  # noqa: BLE001 - checker / inference errors of every kind
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DequantizeError(f"invalid model: {msg}", path=path) from None


def for_reference(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model the oracle runs: model-local functions inlined (ReferenceEvaluator does not hand our op
    to function bodies), so function bodies' nodes are also walked by the policy and the localization."""
    if not model.functions:
        return model
    import onnx.inliner

    try:
        return onnx.inliner.inline_local_functions(model)
    except Exception as e:  # noqa: BLE001
        raise DequantizeError(f"cannot inline the model's local functions for the reference: {e}") from None


def with_types(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model's graph structure with inferred value_info (for the per-tensor policy; large
    initializers' data left out); the model itself when inference fails."""
    try:
        return onnx.shape_inference.infer_shapes(without_large_initializers(model), strict_mode=False)
    except Exception:  # noqa: BLE001 - the policy then treats unknown types conservatively
        return model


def serialized(model: onnx.ModelProto) -> bytes | None:
    """The model as bytes, or None when it is too large for one protobuf message."""
    try:
        data = model.SerializeToString()
    except Exception:  # noqa: BLE001 - protobuf refuses messages over 2 GiB (the error type varies)
        return None
    return data if len(data) < _LIMIT else None
