"""Diagnosis of a failing path: the ops ONNX Runtime's optimizer put into the model, and what is known
about them."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

import numpy as np
import onnx

from .runners import kernel_session, plain_session, session_options

__all__ = ["KNOWN_REWRITES", "ort_rewrites"]

KNOWN_REWRITES = {
    "MatMulNBits": "MatMulNBits from a DequantizeLinear -> MatMul fusion quantizes the activations to int8 "
    "(ORT's default session.qdq_matmulnbits_accuracy_level is 4). Exact remedies (scripts/bench_weights.py, "
    "K=N=1024, one thread): onnx-dequant lower --weights float folds the weight into f32 (4x its bytes; "
    "about 1.6x the fused time at M=1, faster than it at M=512), or --ort-config "
    "session.qdq_matmulnbits_accuracy_level=0 keeps it quantized but dequantizes it on every run (20-100x "
    "the fused time at M=1, the same at M=512)",
    "QLinearConv": "QLinearConv from a DequantizeLinear -> Conv -> QuantizeLinear fusion: with uint8 activations "
    "and int8 weights, ORT's kernel on CPUs without VNNI can saturate its 16-bit intermediate sums (ORT's "
    "quantization tool avoids it with reduce_range=True)",
}
"""What is known about ops ONNX Runtime's optimizer introduces, for the report."""


def ort_rewrites(
    model: onnx.ModelProto,
    level: str,
    *,
    kernel: bool = False,
    config: Mapping[str, str] | None = None,
    limit_bytes: int = 64 << 20,
    arrays: Mapping[str, np.ndarray] | None = None,
) -> list[str]:
    """The nodes ONNX Runtime's optimizer puts into ``model`` at ``level`` that ``model`` has no node of the
    same op for (fused ops such as MatMulNBits, QLinearConv), as ``"op 'name'"``; empty when none or when
    the model is over ``limit_bytes`` (the optimized model is written to a temporary file)."""
    if level == "off" or model.ByteSize() + sum(a.nbytes for a in (arrays or {}).values()) > limit_bytes:
        return []
    have = {(n.domain or "", n.op_type) for n in model.graph.node}
    with tempfile.TemporaryDirectory(prefix="odq-validate-") as tmp:
        so = session_options(level, config)
        so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        try:
            if kernel:
                kernel_session(model, so, arrays)
            else:
                plain_session(model, so, arrays, None)
            optimized = onnx.load(so.optimized_model_filepath, load_external_data=False)
        except Exception:  # noqa: BLE001 - a diagnosis only
            return []
    found = []
    for n in optimized.graph.node:
        if (n.domain or "", n.op_type) not in have and n.op_type != "Cast":
            found.append(f"{n.op_type} '{n.name}'")
    return found
