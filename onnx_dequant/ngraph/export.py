"""Writing a converted graph: ``save_converted(model, output, *, lower=False, path=None)``.

The importer's one write path, shared by ``onnx-dequant convert`` and ``convert_tree``: optionally lower,
check (``modelio.check_model`` with ONNX's shape inference; large weights left out of the check), and
write through ``modelio.save`` (whole or not at all; external data past protobuf's 2 GB).
"""

from __future__ import annotations

import os

import onnx

from .. import modelio
from ..errors import DequantizeError

__all__ = ["save_converted"]


def save_converted(
    model: onnx.ModelProto,
    output: str | os.PathLike[str],
    *,
    lower: bool = False,
    path: str | None = None,
) -> onnx.ModelProto:
    """Write the converted ``model`` (lowered first when ``lower``) to ``output``; returns what was written.

    ``path``: the graph file it came from, named in errors. ``DequantizeError`` when the lowering refuses
    the model or it fails the check; nothing is written then.
    """
    if lower:
        from ..lowering import lower as lower_model  # the importer does not need the lowering pass

        try:
            model = lower_model(model)
        except DequantizeError as e:
            raise e.at(path=path) from None
    modelio.check_model(model, path, full=True)
    modelio.save(model, output, checked=True)
    return model
