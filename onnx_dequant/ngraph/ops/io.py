"""Parameter, Constant and Result: graph inputs, initializers and graph outputs.

Parameter ``shape`` null means an unknown rank, a null dimension an unknown size (a symbolic ONNX dim);
Constant ``value`` is a list of strings (``"2"``, ``"NAN"``, ``"INFINITY"``, ``"-INFINITY"``), one string
when every element is equal. Very old files keep ``element_type`` and ``shape`` under ``value_type``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes, fileio
from ...contract import TensorType
from ..context import MAX_DIM, OpContext, numel
from . import register

__all__ = ["parameter_type", "parse_values"]

EXPAND_ABOVE = 1 << 16
_NUMPY2 = int(np.__version__.split(".")[0]) >= 2
"""A single-value Constant with more elements than this becomes a scalar and an Expand node."""


def _type_holder(ctx: OpContext) -> dict[str, Any]:
    if "element_type" in ctx.js:
        return ctx.js
    vt = ctx.js.get("value_type")
    if isinstance(vt, dict) and "element_type" in vt:
        return vt
    raise ctx.error(f"{ctx.op.op} has no 'element_type' attribute")


def _dims(ctx: OpContext, shape: Any, allow_dynamic: bool) -> tuple[Any, ...] | None:
    if shape is None and allow_dynamic:
        return None
    if not isinstance(shape, list):
        raise ctx.error(f"'shape' must be a list of dimensions{' or null' if allow_dynamic else ''}, got {shape!r:.60}")
    out: list[Any] = []
    for i, d in enumerate(shape):
        if d is None and allow_dynamic:
            out.append(f"{ctx.name}_d{i}")
        elif isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM:
            out.append(d)
        else:
            raise ctx.error(f"'shape' dimension {i} must be a non-negative integer, got {d!r:.40}")
    return tuple(out)


FOUR_BIT_OPSET = 21
"""The first opset (ONNX IR version 10) with 4-bit integer tensors."""


def _element_type(ctx: OpContext, holder: dict[str, Any]) -> dtypes.DType:
    dt = ctx.parse_type(holder["element_type"], "element_type")
    if dt.bits < 8 and ctx.b.opset < FOUR_BIT_OPSET:
        raise ctx.error(
            f"{ctx.op.op} of type {dt} needs opset {FOUR_BIT_OPSET} or later (ONNX has 4-bit tensors from there)"
        )
    return dt


def parameter_type(ctx: OpContext) -> TensorType:
    """The Parameter's element type and (partial) shape; unknown dims become symbolic names."""
    ctx.expect_inputs(0)
    holder = _type_holder(ctx)
    elem = _element_type(ctx, holder)
    if "shape" not in holder:
        raise ctx.error("Parameter has no 'shape' attribute")
    shape = _dims(ctx, holder["shape"], allow_dynamic=True)
    if shape is None:
        raise ctx.error("Parameter has an unknown rank (shape null); ONNX graph inputs need a rank")
    return TensorType(elem, shape)


_RANGES = {t.name: (t.min, t.max) for t in dtypes.TABLE if t.kind in ("quantized", "integer")}
_STR = {str}
_INT = {int}
_BOOL = {"0": False, "1": True, "true": True, "false": False}


def _convert(strs: list[str], dt: dtypes.DType) -> np.ndarray:
    """Strings to ``dt``; ValueError / OverflowError when one does not parse or is out of range."""
    n = len(strs)
    if dt.kind == "real":  # beyond the type's range: infinity, as C's strtof gives (importer ignores overflow)
        if dt.name in ("f32", "f64"):
            return np.fromiter(map(float, strs), dt.numpy, n)
        return np.fromiter(map(float, strs), np.float64, n).astype(dt.numpy)
    if dt.kind == "boolean":
        try:
            return np.fromiter((_BOOL[s.strip().lower()] for s in strs), np.bool_, n)
        except KeyError:
            raise ValueError("not a boolean") from None
    if _NUMPY2 and dt.bits >= 8:  # NumPy 2 refuses out-of-range Python ints itself
        return np.fromiter(map(int, strs), dt.numpy, n)
    lo, hi = _RANGES[dt.name]
    wide = np.fromiter(map(int, strs), np.uint64 if dt.name == "u64" else np.int64, n)
    if n and (int(wide.min()) < lo or int(wide.max()) > hi):
        raise OverflowError("out of range")
    return wide.astype(dt.numpy)


def _parse_strings(ctx: OpContext, values: list[Any], dt: dtypes.DType) -> np.ndarray:
    """The values as a flat array of ``dt``; DequantizeError naming the first value that does not parse."""
    if dt.kind == "real" or set(map(type, values)) <= _STR:  # float() takes JSON numbers as they are
        strs = values
    else:
        strs = []
        for v in values:
            if isinstance(v, str):
                strs.append(v)
            elif isinstance(v, bool):
                strs.append("1" if v else "0")
            elif isinstance(v, (int, float)):
                strs.append(repr(v))
            else:
                raise ctx.error(f"Constant values must be strings, got {v!r:.40}")
    try:
        return _convert(strs, dt)
    except (ValueError, OverflowError, TypeError):
        pass
    for k, s in enumerate(strs):
        if not isinstance(s, (str, int, float)):
            raise ctx.error(f"Constant values must be strings, got {s!r:.40}")
        try:
            _convert([s], dt)
        except OverflowError:
            raise ctx.error(
                f"Constant value #{k} '{s!s:.40}' is out of the range of {dt} [{dt.min}, {dt.max}]"
            ) from None
        except ValueError:
            raise ctx.error(f"Constant value #{k} '{s!s:.40}' does not parse as {dt}") from None
    raise ctx.error(f"Constant values do not parse as {dt}")


def parse_values(ctx: OpContext, dt: dtypes.DType, shape: tuple[int, ...]) -> tuple[np.ndarray, bool]:
    """The Constant's values, and whether they are one value for every element (still flat, length 1)."""
    values = ctx.raw("value")
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        raise ctx.error(f"Constant 'value' must be a list of strings, got {values!r:.40}")
    count = numel(shape)
    if len(values) == 1 and count != 1:
        return _parse_strings(ctx, values, dt), True
    if len(values) != count:
        raise ctx.error(
            f"Constant has {len(values)} values for shape {{{','.join(map(str, shape))}}} ({count} elements)"
        )
    return _parse_strings(ctx, values, dt), False


_DIRECT = {
    t.ctype: t
    for t in dtypes.TABLE
    if t.name in ("f32", "f64") or (_NUMPY2 and t.bits >= 8 and t.kind in ("quantized", "integer"))
}
"""Element types whose values NumPy parses straight into the type, range-checked (the fast path)."""


@register("Constant")
def constant(ctx: OpContext) -> list[TensorType]:
    js = ctx.js
    et, raw_shape, values = js.get("element_type"), js.get("shape"), js.get("value")
    dt = _DIRECT.get(et) if type(et) is str else None
    if (  # the common case: one value per element of a plain shape
        dt is not None
        and type(raw_shape) is list
        and type(values) is list
        and not ctx.inputs
        and set(map(type, raw_shape)) <= _INT
        and len(values) == numel(raw_shape)
        and (not raw_shape or (min(raw_shape) >= 0 and max(raw_shape) <= MAX_DIM))
    ):
        try:
            if dt.kind == "real":  # float() reads strings and JSON numbers alike, as the general path does
                flat = np.fromiter(map(float, values), dt.numpy, len(values))
            elif set(map(type, values)) <= _STR:
                flat = np.array(values, dtype=dt.numpy)  # int() per string; out of range raises
            else:
                flat = None
        except (ValueError, OverflowError, TypeError):
            flat = None  # the general path below names the value
        if flat is not None:
            shape = tuple(raw_shape)
            return [ctx.b.initializer(ctx.out(), flat.reshape(shape), dt)]
    if ctx.inputs:
        ctx.expect_inputs(0)
    holder = _type_holder(ctx)
    dt = _element_type(ctx, holder)
    if "shape" not in holder:
        raise ctx.error("Constant has no 'shape' attribute")
    raw_shape = holder["shape"]
    if type(raw_shape) is list and all(type(d) is int and 0 <= d <= MAX_DIM for d in raw_shape):
        shape: tuple[int, ...] = tuple(raw_shape)
    else:
        shape = _dims(ctx, raw_shape, allow_dynamic=False)  # type: ignore[assignment]  # raises
    flat, single = parse_values(ctx, dt, shape)
    if single and len(shape) and numel(shape) > EXPAND_ABOVE and ctx.onnx_takes(dt, "Expand"):
        scalar = ctx.const(flat.reshape(()), dt, f"{ctx.name}/value")
        ctx.emit("Expand", [scalar, ctx.int64s(shape)], ctx.out())
    else:
        if single:  # written out whole: refused before NumPy is asked for more than the machine has
            fileio.check_memory(numel(shape) * dt.numpy.itemsize, f"Constant of shape {list(shape)}")
        arr = np.broadcast_to(flat, shape) if single else flat.reshape(shape)
        ctx.b.initializer(ctx.out(), arr, dt)
    return [TensorType(dt, shape)]
