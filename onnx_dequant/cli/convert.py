"""``onnx-dequant convert GRAPH.json -o MODEL.onnx [--lower] [--opset N] [--function NAME] [--json]``, and a
whole folder: ``onnx-dequant convert DIR -o OUTDIR [--lower] [--jobs N] [--json]`` (a migration report)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

from .. import fileio
from ..errors import DequantizeError, shown_text
from ..graphs import count_dequantize, iter_nodes
from ..ngraph import DEFAULT_OPSET, convert
from ..ngraph.export import save_converted
from ..ngraph.tree import GraphResult, convert_tree

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "convert",
        help="convert an nGraph serialized JSON graph to ONNX",
        description="Convert one function of an nGraph serialized JSON graph to an ONNX model, or every *.json "
        "under a folder (keeping the tree; a migration report says what each graph became and which ops stopped "
        "the others; exit 0 when all converted, 1 when some were refused). Dequantize stays our op (domain "
        "'ngraph') unless --lower rewrites it into standard ONNX. Outputs are written whole or not at all.",
    )
    p.add_argument("graph", metavar="GRAPH.json|DIR")
    p.add_argument(
        "-o", "--output", metavar="MODEL.onnx|OUTDIR", required=True, help="the ONNX model (or folder) to write"
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="folder mode: worker processes (default: every core; 1: one by one)",
    )
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
    if os.path.isdir(args.graph):
        return run_tree(args)
    if args.jobs is not None:
        raise DequantizeError("--jobs applies to a folder of graphs only", path=args.graph)
    fileio.output_path(args.output, reads=[args.graph])  # the graph is JSON: never written over
    t0 = time.perf_counter()
    model = convert(args.graph, function=args.function, opset=args.opset)
    dequantize = count_dequantize(model)
    model = save_converted(model, args.output, lower=args.lower, path=args.graph)
    seconds = time.perf_counter() - t0
    g = model.graph
    kinds = Counter(f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in iter_nodes(model))
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    graph, output = shown_text(args.graph), shown_text(args.output)  # a file name's undecodable bytes as \xff
    if args.json:
        print(
            json.dumps(
                {
                    "graph": graph,
                    "output": output,
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
            f"converted function '{g.name}' of {graph}: {len(g.input)} input(s), {len(g.output)} output(s), "
            f"{len(g.node)} node(s), {len(g.initializer)} initializer(s) ({what}), opset {opsets.get('ai.onnx')}: "
            f"wrote {output} in {seconds * 1e3:.0f} ms"
        )
    return 0


def _progress(done: int, total: int, r: GraphResult) -> None:
    if r.status == "converted":
        what = f"converted {r.graph}: {r.ops} ops -> {r.nodes} nodes"
    else:
        op = f" ({r.op_type})" if r.op_type else ""
        what = f"refused {r.graph}{op}: {r.message.split(': ', 1)[1] if ': ' in r.message else r.message}"
    sys.stderr.write(f"[{done}/{total}] {shown_text(what)}\n")  # one write: Ctrl-C never splits the line
    sys.stderr.flush()


def run_tree(args: argparse.Namespace) -> int:
    """Folder mode: convert every graph, print the migration report; 0 all converted, 1 some refused."""
    report = convert_tree(
        args.graph,
        args.output,
        lower=args.lower,
        jobs=args.jobs,
        opset=args.opset,
        function=args.function,
        progress=_progress,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
        return 0 if report.ok else 1
    print(
        f"migration report: {len(report.results)} graph(s) under {shown_text(report.source)} -> "
        f"{shown_text(report.output)} ({report.jobs} job(s), {report.seconds:.1f} s)"
    )
    width = max(len(shown_text(r.graph)) for r in report.results)
    for r in report.results:
        graph = shown_text(r.graph)
        if r.status == "converted":
            print(f"  converted  {graph:<{width}}  {r.ops} ops -> {r.nodes} nodes: {shown_text(r.output or '')}")
        else:
            where = f"node '{r.node}'" + (f" ({r.op_type})" if r.op_type else "") + ": " if r.node else ""
            print(f"  refused    {graph:<{width}}  {shown_text(where + (r.error or ''))}")
    converted, refused = len(report.converted), len(report.refused)
    print(
        f"converted {converted}, refused {refused}; {sum(r.ops or 0 for r in report.converted)} ops -> "
        f"{sum(r.nodes or 0 for r in report.converted)} nodes in the converted graphs"
    )
    if refused:
        print("ops that stopped graphs (graphs stopped):")
        for op, n in report.stopped_by:
            print(f"  {op:<24} {n}")
    return 0 if report.ok else 1
