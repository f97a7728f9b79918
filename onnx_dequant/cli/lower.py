"""``onnx-dequant lower IN.onnx -o OUT.onnx [--opset N] [--target ort|portable] [--json]``."""

from __future__ import annotations

import argparse
import json
import time

from ..lowering import TARGETS, LowerOptions, lower_file
from ..opsets import MAX_OPSET, MIN_OPSET, default_opset

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
            "portable: per-tensor/per-axis DequantizeLinear and Cast/Sub/Mul/Reshape only"
        ),
    )
    p.add_argument(
        "--wrap-int32",
        action="store_true",
        help="let i32 nodes use ORT's wrapping int32 arithmetic (faster, not exact)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    options = LowerOptions(opset=args.opset, target=args.target, wrap_int32=args.wrap_int32)
    result = lower_file(args.input, args.output, options)
    report, files = result.nodes, result.files
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
                        {"node": r.node, "graph": r.graph, "strategy": r.strategy, "refused": r.refused} for r in report
                    ],
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
    return 0
