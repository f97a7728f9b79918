"""TopK v0 (outputs indices, values; ties to the lower index; k 0 = the whole axis), ScatterAdd and
ScatterNDAdd (repeated indices accumulate), EmbeddingLookup (1-D indices), ReverseSequence."""

from __future__ import annotations

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter, Ref

from . import GoldenCase, graph
from ._ops import one_op, ulp

RNG = np.random.default_rng(10)
SELECTS = "TopK selects values and computes none (the policy counts it as float arithmetic)"
X = np.array([[3, 1, 4, 1, 5, 9, 2, 6], [5, 3, 5, 8, 9, 7, 9, 3]], np.float32)


def _topk(name: str, x: np.ndarray, k: int, compute_max: bool, it: str) -> GoldenCase:
    w = FunctionWriter()
    p = w.parameter(x.dtype, list(x.shape))
    t = w.op("TopK", p, top_k_axis=1, k=k, compute_max=compute_max, index_element_type=it)
    w.result(w.op("GetOutputElement", Ref(t, 0), n=0))
    w.result(w.op("GetOutputElement", Ref(t, 1), n=1))
    case = GoldenCase(name, graph(w), {p: x}, note=f"TopK k={k} max={compute_max} with ties")
    return ulp(case, 0, SELECTS) if x.dtype.kind == "f" else case


def cases():
    out = [
        _topk("topk_max_i32", X, 3, True, "int32_t"),
        _topk("topk_min_i64", X, 3, False, "int64_t"),
        _topk("topk_all_int", X.astype(np.int32), 0, True, "int64_t"),
        ulp(
            one_op(
                "scatter_add_repeats",
                "ScatterAdd",
                [
                    RNG.standard_normal((5, 3)).astype(np.float32),
                    np.array([[0, 2], [4, 2]], np.int64),
                    RNG.standard_normal((2, 2, 3)).astype(np.float32),
                ],
            ),
            1,
            "repeated indices are added in ONNX Runtime's order, nGraph's in index order",
        ),
        one_op(
            "scatter_nd_add",
            "ScatterNDAdd",
            [
                RNG.standard_normal((4, 3)).astype(np.float32),
                np.array([[0], [3], [1]], np.int32),
                RNG.standard_normal((3, 3)).astype(np.float32),
            ],
        ),
        one_op(
            "embedding_lookup",
            "EmbeddingLookup",
            [np.array([0, 4, 2, 1, 1, 3], np.int32), RNG.standard_normal((5, 4)).astype(np.float32)],
        ),
        one_op(
            "reverse_sequence_batch0",
            "ReverseSequence",
            [RNG.standard_normal((3, 4, 2)).astype(np.float32), np.array([1, 4, 2], np.int32)],
            batch_axis=0,
            sequence_axis=1,
        ),
        one_op(
            "reverse_sequence_batch1",
            "ReverseSequence",
            [RNG.standard_normal((4, 3, 2)).astype(np.float32), np.array([1, 4, 2], np.int32)],
            batch_axis=1,
            sequence_axis=0,
        ),
    ]
    return out
