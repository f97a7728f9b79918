"""What a converter sees of one nGraph op: its attributes (read and checked), inputs, outputs, emitters.

Attribute readers accept every spelling nGraph's serializer used over the years and raise
``DequantizeError`` (the importer adds the op's name and the file) for anything else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from .. import dtypes
from ..contract import Shape, TensorType, shape_str
from ..errors import DequantizeError
from .builder import Builder
from .reader import Op

__all__ = ["OpContext", "MISSING", "MAX_DIM", "shape_str", "known", "numel", "accumulator"]

MISSING: Any = object()
_INT = {int}
_CTYPES = {t.ctype: t for t in dtypes.TABLE}
MAX_DIM = 1 << 48
"""Largest dimension or index accepted (larger values are certainly corrupt)."""


def known(shape: Shape) -> bool:
    """Whether every dimension (and the rank) is known."""
    return shape is not None and all(isinstance(d, int) for d in shape)


def numel(shape: Sequence[int]) -> int:
    """The number of elements of a static shape."""
    return math.prod(shape)


def accumulator(dt: dtypes.DType) -> dtypes.DType | None:
    """The 64-bit type an integer narrower than 32 bits is summed / multiplied in (None for other types).

    The result cast back to ``dt`` wraps exactly as nGraph's arithmetic in the element type does.
    """
    if dt.kind in ("quantized", "integer") and dt.bits < 32:
        return _I64 if dt.signed else _U64
    return None


_I64, _U64 = dtypes.parse("i64"), dtypes.parse("u64")


_ONNX_TAKES: dict[tuple[str, int, str, bool], bool] = {}
_ONNX_TAKES_ALL: set[tuple[tuple[str, ...], int, str, bool]] = set()
"""``require_onnx`` calls already answered yes, whole."""


def _onnx_takes(onnx_op: str, opset: int, dt: dtypes.DType, output: bool) -> bool:
    """Whether the op's data input (or output): its first one open to several types, takes ``dt`` at ``opset``."""
    schema = onnx.defs.get_schema(onnx_op, opset)
    allowed = {t.type_param_str: t.allowed_type_strs for t in schema.type_constraints}
    for formal in schema.outputs if output else schema.inputs:
        types = allowed.get(formal.type_str, [formal.type_str])
        if len(types) > 1:
            return f"tensor({dt.onnx_name.lower()})" in types
    return True


def _dump(v: Any) -> str:
    try:
        text = json.dumps(v)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class OpContext:
    """One op under conversion: ``inputs`` (tensor names), ``types`` (their TensorTypes), ``outputs``."""

    __slots__ = ("op", "js", "name", "b", "inputs", "types", "outputs", "_helpers_named")

    def __init__(
        self,
        op: Op,
        builder: Builder,
        inputs: list[str],
        types: list[TensorType],
        outputs: list[str],
    ) -> None:
        self.op = op
        self.js = op.js
        self.name = op.name
        self.b = builder
        self.inputs = inputs
        self.types = types
        self.outputs = outputs
        self._helpers_named = 0

    # ---- checks ----

    def error(self, message: str) -> DequantizeError:
        return DequantizeError(message, node=self.name)

    def expect_inputs(self, *counts: int) -> None:
        if len(self.inputs) not in counts:
            want = " or ".join(str(c) for c in counts)
            raise self.error(f"{self.op.op} takes {want} input{'s' if counts[-1] != 1 else ''}, got {len(self.inputs)}")

    def elem(self, i: int) -> dtypes.DType:
        return self.types[i].elem_type

    def shape(self, i: int) -> Shape:
        return self.types[i].shape

    def rank(self, i: int, what: str = "input") -> int:
        s = self.types[i].shape
        if s is None:
            raise self.error(f"{self.op.op} needs the rank of its {what} (input {i}), which is unknown")
        return len(s)

    def onnx_takes(self, dt: dtypes.DType, onnx_op: str, output: bool = False) -> bool:
        """Whether the standard ONNX op, at the model's opset, takes ``dt`` (with ``output``: produces it)."""
        key = (onnx_op, self.b.opset, dt.name, output)
        ok = _ONNX_TAKES.get(key)
        if ok is None:
            ok = _ONNX_TAKES[key] = _onnx_takes(onnx_op, self.b.opset, dt, output)
        return ok

    def require_onnx(self, dt: dtypes.DType, *onnx_ops: str, output: bool = False) -> None:
        """Refuse ``dt`` when one of the standard ONNX ops the conversion emits has no version for it
        (for its data input; with ``output``, for its output)."""
        opset = self.b.opset
        if (onnx_ops, opset, dt.name, output) in _ONNX_TAKES_ALL:
            return
        for onnx_op in onnx_ops:
            if not self.onnx_takes(dt, onnx_op, output):
                raise self.error(
                    f"{self.op.op} on {dt} has no ONNX counterpart at opset {opset} "
                    f"(ONNX {onnx_op} does not {'produce' if output else 'take'} {dt.onnx_name.lower()})"
                )
        _ONNX_TAKES_ALL.add((onnx_ops, opset, dt.name, output))

    def value(self, i: int) -> np.ndarray | None:
        """Input ``i``'s value when it is a constant (an initializer), else None. The initializer is dropped
        at the end if the converter's nodes do not use it (it folded the value)."""
        name = self.inputs[i]
        v = self.b.values.get(name)
        if v is not None:
            self.b.folded.add(name)
        return v

    def real_input(self, i: int = 0) -> TensorType:
        """Input ``i``'s type, which must be a real (floating-point) type: ``X on T is not supported``."""
        t = self.types[i]
        if not t.elem_type.is_real:
            raise self.error(f"{self.op.op} on {t.elem_type} is not supported (real types only)")
        return t

    def static_shape(self, i: int, what: str = "input") -> tuple[int, ...]:
        s = self.types[i].shape
        if not known(s):
            raise self.error(f"{self.op.op} needs the full shape of its {what} (input {i}), which is {shape_str(s)}")
        return s  # type: ignore[return-value]

    def constant(self, i: int, what: str = "input") -> np.ndarray:
        """The value of input ``i``, which must be a Constant (an op's axes, shape or indices as an input)."""
        v = self.b.values.get(self.inputs[i])
        if v is None:
            raise self.error(
                f"{self.op.op} needs its {what} (input {i}) as a Constant "
                "(a value computed at run time is not supported)"
            )
        return v

    def constant_ints(self, i: int, what: str = "input", *, lo: int = -MAX_DIM, hi: int = MAX_DIM) -> list[int]:
        """Input ``i`` as a Constant of integers in [lo, hi], flattened."""
        v = self.constant(i, what)
        if v.dtype.kind not in "iub":
            raise self.error(f"{self.op.op}: {what} (input {i}) must hold integers, got {v.dtype}")
        out = [int(x) for x in v.reshape(-1).tolist()]
        if out and (min(out) < lo or max(out) > hi):
            raise self.error(f"{self.op.op}: {what} (input {i}) must be integers in [{lo}, {hi}], got {out[:8]}")
        return out

    # ---- attributes ----

    def has(self, key: str) -> bool:
        return key in self.js and self.js[key] is not None

    def raw(self, key: str, default: Any = MISSING) -> Any:
        v = self.js.get(key, MISSING)
        if v is MISSING or v is None:
            if default is MISSING:
                raise self.error(f"{self.op.op} has no '{key}' attribute")
            return default
        return v

    def attr_int(self, key: str, default: Any = MISSING, *, lo: int = 0, hi: int = MAX_DIM) -> int:
        v = self.raw(key, default)
        if v is default and default is not MISSING:
            return v
        if not _is_int(v) or not lo <= v <= hi:
            raise self.error(f"'{key}' must be an integer in [{lo}, {hi}], got {_dump(v)}")
        return v

    def attr_bool(self, key: str, default: Any = MISSING) -> bool:
        v = self.raw(key, default)
        if isinstance(v, bool):
            return v
        if _is_int(v) and v in (0, 1):
            return bool(v)
        raise self.error(f"'{key}' must be true or false, got {_dump(v)}")

    def attr_float(self, key: str, default: Any = MISSING) -> float:
        """A number attribute, rounded to float32 (nGraph keeps these attributes as ``float``)."""
        v = self.raw(key, default)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise self.error(f"'{key}' must be a number, got {_dump(v)}")
        with np.errstate(over="ignore"):
            return float(np.float32(v))

    def attr_floats(self, key: str, default: Any = MISSING) -> list[float]:
        """A list of numbers, each rounded to float32 (``std::vector<float>`` attributes)."""
        v = self.raw(key, default)
        if type(v) is not list or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            raise self.error(f"'{key}' must be a list of numbers, got {_dump(v)}")
        with np.errstate(over="ignore"):
            return [float(np.float32(x)) for x in v]

    def attr_ints(
        self, key: str, default: Any = MISSING, *, lo: int = 0, hi: int = MAX_DIM, length: int | None = None
    ) -> list[int]:
        v = self.raw(key, default)
        if v is default and default is not MISSING:
            return v
        if type(v) is not list or not (set(map(type, v)) <= _INT and (not v or (min(v) >= lo and max(v) <= hi))):
            raise self.error(f"'{key}' must be a list of integers in [{lo}, {hi}], got {_dump(v)}")
        if length is not None and len(v) != length:
            raise self.error(f"'{key}' must have {length} entries, got {len(v)} ({_dump(v)})")
        return v

    def attr_axes(self, key: str, default: Any = MISSING) -> tuple[int, ...]:
        """An AxisSet: distinct non-negative axes, sorted (nGraph reads it into a std::set)."""
        v = self.attr_ints(key, default)
        return tuple(sorted(set(v)))

    def attr_type(self, key: str, default: Any = MISSING) -> dtypes.DType:
        v = self.raw(key, default)
        if v is default and default is not MISSING:
            return v
        return self.parse_type(v, key)

    def parse_type(self, v: Any, key: str) -> dtypes.DType:
        if isinstance(v, dict):  # the oldest files: {"bitwidth", "is_real", ..., "c_type_string"}
            v = v.get("c_type_string")
        if not isinstance(v, str):
            raise self.error(f"'{key}' must be an element type name, got {_dump(v)}")
        found = _CTYPES.get(v)
        if found is not None:
            return found
        try:
            return dtypes.parse(v)
        except DequantizeError:
            raise self.error(f"unknown element type '{v}' in '{key}'") from None

    # ---- emitting ----

    def out(self, i: int = 0) -> str:
        """The name of the op's output ``i`` (outputs after the first are named when first asked for)."""
        outputs = self.outputs
        while len(outputs) <= i:
            k = len(outputs)
            claimed = self.b.claims.get((self.name, k))  # a Result's name
            if claimed is None:
                names = self.op.output_names
                given = names[k] if type(names) is list and k < len(names) else None
                claimed = self.b.reserve(given if type(given) is str and given else f"{self.name}_{k}")
            outputs.append(claimed)
        return outputs[i]

    def emit_multi(self, op_type: str, inputs: Sequence[str], outs: Sequence[str], **attrs: Any) -> list[str]:
        """Add a standard-domain node with several outputs (named by ``outs``, e.g. ``ctx.out(i)``)."""
        name = self.name if self.outputs[0] in outs else self._helper_name()  # one node carries the name
        self.b.node(op_type, inputs, tuple(outs), name, attrs)
        return list(outs)

    def _helper_name(self) -> str:
        self._helpers_named += 1
        return f"{self.name}/{self._helpers_named}"

    def emit(self, op_type: str, inputs: Sequence[str], out: str | None = None, **attrs: Any) -> str:
        """Add a standard-domain node with one output; ``out`` None means a fresh temporary tensor.

        The node writing the op's output 0 carries the op's name; helper nodes, and the nodes writing its
        other outputs, ``name/1``, ``name/2``... (ONNX node names are unique).
        """
        if out is None:
            out = self.b.reserve(f"{self.name}/{op_type}")
            name = self._helper_name()
        else:
            name = self.name if out == self.outputs[0] else self._helper_name()  # one node carries the name
        self.b.node(op_type, inputs, (out,), name, attrs)
        return out

    def const(self, value: Any, dtype: Any, hint: str = "const") -> str:
        return self.b.const(value, dtype, hint)

    def int64s(self, values: Sequence[int]) -> str:
        key = ("ints", tuple(values))
        found = self.b.small_consts.get(key)
        if found is None:
            try:
                arr = np.asarray(values, np.int64).reshape(-1)
            except OverflowError:
                raise self.error(f"a shape or index does not fit in 64 bits: {list(values)}") from None
            found = self.b.small_consts[key] = self.b.const(arr, np.int64, "ints")
        return found

    def scalar(self, value: Any, dtype: Any) -> str:
        if isinstance(value, np.ndarray):
            return self.b.const(value, dtype, "scalar")
        name = dtype.name if type(dtype) is dtypes.DType else dtypes.parse(dtype).name
        key = (type(value), value, name)  # type: 0 and 0.0 and False are equal keys otherwise
        found = self.b.small_consts.get(key)
        if found is None:
            found = self.b.small_consts[key] = self.b.const(value, dtype, "scalar")
        return found
