"""OpenVINO on ``lower(target="openvino")`` models (issue 14 target), side by side in one run.

For each axes pattern, 16M int8 -> f32 with a constant scale and zero point: OpenVINO (CPU, f32
precision hint) on our openvino-target model against OpenVINO on its own import of the equivalent
per-tensor DequantizeLinear model (same input, one scale and zero point; the form it folds into
``fma(x, s, -zp*s)``, which is not exact). Target: at most 1.25x. Beside them, for scale: the same node
lowered for ONNX Runtime (``target="ort"``, not exact in OpenVINO with a constant zero point) and the exact
but slow int32-subtraction form. Every run is zero-copy: ``infer(..., share_inputs=True,
share_outputs=True)``. ``--threads`` sets OpenVINO's ``INFERENCE_NUM_THREADS`` (default 1: the machine is
shared). Run: ``python scripts/bench_openvino.py [--quick]`` (needs ``pip install -e '.[openvino]'``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Bench, case_data  # noqa: E402

import onnx_dequant as odq  # noqa: E402

PATTERNS = {"{}": (3, ()), "{0}": (3, (0,)), "{last}": (3, (2,)), "{0,2}": (3, (0, 2)), "{1,3}": (4, (1, 3))}
OPSET = 21


def _shape(rank: int, quick: bool) -> tuple[int, ...]:
    if quick:
        return (64, 128, 128) if rank == 3 else (8, 32, 64, 64)
    return (256, 256, 256) if rank == 3 else (16, 64, 128, 128)


def _model(nodes, shape, inits, *, domain: bool) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes,
        "bench",
        [helper.make_tensor_value_info("x", TensorProto.INT8, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
        inits,
    )
    opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(odq.DOMAIN, 1)] if domain else [])
    return helper.make_model(g, opset_imports=opsets)


def ours(shape, axes, s, z) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    return _model([odq.make_node(["x", "s", "z"], ["y"], axes=axes, name="dq")], shape, inits, domain=True)


def native_per_tensor(shape) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.float32(0.05), "s"), numpy_helper.from_array(np.int8(-3), "z")]
    return _model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])], shape, inits, domain=False)


def int32_sub(shape, axes, s, z) -> onnx.ModelProto:
    bshape = [shape[i] if i in axes else 1 for i in range(len(shape))]
    inits = [
        numpy_helper.from_array(s.reshape(bshape), "s"),
        numpy_helper.from_array(z.astype(np.int32).reshape(bshape), "z"),
    ]
    nodes = [
        helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT32),
        helper.make_node("Sub", ["xi", "z"], ["d"]),
        helper.make_node("Cast", ["d"], ["df"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["df", "s"], ["y"]),
    ]
    return _model(nodes, shape, inits, domain=False)


def main() -> int:
    import openvino as ov

    bench = Bench("OpenVINO: lower(target='openvino') vs OpenVINO's own per-tensor DequantizeLinear")
    bench.parser.add_argument("--threads", type=int, default=1, help="OpenVINO CPU threads (default 1)")
    args = bench.args
    core = ov.Core()
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": args.threads}
    print(f"# OpenVINO {ov.__version__}, CPU, {args.threads} thread(s), zero-copy inputs and outputs")
    rng = np.random.default_rng(0)
    for name, (rank, axes) in PATTERNS.items():
        case = f"int8 -> f32 {name}"
        if not bench.wants(case):
            continue
        shape = _shape(rank, args.quick)
        x, s, z = case_data(rng, shape, axes)
        model = ours(shape, axes, s, z)
        models = {
            "OpenVINO's per-tensor DequantizeLinear": native_per_tensor(shape),
            "ours, target openvino (exact)": odq.lower(model, target="openvino"),
            "ours, target ort (not exact here)": odq.lower(model, target="ort"),
            "int32 subtraction (exact)": int32_sub(shape, axes, s, z),
        }
        runs = {}
        for label, m in models.items():
            compiled = core.compile_model(core.read_model(m.SerializeToString(), b""), "CPU", config)
            req = compiled.create_infer_request()
            runs[label] = lambda req=req: req.infer({0: x}, share_inputs=True, share_outputs=True)
        targets = {"ours, target openvino (exact)": ("<= 1.25x OpenVINO's per-tensor DequantizeLinear", 1.25)}
        bench.case(case, runs, "OpenVINO's per-tensor DequantizeLinear", targets)
        del runs, models
    return bench.finish()


if __name__ == "__main__":
    sys.exit(main())
