"""Side-by-side timing for the benchmark scripts: contenders run interleaved, medians and ratios printed.

Every ``scripts/bench*.py`` uses ``Bench``: one case at a time, each contender timed ``repeat`` times in
round-robin order (so machine noise hits them alike), then one table row per contender with its median
and its ratio to the case's baseline. ``--json`` writes the rows for programs.
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

import numpy as np


def count(text: str) -> int:
    """An ``argparse`` type: a whole number of at least 1 (timed samples, rounds, threads); a usage error
    otherwise (none would leave a median of nothing to take, or nothing measured and an exit of 0)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def parse_size(text: str) -> int:
    """An ``argparse`` type: a count of elements, ``4096``, ``64K``, ``4M`` or ``1G`` (powers of 2)."""
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


@dataclass
class Row:
    case: str
    contender: str
    median_s: float
    ratio: float  # median / baseline's median
    baseline: str
    target: str = ""  # e.g. "<= 2.0x copy"; empty when none
    ok: bool | None = None
    extra: dict = field(default_factory=dict)


class Bench:
    """Collects rows; ``case`` times contenders side by side."""

    def __init__(self, title: str, argv: list[str] | None = None, default_repeat: int = 7) -> None:
        p = argparse.ArgumentParser(description=title)
        p.add_argument("--repeat", type=count, default=default_repeat, help="timed runs per contender")
        p.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs (smoke test)")
        p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
        p.add_argument("--only", metavar="SUBSTR", default="", help="run only cases whose name contains this")
        self.parser = p
        self.title = title
        self.argv = argv
        self.rows: list[Row] = []
        self._args: argparse.Namespace | None = None

    @property
    def args(self) -> argparse.Namespace:
        if self._args is None:
            self._args = self.parser.parse_args(self.argv)
            if self._args.quick:
                self._args.repeat = min(self._args.repeat, 3)
            print(f"# {self.title}", flush=True)
        return self._args

    def wants(self, case: str) -> bool:
        return self.args.only in case

    def case(
        self,
        case: str,
        contenders: dict[str, Callable[[], object]],
        baseline: str,
        targets: dict[str, tuple[str, float]] | None = None,
    ) -> dict[str, float]:
        """Time each contender; ``targets[name] = (description, max_ratio)``. Returns medians by name."""
        if not self.wants(case):
            return {}
        targets = targets or {}
        times: dict[str, list[float]] = {n: [] for n in contenders}
        for fn in contenders.values():  # warm-up
            fn()
        for _ in range(self.args.repeat):
            for name, fn in contenders.items():
                gc.collect()
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        med = {n: statistics.median(t) for n, t in times.items()}
        base = med[baseline]
        print(f"\n## {case}")
        print(f"{'contender':<44} {'median':>10} {'ratio':>8}  target")
        for name in contenders:
            ratio = med[name] / base if base > 0 else float("inf")
            desc, limit = targets.get(name, ("", None))
            if limit is not None and self.args.quick:  # targets are stated at full size
                desc, limit = f"{desc} (not checked with --quick)", None
            ok = None if limit is None else ratio <= limit
            mark = "" if ok is None else ("  ok" if ok else "  MISSED")
            print(f"{name:<44} {med[name] * 1e3:>8.1f}ms {ratio:>7.2f}x  {desc}{mark}")
            self.rows.append(Row(case, name, med[name], ratio, baseline, desc, ok))
        sys.stdout.flush()
        return med

    def finish(self) -> int:
        """Print the summary, write JSON if asked; exit status 0 (targets are reported, not enforced)."""
        missed = [r for r in self.rows if r.ok is False]
        print(f"\n{len(self.rows)} rows, {sum(r.ok is True for r in self.rows)} targets met, {len(missed)} missed")
        for r in missed:
            print(f"  missed: {r.case} / {r.contender}: {r.ratio:.2f}x ({r.target})")
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump([asdict(r) for r in self.rows], f, indent=1)
        return 0


def case_data(
    rng: np.random.Generator, shape: tuple[int, ...], axes: tuple[int, ...], zero_point: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Random int8 input, f32 scales in [0.001, 0.1) and (optionally) int8 zero points for one case."""
    sshape = tuple(shape[a] for a in axes)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    s = rng.uniform(0.001, 0.1, sshape).astype(np.float32)
    z = rng.integers(-128, 128, sshape, dtype=np.int8) if zero_point else None
    return x, s, z
