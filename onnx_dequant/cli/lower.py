"""``onnx-dequant lower IN.onnx -o OUT.onnx [--opset N] [--target T] [--weights quantized|float] [--json]``."""

from __future__ import annotations

import argparse
import json
import time

from ..lowering import TARGETS, LowerOptions, lower_file
from ..lowering.options import WEIGHTS
from ..opsets import MAX_OPSET, MIN_OPSET, default_opset
from ..validation.progress import Progress

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "lower",
        help="rewrite every Dequantize node into standard ONNX",
        description="Rewrite every Dequantize node into standard ONNX, in the fastest exact form for the "
        "target. External data is streamed, not loaded, and written again beside the output.",
    )
    p.add_argument("input", metavar="IN.onnx")
    p.add_argument("-o", "--output", metavar="OUT.onnx", required=True, help="output model (may equal the input)")
    p.add_argument(
        "--opset",
        type=int,
        default=None,
        help=f"convert to this default-domain opset ({MIN_OPSET}-{MAX_OPSET}); default: keep the model's",
    )
    p.add_argument(
        "--target",
        choices=TARGETS,
        default="ort",
        help=(
            "ort (default): fastest forms for ONNX Runtime; "
            "portable: per-tensor/per-axis DequantizeLinear and Cast/Sub/Mul/Reshape only; "
            "openvino: the portable forms OpenVINO computes exactly (a constant zero point and scale get "
            "Cast/Sub/Min/Mul, which it does not fold into an inexact fma)"
        ),
    )
    p.add_argument(
        "--wrap-int32",
        action="store_true",
        help="let i32 nodes use ORT's wrapping int32 arithmetic (faster, not exact)",
    )
    p.add_argument(
        "--weights",
        choices=WEIGHTS,
        default="quantized",
        help="quantized (default): keep a constant weight's DequantizeLinear, which ONNX Runtime fuses with its "
        "MatMul/Conv (fast; not exact at ORT's default MatMulNBits accuracy level); float: fold it into a float "
        "initializer with the exact reference (exact in every runtime, 4x the bytes of an 8-bit weight)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr (shown after 2 s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    options = LowerOptions(opset=args.opset, target=args.target, wrap_int32=args.wrap_int32, weights=args.weights)
    with Progress(not args.quiet, prefix="lower").step(f"lowering {args.input} into {args.output}"):
        result = lower_file(args.input, args.output, options)
    report, files = result.nodes, result.files
    kept = sum(1 for r in report if r.weight and r.strategy != "fold-weight")
    notes = list(result.changes)
    if kept and args.weights == "float":
        notes.append(f"{kept} constant weight(s) kept quantized: see why fold-weight refused each")
    elif kept:
        notes.append(
            f"{kept} constant weight(s) kept quantized: ONNX Runtime fuses them with their MatMul/Conv (fast), "
            "and at its default session.qdq_matmulnbits_accuracy_level the fused MatMulNBits quantizes the "
            "activations to int8 (not exact); --weights float folds them to exact float initializers (4x bytes)"
        )
    kept_off = [r for r in report if r.barrier]
    if kept_off:
        notes.append(
            f"{len(kept_off)} DequantizeLinear(s) followed by a Flatten/Reshape pair that keeps ONNX Runtime's QDQ "
            f"passes off them (e.g. {kept_off[0].node}, without it: {kept_off[0].barrier})"
        )
    gathered = [r for r in report if r.gather_moved]
    if gathered:
        notes.append(
            f"{len(gathered)} Gather(s) or Slice(s) moved before the Dequantize they read, so that only the elements "
            f"they take are dequantized (e.g. {gathered[0].gather_moved})"
        )
    shared = [r for r in report if r.runs_saved]
    if shared:
        notes.append(
            f"{len(shared)} DequantizeLinear(s) read by several nodes run once: ONNX Runtime runs one copy per "
            f"reader ({sum(r.runs_saved for r in shared)} run(s) saved by a Flatten/Reshape pair after each)"
        )
    seconds = time.perf_counter() - t0
    counts: dict[str, int] = {}
    for r in report:
        counts[r.strategy] = counts.get(r.strategy, 0) + 1
    opset = default_opset(result.model.opset_import)
    if args.json:
        print(
            json.dumps(
                {
                    "input": args.input,
                    "output": args.output,
                    "files": files,
                    "opset": opset,
                    "target": args.target,
                    "lowered": len(report),
                    "strategies": counts,
                    "nodes": [
                        {
                            "node": r.node,
                            "graph": r.graph,
                            "strategy": r.strategy,
                            "refused": r.refused,
                            "dropped_axes": list(r.dropped_axes),
                            "adopted_axes": list(r.adopted_axes),
                            "runs_saved": r.runs_saved,
                            "barrier": r.barrier,
                            "gather_moved": r.gather_moved,
                        }
                        for r in report
                    ],
                    "weights": args.weights,
                    "changes": result.changes,
                    "notes": notes,
                    "seconds": round(seconds, 3),
                },
                indent=1,
            )
        )
    else:
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "nothing to lower"
        print(
            f"lowered {len(report)} node(s) ({summary}) at opset {opset} for {args.target}: "
            f"wrote {', '.join(files)} in {seconds:.2f} s"
        )
        for n in notes:
            print(f"  note: {n}")
    return 0
