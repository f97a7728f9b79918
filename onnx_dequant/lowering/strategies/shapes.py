"""Shape arithmetic for the lowered forms: grouping adjacent axes, and shape tensors (constants when
every dimension is known, Shape/Slice/ReduceProd/Concat ops when some are symbolic)."""

from __future__ import annotations

from collections.abc import Sequence

from ...contract import Dim
from ..emitter import Emitter

__all__ = ["Group", "groups", "merged_dims", "shape_tensor", "merged_shape_tensor"]

Group = tuple[bool, tuple[int, ...]]
"""(quantized, axes): a run of adjacent axes that are all quantization axes or all broadcast axes."""


def groups(rank: int, axes: Sequence[int], *, merge: bool = True) -> list[Group]:
    """The input's axes cut into runs of quantization (True) and broadcast (False) axes.

    With ``merge=False`` every axis is its own group.
    """
    out: list[Group] = []
    aset = set(axes)
    for i in range(rank):
        q = i in aset
        if merge and out and out[-1][0] == q:
            out[-1] = (q, out[-1][1] + (i,))
        else:
            out.append((q, (i,)))
    return out


def merged_dims(shape: Sequence[Dim], axis_groups: Sequence[Sequence[int]]) -> list[Dim]:
    """The size of each group of axes (None when a member is unknown)."""
    out: list[Dim] = []
    for g in axis_groups:
        n: Dim = 1
        for a in g:
            d = shape[a]
            n = n * d if isinstance(n, int) and isinstance(d, int) else None
        out.append(n)
    return out


def _shape_slice(em: Emitter, tensor: str, start: int, end: int, opset: int) -> str:
    if opset >= 15:
        return em.node("Shape", [tensor], hint="dims", start=start, end=end)
    full = em.node("Shape", [tensor], hint="shape")
    return em.node("Slice", [full, em.i64([start]), em.i64([end]), em.i64([0])], hint="dims")


def merged_shape_tensor(
    em: Emitter, tensor: str, shape: Sequence[Dim], axis_groups: Sequence[Sequence[int] | int], opset: int
) -> str:
    """An int64 shape tensor: for each entry of ``axis_groups``, the product of ``tensor``'s dims in that group
    of axes (a tuple), or a literal size (an int, e.g. 1 for an inserted axis)."""
    parts: list[int | str] = []  # a known size, or the name of a one-element shape tensor
    for g in axis_groups:
        if isinstance(g, int):
            parts.append(g)
            continue
        known = [d for d in (shape[a] for a in g) if isinstance(d, int)]
        if len(known) == len(g):
            n = 1
            for d in known:
                n *= d
            parts.append(n)
        elif len(g) == 1:
            parts.append(_shape_slice(em, tensor, g[0], g[0] + 1, opset))
        else:
            sl = _shape_slice(em, tensor, g[0], g[-1] + 1, opset)
            parts.append(em.node("ReduceProd", [sl], hint="dims", keepdims=1))
    sizes = [p for p in parts if isinstance(p, int)]
    if len(sizes) == len(parts):
        return em.i64(sizes)
    names: list[str] = []
    run: list[int] = []
    for p in parts:
        if isinstance(p, int):
            run.append(p)
            continue
        if run:
            names.append(em.i64(run))
            run = []
        names.append(p)
    if run:
        names.append(em.i64(run))
    return em.node("Concat", names, hint="shape", axis=0)


def shape_tensor(em: Emitter, tensor: str, shape: Sequence[Dim], opset: int) -> str:
    """``tensor``'s shape as an int64 tensor (a constant when every dim is known)."""
    known = [d for d in shape if isinstance(d, int)]
    if len(known) == len(shape):
        return em.i64(known)
    return em.node("Shape", [tensor], hint="shape")
