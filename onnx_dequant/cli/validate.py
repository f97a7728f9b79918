"""``onnx-dequant validate MODEL.onnx|GRAPH.json``: run a model every way we can and compare each run with
the exact reference. Exit 0 when every path agrees, 1 when one disagrees (or none could run), 2 on bad
input. The table goes to stdout (JSON with ``--json``); progress of slow steps to stderr."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import DequantizeError, shown_text
from ..lowering.options import TARGETS
from ..validation import PATHS, RUNTIMES, Policy, validate
from ..validation.inputs import DEFAULT_DIM
from ..validation.runners import LEVELS

__all__ = ["add_parser", "validate_command"]


def _nonneg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return v


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "validate",
        help="compare every execution path of a model with the exact reference, in ULPs",
        description="Run MODEL with ONNX's reference evaluator and the exact NumPy kernel (the oracle), and "
        "compare with it: ONNX Runtime on the lowered model and ONNX Runtime with the Python kernel, each at "
        "ORT's default optimization level and with optimizations off (a model without Dequantize: plain ORT). "
        "With --against, OTHER.onnx is compared instead. Exit 0: every path agrees; 1: a path disagrees or "
        "failed to run; 2: bad input.",
    )
    p.add_argument("model", metavar="MODEL", help="ONNX model (.onnx) or nGraph serialized graph (.json)")
    p.add_argument("--inputs", metavar="IN.npz", help="inputs by name (default: generated from the input types)")
    p.add_argument("--against", metavar="OTHER.onnx", help="compare this model with MODEL on the same inputs")
    p.add_argument(
        "--expected",
        metavar="OUT.npz",
        help="outputs your own run computed (nGraph, say), by output name, nGraph Result name or position "
        "(out_0...): adds an 'expected' row per output, compared with the reference under the same policy",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--opset", type=int, metavar="N", help="opset to lower to (default: the model's own)")
    p.add_argument("--target", choices=TARGETS, default="ort", help="lowering target (default ort)")
    p.add_argument(
        "--runtime",
        default="onnxruntime",
        metavar="R[,R]",
        help="runtimes to run the paths in, comma-separated: onnxruntime (default), openvino (OpenVINO's CPU "
        "with the f32 precision hint, and its default hint when that differs; needs the [openvino] extra)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed for generated inputs (default 0)")
    p.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help=f"size of a symbolic input dim (repeatable; default {DEFAULT_DIM})",
    )
    p.add_argument(
        "--real-range",
        nargs=2,
        type=float,
        default=(-1.0, 1.0),
        metavar=("LOW", "HIGH"),
        help="range of generated real inputs (default -1 1)",
    )
    p.add_argument(
        "--float-ulp",
        type=_nonneg,
        default=Policy.float_ulp,
        metavar="N",
        help=f"ULP allowed on outputs computed by other float ops (default {Policy.float_ulp})",
    )
    p.add_argument("--ulp", type=_nonneg, metavar="N", help="one ULP budget for every output (overrides the policy)")
    p.add_argument(
        "--path",
        action="append",
        choices=PATHS,
        dest="paths",
        help="run only this path (repeatable): " + ", ".join(PATHS),
    )
    p.add_argument(
        "--level",
        action="append",
        choices=LEVELS,
        dest="levels",
        help="ONNX Runtime optimization level (repeatable; default both)",
    )
    p.add_argument(
        "--ort-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="ONNX Runtime session config entry for every ORT session (repeatable), e.g. "
        "session.qdq_matmulnbits_accuracy_level=0",
    )
    p.add_argument("--no-localize", action="store_true", help="do not search for the first differing node")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=validate_command)


def validate_command(args: argparse.Namespace) -> int:
    policy = Policy(float_ulp=args.float_ulp, ulp=args.ulp)
    if args.opset is not None and args.opset < 1:
        raise DequantizeError(f"--opset must be a positive opset version, got {args.opset}")
    config = {}
    for item in args.ort_config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise DequantizeError(f"--ort-config wants KEY=VALUE, got '{item}'")
        config[key.strip()] = value.strip()
    runtimes = [r.strip() for r in args.runtime.split(",") if r.strip()]
    for r in runtimes:
        if r not in RUNTIMES:
            raise DequantizeError(f"--runtime: unknown runtime '{r}'; choose from {', '.join(RUNTIMES)}")
    report = validate(
        args.model,
        args.inputs,
        against=args.against,
        opset=args.opset,
        target=args.target,
        seed=args.seed,
        dims=args.dim,
        real_range=tuple(args.real_range),
        policy=policy,
        paths=args.paths,
        levels=args.levels or LEVELS,
        localize=not args.no_localize,
        progress=not args.quiet,
        ort_config=config,
        runtimes=runtimes,
        expected=args.expected,
    )
    report.model = shown_text(report.model)  # a file name's undecodable bytes as \xff: valid text and JSON
    if report.against is not None:
        report.against = shown_text(report.against)
    print(report.to_json() if args.json else report.to_text(), flush=True)
    return report.exit_code
