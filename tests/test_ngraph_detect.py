"""Detection and sequence ops of opset 1: bad input is a DequantizeError naming the node and the rule (nGraph's
message where it has one); what has no exact ONNX form is refused with the reason. The numbers themselves are
checked by the golden family ops_detect."""

from __future__ import annotations

import json

import numpy as np
import pytest

import onnx_dequant as odq
from onnx_dequant.ngraph.writer import FunctionWriter


def _error(w: FunctionWriter, match: str, node: str) -> None:
    with pytest.raises(odq.DequantizeError) as info:
        odq.ngraph.convert(json.loads(json.dumps([w.to_json()])))
    e = info.value
    assert e.node == node and match in str(e), str(e)


def _nms(boxes=(1, 6, 4), scores=(1, 2, 6), et="f32", extra=(), inputs=None, **attrs) -> tuple[FunctionWriter, str]:
    w = FunctionWriter(era="v0.29")
    b, s = w.parameter(et, list(boxes)), w.parameter(et, list(scores))
    if inputs is None:
        inputs = [w.constant(np.int64(2)), w.constant(np.float32(0.5)), w.constant(np.float32(0.0))]
    y = w.op("NonMaxSuppression", b, s, *inputs, *extra, version=1, **attrs)
    w.result(y)
    return w, y


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"boxes": (6, 4)}, "Expected a 3D tensor for the 'boxes' input. Got: {6,4}"),
        ({"scores": (1, 6)}, "Expected a 3D tensor for the 'scores' input. Got: {1,6}"),
        ({"scores": (2, 2, 6)}, "The first dimension of both 'boxes' and 'scores' must match. Boxes: 1; Scores: 2"),
        ({"scores": (1, 2, 5)}, "must match at the second and third dimension respectively. Boxes: 6; Scores: 5"),
        ({"boxes": (1, 6, 5), "scores": (1, 2, 6)}, "The last dimension of the 'boxes' input must be equal to 4"),
        ({"et": "f64"}, "NonMaxSuppression on f64 has no ONNX counterpart"),
        ({"box_encoding": "middle"}, '\'box_encoding\' must be "corner" or "center"'),
        ({"sort_result_descending": "yes"}, "'sort_result_descending' must be true or false"),
    ],
)
def test_nms_rules(kw, match):
    w, y = _nms(**kw)
    _error(w, match, y)


def test_nms_input_rules():
    w = FunctionWriter(era="v0.29")
    b, s = w.parameter("f32", [1, 6, 4]), w.parameter("f32", [1, 2, 6])
    inputs = [w.constant(np.array([2], np.int64)), w.constant(np.float32(0.5)), w.constant(np.float32(0.0))]
    y = w.op("NonMaxSuppression", b, s, *inputs, version=1)
    w.result(y)
    _error(w, "Expected a scalar for the 'max_output_boxes_per_class' input. Got: {1}", y)
    w = FunctionWriter(era="v0.29")
    b, s = w.parameter("f32", [1, 6, 4]), w.parameter("f32", [1, 2, 6])
    t = w.parameter("f32", [])
    y = w.op("NonMaxSuppression", b, s, w.constant(np.int64(2)), w.constant(np.float32(0.5)), t, version=1)
    w.result(y)
    _error(w, "needs its score_threshold (input 4) as a Constant", y)
    w = FunctionWriter(era="v0.29")
    b, s = w.parameter("f32", [1, 6, 4]), w.parameter("f32", [1, 2, 6])
    y = w.op("NonMaxSuppression", b, s, w.constant(np.int64(-1)), version=1)
    w.result(y)
    _error(w, "max_output_boxes_per_class must not be negative", y)
    w = FunctionWriter(era="v0.29")
    b, s = w.parameter("f32", [1, 6, 4]), w.parameter("f32", [1, 2, 6])
    y = w.op("NonMaxSuppression", b, s, w.constant(np.int64(1)), w.constant(np.float32(1.5)), version=1)
    w.result(y)
    _error(w, "iou_threshold 1.5 has no ONNX counterpart", y)
    w = FunctionWriter(era="v0.29")
    b, s = w.parameter("f32", [1, 6, 4]), w.parameter("f32", [1, 2, 6])
    y = w.op("NonMaxSuppression", b, s, version=3, output_type="f32")
    w.result(y)
    _error(w, "Output type must be i32 or i64", y)


def test_nms_runtime_max_output_has_dynamic_rows():
    """max_output_boxes_per_class computed at run time: the row count is computed too (nGraph: dynamic)."""
    import onnxruntime as ort

    w = FunctionWriter(era="v0.29")
    b, s, m = w.parameter("f32", [1, 3, 4]), w.parameter("f32", [1, 1, 3]), w.parameter("i32", [])
    w.result(w.op("NonMaxSuppression", b, s, m, w.constant(np.float32(0.5)), w.constant(np.float32(0)), version=1))
    model = odq.ngraph.convert([w.to_json()])
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_value == 0  # unknown
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    got = sess.run(None, dict(zip(names, (boxes, scores, np.array(3, np.int32)))))[0]
    assert got.tolist() == [[0, 0, 0], [0, 0, 2], [-1, -1, -1]]  # min(3 boxes, 3 * 1 class) rows


def _prior(op: str, layer, image, **attrs) -> tuple[FunctionWriter, str]:
    w = FunctionWriter(era="v0.29")
    ins = [w.constant(np.asarray(v)) if not isinstance(v, str) else w.parameter("i64", [2]) for v in (layer, image)]
    y = w.op(op, *ins, **{f"attrs.{k}": v for k, v in attrs.items()})
    w.result(y)
    return w, y


@pytest.mark.parametrize(
    "op, layer, image, attrs, match",
    [
        ("PriorBox", [2.0, 2.0], [8, 8], {"min_size": [2.0]}, "layer shape input must be an integral number"),
        ("PriorBox", [2, 2, 1], [8, 8], {"min_size": [2.0]}, "Layer shape must have rank 2"),
        ("PriorBox", [2, 2], [8], {"min_size": [2.0]}, "the image shape must hold a height and a width"),
        ("PriorBox", "runtime", [8, 8], {"min_size": [2.0]}, "needs its layer shape (input 0) known when converting"),
        ("PriorBox", [2, 2], [8, 8], {"min_size": [2.0], "variance": [0.1, 0.2]}, "must hold 0, 1 or 4 values"),
        ("PriorBox", [2, 2], [8, 8], {"min_size": [2.0], "aspect_ratio": [0.0]}, "must be positive numbers"),
        ("PriorBox", [2, 2], [8, 8], {"fixed_size": [4.0]}, "needs a density >= 1 for each fixed size"),
        ("PriorBox", [2, 2], [8, 8], {"min_size": "big"}, "'attrs.min_size' must be a list of numbers"),
        ("PriorBox", [2, 2], [8, 8], {"min_size": [2.0], "step": [1]}, "'attrs.step' must be a number"),
        ("PriorBox", [8192, 8192], [8, 8], {"min_size": [2.0]}, "is too large to write out"),
        ("PriorBoxClustered", [2, 2], [8, 8], {"widths": [1.0], "heights": []}, "Size of heights vector 0 doesn't"),
    ],
)
def test_prior_box_rules(op, layer, image, attrs, match):
    w, y = _prior(op, layer, image, **attrs)
    _error(w, match, y)


def test_prior_box_count_mismatch_is_refused():
    """aspect ratios 2 and 2.0000001 are one ratio to the kernel (closer than 1e-6) but two to nGraph's count."""
    w, y = _prior("PriorBox", [1, 1], [8, 8], min_size=[2.0], aspect_ratio=[2.0, 2.0000009], scale_all_sizes=True)
    _error(w, "nGraph's number_of_priors and its kernel disagree", y)


def _yolo(shape=(1, 14, 3, 4), et="f32", **attrs) -> tuple[FunctionWriter, str]:
    w = FunctionWriter(era="v0.29")
    a = {"coords": 4, "classes": 2, "num": 2, "do_softmax": True, "mask": [], "axis": 1, "end_axis": 3, **attrs}
    y = w.op("RegionYolo", w.parameter(et, list(shape)), **a)
    w.result(y)
    return w, y


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"shape": (1, 14, 12)}, "RegionYolo needs a non-empty 4-D input (N, C, H, W), got {1,14,12}"),
        ({"shape": (1, 15, 3, 4)}, "15 channels do not hold 2 regions of coords + classes + 1 = 7"),
        ({"do_softmax": False, "mask": [0, 1, 2]}, "14 channels do not hold 3 regions"),
        ({"coords": 1, "shape": (1, 8, 3, 4)}, "coords must be >= 2"),
        ({"et": "i32"}, "RegionYolo on i32 is not supported"),
        ({"axis": 2, "end_axis": 1}, "end_axis (1) must not come before axis (2)"),
        ({"classes": -1}, "'classes' must be an integer in [0, 1048576]"),
        ({"anchors": "x"}, "'anchors' must be a list of numbers"),
    ],
)
def test_region_yolo_rules(kw, match):
    w, y = _yolo(**kw)
    _error(w, match, y)


def _tree(shapes=((5, 2, 3), (5, 2, 3), (2,), ()), types=("i32",) * 4) -> tuple[FunctionWriter, str]:
    w = FunctionWriter(era="v0.29")
    y = w.op("GatherTree", *(w.parameter(t, list(s)) for s, t in zip(shapes, types)), version=1)
    w.result(y)
    return w, y


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"shapes": ((5, 2), (5, 2, 3), (2,), ())}, "step_ids input rank must equal to 3 (step_ids rank: 2)"),
        ({"shapes": ((5, 2, 3), (5, 2, 3), (2, 1), ())}, "max_seq_len input rank must equal to 1"),
        ({"shapes": ((5, 2, 3), (5, 2, 3), (2,), (1,))}, "end_token input rank must be scalar (end_token rank: 1)"),
        ({"shapes": ((5, 2, 3), (5, 2, 4), (2,), ())}, "step_ids shape and parent_ids shape must be the same"),
        ({"shapes": ((5, 2, 3), (5, 2, 3), (3,), ())}, "max_seq_len must have size of BATCH_SIZE"),
        ({"types": ("i64",) * 4}, "of one type, i32 or f32"),
        ({"types": ("i32", "i32", "f32", "i32")}, "of one type, i32 or f32"),
    ],
)
def test_gather_tree_rules(kw, match):
    w, y = _tree(**kw)
    _error(w, match, y)


@pytest.mark.parametrize(
    "shapes, types, attrs, match",
    [
        (((6, 3), (6, 3)), ("f32", "f32"), {}, "CTCGreedyDecoder expects 3 or more dimensions for input. Got 2"),
        (((6, 3, 4, 1), (6, 3)), ("f32", "f32"), {}, "must be [T, N, C], got {6,3,4,1}"),
        (((6, 3, 4), (6, 2)), ("f32", "f32"), {}, "sequence_mask must be [T, N] = {6,3}, got {6,2}"),
        (((6, 3, 4), (6, 3)), ("i32", "f32"), {}, "takes floating-point data and a numeric mask"),
        (((6, 3, 0), (6, 3)), ("f32", "f32"), {}, "needs at least one step, sequence and class (the blank)"),
        (((6, 3, 4), (6, 3)), ("f32", "f32"), {"ctc_merge_repeated": 3}, "'ctc_merge_repeated' must be true or"),
    ],
)
def test_ctc_greedy_decoder_rules(shapes, types, attrs, match):
    w = FunctionWriter(era="v0.29")
    y = w.op("CTCGreedyDecoder", *(w.parameter(t, list(s)) for s, t in zip(shapes, types)), **attrs)
    w.result(y)
    _error(w, match, y)


@pytest.mark.parametrize(
    "op, reason",
    [
        ("PSROIPooling", "position-sensitive ROI pooling"),
        ("DeformablePSROIPooling", "ONNX has no deformable or position-sensitive ROI pooling"),
        ("DetectionOutput", "has no +1 areas and no pre-NMS top_k"),
        ("Proposal", "computes areas without the +1"),
    ],
)
def test_refused_detection_ops_say_why(op, reason):
    w = FunctionWriter(era="v0.29")
    w.result(w.op(op, w.parameter("f32", [1, 8, 4, 4]), w.parameter("f32", [2, 5])))
    with pytest.raises(odq.DequantizeError) as info:
        odq.ngraph.convert([w.to_json()])
    assert f"{op} is refused: " in str(info.value) and reason in str(info.value)
    assert "run this step in application code" in str(info.value)
    assert dict((name, what) for name, _, what in odq.ngraph.catalog())[op].startswith("refused: ")


@pytest.mark.parametrize("threshold, inputs", [(-np.inf, 4), (np.nan, 4), (0.5, 5)])
def test_nms_threshold_below_every_score_is_no_threshold(threshold, inputs):
    """nGraph stops at a score below score_threshold: none is below -inf or NaN, so ONNX gets no threshold."""
    w = FunctionWriter(era="v0.29")
    b, s = w.parameter("f32", [1, 6, 4]), w.parameter("f32", [1, 2, 6])
    t = w.constant(np.float32(threshold))
    w.result(w.op("NonMaxSuppression", b, s, w.constant(np.int64(2)), w.constant(np.float32(0.5)), t, version=1))
    model = odq.ngraph.convert([w.to_json()])
    node = next(n for n in model.graph.node if n.op_type == "NonMaxSuppression")
    assert len(node.input) == inputs
