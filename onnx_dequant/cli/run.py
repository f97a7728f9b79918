"""``onnx-dequant run MODEL --inputs IN.npz -o OUT.npz``: run a model that keeps the op under ONNX Runtime.

Inputs are taken from the npz by name and checked against the model's declared inputs
(``validation.inputs.check_feeds``): a missing, extra or mistyped input is an error, exit 2. The outputs
are written, by name, to an npz that appears whole or not at all. bf16 and 4-bit inputs and outputs, which
ONNX Runtime's Python API cannot exchange with NumPy, are carried through exact Casts
(``validation.carriers``), as ``validate`` carries them; bf16 outputs are stored as ml_dtypes arrays
(``|V2`` in the npz: their bits).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .. import fileio, modelio
from ..errors import DequantizeError
from ..validation.carriers import with_carriers
from ..validation.inputs import check_feeds, graph_inputs, load_npz

__all__ = ["add_parser", "run_command"]


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a model that keeps Dequantize under ONNX Runtime (Python kernel)",
        description="Run MODEL under ONNX Runtime, its Dequantize nodes computed by the exact NumPy "
        "reference as an onnxruntime-extensions Python op (nodes it cannot carry are lowered).",
    )
    p.add_argument("model", metavar="MODEL", help="ONNX model (.onnx)")
    p.add_argument("--inputs", metavar="IN.npz", required=True, help="the model's inputs, by name")
    p.add_argument("-o", "--output", metavar="OUT.npz", required=True, help="where to write the outputs, by name")
    p.add_argument("--no-optimizations", action="store_true", help="run with ONNX Runtime's graph optimizations off")
    p.add_argument(
        "--opset",
        type=int,
        default=None,
        help="convert to this opset if nodes must be lowered (default: keep the model's)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run_command)


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``numpy.savez`` by hand: any output name is a valid key (savez's own keywords included)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, value in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.asanyarray(value), allow_pickle=False)


def run_command(args: argparse.Namespace) -> int:
    from ..ort import session as make_session

    path = str(args.model)
    folder = os.path.dirname(os.path.abspath(path))
    reads = [path, str(args.inputs), *modelio.external_files(modelio.load(path, load_external=False), folder)]
    fileio.output_path(args.output, reads=reads)  # refused before anything runs
    model = modelio.load(path)
    feed = check_feeds(graph_inputs(model), load_npz(args.inputs), source=str(args.inputs))
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # ORT's own error log would repeat the one line the command prints
    if args.no_optimizations:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    t0 = time.perf_counter()
    carried, in_map, out_map = with_carriers(model, {})  # bf16 and 4-bit tensors through exact Casts
    feed = {in_map[n][0] if n in in_map else n: v.astype(in_map[n][1]) if n in in_map else v for n, v in feed.items()}
    try:
        sess = make_session(carried, sess_options=options, opset=args.opset)
        t1 = time.perf_counter()
        names = [o.name for o in sess.get_outputs()]
        values = sess.run(names, feed)
    except DequantizeError as e:
        raise e.at(path=path) from None
    except MemoryError:
        raise
    except Exception as e:  # ONNX Runtime's own errors (a bad shape deeper in the graph; Fail, InvalidArgument)
        raise DequantizeError(f"ONNX Runtime failed: {type(e).__name__}: {e}", path=path) from None
    t2 = time.perf_counter()
    outputs = {}
    for name, value in zip(names, values):
        if not isinstance(value, np.ndarray):
            raise DequantizeError(f"output '{name}' is a {type(value).__name__}, not a tensor: cannot store it in npz")
        name, carrier = out_map.get(name, (name, None))
        outputs[name] = value if carrier is None else value.astype(carrier)
    with fileio.atomic_path(args.output, reads=reads) as tmp:
        _write_npz(tmp, outputs)

    result = {
        "model": str(args.model),
        "output_file": str(args.output),
        "outputs": {n: {"dtype": str(v.dtype), "shape": list(v.shape)} for n, v in outputs.items()},
        "kernel_nodes": list(sess.kernel_nodes),
        "lowered_nodes": dict(sess.lowered),
        "session_s": round(t1 - t0, 6),
        "run_s": round(t2 - t1, 6),
    }
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        print(
            f"{args.model}: ran in {t2 - t1:.3f} s (session {t1 - t0:.3f} s); "
            f"wrote {len(outputs)} output(s) to {args.output}"
        )
        for n, v in outputs.items():
            print(f"  {n}: {v.dtype} {tuple(v.shape)}")
        print(f"  Dequantize nodes run by the Python kernel: {len(sess.kernel_nodes)}")
        for n, why in sess.lowered.items():
            print(f"  lowered to standard ONNX: {n} ({why})")
    return 0
