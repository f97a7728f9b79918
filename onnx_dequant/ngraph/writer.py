"""Writing nGraph serialized JSON, in any era of the format (for sample models and tests).

``FunctionWriter`` hands out op names the way nGraph does (``Add_3``, outputs ``Add_3_0``), writes
Constant values as strings (``NAN``, ``INFINITY``, ``-INFINITY``; one string when all are equal) and
binary-op broadcasting as each era spelled it:

- ``"v0.25"``: no ``op_version``; ``autob`` object ``{"type": 0|1|2, "axis": n}``
- ``"v0.26"``: ``op_version`` 0; ``auto_broadcast`` object
- ``"v0.29"``: ``op_version`` (binary ops 1), ``attribute_visitor``, ``auto_broadcast`` string ``"NUMPY"``
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes

__all__ = ["FunctionWriter", "Ref", "ERAS", "value_strings", "dumps"]

ERAS = ("v0.25", "v0.26", "v0.29")
BINARY = ("Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum")
_AUTOB = {"none": (0, "NONE"), "numpy": (1, "NUMPY"), "pdpd": (2, "PDPD")}


class Ref(str):
    """An op's output: the op's name, plus the output index (0 unless made with ``Ref(name, i)``)."""

    index: int

    def __new__(cls, name: str, index: int = 0) -> Ref:
        r = super().__new__(cls, name)
        r.index = index
        return r


def _number_string(v: float) -> str:
    if np.isnan(v):
        return "NAN"
    if np.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(float(v))


def value_strings(array: np.ndarray) -> list[str]:
    """A Constant's ``value``: one string per element, or one string when all elements are equal."""
    flat = np.asarray(array).reshape(-1)
    dt = dtypes.parse(flat.dtype)
    if dt.kind == "real":
        wide = flat.astype(np.float64)
        strs = [_number_string(v) for v in wide.tolist()]
    elif dt.kind == "boolean":
        strs = ["1" if v else "0" for v in flat.tolist()]
    else:
        strs = [str(int(v)) for v in flat.astype(np.int64 if dt.name != "u64" else np.uint64).tolist()]
    if len(strs) > 1 and all(s == strs[0] for s in strs):
        return strs[:1]
    return strs


class FunctionWriter:
    """Builds one serialized function; ``to_json()`` gives the JSON object (keys sorted, as nGraph's)."""

    def __init__(self, name: str = "Function_0", era: str = "v0.26") -> None:
        if era not in ERAS:
            raise ValueError(f"era must be one of {ERAS}")
        self.name = name
        self.era = era
        self.ops: list[dict[str, Any]] = []
        self.parameters: list[str] = []
        self.results: list[str] = []
        self._counts: dict[str, int] = {}
        self._id = 0

    def _new(self, op: str, inputs: Sequence[Any], version: int = 0, **attrs: Any) -> Ref:
        name = f"{op}_{self._id}"
        self._id += 1
        js: dict[str, Any] = {"name": name, "op": op, "inputs": [_input(i) for i in inputs], "outputs": [f"{name}_0"]}
        if self.era != "v0.25":
            js["op_version"] = version
        js.update(attrs)
        self.ops.append(js)
        return Ref(name)

    def parameter(self, element_type: Any, shape: Sequence[int | None] | None) -> Ref:
        dt = dtypes.parse(element_type)
        r = self._new(
            "Parameter", [], cacheable=False, element_type=dt.ctype, shape=None if shape is None else list(shape)
        )
        self.parameters.append(r)
        return r

    def constant(self, array: Any, element_type: Any = None) -> Ref:
        arr = np.asarray(array) if element_type is None else np.asarray(array, dtype=dtypes.parse(element_type).numpy)
        dt = dtypes.parse(arr.dtype)
        return self._new("Constant", [], element_type=dt.ctype, shape=list(arr.shape), value=value_strings(arr))

    def op(self, op: str, *inputs: Any, version: int = 0, **attrs: Any) -> Ref:
        """Any op; element-type attributes may be given in any spelling (written as C type strings)."""
        for key in ("type", "target_type", "output_type"):
            if key in attrs and not isinstance(attrs[key], dict):
                attrs[key] = dtypes.parse(attrs[key]).ctype
        return self._new(op, inputs, version, **attrs)

    def binary(self, op: str, a: Any, b: Any, broadcast: str = "numpy", axis: int = -1, **attrs: Any) -> Ref:
        """A binary elementwise op with the era's spelling of its broadcast rule."""
        code, text = _AUTOB[broadcast]
        if self.era == "v0.25":
            if broadcast != "none":
                attrs["autob"] = {"axis": axis, "type": code}
            return self._new(op, [a, b], 0, **attrs)
        if self.era == "v0.26":
            attrs["auto_broadcast"] = {"axis": axis, "type": code}
            return self._new(op, [a, b], 0, **attrs)
        attrs["auto_broadcast"] = text
        attrs["attribute_visitor"] = True
        return self._new(op, [a, b], 1, **attrs)

    def result(self, x: Any) -> Ref:
        r = self._new("Result", [x], needs_default_layout=False)
        self.results.append(r)
        return r

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ops": self.ops, "parameters": list(self.parameters), "result": list(self.results)}


def _input(x: Any) -> Any:
    if isinstance(x, Ref) and x.index:
        return {"index": x.index, "node": str(x)}
    return str(x)


def dumps(functions: Sequence[FunctionWriter], indent: int | None = None) -> str:
    """The file's text: a JSON array of the functions, keys sorted."""
    return json.dumps([f.to_json() for f in functions], sort_keys=True, indent=indent)
