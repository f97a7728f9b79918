"""Where a path first disagrees: both sides run again with every intermediate tensor exposed, and the
original model's nodes are walked in order until one's output differs beyond its tolerance.

Tensors are matched by name: the lowering pass keeps each Dequantize node's output name, and a model
converted by another tool usually keeps the tensor names too. The node named is always the ORIGINAL
model's node (the one the user wrote), not a node of the lowered or other model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx

from .diff import compare_output
from .policy import Tolerance
from .report import FirstDifference

__all__ = ["first_difference"]

_EXACT = Tolerance(0, False, "unchanged tensor")


def first_difference(
    original: onnx.ModelProto,
    oracle: Mapping[str, Any],
    run_exposed: Callable[[Mapping[str, np.dtype]], Mapping[str, np.ndarray]],
    tolerances: Mapping[str, Tolerance],
) -> FirstDifference:
    """The first node of ``original`` whose output, as ``run_exposed`` computes it, disagrees with ``oracle``.

    ``oracle`` holds every tensor the reference computed; ``run_exposed(expose)`` runs the path with the
    tensors of ``expose`` (name -> dtype) as extra outputs and returns what it has of them by name.
    """
    expose: dict[str, np.dtype] = {}
    for node in original.graph.node:
        for o in node.output:
            v = oracle.get(o) if o else None
            if isinstance(v, np.ndarray):
                expose[o] = v.dtype
    try:
        got = run_exposed(expose)
    except Exception as e:  # noqa: BLE001 - a diagnosis that cannot run must not hide the finding itself
        return FirstDifference(None, note=f"could not localize: running with intermediates exposed failed: {type(e).__name__}: {e}")
    compared = 0
    for i, node in enumerate(original.graph.node):
        for o in node.output:
            if not o or o not in got or o not in expose:
                continue
            compared += 1
            r = compare_output(o, oracle[o], got[o], tolerances.get(o, _EXACT))
            if not r.ok:
                return FirstDifference(node.name or f"#{i}", node.op_type, o, i, r)
    if compared == 0:
        return FirstDifference(None, note="could not localize: the path's model shares no intermediate tensor names with the original")
    return FirstDifference(
        None,
        note=(
            f"could not localize: with {compared} intermediate tensors exposed, every node's output agrees "
            "(exposing intermediates changes what ONNX Runtime fuses; the difference appears only in the optimized graph)"
        ),
    )
