#!/usr/bin/env python3
"""Write the golden suite: run every case of scripts/golden/ through real nGraph 0.26.0 (INTERPRETER).

    python scripts/make_golden.py [--family F ...] [--runner PATH] [--out tests/golden]

The runner is ``--runner``, else ``$NGRAPH_RUN``, else ``/work/shared/ngraph-oracle/ngraph-run``. Each case
becomes ``OUT/<family>/<name>.json`` (the graph, as nGraph reads it) and ``<name>.npz``: ``in.<parameter>``,
``out.<result>`` and ``meta`` (a JSON string: source, ulp, why, note, parameter and result order, element types
NumPy cannot hold). A family's folder is rewritten whole (its old files removed); other families are not touched.
The output is deterministic: the same cases and the same nGraph give the same bytes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from golden import GoldenCase, families, load_family  # noqa: E402

DEFAULT_RUNNER = "/work/shared/ngraph-oracle/ngraph-run"
SOURCE_NGRAPH = "nGraph 0.26.0 INTERPRETER"
SOURCE_DEFINITION = "definition"


class RunnerError(RuntimeError):
    pass


def runner_path(given: str | None) -> str:
    return given or os.environ.get("NGRAPH_RUN") or DEFAULT_RUNNER


def _wire(x: np.ndarray) -> tuple[np.ndarray, str | None]:
    """An array as stored (and as the runner takes it): bf16 as its uint16 bits, with its nGraph type."""
    x = np.asarray(x)
    if x.dtype == ml_dtypes.bfloat16:
        return np.array(x, order="C").view(np.uint16), "bf16"
    return np.array(x, order="C"), None  # (ascontiguousarray makes 0-d arrays 1-d)


def _check(args: list[str]) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RunnerError(proc.stderr.strip() or f"runner exited with {proc.returncode}")
    return proc.stdout


def run_ngraph(runner: str, graph_path: Path, inputs: dict[str, np.ndarray], function: dict) -> dict[str, np.ndarray]:
    """nGraph's outputs, keyed by Result name (the op's name, whatever its friendly name), in result order."""
    with tempfile.TemporaryDirectory(prefix="golden_") as tmp:
        args = [runner, str(graph_path), "--function", function["name"], "-o", tmp]
        for k, x in enumerate(inputs.values()):  # in parameter order (the runner names them by friendly name)
            p = os.path.join(tmp, f"in_{k}.npy")
            np.save(p, _wire(x)[0])
            args += ["-i", p]
        summary = json.loads(_check(args))
        described = json.loads(_check([runner, str(graph_path), "--function", function["name"], "--describe"]))
        results = summary["results"]
        if len(results) != len(function["result"]):
            raise RunnerError(f"{len(results)} results from nGraph, {len(function['result'])} in the graph")
        out = {}
        for name, r, d in zip(function["result"], results, described["results"]):
            y = np.load(r["file"])
            if d["shape"] is not None and None not in d["shape"]:  # the runner writes 0-d results with shape (1,)
                y = y.reshape(d["shape"])
            if r["element_type"] == "bf16":
                y = y.view(ml_dtypes.bfloat16)
            out[name] = y
        return out


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz whose bytes depend only on the arrays (fixed timestamps, insertion order)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for key, arr in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, member.getvalue())
    return buf.getvalue()


def _function(graph: list) -> dict:
    return graph[-1]


def build_case(case: GoldenCase, runner: str, folder: Path) -> tuple[str, str]:
    """Write one case's files into ``folder``; returns (graph text, npz name)."""
    fn = _function(case.graph)
    params = list(fn["parameters"])
    if sorted(params) != sorted(case.inputs):
        raise RunnerError(f"{case.name}: inputs {sorted(case.inputs)} do not match parameters {params}")
    inputs = {p: np.asarray(case.inputs[p]) for p in params}
    text = json.dumps(case.graph, sort_keys=True, indent=1) + "\n"
    gpath = folder / f"{case.name}.json"
    gpath.write_text(text)
    if case.expected is None:
        outputs = run_ngraph(runner, gpath, inputs, fn)
        source = SOURCE_NGRAPH
    else:
        outputs = {r: np.asarray(case.expected[r]) for r in fn["result"]}
        source = SOURCE_DEFINITION
    arrays: dict[str, np.ndarray] = {}
    types: dict[str, str] = {}
    for prefix, group in (("in.", inputs), ("out.", outputs)):
        for name, x in group.items():
            arr, et = _wire(x)
            arrays[prefix + name] = arr
            if et:
                types[prefix + name] = et
    meta = {
        "source": source,
        "ulp": case.ulp,
        "why": case.why,
        "note": case.note,
        "parameters": params,
        "results": list(outputs),
        "types": types,
    }
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    (folder / f"{case.name}.npz").write_bytes(_npz_bytes(arrays))
    return text, f"{case.name}.npz"


def make_family(name: str, runner: str, out: Path, keep_going: bool = False) -> int:
    cases = load_family(name)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out))
    tmp.chmod(0o755)
    written = 0
    try:
        for case in cases:
            try:
                build_case(case, runner, tmp)
                written += 1
            except RunnerError as e:
                if not keep_going:
                    raise RunnerError(f"{name}/{case.name}: {e}") from None
                print(f"{name}/{case.name}: left out: {str(e).splitlines()[0][:200]}", file=sys.stderr)
                for suffix in (".json", ".npz"):
                    (tmp / f"{case.name}{suffix}").unlink(missing_ok=True)
        final = out / name
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return written


def summary(out: Path) -> str:
    """What the committed suite covers: cases per source, bit-identical or within a stated budget, and the
    importer's ops that appear in some case (needs no runner)."""
    import onnx_dequant as odq

    cases = sorted(out.glob("*/*.json"))
    ops: set[str] = set()
    sources: dict[str, int] = {}
    exact = 0
    for p in cases:
        ops.update(op["op"] for op in json.loads(p.read_text())[-1]["ops"])
        with np.load(p.with_suffix(".npz"), allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
        sources[meta["source"]] = sources.get(meta["source"], 0) + 1
        exact += meta["ulp"] in (None, 0)
    supported = set(odq.ngraph.supported_ops())
    missing = sorted(supported - ops)
    lines = [
        f"{len(cases)} cases in {len({p.parent.name for p in cases})} families: "
        + ", ".join(f"{n} from {k}" for k, n in sorted(sources.items())),
        f"{exact} bit-identical, {len(cases) - exact} within a stated ULP budget",
        f"{len(supported & ops)} of the importer's {len(supported)} op types appear in a case"
        + (f" (not: {', '.join(missing)})" if missing else ""),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", action="append", help="only these families (repeatable; default: all)")
    ap.add_argument("--runner", help="the nGraph runner (default: $NGRAPH_RUN, else the oracle's ngraph-run)")
    ap.add_argument("--keep-going", action="store_true", help="leave out cases nGraph rejects (listed on stderr)")
    ap.add_argument("--out", default=str(ROOT / "tests" / "golden"), help="the golden folder")
    ap.add_argument("--summary", action="store_true", help="print what the committed suite covers and exit")
    a = ap.parse_args(argv)
    if a.summary:
        print(summary(Path(a.out)))
        return 0
    known = families()
    chosen = a.family or known
    unknown = [f for f in chosen if f not in known]
    if unknown:
        print(f"make_golden: error: unknown family {unknown} (known: {known})", file=sys.stderr)
        return 2
    runner = runner_path(a.runner)
    total = 0
    for f in chosen:
        try:
            n = make_family(f, runner, Path(a.out), a.keep_going)
        except (RunnerError, OSError) as e:
            print(f"make_golden: error: {e}", file=sys.stderr)
            return 2
        total += n
        print(f"{f}: {n} case(s)")
    print(f"{total} case(s) in {len(chosen)} famil{'y' if len(chosen) == 1 else 'ies'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
