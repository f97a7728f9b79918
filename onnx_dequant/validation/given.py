"""Outputs another implementation computed (nGraph run by the user, for instance), brought in as an ``.npz``
or a mapping, matched to the model's outputs: by output name, by the nGraph Result name the importer records
(``nGraph Result Result_12`` in the output's doc string), or by position (``0``, ``out_0``, ``result_0``,
``arr_0``). The golden suite's ``out.<result>`` keys are read too (its ``in.*`` and ``meta`` entries are
skipped)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from .. import dtypes
from ..errors import DequantizeError
from .inputs import load_npz

__all__ = ["load_given", "check_given"]

_POSITION = re.compile(r"^(?:out_|result_|arr_)?(\d+)$")
_NGRAPH_RESULT = "nGraph Result "


def load_given(source: Any, model: onnx.ModelProto) -> tuple[dict[str, np.ndarray], str]:
    """The given outputs by model output name, and where they came from; ``DequantizeError`` for a bad file or a
    key that names no output (or one output twice)."""
    if isinstance(source, (str, os.PathLike)):
        label = os.fspath(source)
        if not os.path.exists(label):
            raise DequantizeError("expected outputs: no such file", path=label)
        arrays = load_npz(label)
    elif isinstance(source, Mapping):
        label = "expected outputs"
        arrays = {str(k): np.asarray(v) for k, v in source.items()}
    else:
        raise DequantizeError(f"expected outputs must be an .npz path or a mapping, got {type(source).__name__}")
    outputs = [o.name for o in model.graph.output]
    by_result = {
        o.doc_string[len(_NGRAPH_RESULT) :]: o.name
        for o in model.graph.output
        if o.doc_string.startswith(_NGRAPH_RESULT)
    }
    found: dict[str, np.ndarray] = {}
    keys: dict[str, str] = {}
    for key, arr in arrays.items():
        if key == "meta" or key.startswith("in."):
            continue
        name = key[4:] if key.startswith("out.") else key
        m = _POSITION.match(name)
        if name in outputs:
            target = name
        elif name in by_result:
            target = by_result[name]
        elif m:
            k = int(m.group(1))
            if k >= len(outputs):
                raise DequantizeError(
                    f"expected outputs: '{key}' is output {k}, but the model has {len(outputs)}", path=label
                )
            target = outputs[k]
        else:
            raise DequantizeError(
                f"expected outputs: '{key}' names no output of the model (outputs: {', '.join(outputs)}; "
                "give output names, nGraph Result names, or positions out_0...)",
                path=label,
            )
        if target in found:
            raise DequantizeError(
                f"expected outputs: '{key}' and '{keys[target]}' both name output '{target}'", path=label
            )
        found[target], keys[target] = arr, key
    if not found:
        raise DequantizeError("expected outputs: the file holds no outputs", path=label)
    return found, label


def check_given(given: Mapping[str, np.ndarray], computed: Mapping[str, Any], label: str) -> dict[str, np.ndarray]:
    """The given outputs with the computed outputs' element types (bf16 and 4-bit types may come as raw bits);
    ``DequantizeError`` where an element type or shape does not match."""
    out = {}
    for name, arr in given.items():
        ref = np.asarray(computed[name])
        if arr.dtype != ref.dtype:
            raw = ref.dtype.kind == "V" and arr.dtype.kind in "uV" and arr.dtype.itemsize == ref.dtype.itemsize
            if not raw:
                have, want = _type_name(arr.dtype), _type_name(ref.dtype)
                raise DequantizeError(f"expected outputs: '{name}' is {have}, the model's output is {want}", path=label)
            arr = arr.view(ref.dtype)
        if arr.shape != ref.shape:
            raise DequantizeError(
                f"expected outputs: '{name}' has shape {list(arr.shape)}, the model's output {list(ref.shape)}",
                path=label,
            )
        out[name] = arr
    return out


def _type_name(dt: np.dtype) -> str:
    try:
        return dtypes.parse(dt).name
    except DequantizeError:
        return str(dt)
