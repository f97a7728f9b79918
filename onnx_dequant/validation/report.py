"""The validation report: per path and output, the figures and the verdict; a table for people
(``str(report)``) and JSON for programs (``report.to_json()``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .. import dtypes
from ..errors import DequantizeError
from .diff import OutputResult, json_float

__all__ = ["FirstDifference", "PathResult", "Report", "error_line"]


@dataclass
class FirstDifference:
    """The first node (in the original model's order) whose output disagrees on a failing path."""

    node: str | None  # the original node's name; None when it could not be found
    op_type: str = ""
    tensor: str = ""
    position: int = -1  # the node's index in the original main graph
    result: OutputResult | None = None
    note: str = ""

    def describe(self) -> str:
        if self.node is None:
            return self.note
        r = self.result
        figures = ""
        if r is not None:
            figures = r.note or (
                f"{r.failures} of {r.size} elements beyond {r.allowed}, "
                f"max {_fmt(r.max_ulp)} ULP, max abs {_fmt(r.max_abs)}"
            )
            if r.first_failure:
                f = r.first_failure
                ref_v, got_v = _val(f["reference"], r.dtype), _val(f["got"], r.dtype)
                figures += f"; first at {f['index']}: reference {ref_v}, got {got_v}"
        s = f"first differing node: '{self.node}' ({self.op_type}), output '{self.tensor}'"
        s += f": {figures}" if figures else ""
        return s + (f" ({self.note})" if self.note else "")

    def to_dict(self) -> dict[str, Any]:
        """This result as JSON-ready values (what ``to_json`` and the ``--json`` output hold)."""
        return {
            "node": self.node,
            "op_type": self.op_type,
            "tensor": self.tensor,
            "position": self.position,
            "figures": None if self.result is None else self.result.to_dict(),
            "note": self.note,
        }


@dataclass
class PathResult:
    """One execution path (``path`` run at ONNX Runtime optimization ``level``) against the reference."""

    path: str  # "lowered", "kernel", "ort" or "against"
    level: str  # "default" or "off"
    status: str  # "pass", "fail", "error" (could not load or run) or "skipped" (cannot run here)
    reason: str = ""
    seconds: float = 0.0
    outputs: list[OutputResult] = field(default_factory=list)
    first_difference: FirstDifference | None = None

    @property
    def label(self) -> str:
        return f"{self.path}/{self.level}"

    @property
    def ok(self) -> bool:
        """The path passed, or was skipped (not a disagreement)."""
        return self.status in ("pass", "skipped")

    def to_dict(self) -> dict[str, Any]:
        """This result as JSON-ready values (what ``to_json`` and the ``--json`` output hold)."""
        return {
            "path": self.path,
            "level": self.level,
            "status": self.status,
            "reason": self.reason,
            "seconds": round(self.seconds, 4),
            "outputs": [o.to_dict() for o in self.outputs],
            "first_difference": None if self.first_difference is None else self.first_difference.to_dict(),
        }


@dataclass
class Report:
    """What ``validate`` found. ``ok`` is true when at least one path ran and every path that ran agreed."""

    model: str
    against: str | None = None
    dequantize_nodes: int = 0
    inputs: list[dict[str, Any]] = field(default_factory=list)  # name, dtype, shape, source
    seed: int | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    ort_config: dict[str, str] = field(default_factory=dict)
    reference_seconds: float = 0.0
    reference_runs: int = 0
    no_reference: str = ""  # why no reference ran (ONNX Runtime without optimizations stood in)
    paths: list[PathResult] = field(default_factory=list)

    @property
    def compared(self) -> int:
        """How many paths ran to a comparison (passed or failed)."""
        return sum(p.status in ("pass", "fail") for p in self.paths)

    @property
    def ok(self) -> bool:
        """At least one path was compared, and every path is ok."""
        return self.compared > 0 and all(p.ok for p in self.paths)

    @property
    def exit_code(self) -> int:
        """0 when every path agrees, 1 otherwise (the command's exit status)."""
        return 0 if self.ok else 1

    @property
    def verdict(self) -> str:
        """The report's last line: AGREE, or what disagreed."""
        if self.ok and self.no_reference:
            return f"AGREE WITHOUT A REFERENCE: {self.compared} path(s) match ONNX Runtime without optimizations"
        if self.ok:
            return f"AGREE: {self.compared} path(s) match the reference"
        if self.compared == 0 and all(p.status == "skipped" for p in self.paths):
            return "NOTHING COMPARED: every path was skipped"
        bad = [p.label for p in self.paths if not p.ok]
        return f"DISAGREE: {', '.join(bad)}"

    def to_dict(self) -> dict[str, Any]:
        """This result as JSON-ready values (what ``to_json`` and the ``--json`` output hold)."""
        return {
            "model": self.model,
            "against": self.against,
            "ok": self.ok,
            "verdict": self.verdict,
            "dequantize_nodes": self.dequantize_nodes,
            "inputs": self.inputs,
            "seed": self.seed,
            "policy": self.policy,
            "ort_config": self.ort_config,
            "reference_seconds": round(self.reference_seconds, 4),
            "reference_runs": self.reference_runs,
            "no_reference": self.no_reference,
            "paths": [p.to_dict() for p in self.paths],
        }

    def to_json(self, indent: int | None = 1) -> str:
        """The report as JSON (numbers that are not finite written as "inf"/"nan")."""
        return json.dumps(self.to_dict(), indent=indent)

    def policy_line(self) -> str:
        """The precision policy in one line."""
        p = self.policy
        if p.get("ulp") is not None:
            return f"one budget: {p['ulp']} ULP for every computed real tensor"
        return (
            f"docs/precision.md: {p.get('exact_ulp', 0)} ULP where ONNX Runtime can be exact, "
            f"{p.get('rounded_ulp', 1)} where it rounds twice, {p.get('float_ulp', 64)} after other float "
            "arithmetic; NaN equals NaN"
        )

    def to_text(self) -> str:
        """The report as a table a person reads at a glance."""
        lines = []
        what = f"{self.model}" + (f" against {self.against}" if self.against else "")
        lines.append(f"validate {what}: {self.dequantize_nodes} Dequantize node(s)")
        ins = ", ".join(f"{i['name']} {i['dtype']} {tuple(i['shape'])}" for i in self.inputs) or "none"
        src = {i["source"] for i in self.inputs}
        how = (
            f"generated (seed {self.seed})"
            if src == {"generated"}
            else "from file"
            if src == {"file"}
            else "given"
            if src
            else ""
        )
        lines.append(f"inputs {how}: {ins}")
        if self.ort_config:
            lines.append("ONNX Runtime session config: " + ", ".join(f"{k}={v}" for k, v in self.ort_config.items()))
        runs = f", {self.reference_runs} runs" if self.reference_runs > 1 else ""
        if self.no_reference:
            lines.append(f"NO REFERENCE RAN: {self.no_reference} ({self.reference_seconds:.2f} s{runs})")
        else:
            lines.append(
                "reference: onnx.reference.ReferenceEvaluator with the exact NumPy kernel "
                f"({self.reference_seconds:.2f} s{runs})"
            )
        lines.append("")
        header = ["path", "output", "allowed", "max ULP", "max abs", "mismatches"]
        header += ["first mismatch: reference vs got", "result"]
        rows: list[list[str]] = []
        notes: dict[int, list[str]] = {}
        for p in self.paths:
            if p.status in ("skipped", "error"):
                verdict = f"{p.status}: {p.reason}" if p.status == "skipped" else "ERROR"
                rows.append([p.label, "-", "", "", "", "", "", verdict])
                if p.status == "error":
                    notes.setdefault(len(rows) - 1, []).append(f"error: {p.reason}")
                continue
            for o in p.outputs:
                first = o.first_failure or o.first_mismatch
                where = "-"
                if first is not None:
                    where = f"{first['index']}: {_val(first['reference'], o.dtype)} vs {_val(first['got'], o.dtype)}"
                rows.append(
                    [
                        p.label,
                        o.name,
                        o.allowed,
                        _fmt(o.max_ulp),
                        _fmt(o.max_abs),
                        f"{o.mismatches}/{o.size}",
                        o.note or where,
                        "pass" if o.ok else "FAIL",
                    ]
                )
            if p.first_difference is not None:
                notes.setdefault(len(rows) - 1, []).append(p.first_difference.describe())
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header) - 1)]

        def fmt_row(r):
            return "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1]

        lines.append(fmt_row(header).rstrip())
        for i, r in enumerate(rows):
            lines.append(fmt_row(r).rstrip())
            for n in notes.get(i, []):
                lines.append(f"    {n}")
        budgets = {o.name: (o.allowed, o.why) for p in self.paths for o in p.outputs}
        if budgets:
            lines.append("")
            lines.append(f"allowed, per output ({self.policy_line()}):")
            width = max(len(n) for n in budgets)
            for name, (allowed, why) in budgets.items():
                lines.append(f"  {name.ljust(width)}  {allowed}: {why}")
        lines.append("")
        lines.append(self.verdict)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def _fmt(v: float) -> str:
    j = json_float(v)
    if isinstance(j, str):
        return j
    if isinstance(j, int):
        return str(j)
    return f"{j:.3g}"


def _val(v: Any, dtype: str) -> str:
    """A value as its own type prints it (shortest repr that round-trips)."""
    if isinstance(v, str):
        return v
    try:
        return str(dtypes.parse(dtype).numpy.type(v))
    except (DequantizeError, TypeError, ValueError, OverflowError):  # types outside the table print as they are
        return str(v)


def error_line(e: BaseException, limit: int = 400) -> str:
    """An exception as one line for the report: its type and its message's lines joined, cut at ``limit``
    characters (OpenVINO's reason comes lines after where it was raised)."""
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:limit]
