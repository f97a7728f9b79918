"""The value of a tensor of the graph under construction when it is known while converting: an initializer, or
a small computation on initializers and on the shapes of tensors whose shape is static (``ShapeOf`` followed by
slicing, as detection graphs compute a feature map's height and width). Evaluated with ONNX's reference
evaluator, so the value is what the emitted nodes would compute at run time."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .builder import Builder
from .context import known

__all__ = ["static_value"]

_FOLDABLE = frozenset(
    {"Shape", "Gather", "Slice", "Cast", "Concat", "Squeeze", "Unsqueeze", "Reshape", "Identity", "Add", "Sub", "Mul"}
)
_LIMIT = 32


def static_value(b: Builder, name: str) -> np.ndarray | None:
    """``name``'s value if it follows from initializers and static shapes alone (at most a few nodes), else None."""
    found = b.values.get(name)
    if found is not None:
        return found
    producers = {o: n for n in b.graph.node for o in n.output}
    feeds: dict[str, np.ndarray] = {}
    needed: set[int] = set()
    stack, seen = [name], set()
    while stack:
        t = stack.pop()
        if not t or t in seen:
            continue
        seen.add(t)
        if t in b.values:
            feeds[t] = b.values[t]
            continue
        n = producers.get(t)
        if n is None or n.domain or n.op_type not in _FOLDABLE or len(needed) >= _LIMIT:
            return None
        if n.op_type == "Shape":
            shape = b.types.get(n.input[0], (None, None))[1]
            if not known(shape):
                return None
            attrs = {a.name: a.i for a in n.attribute}
            feeds[t] = np.array(shape, np.int64)[attrs.get("start", 0) : attrs.get("end", len(shape))]
            continue
        needed.add(id(n))
        stack.extend(n.input)
    nodes = [n for n in b.graph.node if id(n) in needed]
    try:
        from onnx.reference import ReferenceEvaluator

        graph = helper.make_graph(
            nodes,
            "fold",
            [],
            [helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None)],
            [numpy_helper.from_array(np.asarray(v), k) for k, v in feeds.items()],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", b.opset)])
        return np.asarray(ReferenceEvaluator(model).run(None, {})[0])
    except Exception:  # noqa: BLE001  (not foldable after all: the caller refuses with its own reason)
        return None
