"""``validate``: run a model every way we can and compare each run with the reference.

The oracle is the original model under ``onnx.reference.ReferenceEvaluator`` with our exact kernel.
Against it, each at ONNX Runtime's default optimization level and with optimizations off:

- ``lowered``: ONNX Runtime on ``onnx_dequant.lower(model)``;
- ``kernel``: ONNX Runtime with our Python kernel (``onnx_dequant.session(model)``);
- ``ort``: plain ONNX Runtime, for a model without our op;
- ``against``: another model (lowered by us, by another tool or by hand) on the same inputs, instead of
  the paths above unless ``paths`` asks for them too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ..errors import DequantizeError
from ..graphs import count_dequantize, has_dequantize
from . import inputs as inputs_mod
from .diagnosis import KNOWN_REWRITES, ort_rewrites
from .diff import compare_output
from .expected import Expected
from .given import check_given, load_given
from .loading import for_reference, load_model, serialized, with_types
from .localize import first_difference
from .openvino_runner import OPENVINO_LEVELS, OpenVinoMissing, OpenVinoRunner, openvino_levels
from .policy import Policy, Tolerance, tolerances
from .progress import Progress
from .report import FirstDifference, PathResult, Report, error_line
from .runners import LEVELS, OrtRunner, ReferenceRunner, Skip
from .stand_in import OrtStandIn, foreign_ops
from .weights import externalize

__all__ = ["PATHS", "RUNTIMES", "load_model", "validate"]

PATHS = ("lowered", "kernel", "ort", "against")
"""Path names ``validate(paths=...)`` accepts."""

RUNTIMES = ("onnxruntime", "openvino")
"""Runtimes ``validate(runtimes=...)`` accepts (OpenVINO is an optional extra)."""


def _feeds(
    model: onnx.ModelProto, given: Any, *, seed: int, dims: Any, real_range: tuple[float, float]
) -> tuple[dict[str, np.ndarray], str]:
    specs = inputs_mod.graph_inputs(model)
    if given is None:
        generated = inputs_mod.generate(specs, seed=seed, dims=inputs_mod.parse_dims(dims), real_range=real_range)
        return generated, "generated"
    if isinstance(given, (str, os.PathLike)):
        path = os.fspath(given)
        if not os.path.exists(path):
            raise DequantizeError("inputs file not found", path=path)
        return inputs_mod.check_feeds(specs, inputs_mod.load_npz(path), source=path), "file"
    if isinstance(given, Mapping):
        return inputs_mod.check_feeds(specs, given), "given"
    raise DequantizeError(f"inputs must be a mapping of name to array or an .npz path, got {type(given).__name__}")


def _generated_hint(
    e: DequantizeError, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], source: str
) -> DequantizeError:
    """``e`` (the reference failed) with, for generated inputs, the sizes their symbolic dims took and how
    to give others."""
    specs = inputs_mod.graph_inputs(model)
    sizes = inputs_mod.symbolic_sizes(specs, feeds) if source == "generated" else {}
    if not sizes:
        return e
    taken = ", ".join(f"{k}={v}" for k, v in sizes.items())
    fixed = inputs_mod.fixed_sizes(specs)
    clashes = [(k, f) for k, v in sizes.items() for f in fixed.get(k, ()) if f[0] != v]
    if clashes:
        name, (size, node, x, axis) = clashes[0]
        advice = f"node '{node}' fixes dim {axis} of input '{x}' to {size}: give --dim {name}={size}"
    else:
        advice = "give the right sizes with --dim NAME=SIZE"
    return DequantizeError(f"{e.rule} (generated inputs with {taken}; {advice})", node=e.node, path=e.path)


def _choose_paths(paths: Sequence[str] | None, model: onnx.ModelProto, against: onnx.ModelProto | None) -> list[str]:
    if paths is None:
        if against is not None:
            return ["against"]
        return ["lowered", "kernel"] if has_dequantize(model) else ["ort"]
    chosen = []
    for p in paths:
        if p not in PATHS:
            raise DequantizeError(f"unknown path '{p}'; choose from {', '.join(PATHS)}")
        if p == "against" and against is None:
            raise DequantizeError("path 'against' needs an other model (against=... / --against)")
        if p not in chosen:
            chosen.append(p)
    return chosen


def validate(
    model: Any,
    inputs: Any = None,
    *,
    against: Any = None,
    opset: int | None = None,
    target: str = "ort",
    seed: int = 0,
    dims: Any = None,
    real_range: tuple[float, float] = (-1.0, 1.0),
    policy: Policy | None = None,
    paths: Sequence[str] | None = None,
    levels: Sequence[str] = LEVELS,
    localize: bool = True,
    progress: bool = False,
    ort_config: Mapping[str, str] | None = None,
    runtimes: Sequence[str] = ("onnxruntime",),
    expected: Any = None,
) -> Report:
    """Run ``model`` every way we can and compare each run with the reference; returns a ``Report``.

    ``model`` (and ``against``) is an ``onnx.ModelProto``, an ``.onnx`` path or an nGraph ``.json`` path.
    ``inputs`` is a mapping of input name to array, an ``.npz`` path, or None to generate them from the
    declared types and shapes (``seed``; ``dims`` sizes symbolic dims, ``{"N": 4}`` or ``["N=4"]``;
    ``real_range`` bounds real inputs). ``opset`` and ``target`` go to ``lower``. ``policy`` sets the
    allowed ULP (see ``Policy``). ``paths`` picks among ``PATHS`` (default: lowered and kernel, or ort
    for a model without our op, or against when ``against`` is given); ``levels`` among "default" and
    "off". ``localize`` names the first differing node of a failing path. ``progress`` prints steps
    that take more than two seconds to stderr. ``ort_config`` adds ONNX Runtime session config entries
    (``{"session.qdq_matmulnbits_accuracy_level": "0"}``) to every ORT session. ``runtimes`` (of
    ``RUNTIMES``) adds OpenVINO's paths (``openvino-f32``, and ``openvino-default`` where the CPU's default
    precision hint is not f32) for every path but the Python kernel. ``expected``: outputs the user's own run
    computed (an ``.npz`` path or a mapping; keyed by output name, nGraph Result name or position ``out_0``):
    the report adds an ``expected`` row comparing them with the reference under the same policy (nGraph's
    two roundings of an i32 Dequantize allowed).

    Raises ``DequantizeError`` for bad input (an invalid model, inputs that do not fit it, a model the
    reference cannot run); a path that fails to load or run is reported, not raised.
    """
    policy = policy or Policy()
    levels = _check_levels(levels)
    path_levels = _path_levels(levels, runtimes)
    show = Progress(progress)
    with show.step("loading"):
        original, label = load_model(model)
        other, other_label = (None, None) if against is None else load_model(against, what="other model")
    chosen = _choose_paths(paths, original, other)
    model_path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    try:
        feeds, source = _feeds(original, inputs, seed=seed, dims=dims, real_range=real_range)
    except DequantizeError as e:
        raise (e.at(path=model_path) if inputs is None else e) from None
    other_feeds = None if other is None else _other_feeds(original, other, other_label, feeds)
    # Large initializers are held once, as arrays shared by the reference and ONNX Runtime (OrtValues
    # over them): the lowering and the kernel's preparation then do not copy them, and no session
    # serializes or parses them.
    with_placeholders, arrays = externalize(original)
    other_with_placeholders, other_arrays = (None, {}) if other is None else externalize(other)
    run = _Comparison(for_reference(with_placeholders), policy, ort_config, localize, show)
    report = Report(
        model=label,
        ort_config=run.config,
        against=other_label,
        dequantize_nodes=count_dequantize(original),
        inputs=[{"name": k, "dtype": str(v.dtype), "shape": list(v.shape), "source": source} for k, v in feeds.items()],
        seed=seed if source == "generated" else None,
        policy=policy.to_dict(),
    )
    given = None if expected is None else load_given(expected, original)
    oracle = run.reference(with_placeholders, arrays, report)
    try:
        run.expected = Expected(oracle, feeds, [o.name for o in original.graph.output], show)
    except DequantizeError as e:
        raise _generated_hint(e, original, feeds, source).at(path=model_path) from None
    if given is not None:
        report.paths.append(run.given(*given))
    for path in chosen:
        try:
            path_model, path_feeds, kernel = _path_model(
                path, with_placeholders, other_with_placeholders, feeds, other_feeds, opset, target, show
            )
        except Skip as e:
            report.paths.extend(PathResult(path, lv, "skipped", str(e)) for lv in levels)
            continue
        data = None if kernel else serialized(path_model)  # one serialization for both levels
        path_arrays = other_arrays if path == "against" else arrays
        for level in path_levels:
            report.paths.append(run.path(path, level, path_model, path_feeds, kernel, data, path_arrays))
    report.reference_seconds, report.reference_runs = run.expected.seconds, run.expected.runs
    return report


def _check_levels(levels: Sequence[str]) -> list[str]:
    for lv in levels:
        if lv not in LEVELS:
            raise DequantizeError(f"unknown optimization level '{lv}'; choose from {', '.join(LEVELS)}")
    return list(levels)


def _path_levels(levels: list[str], runtimes: Sequence[str]) -> list[str]:
    """The levels every path runs at: ONNX Runtime's ``levels``, then OpenVINO's when asked for."""
    for rt in runtimes:
        if rt not in RUNTIMES:
            raise DequantizeError(f"unknown runtime '{rt}'; choose from {', '.join(RUNTIMES)}")
    path_levels = levels if "onnxruntime" in runtimes else []
    if "openvino" in runtimes:
        try:
            path_levels = path_levels + openvino_levels()
        except OpenVinoMissing as e:
            raise DequantizeError(f"--runtime openvino: {e}") from None
    return path_levels


def _other_feeds(
    original: onnx.ModelProto, other: onnx.ModelProto, other_label: str | None, feeds: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The other model's feeds (the model's, by name); ``DequantizeError`` when it needs an input the
    model lacks or lacks an output the model has."""
    other_specs = inputs_mod.graph_inputs(other)
    lacking = [s.name for s in other_specs if s.name not in feeds]
    if lacking:
        raise DequantizeError(
            f"the other model needs input(s) {', '.join(map(repr, lacking))} that the model does not have",
            path=other_label,
        )
    other_feeds = inputs_mod.check_feeds(
        other_specs, {s.name: feeds[s.name] for s in other_specs}, source=f"the other model ({other_label})"
    )
    missing = [o.name for o in original.graph.output if o.name not in {p.name for p in other.graph.output}]
    if missing:
        raise DequantizeError(
            f"the other model lacks output(s) {', '.join(map(repr, missing))} of the model", path=other_label
        )
    return other_feeds


class _Comparison:
    """What every path's run shares: the reference (model, tolerances, ``Expected`` results) and the
    options of the comparison."""

    expected: Expected

    def __init__(
        self,
        oracle_model: onnx.ModelProto,
        policy: Policy,
        ort_config: Mapping[str, str] | None,
        localize: bool,
        show: Progress,
    ) -> None:
        self.oracle_model = oracle_model
        self.policy = policy
        self.tolerances = tolerances(with_types(oracle_model), policy)
        self.ort_config = ort_config
        self.config = {str(k): str(v) for k, v in (ort_config or {}).items()}
        self.localize = localize
        self.show = show
        self.stand_in: OrtStandIn | None = None

    def reference(
        self, model: onnx.ModelProto, arrays: Mapping[str, np.ndarray], report: Report
    ) -> ReferenceRunner | OrtStandIn:
        """The reference evaluator on the model; where it has no kernel for some op, ONNX Runtime with
        optimizations off stands in (said in the report; no localization then)."""
        try:
            return ReferenceRunner(self.oracle_model, arrays)
        except DequantizeError:
            foreign = foreign_ops(self.oracle_model)
            if not foreign:
                raise
        report.no_reference = (
            f"the reference evaluator has no kernel for {', '.join(foreign)}: ONNX Runtime with optimizations "
            "off stands in for it, so this compares ONNX Runtime's optimized graph with its plain one"
        )
        self.localize = False
        self.stand_in = OrtStandIn(model, arrays, self.ort_config)
        return self.stand_in

    def given(self, outputs: Mapping[str, np.ndarray], label: str) -> PathResult:
        """The reference against outputs the user brought (``expected``), under the policy against nGraph."""
        computed = self.expected.outputs()
        outputs = check_given(outputs, computed, label)
        tol = tolerances(with_types(self.oracle_model), self.policy, ngraph=True)
        result = PathResult("expected", os.path.basename(label), "pass")
        for name, want in outputs.items():
            allowed = tol.get(name, Tolerance(self.policy.exact_ulp, False, "graph output"))
            result.outputs.append(compare_output(name, want, computed[name], allowed))
        if not all(o.ok for o in result.outputs):
            result.status = "fail"
        return result

    def allowed(self, name: str) -> Tolerance:
        return self.tolerances.get(name, Tolerance(self.policy.exact_ulp, False, "graph output"))

    def path(
        self,
        path: str,
        level: str,
        model: onnx.ModelProto,
        feeds: dict[str, np.ndarray],
        kernel: bool,
        data: bytes | None,
        arrays: Mapping[str, np.ndarray],
    ) -> PathResult:
        """One path at one level, run and compared with the reference."""
        result = PathResult(path, level, "pass")
        if self.stand_in is not None and self.stand_in.same_as(path, level):
            result.status, result.reason = "skipped", "it stands in for the reference"
            return result
        openvino = level in OPENVINO_LEVELS
        if openvino and kernel:
            result.status, result.reason = "skipped", "our Python kernel runs in ONNX Runtime only"
            return result
        scratch = self.expected.scratch(kernel)
        t0 = time.perf_counter()
        with self.show.step(f"running {result.label}"):
            try:
                if openvino:
                    got = OpenVinoRunner(model, level, arrays=arrays).run(feeds)
                else:
                    runner = OrtRunner(
                        model, level, kernel=kernel, config=self.ort_config, data=data, arrays=arrays, scratch=scratch
                    )
                    got = runner.run(feeds, self.expected.buffers)
            except (Skip, OpenVinoMissing) as e:
                result.status, result.reason = "skipped", str(e)
            except Exception as e:  # noqa: BLE001 - a path that cannot load or run is a finding
                result.status, result.reason = "error", error_line(e)
            finally:
                runner = None
        result.seconds = time.perf_counter() - t0
        if result.status != "pass":
            return result
        expected = self.expected.outputs()
        for name in self.expected.names:
            result.outputs.append(compare_output(name, expected[name], got.get(name), self.allowed(name)))
        del got
        if not all(o.ok for o in result.outputs):
            result.status = "fail"
            if self.localize and not openvino:
                with self.show.step(f"finding the first differing node of {result.label}"):
                    result.first_difference = _localize(
                        self.oracle_model,
                        self.expected.intermediate(),
                        model,
                        feeds,
                        level,
                        kernel,
                        self.ort_config,
                        self.tolerances,
                        arrays,
                    )
        return result


def _localize(
    original: onnx.ModelProto,
    oracle: dict[str, Any],
    path_model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    level: str,
    kernel: bool,
    config: Mapping[str, str] | None,
    tol: dict[str, Tolerance],
    arrays: Mapping[str, np.ndarray],
) -> FirstDifference:
    """The first differing node of a failing path, with the ops ORT's optimizer introduced."""

    def run_exposed(expose: Mapping[str, np.dtype]) -> dict[str, np.ndarray]:
        return OrtRunner(path_model, level, kernel=kernel, expose=expose, config=config, arrays=arrays).run(feeds)

    found = first_difference(original, oracle, run_exposed, tol)
    fused = ort_rewrites(path_model, level, kernel=kernel, config=config, arrays=arrays)
    if fused:
        extra = "ONNX Runtime's optimized graph has " + ", ".join(fused[:8]) + (" ..." if len(fused) > 8 else "")
        for op, what in KNOWN_REWRITES.items():
            if any(f.startswith(op + " ") for f in fused):
                extra += f"; {what}"
        found.note = f"{found.note}; {extra}" if found.note else extra
    return found


def _path_model(
    path: str,
    original: onnx.ModelProto,
    other: onnx.ModelProto | None,
    feeds: dict[str, np.ndarray],
    other_feeds: dict[str, np.ndarray] | None,
    opset: int | None,
    target: str,
    show: Progress,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray], bool]:
    """The model a path runs, its feeds, and whether it needs our kernel."""
    if path == "against":
        assert other is not None and other_feeds is not None
        return other, other_feeds, has_dequantize(other)
    if path == "ort":
        return original, feeds, has_dequantize(original)
    if path == "kernel":
        if not has_dequantize(original):
            raise Skip("the model has no Dequantize node (plain ONNX Runtime is the 'ort' path)")
        return original, feeds, True
    # lowered
    try:
        from ..lowering import lower
    except ImportError as e:
        raise Skip(f"the lowering pass (onnx_dequant.lowering.lower) is not available: {e}") from None
    with show.step("lowering"):
        try:
            lowered = lower(original, opset=opset, target=target)
        except DequantizeError as e:
            raise DequantizeError(f"lowering failed: {e}") from None
    return lowered, feeds, has_dequantize(lowered)
