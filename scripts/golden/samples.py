"""The three sample graphs of models/ on deterministic inputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import GoldenCase

MODELS = Path(__file__).resolve().parents[2] / "models"


_AUTOB = {"NONE": 0, "NUMPY": 1, "PDPD": 2}


def _load(name: str) -> list:
    return json.loads((MODELS / f"{name}.json").read_text())


def _as_v026(graph: list) -> list:
    """The graph with attribute-visitor binary ops (v0.29's spelling, which nGraph 0.26 cannot read) spelled as
    nGraph 0.26 writes them: ``op_version`` 0 and an ``auto_broadcast`` object."""
    for fn in graph:
        for op in fn["ops"]:
            if op.pop("attribute_visitor", False) and isinstance(op.get("auto_broadcast"), str):
                op["auto_broadcast"] = {"axis": -1, "type": _AUTOB[op["auto_broadcast"]]}
                op["op_version"] = 0
    return graph


def cases() -> list[GoldenCase]:
    rng = np.random.default_rng(20261201)
    return [
        GoldenCase(
            "qdq_chain",
            _load("qdq_chain"),
            {
                "Parameter_0": (rng.standard_normal((4, 6, 8)) * 3).astype(np.float32),
                "Parameter_1": rng.uniform(0.02, 0.1, 6).astype(np.float32),
            },
            note="models/qdq_chain.json: Quantize/Dequantize round trips, Convert, integer Divide, Maximum/Minimum",
            ulp=0,
            why="bit-identical; the policy cannot prove it (a Quantize of a computed Dequantize may flip a step)",
        ),
        GoldenCase(
            "quantized_mlp",
            _as_v026(_load("quantized_mlp")),
            {"Parameter_0": rng.standard_normal((5, 64)).astype(np.float32)},
            note="models/quantized_mlp.json (Adds as v0.26 spells them): Dequantize on {1} and {0, 1}, Dot, Softmax",
            ulp=64,
            why="f32 Dot and Softmax: nGraph and ONNX Runtime add in different orders",
        ),
        GoldenCase(
            "conv_block",
            _load("conv_block"),
            {"Parameter_0": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)},
            note="models/conv_block.json: Convolution, pools, Concat, Slice, Reshape, Dot, Tanh",
            ulp=64,
            why="f32 Convolution, AvgPool, Dot and Tanh: different summation orders and libm",
        ),
    ]
