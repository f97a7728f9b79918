#!/usr/bin/env python3
"""Validation cost: ``odq.validate`` on a model with 100M dequantized elements against the runs it wraps.

Targets (issue 6):
- time: validating (reference + ORT on the lowered model and ORT with the Python kernel, each at the
  default optimization level and with optimizations off, plus the comparisons) at most **3x** the time of
  one ORT run of the lowered model plus one reference run;
- memory: peak resident memory of the data at most **1.5x** what holding the inputs and the outputs
  takes. Any comparison must hold the inputs, the reference's outputs and one path's outputs at once, so
  that sum is the baseline the target is checked against; the ratio to inputs plus ONE set of outputs is
  printed too.

Model: ``x`` int8 (100, 1000, 1000) graph input -> Dequantize, axes {0, 2}, f32 scale and int8 zero
point (100, 1000) -> ``y`` f32. ``--quick`` uses 10M elements. Memory is measured in a fresh
subprocess per case (VmHWM after resetting it, minus the resident size before the inputs existed;
tracemalloc's peak as a second figure, NumPy allocations only).

    python scripts/bench_validate.py [--quick] [--only weights|lowered] [--no-memory] [--repeat N] [--json FILE]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import onnx
from benchlib import Bench, Row
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.validation.runners import OrtRunner, ReferenceRunner

FULL = (100, 1000, 1000)
QUICK = (10, 1000, 1000)


def build(shape: tuple[int, ...], *, weights: bool = False) -> onnx.ModelProto:
    """x int8 ``shape`` -> Dequantize axes {0, 2} -> y f32; with ``weights`` x is an initializer (the
    usual case for a shipped model: dequantized weights), else a graph input."""
    rng = np.random.default_rng(0)
    pshape = (shape[0], shape[2])
    s = rng.uniform(0.01, 1.0, pshape).astype(np.float32)
    zp = rng.integers(-128, 128, pshape).astype(np.int8)
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(zp, "zp")]
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.INT8, shape)]
    if weights:
        inits.append(numpy_helper.from_array(inputs(shape)["x"], "x"))
        graph_inputs = []
    g = helper.make_graph(
        [odq.make_node(["x", "s", "zp"], ["y"], axes=(0, 2), name="dq")],
        "bench_validate",
        graph_inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])


def inputs(shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    n = int(np.prod(shape))
    return {"x": np.frombuffer(np.random.default_rng(1).bytes(n), np.int8).reshape(shape).copy()}


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    return float("nan")


def memory_child(case: str, quick: bool) -> None:
    """Runs in a subprocess: one case, prints its memory figures as JSON."""
    shape = QUICK if quick else FULL
    odq.validate(build((shape[0], 2, shape[2])))  # load every library first: not data
    weights = case.endswith("weights")
    base = _status_mb("VmRSS")
    model = build(shape, weights=weights)  # with weights, the model holds the input data
    feeds = {} if weights else inputs(shape)
    lowered = odq.lower(model) if case == "ort" else None
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current resident size
        reset = True
    except OSError:
        reset = False
    tracemalloc.start()
    if case.startswith("validate"):
        report = odq.validate(model, feeds)
        assert report.ok, report.to_text()
    elif case == "ort":
        OrtRunner(lowered, "default").run(feeds)
    elif case == "reference":
        ReferenceRunner(model).run(feeds)
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak = _status_mb("VmHWM")
    in_mb = int(np.prod(shape)) / 2**20  # the int8 data, a graph input or the model's initializer
    out_mb = int(np.prod(shape)) * 4 / 2**20
    print(
        json.dumps(
            {
                "case": case,
                "peak_data_mb": peak - base,
                "traced_mb": traced / 2**20,
                "in_mb": in_mb,
                "out_mb": out_mb,
                "hwm_reset": reset,
            }
        )
    )


def memory(bench: Bench, cases: tuple[str, ...] | None = None) -> None:
    print("\n## peak memory (fresh subprocess per case; data = peak RSS - RSS before the inputs)")
    print(f"{'case':<16} {'data peak':>10} {'tracemalloc':>12} {'/ (in+ref+out)':>15} {'/ (in+out)':>11}  target")
    for case in cases or ("ort", "reference", "validate", "validate-weights"):
        args = [sys.executable, __file__, "--memory-child", case] + (["--quick"] if bench.args.quick else [])
        done = subprocess.run(args, capture_output=True, text=True, timeout=900)
        if done.returncode:
            print(f"{case}: failed\n{done.stderr[-2000:]}")
            continue
        d = json.loads(done.stdout.strip().splitlines()[-1])
        both = d["in_mb"] + 2 * d["out_mb"]
        one = d["in_mb"] + d["out_mb"]
        r2, r1 = d["peak_data_mb"] / both, d["peak_data_mb"] / one
        target = ""
        if case.startswith("validate"):
            target = f"<= 1.5x in+ref+out {'ok' if r2 <= 1.5 else 'MISSED'}; "
            target += f"<= 1.5x in+out {'ok' if r1 <= 1.5 else 'MISSED'}"
        print(f"{case:<16} {d['peak_data_mb']:>8.0f}MB {d['traced_mb']:>10.0f}MB {r2:>14.2f}x {r1:>10.2f}x  {target}")
        ok = (r2 <= 1.5) if case.startswith("validate") else None
        bench.rows.append(
            Row(
                f"memory {case}",
                case,
                0.0,
                r2,
                "in+ref+out",
                "<= 1.5x" if ok is not None else "",
                ok,
                {**d, "ratio_in_out": r1},
            )
        )


def breakdown(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """One more validation, with the time of each step."""
    t0 = time.perf_counter()
    report = odq.validate(model, feeds)
    total = time.perf_counter() - t0
    parts = ", ".join(f"{p.label} {p.seconds * 1e3:.0f} ms" for p in report.paths)
    rest = total - report.reference_seconds - sum(p.seconds for p in report.paths)
    print(
        f"one validate: {total * 1e3:.0f} ms = reference {report.reference_seconds * 1e3:.0f} ms "
        f"({report.reference_runs} runs), {parts}, rest {rest * 1e3:.0f} ms"
    )


def main() -> int:
    if "--memory-child" in sys.argv:
        i = sys.argv.index("--memory-child")
        memory_child(sys.argv[i + 1], "--quick" in sys.argv)
        return 0
    bench = Bench("validation: odq.validate against one ORT run plus one reference run", default_repeat=9)
    bench.parser.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    shape = QUICK if bench.args.quick else FULL
    n = int(np.prod(shape))
    input_case = f"validate {n // 10**6}M elements (lowered + kernel, 2 levels each)"
    weights_case = f"validate {n // 10**6}M elements of weights (x an initializer; sessions load it)"
    # --only (benchlib): "weights" runs the weights case alone, "lowered" the graph-input case alone
    only = "weights" if not bench.wants(input_case) else "input" if not bench.wants(weights_case) else None
    model = build(shape)
    t0 = time.perf_counter()
    lowered = odq.lower(model)
    lower_s = time.perf_counter() - t0
    feeds = inputs(shape)
    print(
        f"model: x int8 {shape} ({n / 1e6:.0f}M elements) -> Dequantize axes {{0,2}} -> y f32; "
        f"lowering took {lower_s * 1e3:.0f} ms"
    )

    def ort_run() -> None:
        OrtRunner(lowered, "default").run(feeds)

    def reference_run() -> None:
        ReferenceRunner(model).run(feeds)

    def ort_plus_reference() -> None:
        ort_run()
        reference_run()

    def validate() -> None:
        report = odq.validate(model, feeds)
        assert report.ok, report.to_text()

    def validate_held() -> None:
        from onnx_dequant.validation import core

        saved = core.RELEASE_BYTES
        core.RELEASE_BYTES = 1 << 62  # never let the reference's outputs go: one reference run, more memory
        try:
            report = odq.validate(model, feeds)
        finally:
            core.RELEASE_BYTES = saved
        assert report.ok and report.reference_runs == 1, report.to_text()

    def validate_generated() -> None:
        report = odq.validate(model)
        assert report.ok, report.to_text()

    if only == "weights":
        return _weights(bench, shape, weights_case)
    bench.case(
        input_case,
        {
            "ORT run + reference run": ort_plus_reference,
            "ORT run (lowered, default level, new session)": ort_run,
            "reference run (ReferenceEvaluator)": reference_run,
            "odq.validate(model, inputs)": validate,
            "odq.validate, reference held (no reruns)": validate_held,
            "odq.validate(model) (inputs generated)": validate_generated,
        },
        baseline="ORT run + reference run",
        targets={"odq.validate(model, inputs)": ("<= 3x ORT run + reference run", 3.0)},
    )
    breakdown(model, feeds)
    if only == "input":
        if not bench.args.no_memory:
            memory(bench, ("ort", "reference", "validate"))
        return bench.finish()
    model = lowered = feeds = None  # free before the memory cases run
    return _weights(bench, shape, weights_case)


def _weights(bench: Bench, shape: tuple[int, ...], name: str) -> int:
    """The case with x an initializer (weights), then the memory figures."""
    weights_model = build(shape, weights=True)
    weights_lowered = odq.lower(weights_model)

    def weights_ort_plus_reference() -> None:
        OrtRunner(weights_lowered, "default").run({})
        ReferenceRunner(weights_model).run({})

    def weights_validate() -> None:
        report = odq.validate(weights_model)
        assert report.ok, report.to_text()

    bench.case(
        name,
        {"ORT run + reference run": weights_ort_plus_reference, "odq.validate(model)": weights_validate},
        baseline="ORT run + reference run",
        targets={"odq.validate(model)": ("<= 3x ORT run + reference run", 3.0)},
    )
    breakdown(weights_model, {})
    if not bench.args.no_memory:
        memory(bench, ("validate-weights",) if bench.args.only else None)
    return bench.finish()


if __name__ == "__main__":
    sys.exit(main())
