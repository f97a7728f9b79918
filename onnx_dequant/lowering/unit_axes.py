"""Quantization axes of size 1 dropped before planning: along such an axis the scale (and zero point) has
one value, so the axis is as much a broadcast axis as a quantization one. Dropped, a node may take a
plainer form (``(6,765,19,5,1)`` with axes ``{4}`` is per-tensor; ``(C,1,H,W)`` with axes ``{0,1}``
per-axis); the scale and zero point lose those dims (a new constant, or a Squeeze)."""

from __future__ import annotations

import dataclasses

from .emitter import Emitter
from .facts import NodeInfo

__all__ = ["unit_axes", "without_unit_axes", "squeeze_unit_axes"]


def unit_axes(info: NodeInfo) -> tuple[int, ...]:
    """The node's quantization axes whose size is known to be 1, where they can be dropped (ORT has no
    Squeeze for a 4-bit zero point computed at run time)."""
    if info.shape is None:
        return ()
    if info.has_zp and not info.zp_const and info.in_type.bits < 8:
        return ()
    return tuple(a for a in info.axes if info.shape[a] == 1)


def without_unit_axes(info: NodeInfo, dropped: tuple[int, ...]) -> NodeInfo:
    """The facts the planner reads with the axes ``dropped``: a constant scale or zero point reads back
    without their dims."""
    axes = tuple(a for a in info.axes if a not in dropped)
    kept = [i for i, a in enumerate(info.axes) if a not in dropped]
    old = info.read

    def read(name: str):  # type: ignore[no-untyped-def]
        value = None if old is None else old(name)
        if value is None or name not in (info.scale, info.zero_point) or value.ndim != len(info.axes):
            return value
        return value.reshape([value.shape[i] for i in kept])

    return dataclasses.replace(info, axes=axes, read=read)


def squeeze_unit_axes(info: NodeInfo, dropped: tuple[int, ...], em: Emitter) -> NodeInfo:
    """``without_unit_axes(info, dropped)`` with its scale and zero point given the new shape in ``em``
    (a constant reshaped in the file, else a Squeeze node)."""
    reduced = without_unit_axes(info, dropped)
    positions = [i for i, a in enumerate(info.axes) if a in dropped]

    def squeezed(name: str, hint: str) -> str:
        t = em.constants.get(name)
        out = None if t is None else em.redim(name, [d for i, d in enumerate(t.dims) if i not in positions], hint)
        return out or em.node("Squeeze", [name, em.i64(positions, "axes")], hint=hint)

    scale = squeezed(info.scale, "scale_squeezed")
    zp = info.zero_point and squeezed(info.zero_point, "zp_squeezed")
    old = reduced.read
    renamed = {scale: info.scale, zp: info.zero_point}

    def read(name: str):  # type: ignore[no-untyped-def]
        return None if old is None else old(renamed.get(name, name))

    return dataclasses.replace(reduced, scale=scale, zero_point=zp, read=read)
