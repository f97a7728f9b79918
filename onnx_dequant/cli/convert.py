"""``onnx-dequant convert GRAPH.json -o MODEL.onnx [--lower] [--opset N] [--function NAME] [--json]``."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import onnx

from .. import modelio
from ..errors import DequantizeError
from ..graphs import count_dequantize, iter_nodes
from ..ngraph import DEFAULT_OPSET, convert

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "convert",
        help="convert an nGraph serialized JSON graph to ONNX",
        description="Convert one function of an nGraph serialized JSON graph to an ONNX model. Dequantize "
        "stays our op (domain 'ngraph') unless --lower rewrites it into standard ONNX. The output is "
        "written whole or not at all.",
    )
    p.add_argument("graph", metavar="GRAPH.json")
    p.add_argument("-o", "--output", metavar="MODEL.onnx", required=True, help="the ONNX model to write")
    p.add_argument(
        "--lower", action="store_true", help="rewrite Dequantize nodes into standard ONNX (onnx_dequant.lower)"
    )
    p.add_argument(
        "--opset",
        type=int,
        default=DEFAULT_OPSET,
        help=f"standard-domain opset (13 and later; default {DEFAULT_OPSET})",
    )
    p.add_argument(
        "--function", metavar="NAME", default=None, help="the function to convert (default: the last in the file)"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Convert, check, write atomically, report; exit status 0 (bad input raises DequantizeError: 2)."""
    t0 = time.perf_counter()
    model = convert(args.graph, function=args.function, opset=args.opset)
    dequantize = count_dequantize(model)
    if args.lower:
        from ..lowering import lower  # imported here: the importer does not need the lowering pass

        try:
            model = lower(model)
        except DequantizeError as e:
            raise e.at(path=args.graph) from None
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise DequantizeError(f"the converted model fails the ONNX checker: {e}", path=args.graph) from None
    modelio.save(model, args.output)
    seconds = time.perf_counter() - t0
    g = model.graph
    kinds = Counter(f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in iter_nodes(model))
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    if args.json:
        print(
            json.dumps(
                {
                    "graph": args.graph,
                    "output": args.output,
                    "function": g.name,
                    "opset_import": opsets,
                    "lowered": bool(args.lower),
                    "inputs": [i.name for i in g.input],
                    "outputs": [o.name for o in g.output],
                    "initializers": len(g.initializer),
                    "nodes": len(g.node),
                    "node_types": dict(sorted(kinds.items())),
                    "dequantize_nodes": dequantize,
                    "seconds": round(seconds, 3),
                },
                indent=1,
            )
        )
    else:
        what = (
            f"{dequantize} Dequantize lowered" if args.lower else f"{dequantize} Dequantize kept as ngraph.Dequantize"
        )
        print(
            f"converted function '{g.name}' of {args.graph}: {len(g.input)} input(s), {len(g.output)} output(s), "
            f"{len(g.node)} node(s), {len(g.initializer)} initializer(s) ({what}), opset {opsets.get('ai.onnx')}: "
            f"wrote {args.output} in {seconds * 1e3:.0f} ms"
        )
    return 0
