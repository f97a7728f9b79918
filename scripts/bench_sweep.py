#!/usr/bin/env python3
"""Performance by the worst case: a seeded sweep of Dequantize cases, every measure side by side.

    python scripts/bench_sweep.py                      # the full sweep (>= 200 cases, up to 64M elements)
    python scripts/bench_sweep.py --quick              # a smoke run: every 8th case, at most 1M elements
    python scripts/bench_sweep.py --max-elements 4M    # cap the sizes (cases above are skipped)
    python scripts/bench_sweep.py --cases 'r3.*\\{0,2\\}' --json out.json
    python scripts/bench_sweep.py --seed 1             # held-out cases: another draw of the same classes
    python scripts/bench_sweep.py --symbolic --measures graph   # held out: dims but the axes known at run time
    python scripts/bench_sweep.py --symbolic batch --measures graph   # held out: the first dim (a batch) symbolic

The cases cover ranks 1-6, every axes-set class (none, one leading / middle / last axis, several
adjacent, several apart, all), sizes from a few elements to 64M, narrow and wide rows, every input type
with f32 output and a sample of f16/bf16/f64 outputs, the scale (and zero point) as an initializer or as
a graph input. For each case, side by side in one run (contenders interleaved, medians of ``--repeat``):

- ``graph``: the lowered model feeding Relu against ORT's per-tensor DequantizeLinear feeding Relu
  (f32 outputs; targets: <= 1.15x at the 90th percentile, <= 1.3x worst);
- ``standalone``: the lowered model (its output a graph output) against a casting copy of the input
  into a preallocated output (target <= 1.25x worst);
- ``reference``: ``odq.dequantize(..., out=)`` against the same casting copy (<= 2x p90, <= 3x worst);
- ``kernel``: ``odq.session(...).run`` minus ``odq.dequantize`` (fresh output), in casting copies
  (target <= 2 worst);
- ``f16/bf16``: the lowered f16/bf16 model standalone against the same case with f32 output (<= 2x).

The graph, standalone and reference ratios are divided by the case's bytes floor, (input + scale +
zero point + output bytes) / (input + output bytes): a scale as large as the input must be read, and no
form beats that. 4-bit inputs are measured by the reference only (ORT's Python API takes no 4-bit
array). ORT runs with ``--threads`` intra-op threads (1 by default: on a shared machine a spinning
pool turns figures into noise); the reference uses its own thread pool.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import _split, dtypes, reference
from onnx_dequant.lowering import LowerOptions, lower_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import count, parse_size  # noqa: E402  (beside this script)

MAX_ELEMENTS = 64 << 20
INPUTS = ("i8", "u8", "i16", "u16", "i32", "i4", "u4")
CLASSES = ("none", "lead", "middle", "last", "adjacent", "apart", "all")
SIZES = (  # (bucket, low, high) in elements, drawn log-uniformly
    ("tiny", 1, 1 << 10),
    ("small", 1 << 12, 1 << 17),
    ("medium", 1 << 18, 1 << 22),
    ("large", 1 << 22, 1 << 25),
)
HUGE = ("huge", 1 << 25, MAX_ELEMENTS)
F64_MAX = 16 << 20
"""f64 cases stay at or below this size (each f64 output of 64M elements is 512 MB)."""
TARGETS = {  # measure: (p90 limit, worst limit)
    "graph": (1.15, 1.3),
    "standalone": (None, 1.25),
    "reference": (2.0, 3.0),
    "kernel": (None, 2.0),
    "f16/bf16": (None, 2.0),
}
THREADS = 1
SYMBOLIC = ""  # lower each case over its dims other than the axes ("all"), or its batch ("batch"), by name
JUDGED_MIN = 1 << 16
"""Targets are judged on cases of at least this many elements; below it a call's fixed cost (the
contract's checks, ORT's run overhead: microseconds) dominates a copy of a few hundred nanoseconds,
and those cases are summarized apart."""
JUDGED_MIN_KERNEL = 1 << 20
"""The kernel measure's threshold: one call through ORT's Python op bridge costs about 0.1 ms, as much
as two casting copies of a quarter-million elements."""


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    klass: str
    in_type: str
    out_type: str
    zero_point: bool
    scale_input: bool  # the scale (and zero point) are graph inputs, not initializers

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def name(self) -> str:
        dims = ",".join(map(str, self.shape))
        ax = ",".join(map(str, self.axes))
        src = "input" if self.scale_input else "init"
        return (
            f"r{len(self.shape)} ({dims}) {{{ax}}} {self.klass} {self.in_type}->{self.out_type}"
            f"{' zp' if self.zero_point else ''} scale:{src}"
        )

    def floor(self) -> float:
        """(input + scale + zero point + output bytes) / (input + output bytes)."""
        it, ot = dtypes.parse(self.in_type), dtypes.parse(self.out_type)
        ib, ob = max(it.bits, 8) / 8, ot.bits / 8
        s = int(np.prod([self.shape[a] for a in self.axes], dtype=np.int64))
        n = self.size
        return (n * (ib + ob) + s * ob + (s * ib if self.zero_point else 0)) / (n * (ib + ob))


def _axes(rng: np.random.Generator, rank: int, klass: str) -> tuple[int, ...] | None:
    """Axes of ``klass`` for ``rank`` (None when the rank has no such set)."""
    if klass == "none":
        return ()
    if klass == "all":
        return tuple(range(rank))
    if klass == "lead":
        return (0,) if rank >= 2 else None
    if klass == "last":
        return (rank - 1,) if rank >= 2 else None
    if klass == "middle":
        return (int(rng.integers(1, rank - 1)),) if rank >= 3 else None
    if klass == "adjacent":  # two or more adjacent axes, not all
        if rank < 3:
            return None
        k = int(rng.integers(2, rank))
        start = int(rng.integers(0, rank - k + 1))
        return tuple(range(start, start + k))
    if klass == "apart":  # two or more axes, some pair not adjacent
        if rank < 3:
            return None
        while True:
            k = int(rng.integers(2, rank))
            ax = tuple(sorted(rng.choice(rank, k, replace=False).tolist()))
            if ax[-1] - ax[0] + 1 > len(ax):
                return ax
    raise ValueError(klass)


def _shape(rng: np.random.Generator, rank: int, total: int, rows: str) -> tuple[int, ...]:
    """A shape of ``rank`` with about ``total`` elements; ``rows``: "narrow", "wide" or "any" last dim."""
    if rank == 1:
        return (max(1, total),)
    if rows == "narrow":
        last = int(rng.integers(2, 17))
    elif rows == "wide":
        last = int(min(total, rng.integers(1024, 16385)))
    else:
        last = int(round(np.exp(rng.uniform(0, np.log(max(total, 2)) / rank * 1.5))))
    last = max(1, min(last, total))
    rest = max(1, total // last)
    bits = np.log2(rest)
    floor_bits = 1.0 if bits >= rank - 1 else 0.0  # no size-1 dim unless the size is too small
    w = floor_bits + rng.dirichlet(np.ones(rank - 1)) * (bits - floor_bits * (rank - 1))
    dims = [max(1, int(round(2**wi))) for wi in w]
    return (*dims, last)


def make_cases(seed: int) -> list[Case]:
    """The sweep: every (rank, class) at every size bucket, then a sample of huge, f16/bf16/f64 cases."""
    rng = np.random.default_rng(seed)
    cases: list[Case] = []
    i = 0

    def draw(rank: int, klass: str, bucket: tuple[str, int, int], out: str, in_type: str | None = None) -> bool:
        nonlocal i
        axes = _axes(rng, rank, klass)
        if axes is None:
            return False
        _, lo, hi = bucket
        hi = min(hi, F64_MAX) if out == "f64" else hi
        total = int(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        rows = ("narrow", "wide", "any", "any")[i % 4]
        shape = _shape(rng, rank, total, rows)
        if int(np.prod(shape)) > MAX_ELEMENTS:
            shape = _shape(rng, rank, MAX_ELEMENTS // 2, "any")
        it = in_type or INPUTS[i % len(INPUTS)]
        cases.append(Case(shape, axes, klass, it, out, bool(rng.integers(0, 2)), bool(i % 3 == 2)))
        i += 1
        return True

    def sample(bucket: tuple[str, int, int], out: str, in_type: str | None = None) -> None:
        while not draw(int(rng.integers(1, 7)), CLASSES[int(rng.integers(0, len(CLASSES)))], bucket, out, in_type):
            pass

    for bucket in SIZES:
        for rank in range(1, 7):
            for klass in CLASSES:
                draw(rank, klass, bucket, "f32")
    for _ in range(24):
        sample(HUGE, "f32", "i8")
    for out in ("f16", "bf16", "f64"):
        for _ in range(14):
            sample(SIZES[int(rng.integers(1, len(SIZES)))], out)
    return cases


NAMED = [  # the cases the issue names, in every run
    Case((8, 16, 256, 512), (1, 2), "adjacent", "i8", "f32", True, False),
    Case((4 << 20, 4, 4), (0, 2), "apart", "i8", "f32", True, False),
    Case((2 << 20, 8), (0,), "lead", "i8", "f32", True, False),
    Case((1024, 16384), (0, 1), "all", "i8", "f32", True, False),
    Case((256, 256, 256), (0, 2), "apart", "i8", "f16", True, False),
    Case((4 << 20, 4), (0, 1), "all", "i8", "f32", False, False),
]


# ---- data and models ----


def data(case: Case, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng(seed)
    it, ot = dtypes.parse(case.in_type), dtypes.parse(case.out_type)
    sshape = tuple(case.shape[a] for a in case.axes)
    lo, hi = (-(1 << (it.bits - 1)), 1 << (it.bits - 1)) if it.signed else (0, 1 << it.bits)
    hi = min(hi, 1 << 20)  # i32: values a float32 difference holds
    lo = max(lo, -(1 << 20))
    x = rng.integers(lo, hi, case.shape, dtype=np.int64 if it.bits >= 32 else np.int32).astype(it.numpy)
    s = rng.uniform(0.001, 0.1, sshape).astype(np.float32).astype(ot.numpy)
    z = rng.integers(lo, hi, sshape).astype(it.numpy) if case.zero_point else None
    return x, s, z


def model(case: Case, s: np.ndarray, z: np.ndarray | None, *, consumer: str | None = None, native: bool = False):
    """x (-> Dequantize or per-tensor DequantizeLinear) (-> consumer) -> y, opset 21."""
    it, ot = dtypes.parse(case.in_type), dtypes.parse(case.out_type)
    ins = [helper.make_tensor_value_info("x", it.onnx, list(case.shape))]
    inits = []
    t = "t" if consumer else "y"
    if native:
        inits = [numpy_helper.from_array(np.array(0.05, ot.numpy), "s")]
        if case.zero_point:
            inits.append(numpy_helper.from_array(np.array(3, it.numpy), "z"))
        nodes = [helper.make_node("DequantizeLinear", ["x", "s"] + (["z"] if case.zero_point else []), [t])]
    else:
        params = [("s", s, ot)] + ([("z", z, it)] if z is not None else [])
        for name, arr, typ in params:
            if case.scale_input:
                ins.append(helper.make_tensor_value_info(name, typ.onnx, list(arr.shape)))
            else:
                inits.append(numpy_helper.from_array(arr, name))
        nodes = [odq.make_node(["x"] + [p[0] for p in params], [t], axes=case.axes, name="dq")]
    if consumer:
        nodes.append(helper.make_node(consumer, ["t"], ["y"]))
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", ot.onnx, list(case.shape))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])
    m.ir_version = 10
    return m


def symbolic(m: onnx.ModelProto, which: str = "all") -> onnx.ModelProto:
    """``m`` with its input's dims other than the Dequantize's axes (``which="batch"``: its first dim, where
    that is not an axis), and its output's, declared by name: sizes known only at run time (a batch, a
    sequence)."""
    out = onnx.ModelProto.FromString(m.SerializeToString())
    node = next(n for n in out.graph.node if n.domain == odq.DOMAIN)
    axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), [])
    for i, d in enumerate(out.graph.input[0].type.tensor_type.shape.dim):
        if i not in axes and (which == "all" or i == 0):
            d.dim_param = f"x{i}"
    for i, d in enumerate(out.graph.output[0].type.tensor_type.shape.dim):
        d.dim_param = f"y{i}"
    return out


def lowered(m: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """The lowered model (over ``symbolic`` dims with ``SYMBOLIC``) and its node's strategy."""
    m = symbolic(m, SYMBOLIC) if SYMBOLIC else onnx.ModelProto.FromString(m.SerializeToString())
    result = lower_model(m, LowerOptions())
    return result.model, result.nodes[0].strategy


class Runner:
    """One ORT session with its inputs bound once and every output bound to a preallocated buffer of its
    declared type and shape (the input's where a dim is not known; ORT's own buffer for bf16, which NumPy
    cannot hold), on ``THREADS`` intra-op threads."""

    NUMPY = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}

    def __init__(self, m: onnx.ModelProto, feed: dict[str, np.ndarray]) -> None:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.intra_op_num_threads = THREADS
        self.sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        self.b = self.sess.io_binding()
        for k, v in feed.items():
            if v.dtype == ml_dtypes.bfloat16:  # ORT's NumPy bridge takes no bf16 array: hand it the bits
                v = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(v.view(np.uint16), TensorProto.BFLOAT16)
                self.b.bind_ortvalue_input(k, v)
            else:
                self.b.bind_cpu_input(k, v)
        self.outs: list[np.ndarray | None] = []  # ORT writes into these: they live as long as the binding
        outputs = self.sess.get_outputs()
        shapes = [o.shape for o in outputs]
        if not all(isinstance(d, int) for shape in shapes for d in shape):  # dims known at run time: run once
            for o in outputs:
                self.b.bind_output(o.name, "cpu")
            self.sess.run_with_iobinding(self.b)
            shapes = [v.shape() for v in self.b.get_outputs()]
            self.b.clear_binding_outputs()
        for o, shape in zip(outputs, shapes):
            if o.type not in self.NUMPY:
                self.b.bind_output(o.name, "cpu")
                self.outs.append(None)
                continue
            y = np.empty(shape, self.NUMPY[o.type])
            self.b.bind_output(o.name, "cpu", 0, y.dtype, y.shape, y.ctypes.data)
            self.outs.append(y)

    def __call__(self) -> None:
        self.sess.run_with_iobinding(self.b)


def copier(x: np.ndarray, out_type: str) -> Callable[[], None]:
    """A casting copy of ``x`` into a preallocated array of the output type; for f16/bf16 into an
    integer of the same width (NumPy converts to f16 one element at a time, not at memory speed)."""
    ot = np.uint16 if out_type in ("f16", "bf16") else dtypes.parse(out_type).numpy
    out = np.empty(x.shape, ot)
    src = x.astype(np.int8) if x.dtype in (ml_dtypes.int4, ml_dtypes.uint4) else x
    return lambda: np.copyto(out, src, casting="unsafe")


# ---- timing ----


def timed(contenders: dict[str, Callable[[], object]], repeat: int, budget_s: float = 0.02) -> dict[str, float]:
    """Median seconds per call of each contender, interleaved round-robin; fast calls are looped."""
    loops = {}
    for name, fn in contenders.items():
        fn()  # warm-up: one-off costs (Numba's cache load, first-touch pages, ORT's first run) are not timed
        t0 = time.perf_counter()
        fn()  # how many calls make one sample: timed on a warm call (a cold one would leave one call a sample)
        dt = time.perf_counter() - t0
        loops[name] = max(1, min(2000, int(budget_s / max(dt, 1e-7))))
    times: dict[str, list[float]] = {n: [] for n in contenders}
    gc.collect()
    gc.disable()  # a collection inside a sample would be noise (one at the start of each case)
    try:
        for _ in range(repeat):
            for name, fn in contenders.items():
                k = loops[name]
                t0 = time.perf_counter()
                for _ in range(k):
                    fn()
                times[name].append((time.perf_counter() - t0) / k)
    finally:
        gc.enable()
    return {n: statistics.median(t) for n, t in times.items()}


@dataclass
class Result:
    case: str
    size: int
    floor: float
    strategy: str = ""
    graph_strategy: str = ""
    ratios: dict = field(default_factory=dict)  # measure -> ratio (graph/standalone/reference over the floor)
    seconds: dict = field(default_factory=dict)
    cut: float | None = None  # the share of the reference's calls cut among threads (None: none may be)
    cold: float | None = None  # the share of its calls cut that found a helper asleep


def cut_share(x: np.ndarray, s: np.ndarray, z: np.ndarray | None, axes: tuple[int, ...]) -> tuple[float, float] | None:
    """The share of the reference's calls of this case cut among helper threads so far, and the share
    of those that found a helper asleep (its calls' ``_split.Cost``), or None where none may be cut: a
    worst case that ran whole in one run and cut in another is the machine's noise, not the code's, and
    cut calls that always find their helpers asleep come more than ``_split.SPIN`` apart."""
    if x.size < _split.MIN_ELEMENTS or _split.cpu_count() < 2:
        return None
    key = (x.dtype, x.shape, s.dtype, s.shape, *((None, None) if z is None else (z.dtype, z.shape)))
    setup = reference._checked(*key, tuple(axes), None, x.size >= reference.FUSED_MIN_ELEMENTS)[4]
    cost = None if setup is None else setup[2]
    if cost is None or not cost.calls:
        return None
    return cost.cuts / cost.calls, cost.colds / cost.cuts if cost.cuts else 0.0


def cut_label(res: Result) -> str:
    """`` (cut 95%)``, `` (cut 95%, 90% cold)`` where cut calls found a helper asleep, or nothing."""
    if res.cut is None:
        return ""
    return f" (cut {res.cut:.0%}" + (f", {res.cold:.0%} cold)" if res.cold else ")")


def measure(case: Case, repeat: int, only: set[str]) -> Result:
    x, s, z = data(case)
    feed = {"x": x} | ({"s": s} | ({"z": z} if z is not None else {}) if case.scale_input else {})
    floor = case.floor()
    r = Result(case.name, case.size, floor)
    copy = copier(x, case.out_type)
    four_bit = case.in_type in ("i4", "u4")
    if "reference" in only or "kernel" in only:
        ref_out = np.empty(case.shape, dtypes.parse(case.out_type).numpy)
        c = {
            "copy": copy,
            "reference": lambda: odq.dequantize(x, s, z, axes=case.axes, out=ref_out),
        }
        sess = None
        if "kernel" in only and not four_bit and case.out_type in ("f32", "f64"):
            sess = odq.session(model(case, s, z))
            c["reference (fresh output)"] = lambda: odq.dequantize(x, s, z, axes=case.axes)
            c["kernel"] = lambda: sess.run(None, feed)
        t = timed(c, repeat)
        r.seconds.update({f"ref: {k}": v for k, v in t.items()})
        r.ratios["reference"] = t["reference"] / t["copy"] / floor
        r.cut, r.cold = cut_share(x, s, z, case.axes) or (None, None)
        if sess is not None:
            r.ratios["kernel"] = (t["kernel"] - t["reference (fresh output)"]) / t["copy"]
        del sess, c, ref_out
    if four_bit:
        return r
    if "standalone" in only or "f16/bf16" in only:
        low, r.strategy = lowered(model(case, s, z))
        c = {"copy": copy, "lowered": Runner(low, feed)}
        twin = None
        if "f16/bf16" in only and case.out_type in ("f16", "bf16"):
            twin = Case(case.shape, case.axes, case.klass, case.in_type, "f32", case.zero_point, case.scale_input)
            s32 = s.astype(np.float32)
            tfeed = dict(feed) | ({"s": s32} if case.scale_input else {})
            c["lowered f32 twin"] = Runner(lowered(model(twin, s32, z))[0], tfeed)
        t = timed(c, repeat)
        r.seconds.update({f"standalone: {k}": v for k, v in t.items()})
        if "standalone" in only:
            r.ratios["standalone"] = t["lowered"] / t["copy"] / floor
        if twin is not None:
            r.ratios["f16/bf16"] = t["lowered"] / t["lowered f32 twin"]
        del c
    if "graph" in only and case.out_type == "f32":
        low, r.graph_strategy = lowered(model(case, s, z, consumer="Relu"))
        c = {
            "per-tensor DQL -> Relu": Runner(model(case, s, z, consumer="Relu", native=True), {"x": x}),
            "lowered -> Relu": Runner(low, feed),
        }
        t = timed(c, repeat)
        r.seconds.update({f"graph: {k}": v for k, v in t.items()})
        r.ratios["graph"] = t["lowered -> Relu"] / t["per-tensor DQL -> Relu"] / floor
        del c
    return r


# ---- summary ----


def summary(results: list[Result], judged: bool = True) -> dict[str, dict]:
    """Per measure: n, median, p90, worst (with its case) over the judged (large enough) cases, or
    over the small ones (``judged=False``)."""
    out = {}
    for m in TARGETS:
        least = JUDGED_MIN_KERNEL if m == "kernel" else JUDGED_MIN
        pick = [res for res in results if m in res.ratios and (res.size >= least) == judged]
        vals = sorted(((res.ratios[m], res) for res in pick), key=lambda p: p[0])
        if not vals:
            continue
        v = np.array([p[0] for p in vals])
        worst_v, worst = vals[-1]
        p90_lim, worst_lim = TARGETS[m]
        p90 = float(np.percentile(v, 90))

        def label(res: Result, m: str = m) -> str:  # the reference's: whether its calls were cut
            return res.case + ("" if m != "reference" else cut_label(res))

        out[m] = {
            "n": len(v),
            "median": float(np.median(v)),
            "p90": p90,
            "worst": float(worst_v),
            "worst_case": label(worst),
            "worst_strategy": worst.graph_strategy if m == "graph" else worst.strategy,
            "top5": [(float(a), label(b)) for a, b in vals[-5:][::-1]],
            "p90_ok": None if p90_lim is None else p90 <= p90_lim,
            "worst_ok": None if worst_lim is None else worst_v <= worst_lim,
        }
    return out


def print_summary(summ: dict[str, dict], title: str) -> None:
    print(f"\n# {title}")
    print("# (graph, standalone, reference: ratios over the bytes floor; kernel: casting copies added)")
    print(f"{'measure':<12} {'n':>4} {'median':>8} {'p90':>8} {'worst':>8}  worst case")
    for m, d in summ.items():
        p90_lim, worst_lim = TARGETS[m]
        tgt = ", ".join(f"{k} <= {v}" for k, v in (("p90", p90_lim), ("worst", worst_lim)) if v is not None)
        ok = [d[k] for k in ("p90_ok", "worst_ok") if d[k] is not None]
        mark = "ok" if all(ok) else "MISSED"
        print(f"{m:<12} {d['n']:>4} {d['median']:>8.2f} {d['p90']:>8.2f} {d['worst']:>8.2f}  {d['worst_case']}")
        print(f"{'':<12} target {tgt}: {mark}; worst form {d['worst_strategy'] or '-'}")
        for v, c in d["top5"][1:]:
            print(f"{'':<12}   next {v:.2f}  {c}")


def report(results: list[Result]) -> tuple[dict[str, dict], dict[str, dict], dict[str, dict]]:
    """Print the distributions of the small (not judged) cases, the judged ones, and the judged ones
    without i32 inputs; return the three."""
    small = summary(results, judged=False)
    if small:
        print_summary(small, f"cases under {JUDGED_MIN} elements (kernel: {JUDGED_MIN_KERNEL}; fixed per-call costs)")
    summ = summary(results)
    print_summary(summ, f"{len(results)} cases: those of {JUDGED_MIN} elements or more (kernel: {JUDGED_MIN_KERNEL})")
    others = [r for r in results if " i32->" not in r.case]
    no_i32 = summary(others)
    print_summary(no_i32, f"the same without i32 inputs ({len(others)} cases; exact i32 needs float64 work in ORT)")
    return small, summ, no_i32


def held_out_parser(doc: str, unit: str) -> argparse.ArgumentParser:
    """The options of the held-out benchmarks that time pairs of models (``bench_readers.py``,
    ``bench_switch.py``): samples, rounds, ORT threads, a filter on ``unit`` names, JSON."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--repeat", type=count, default=7, help="timed samples per model (median taken)")
    ap.add_argument("--rounds", type=count, default=1, help=f"measure each {unit} this many times")
    ap.add_argument("--threads", type=count, default=1, help="ORT intra-op threads")
    ap.add_argument("--only", metavar="TEXT", default="", help=f"only the {unit}s whose name holds TEXT")
    ap.add_argument("--json", metavar="FILE", help="write every round's rows as JSON")
    return ap


def held_out_args(ap: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``ap``'s arguments, checked; ``THREADS`` set for the ``Runner`` sessions."""
    global THREADS
    args = ap.parse_args(argv)
    THREADS = args.threads
    return args


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="onnx_dequant: a seeded sweep of cases, each measure side by side")
    p.add_argument("--seed", type=int, default=0, help="case draw (0: the sweep; others: held-out cases)")
    p.add_argument("--repeat", type=count, default=5, help="timed samples per contender (median taken)")
    p.add_argument("--quick", action="store_true", help="every 8th case, at most 1M elements, 3 samples")
    p.add_argument("--cases", default="", metavar="REGEX", help="only cases whose name matches")
    p.add_argument("--max-elements", type=parse_size, default=MAX_ELEMENTS, help="skip larger cases (e.g. 4M)")
    p.add_argument("--measures", default=",".join(TARGETS), help="comma-separated subset of: " + ",".join(TARGETS))
    p.add_argument("--no-named", action="store_true", help="leave out the cases the issue names")
    p.add_argument("--list", action="store_true", help="print the cases and exit")
    p.add_argument("--start", type=int, default=1, metavar="N", help="begin at the N-th selected case (resume)")
    p.add_argument("--threads", type=count, default=1, help="ORT intra-op threads (default 1)")
    p.add_argument(
        "--symbolic",
        nargs="?",
        const="all",
        default="",
        choices=["all", "batch"],
        help="lower each case with its dims other than the axes (all), or its first one (batch), declared by name",
    )
    p.add_argument("--json", metavar="FILE", help="write every case's ratios and the distribution as JSON")
    p.add_argument("--summarize", nargs="+", metavar="JSON", help="print the distribution of earlier runs' JSON")
    args = p.parse_args(argv)
    if args.summarize:  # several files: resumed runs (a later file's case replaces an earlier one's)
        merged: dict[str, Result] = {}
        for path in args.summarize:
            with open(path) as f:
                for c in json.load(f)["cases"]:
                    merged[c["case"]] = Result(**c)
        report(list(merged.values()))
        return 0
    global THREADS, SYMBOLIC
    THREADS, SYMBOLIC = args.threads, args.symbolic
    cases = make_cases(args.seed)
    if not args.no_named:
        cases = NAMED + cases
    if args.quick:
        cases = cases[::8]
        args.max_elements = min(args.max_elements, 1 << 20)
        args.repeat = min(args.repeat, 3)
    pat = re.compile(args.cases)
    cases = [c for c in cases if pat.search(c.name) and c.size <= args.max_elements]
    cases = cases[args.start - 1 :]
    only = set(args.measures.split(","))
    if args.list:
        for c in cases:
            print(c.name)
        print(f"{len(cases)} cases")
        return 0
    import onnxruntime_extensions as ox

    print(
        f"# sweep seed {args.seed}{f' (symbolic dims: {SYMBOLIC})' if SYMBOLIC else ''}: {len(cases)} cases, "
        f"repeat {args.repeat}, "
        f"ORT {ort.__version__} "
        f"({THREADS} thread), onnxruntime-extensions {ox.__version__}, NumPy {np.__version__}",
        flush=True,
    )
    results = []
    t_start = time.perf_counter()
    for i, c in enumerate(cases):
        try:
            res = measure(c, args.repeat, only)
        except Exception as e:  # one case's failure must not cost the run: reported, left out
            print(f"[{i + 1}/{len(cases)}] {c.name}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        results.append(res)
        rs = "  ".join(f"{k} {v:.2f}" for k, v in res.ratios.items())
        rs += cut_label(res)
        print(f"[{i + 1}/{len(cases)}] {c.name} floor {res.floor:.2f}: {rs}  ({res.strategy or '-'})", flush=True)
    small, summ, no_i32 = report(results)
    print(f"\n{len(results)} cases in {time.perf_counter() - t_start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            doc = {
                "args": vars(args),
                "summary": summ,
                "summary_without_i32": no_i32,
                "small": small,
                "cases": [asdict(r) for r in results],
            }
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
