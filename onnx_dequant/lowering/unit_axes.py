"""Axes of size 1 given the kind that suits the kernels before planning: along such an axis the scale (and
zero point) has one value, so the axis is as much a broadcast axis as a quantization one.

- A quantization axis of size 1 is planned as a broadcast one (dropped): a node may then take a plainer
  form (``(6,765,19,5,1)`` with axes ``{4}`` is per-tensor; ``(C,1,H,W)`` with axes ``{0,1}`` per-axis).
- Broadcast axes of size 1 after the input's last other axis, where that one is a quantization axis, are
  planned as quantization axes (adopted): ORT's kernels walk runs of the trailing axes of one kind, and a
  trailing axis of 1 broadcast made them runs of one element (``(3,14,36001,1)`` with axes ``{0,1,2}``:
  the scale is as large as the input).

The scale and zero point take the new shape: a new constant, or Squeeze/Unsqueeze nodes."""

from __future__ import annotations

import dataclasses

from .emitter import Emitter
from .facts import NodeInfo

__all__ = ["UnitAxes", "unit_axes", "with_unit_axes", "reshape_unit_axes"]


@dataclasses.dataclass(frozen=True)
class UnitAxes:
    """Axes of size 1 whose kind the planner changes: ``dropped`` quantization axes, ``adopted`` broadcast ones."""

    dropped: tuple[int, ...] = ()
    adopted: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.dropped or self.adopted)

    def axes(self, info: NodeInfo) -> tuple[int, ...]:
        """The quantization axes the node is planned with."""
        return tuple(sorted((set(info.axes) - set(self.dropped)) | set(self.adopted)))


def unit_axes(info: NodeInfo) -> UnitAxes:
    """The node's axes of known size 1 whose kind is changed. None where the scale or zero point could not
    be reshaped (ORT has no Squeeze or Unsqueeze for a 4-bit zero point computed at run time) and where the
    input is known to be empty (its form computes nothing). No broadcast axis is adopted for a constant
    weight ORT fuses: its per-axis DequantizeLinear (a ``(C,1,1,1)`` Conv weight, ``{0}``) is the form ORT
    fuses, whatever its own speed."""
    if info.shape is None or 0 in info.shape:
        return UnitAxes()
    if info.has_zp and not info.zp_const and info.in_type.bits < 8:
        return UnitAxes()
    unit = [a for a in range(len(info.shape)) if info.shape[a] == 1]
    others = [a for a in range(len(info.shape)) if a not in unit]
    adopts = bool(others) and others[-1] in info.axes and not (info.fusable_weight and not info.fold)
    trailing = [a for a in unit if a > others[-1]] if adopts else []
    return UnitAxes(
        tuple(a for a in info.axes if a in unit and a not in trailing),
        tuple(a for a in trailing if a not in info.axes),
    )


def with_unit_axes(info: NodeInfo, unit: UnitAxes) -> NodeInfo:
    """The facts the planner reads with the axes ``unit`` changes: a constant scale or zero point reads back
    in their new shape."""
    axes = unit.axes(info)
    old = info.read

    def read(name: str):  # type: ignore[no-untyped-def]
        value = None if old is None else old(name)
        if value is None or name not in (info.scale, info.zero_point) or value.ndim != len(info.axes):
            return value
        return value.reshape([value.shape[info.axes.index(a)] if a in info.axes else 1 for a in axes])

    return dataclasses.replace(info, axes=axes, read=read)


def reshape_unit_axes(info: NodeInfo, unit: UnitAxes, em: Emitter) -> NodeInfo:
    """``with_unit_axes(info, unit)`` with its scale and zero point given the new shape in ``em`` (a new
    constant, else Squeeze and Unsqueeze nodes)."""
    planned = with_unit_axes(info, unit)
    squeezed = [i for i, a in enumerate(info.axes) if a in unit.dropped]
    unsqueezed = [i for i, a in enumerate(planned.axes) if a in unit.adopted]

    def reshaped(name: str, hint: str) -> str:
        t = em.constants.get(name)
        if t is not None:
            kept = [d for i, d in enumerate(t.dims) if i not in squeezed]
            dims = [1 if i in unsqueezed else kept.pop(0) for i in range(len(planned.axes))]
            return em.redim(name, dims, hint)  # type: ignore[return-value]
        if squeezed:
            name = em.node("Squeeze", [name, em.i64(squeezed, "axes")], hint=hint)
        if unsqueezed:
            name = em.node("Unsqueeze", [name, em.i64(unsqueezed, "axes")], hint=hint)
        return name

    scale = reshaped(info.scale, "scale_unit")
    zp = info.zero_point and reshaped(info.zero_point, "zp_unit")
    old = planned.read
    renamed = {scale: info.scale, zp: info.zero_point}

    def read(name: str):  # type: ignore[no-untyped-def]
        return None if old is None else old(renamed.get(name, name))

    return dataclasses.replace(planned, scale=scale, zero_point=zp, read=read)
