"""Parameter, Constant and Result: graph inputs, initializers and graph outputs.

Parameter ``shape`` null means an unknown rank, a null dimension an unknown size (a symbolic ONNX dim);
Constant ``value`` is a list of strings (``"2"``, ``"NAN"``, ``"INFINITY"``, ``"-INFINITY"``), one string
when every element is equal. Very old files keep ``element_type`` and ``shape`` under ``value_type``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import MAX_DIM, OpContext, numel
from . import register

__all__ = ["parameter_type", "parse_values"]

EXPAND_ABOVE = 1 << 16
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


def parameter_type(ctx: OpContext) -> TensorType:
    """The Parameter's element type and (partial) shape; unknown dims become symbolic names."""
    ctx.expect_inputs(0)
    holder = _type_holder(ctx)
    elem = ctx.parse_type(holder["element_type"], "element_type")
    if "shape" not in holder:
        raise ctx.error("Parameter has no 'shape' attribute")
    shape = _dims(ctx, holder["shape"], allow_dynamic=True)
    if shape is None:
        raise ctx.error("Parameter has an unknown rank (shape null); ONNX graph inputs need a rank")
    return TensorType(elem, shape)


def _convert(arr: np.ndarray, dt: dtypes.DType) -> np.ndarray:
    """Strings to ``dt``; ValueError / OverflowError when one does not parse or is out of range."""
    if dt.kind == "real":
        with np.errstate(over="ignore"):  # beyond the type's range: infinity, as C's strtof gives
            return arr.astype(np.float64).astype(dt.numpy)
    if dt.kind == "boolean":
        low = np.char.lower(np.char.strip(arr))
        if not np.isin(low, ["0", "1", "true", "false"]).all():
            raise ValueError("not a boolean")
        return np.isin(low, ["1", "true"])
    wide = arr.astype(np.uint64 if dt.name == "u64" else np.int64)
    if wide.size and (int(wide.min()) < dt.min or int(wide.max()) > dt.max):
        raise OverflowError("out of range")
    return wide.astype(dt.numpy)


def _parse_strings(ctx: OpContext, values: list[Any], dt: dtypes.DType) -> np.ndarray:
    """The values as a flat array of ``dt``; DequantizeError naming the first value that does not parse."""
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
    arr = np.array(strs, dtype=str) if strs else np.zeros(0, dtype=str)
    try:
        return _convert(arr, dt)
    except (ValueError, OverflowError):
        pass
    for k, s in enumerate(strs):
        try:
            _convert(np.array([s], dtype=str), dt)
        except OverflowError:
            raise ctx.error(f"Constant value #{k} '{s:.40}' is out of the range of {dt} [{dt.min}, {dt.max}]") from None
        except ValueError:
            raise ctx.error(f"Constant value #{k} '{s:.40}' does not parse as {dt}") from None
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


@register("Constant")
def constant(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(0)
    holder = _type_holder(ctx)
    dt = ctx.parse_type(holder["element_type"], "element_type")
    if "shape" not in holder:
        raise ctx.error("Constant has no 'shape' attribute")
    shape: tuple[int, ...] = _dims(ctx, holder["shape"], allow_dynamic=False)  # type: ignore[assignment]
    flat, single = parse_values(ctx, dt, shape)
    count = numel(shape)
    b = ctx.b
    if single and count > EXPAND_ABOVE:
        scalar = ctx.const(flat.reshape(()), dt, f"{ctx.name}/value")
        ctx.emit("Expand", [scalar, ctx.int64s(shape)], ctx.out())
    else:
        arr = np.broadcast_to(flat, (count,)) if single else flat
        b.initializer(ctx.out(), np.array(arr).reshape(shape))
    return [TensorType(dt, shape)]
