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
from .report import FirstDifference, error_line

__all__ = ["first_difference"]

_EXACT = Tolerance(0, False, "unchanged tensor")
ONE_AT_A_TIME = 64
"""At most this many single-tensor runs when exposing everything at once hides the difference."""


def first_difference(
    original: onnx.ModelProto,
    oracle: Mapping[str, Any],
    run_exposed: Callable[[Mapping[str, np.dtype]], Mapping[str, np.ndarray]],
    tolerances: Mapping[str, Tolerance],
    *,
    one_at_a_time: int = ONE_AT_A_TIME,
) -> FirstDifference:
    """The first node of ``original`` whose output, as ``run_exposed`` computes it, disagrees with ``oracle``.

    ``oracle`` holds every tensor the reference computed; ``run_exposed(expose)`` runs the path with the
    tensors of ``expose`` (name -> dtype) as extra outputs and returns what it has of them by name.
    When every tensor agrees with all of them exposed (exposing blocks ONNX Runtime's fusions), the
    tensors are exposed one at a time, in order, up to ``one_at_a_time`` runs.
    """
    expose: dict[str, np.dtype] = {}
    producer: dict[str, tuple[int, onnx.NodeProto]] = {}
    for i, node in enumerate(original.graph.node):
        for o in node.output:
            v = oracle.get(o) if o else None
            if isinstance(v, np.ndarray):
                expose[o] = v.dtype
                producer[o] = (i, node)
    try:
        got = run_exposed(expose)
    except Exception as e:  # noqa: BLE001 - a diagnosis that cannot run must not hide the finding itself
        note = f"could not localize: running with intermediates exposed failed: {error_line(e)}"
        return FirstDifference(None, note=note)
    shared = [o for o in expose if o in got]
    for o in shared:
        r = compare_output(o, oracle[o], got[o], tolerances.get(o, _EXACT))
        if not r.ok:
            i, node = producer[o]
            return FirstDifference(node.name or f"#{i}", node.op_type, o, i, r)
    if not shared:
        return FirstDifference(
            None, note="could not localize: the path's model shares no intermediate tensor names with the original"
        )
    # Every tensor agrees when all are exposed: the difference comes from a rewrite ORT makes only while
    # the tensors are internal. Expose one at a time; the first that differs is the first node whose
    # output disagrees in (nearly) the graph that disagreed.
    for o in shared[:one_at_a_time]:
        try:
            single = run_exposed({o: expose[o]})
        except Exception:  # noqa: BLE001
            continue
        if o not in single:
            continue
        r = compare_output(o, oracle[o], single[o], tolerances.get(o, _EXACT))
        if not r.ok:
            i, node = producer[o]
            return FirstDifference(
                node.name or f"#{i}",
                node.op_type,
                o,
                i,
                r,
                note="found exposing one tensor at a time; with every intermediate exposed all agree, so the "
                "difference comes from a rewrite ONNX Runtime makes around this node",
            )
    scanned = min(len(shared), one_at_a_time)
    return FirstDifference(
        None,
        note=(
            f"could not localize: every one of {len(shared)} intermediate tensors agrees when exposed"
            f" (all at once, and {scanned} one at a time); exposing a tensor changes what ONNX Runtime fuses, "
            "and the difference appears only in the fully optimized graph"
        ),
    )
