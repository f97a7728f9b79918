"""The reference's results that every path is compared with, and their memory.

The outputs are computed once. Large outputs that were quick to compute are let go while a kernel path
runs (the kernel's bridge holds a second copy of its outputs): their memory becomes the kernels'
scratch, and the reference then computes them again into that same memory, poisoned first, so no
fresh pages are faulted in and an element the rerun skips cannot pass. Every path's outputs go into
one reused buffer per output (``buffers``), poisoned where the reference's values are known.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .buffers import POISON_STRIDE, poison
from .progress import Progress
from .runners import ReferenceRunner
from .stand_in import OrtStandIn

__all__ = ["Expected", "RELEASE_BYTES", "RELEASE_SECONDS"]

RELEASE_BYTES = 256 << 20
RELEASE_SECONDS = 1.0
"""Outputs of at least ``RELEASE_BYTES`` whose reference run took at most ``RELEASE_SECONDS`` are not held
while a kernel path runs: the reference runs again after it (time traded for peak memory)."""


class Expected:
    """The reference's outputs (and, on demand, every intermediate tensor) for one set of feeds; ``oracle``
    is the reference evaluator or, for a model it cannot run, ONNX Runtime standing in."""

    def __init__(
        self,
        oracle: ReferenceRunner | OrtStandIn,
        feeds: Mapping[str, np.ndarray],
        outputs: Sequence[str],
        show: Progress,
    ) -> None:
        self.oracle, self.feeds, self.names, self.show = oracle, feeds, list(outputs), show
        self.seconds = 0.0
        self.runs = 0
        self._outputs: dict[str, Any] | None = self._run("running the reference")
        self._lent: dict[str, np.ndarray] = {}  # the outputs' arrays while the kernels use them
        self._intermediate: dict[str, Any] | None = None
        arrays = [a for a in (self._outputs[n] for n in self.names) if isinstance(a, np.ndarray)]
        self.release = sum(a.nbytes for a in arrays) >= RELEASE_BYTES and self.seconds <= RELEASE_SECONDS
        self.buffers: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        """One output buffer per output, with the reference's values at the poisoned positions."""
        for name in self.names:
            ref = self._outputs[name]
            if isinstance(ref, np.ndarray) and ref.size and ref.flags.c_contiguous:
                self.buffers[name] = (np.empty_like(ref), ref.reshape(-1)[::POISON_STRIDE].copy())

    def _run(self, what: str, into: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
        t0 = time.perf_counter()
        with self.show.step(what):
            outputs = self.oracle.run(self.feeds, into=into)
        self.seconds += time.perf_counter() - t0
        self.runs += 1
        return outputs

    def scratch(self, kernel: bool) -> list[np.ndarray] | None:
        """Before a path runs: for a kernel path, when outputs are released, their memory (let go here)."""
        if kernel and self.release and self._outputs is not None:
            self._lent = {n: self._outputs[n] for n in self.names if isinstance(self._outputs[n], np.ndarray)}
            self._outputs = None
        return list(self._lent.values()) if self._outputs is None else None

    def outputs(self) -> dict[str, Any]:
        """The outputs by name, computed again (into the lent memory, poisoned first) when let go."""
        if self._outputs is None:
            for name, a in self._lent.items():  # against the first run's values: an element skipped fails
                known = self.buffers.get(name)
                if a.size:
                    poison(a, known[1] if known is not None else a.reshape(-1)[::POISON_STRIDE].copy())
            self._outputs = self._run("running the reference again", into=self._lent)
            self._lent = {}
        return self._outputs

    def intermediate(self) -> dict[str, Any]:
        """Every tensor the reference computes or takes in (computed once, when first asked)."""
        if self._intermediate is None:
            with self.show.step("running the reference with intermediates"):
                self._intermediate = self.oracle.run(self.feeds, intermediate=True)
        return self._intermediate
