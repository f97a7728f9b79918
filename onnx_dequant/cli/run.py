"""``onnx-dequant run MODEL --inputs IN.npz -o OUT.npz``: run a model that keeps the op under ONNX Runtime.

Inputs are taken from the npz by name; a missing, extra or mistyped input is an error (exit 2) that
lists every problem. The outputs are written, by name, to an npz that appears whole or not at all.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import DequantizeError
from ..fileio import atomic_path

__all__ = ["add_parser", "run_command", "check_feed"]


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
    p.add_argument(
        "--no-optimizations", action="store_true", help="run with ONNX Runtime's graph optimizations off"
    )
    p.add_argument(
        "--opset", type=int, default=None, help="convert to this opset if nodes must be lowered (default: keep the model's)"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run_command)


def _load_npz(path: str) -> dict[str, np.ndarray]:
    if not Path(path).is_file():
        raise DequantizeError("no such inputs file", path=path)
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise DequantizeError("inputs must be an .npz archive (numpy.savez), not a single array", path=path)
        with data:
            return {name: data[name] for name in data.files}
    except (ValueError, zipfile.BadZipFile, EOFError) as e:
        if isinstance(e, DequantizeError):
            raise
        raise DequantizeError(f"cannot read the inputs: {e}", path=path) from None


def _numpy_type(ort_type: str) -> np.dtype | None:
    """The NumPy dtype of an ORT type string such as ``tensor(int8)``; None when there is none to check."""
    if not (ort_type.startswith("tensor(") and ort_type.endswith(")")):
        return None
    try:
        return dtypes.parse(ort_type[len("tensor(") : -1]).numpy
    except DequantizeError:
        return None


def _declared_ranks(model_path: str) -> dict[str, bool]:
    """Which graph inputs declare a shape (ONNX Runtime reports an absent shape as ``[]``, like a scalar)."""
    import onnx

    try:
        graph = onnx.load(model_path, load_external_data=False).graph
    except Exception:  # noqa: BLE001 - the session already loaded it; be lenient here
        return {}
    return {i.name: i.type.tensor_type.HasField("shape") for i in graph.input}


def check_feed(session: Any, feed: dict[str, np.ndarray], has_shape: dict[str, bool] | None = None) -> list[str]:
    """Every problem with ``feed`` for ``session``: missing, extra and mistyped inputs (empty when none).

    ``has_shape`` tells which inputs declare a shape at all (default: all of them).
    """
    problems = []
    inputs = {i.name: i for i in session.get_inputs()}
    optional = {i.name for i in session.get_overridable_initializers()}
    for name in inputs:
        if name not in feed:
            shape = inputs[name].shape if (has_shape or {}).get(name, True) else "unknown"
            problems.append(f"missing input '{name}' ({inputs[name].type}, shape {shape})")
    for name in feed:
        if name not in inputs and name not in optional:
            problems.append(f"extra input '{name}': the model has no such input (inputs: {', '.join(inputs) or 'none'})")
    for name, meta in inputs.items():
        if name not in feed:
            continue
        value = feed[name]
        want = _numpy_type(meta.type)
        if want is not None and value.dtype != want:
            problems.append(f"input '{name}' has dtype {value.dtype}, the model wants {meta.type}")
        shape = meta.shape
        if isinstance(shape, list) and (has_shape or {}).get(name, True):
            if len(shape) != value.ndim:
                problems.append(f"input '{name}' has shape {value.shape}, the model wants rank {len(shape)} ({shape})")
            elif any(isinstance(d, int) and d != n for d, n in zip(shape, value.shape)):
                problems.append(f"input '{name}' has shape {value.shape}, the model wants {shape}")
    return problems


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``numpy.savez`` by hand: any output name is a valid key (savez's own keywords included)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, value in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.asanyarray(value), allow_pickle=False)


def run_command(args: argparse.Namespace) -> int:
    from ..ort import session as make_session

    feed = _load_npz(args.inputs)
    options = None
    if args.no_optimizations:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    t0 = time.perf_counter()
    sess = make_session(args.model, sess_options=options, opset=args.opset)
    problems = check_feed(sess, feed, _declared_ranks(args.model))
    if problems:
        raise DequantizeError("bad inputs:\n  " + "\n  ".join(problems), path=args.inputs)
    t1 = time.perf_counter()
    names = [o.name for o in sess.get_outputs()]
    try:
        values = sess.run(names, feed)
    except DequantizeError:
        raise
    except (RuntimeError, ValueError) as e:  # ONNX Runtime's own errors (a bad shape deeper in the graph)
        raise DequantizeError(f"ONNX Runtime failed: {e}", path=str(args.model)) from None
    t2 = time.perf_counter()
    outputs = {}
    for name, value in zip(names, values):
        if not isinstance(value, np.ndarray):
            raise DequantizeError(f"output '{name}' is a {type(value).__name__}, not a tensor: cannot store it in npz")
        outputs[name] = value
    with atomic_path(args.output) as tmp:
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
        print(f"{args.model}: ran in {t2 - t1:.3f} s (session {t1 - t0:.3f} s); wrote {len(outputs)} output(s) to {args.output}")
        for n, v in outputs.items():
            print(f"  {n}: {v.dtype} {tuple(v.shape)}")
        print(f"  Dequantize nodes run by the Python kernel: {len(sess.kernel_nodes)}")
        for n, why in sess.lowered.items():
            print(f"  lowered to standard ONNX: {n} ({why})")
    return 0
