"""Which lowered forms OpenVINO computes bit-identically to the reference (issue 14), as a table.

For every input type (i8, u8, i16, u16, i32), output type (f32, f16, bf16, f64) and zero point (a
constant, fed as a graph input, none), three cases (axes {}, {1}, {0,2}; shape (4, 6, 8); scales of varied
exponents; some elements equal to the zero point, where OpenVINO's fma form is furthest off) go through
``onnx_dequant.validate`` for each target: ONNX Runtime (default level) on ``target="ort"``, and OpenVINO
(CPU, f32 precision hint) on ``target="ort"``, ``"portable"`` and ``"openvino"``. A cell counts the cases
bit-identical to the reference (0 ULP); "refused" means the lowering refuses the target (no exact form
there). ONNX Runtime itself rounds twice for 16-bit inputs to f16 and i32 inputs to f16/bf16 (at most 1 ULP).
Run: ``python scripts/openvino_exactness.py`` (needs ``pip install -e '.[openvino]'``).
"""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort
import openvino as ov
from onnx import helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import dtypes

TYPES = ("i8", "u8", "i16", "u16", "i32")
OUTS = ("f32", "f16", "bf16", "f64")
ZERO_POINTS = ("constant", "fed", "none")
AXES = ((), (1,), (0, 2))
SHAPE = (4, 6, 8)
TARGETS = ("ort", "portable", "openvino")
SEEDS = (0,)


def case(qt: str, rt: str, axes: tuple[int, ...], zp: str, seed: int):
    rng = np.random.default_rng(seed)
    q, r = dtypes.parse(qt), dtypes.parse(rt)
    x = rng.integers(int(q.min), int(q.max) + 1, SHAPE).astype(q.numpy)
    ss = tuple(SHAPE[a] for a in axes)
    s = np.asarray(rng.standard_normal(ss) * np.exp2(rng.integers(-8, 8, ss))).astype(r.numpy)
    z = None if zp == "none" else np.asarray(rng.integers(int(q.min), int(q.max) + 1, ss)).astype(q.numpy)
    if z is not None:
        x.reshape(-1)[:6] = z.reshape(-1)[0]
    inputs = [helper.make_tensor_value_info("x", q.onnx, list(SHAPE))]
    inits = [numpy_helper.from_array(s, "s")]
    feeds = {"x": x}
    names = ["x", "s"]
    if z is not None:
        names.append("z")
        if zp == "fed":
            inputs.append(helper.make_tensor_value_info("z", q.onnx, list(ss)))
            feeds["z"] = z
        else:
            inits.append(numpy_helper.from_array(z, "z"))
    g = helper.make_graph(
        [odq.make_node(names, ["y"], axes=axes, name="dq")],
        "g",
        inputs,
        [helper.make_tensor_value_info("y", r.onnx, list(SHAPE))],
        inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)])
    return model, feeds


def exact(report: odq.Report, label: str) -> bool:
    """Whether the path ``label`` ran and matched the reference bit for bit."""
    found = [p for p in report.paths if p.label == label]
    return bool(found) and found[0].status == "pass" and all(o.max_ulp == 0 for o in found[0].outputs)


def main() -> int:
    print(f"# OpenVINO {ov.__version__} (CPU, INFERENCE_PRECISION_HINT f32), onnxruntime {ort.__version__}")
    print(f"# cases per row: {len(AXES) * len(SEEDS)} (axes {{}}, {{1}}, {{0,2}}), shape {SHAPE}")
    header = ["input -> output", "zero point", "ORT on target ort"] + [f"OpenVINO on target {t}" for t in TARGETS]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    options = {"paths": ["lowered"], "levels": ["default"], "localize": False, "policy": odq.Policy(rounded_ulp=0)}
    for qt in TYPES:
        for rt in OUTS:
            for zp in ZERO_POINTS:
                counts = {"ORT": 0, **{t: 0 for t in TARGETS}}
                refused: set[str] = set()
                total = 0
                for axes in AXES:
                    for seed in SEEDS:
                        model, feeds = case(qt, rt, axes, zp, seed)
                        total += 1
                        for target in TARGETS:
                            try:
                                report = odq.validate(
                                    model, feeds, target=target, runtimes=("onnxruntime", "openvino"), **options
                                )
                            except odq.DequantizeError:
                                refused.add(target)
                                continue
                            if target == "ort":
                                counts["ORT"] += exact(report, "lowered/default")
                            counts[target] += exact(report, "lowered/openvino-f32")
                cells = [f"{counts['ORT']}/{total}"]
                cells += ["refused" if t in refused else f"{counts[t]}/{total}" for t in TARGETS]
                print(f"| {qt} -> {rt} | {zp} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
