"""Converting a whole folder of nGraph graphs: ``convert_tree(src, out, *, lower=False, jobs=None, ...)``.

Every ``*.json`` under ``src`` becomes ``out/<same relative path>.onnx``, on ``jobs`` processes (default:
every core). One graph failing never stops the others: each is converted, checked with ``onnx.checker``
and written whole (or, when refused, not at all) on its own, and the ``TreeReport`` says per graph what
happened: converted (op and node counts) or refused (the rule, the node and its op type). The report's
``stopped_by`` counts the op types that stopped graphs, most frequent first.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DequantizeError, shown_text
from ..opsets import DEFAULT_OPSET
from . import reader
from .export import save_converted
from .importer import convert

__all__ = ["convert_tree", "TreeReport", "GraphResult", "find_graphs"]


@dataclass
class GraphResult:
    """One graph of the folder: ``status`` "converted" or "refused"."""

    graph: str
    """The JSON file, relative to the source folder."""
    status: str
    output: str | None = None
    """The ONNX file written, relative to the output folder (None when refused)."""
    ops: int | None = None
    """Ops in the converted function (None when the file did not parse)."""
    nodes: int | None = None
    """ONNX nodes in the model (converted only)."""
    error: str | None = None
    """The rule broken (refused only), as ``DequantizeError.rule``."""
    node: str | None = None
    """The op that stopped the graph, when the error names one."""
    op_type: str | None = None
    """That op's type (``"TopK"``), when known."""
    seconds: float = 0.0

    @property
    def message(self) -> str:
        """One line: the file, the node and the rule, as ``DequantizeError`` words it."""
        return str(DequantizeError(self.error or "", node=self.node, path=self.graph))


@dataclass
class TreeReport:
    """What ``convert_tree`` did, graph by graph (in path order)."""

    source: str
    output: str
    jobs: int
    results: list[GraphResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def converted(self) -> list[GraphResult]:
        """The graphs written."""
        return [r for r in self.results if r.status == "converted"]

    @property
    def refused(self) -> list[GraphResult]:
        """The graphs not written, each with the reason."""
        return [r for r in self.results if r.status != "converted"]

    @property
    def ok(self) -> bool:
        """Every graph converted."""
        return not self.refused

    @property
    def stopped_by(self) -> list[tuple[str, int]]:
        """``(op type, graphs it stopped)``, most first; ``"(file)"`` for graphs refused before any op."""
        counts = Counter(r.op_type or "(file)" for r in self.refused)
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON values; paths and messages as valid Unicode text (``errors.shown_text``)."""

        def shown(v: Any) -> Any:
            return shown_text(v) if isinstance(v, str) else v

        return {
            "source": shown(self.source),
            "output": shown(self.output),
            "jobs": self.jobs,
            "graphs": len(self.results),
            "converted": len(self.converted),
            "refused": len(self.refused),
            "ops": sum(r.ops or 0 for r in self.results),
            "nodes": sum(r.nodes or 0 for r in self.converted),
            "stopped_by": dict(self.stopped_by),
            "seconds": round(self.seconds, 3),
            "results": [{k: shown(v) for k, v in asdict(r).items() if v is not None} for r in self.results],
        }


def find_graphs(src: str | os.PathLike[str]) -> list[str]:
    """Every ``*.json`` file under ``src`` (recursively, hidden folders skipped), relative, sorted."""
    root = Path(src)
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in filenames:
            if f.endswith(".json") and not f.startswith("."):
                found.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(found)


def _ops(data: list[Any], function: str | None) -> list[Any]:
    """The raw op list of the function converted (the last one, or the one named), [] if there is none."""
    for fn in reversed(data):
        if isinstance(fn, dict) and (function is None or fn.get("name") == function):
            ops = fn.get("ops")
            return ops if isinstance(ops, list) else []
    return []


def _op_type(ops: list[Any], node: str | None) -> str | None:
    if node is None:
        return None
    for op in ops:
        if isinstance(op, dict) and op.get("name") == node:
            t = op.get("op")
            return t if isinstance(t, str) else None
    return None


def _convert_one(src: str, rel: str, out: str, options: dict[str, Any]) -> GraphResult:
    """Convert, check and write one graph; every failure becomes a refused result."""
    t0 = time.perf_counter()
    target = os.path.splitext(rel)[0] + ".onnx"
    result = GraphResult(rel, "refused")
    data: list[Any] = []
    try:
        data, _ = reader.load(os.path.join(src, rel))
        result.ops = len(_ops(data, options["function"]))
        model = convert(data, function=options["function"], opset=options["opset"])
        path = Path(out) / target
        path.parent.mkdir(parents=True, exist_ok=True)
        model = save_converted(model, path, lower=options["lower"])
        result.status, result.output, result.nodes = "converted", target, len(model.graph.node)
    except DequantizeError as e:
        result.error, result.node = e.rule, e.node
        result.op_type = _op_type(_ops(data, options["function"]), e.node)
    except OSError as e:
        result.error = f"cannot write the model: {e.strerror or e}"
    except Exception as e:  # a bug must not stop the other graphs: report it as this graph's failure
        result.error = f"internal error ({type(e).__name__}: {e})"
    result.seconds = time.perf_counter() - t0
    return result


_converting = False
"""In a worker: a graph is being converted."""
_stop_requested = False
"""In a worker: SIGTERM came; the worker exits once the graph under way is written (or refused)."""

_WORKER_SIGNALS = {signal.SIGINT, signal.SIGTERM}
_GRACE = 5.0
"""Seconds the stopped workers have to finish the graph under way before they are killed."""


def _worker_sigterm(signum: int, frame: Any) -> None:
    """A worker's SIGTERM: exit now between two graphs; during one, once it is finished. Never raises: an
    exception at an arbitrary bytecode could leave a temporary output file behind."""
    global _stop_requested
    _stop_requested = True
    if not _converting:
        os._exit(128 + signum)


_state: Any = None
"""In a worker: the pass's shared ``RawArray`` of graph states (``_QUEUED``, ``_UNDER_WAY``, ``_DONE``), by index."""
_QUEUED, _UNDER_WAY, _DONE = 0, 1, 2


def _init_worker(state: Any = None) -> None:
    """A worker's signals: Ctrl-C (the terminal sends it to the whole process group) is the parent's to
    handle, which stops the workers with SIGTERM; SIGTERM lets the graph under way finish, then ends the worker.
    The parent blocked both while it started the workers: nothing arrived before these handlers were set.
    ``state``: where the worker marks the graphs it starts and ends (shared memory: no lock a dying worker
    could hold)."""
    global _state
    _state = state
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _worker_sigterm)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WORKER_SIGNALS)


def _convert_in_worker(src: str, rel: str, out: str, options: dict[str, Any], index: int) -> GraphResult:
    """``_convert_one`` in a worker process (graph ``index`` of the pass: marked under way, then done); after
    a SIGTERM the worker exits once the graph is done."""
    global _converting
    _converting = True
    result = None
    if not _stop_requested:
        _state[index] = _UNDER_WAY
        result = _convert_one(src, rel, out, options)
        _state[index] = _DONE
    _converting = False
    if _stop_requested or result is None:  # the parent stops the pool: it does not wait for this result
        os._exit(128 + signal.SIGTERM)
    return result


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM held back in this thread (where the platform can), delivered on leaving.

    Around starting the workers: a forked worker inherits the mask, so it gets neither before
    ``_init_worker`` has set its handlers (Ctrl-C there printed a worker's traceback)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _WORKER_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _stop_pool(pool: ProcessPoolExecutor, interrupted: BaseException) -> None:
    """Stop the workers at once (Ctrl-C, SIGTERM, an error in this process): queued graphs are cancelled,
    each worker gets SIGTERM (it finishes the graph under way: written whole or refused, never half) and is
    killed if it has not exited after ``_GRACE`` seconds. A Ctrl-C or SIGTERM meanwhile waits until the
    workers are gone (blocked, and its Python handler swapped for one that notes it); a noted one is raised
    then only where ``interrupted`` is an error, not already a signal's exception (Ctrl-C twice is one
    interruption)."""
    held: list[tuple[int, Any]] = []
    saved: dict[int, Any] = {}
    try:
        with _signals_blocked():
            if threading.current_thread() is threading.main_thread():
                for sig in _WORKER_SIGNALS:
                    handler = signal.getsignal(sig)
                    if callable(handler):
                        saved[sig] = handler
                        signal.signal(sig, lambda signum, frame: held.append((signum, frame)))
            processes = list((getattr(pool, "_processes", None) or {}).values())  # the executor's own table
            pool.shutdown(wait=False, cancel_futures=True)
            for p in processes:
                p.terminate()  # no-op for one that has exited
            # Each worker's sentinel turns ready when it exits: unlike ``join``, it does not race with the
            # executor's own thread, which reaps the workers too (a pid reaped there reads as alive here).
            left = {p.sentinel: p for p in processes}
            deadline = time.monotonic() + _GRACE
            while left and (remaining := deadline - time.monotonic()) > 0:
                for ready in multiprocessing.connection.wait(list(left), remaining):
                    left.pop(ready)  # type: ignore[call-overload]
            for p in left.values():
                p.kill()
            if left:  # (waiting on no object at all would wait for ever)
                multiprocessing.connection.wait(list(left))
    finally:  # unblocked first: a signal held meanwhile reaches the noting handler (``signal.signal`` runs
        for sig, handler in saved.items():  # what is pending before it sets), not the one put back
            signal.signal(sig, handler)
    if held and isinstance(interrupted, Exception):
        signum, frame = held[0]
        saved[signum](signum, frame)


def _pool_pass(
    src: str, out: str, rels: list[str], jobs: int, options: dict[str, Any], finished: Callable[[GraphResult], None]
) -> tuple[list[str], list[str], list[int | None]]:
    """Convert ``rels`` on a pool of ``jobs`` workers, each result handed to ``finished``. Where a worker
    died: the graphs it left to do again (not started, or done with their result lost) and those under way
    in a worker then, whose temporary files are removed, and the workers' exit codes."""
    ctx = _context()
    state = ctx.RawArray("b", len(rels))
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(rels)), mp_context=ctx, initializer=_init_worker, initargs=(state,)
    )
    lost: list[int] = []
    try:
        with _signals_blocked():  # the workers start during the submits
            futures = {pool.submit(_convert_in_worker, src, rel, out, options, i): i for i, rel in enumerate(rels)}
        processes = list((getattr(pool, "_processes", None) or {}).values())  # the executor's own table
        for fut in as_completed(futures):
            try:
                finished(fut.result())
            except BrokenProcessPool:  # a worker died: this graph's fate is known once the pool is down
                lost.append(futures[fut])
            except Exception as e:  # noqa: BLE001 - a result that did not come back (it could not be sent)
                i = futures[fut]
                finished(GraphResult(rels[i], "refused", error=f"the worker failed ({type(e).__name__}: {e})"))
    except BaseException as e:  # Ctrl-C, SIGTERM: waiting for the queued graphs could hang (workers
        _stop_pool(pool, e)  # interrupted in the queues' locks), and would convert them all first
        raise
    pool.shutdown(wait=True)  # every worker has exited: the states are final
    under_way = [rels[i] for i in sorted(lost) if state[i] == _UNDER_WAY]
    for rel in under_way:
        _remove_temporaries(out, rel)
    exits = [p.exitcode for p in processes] if lost else []
    return [rels[i] for i in sorted(lost) if state[i] != _UNDER_WAY], under_way, exits


def _remove_temporaries(out: str, rel: str) -> None:
    """The temporary files a worker that died while writing ``rel``'s model may have left beside it."""
    target = Path(out) / (os.path.splitext(rel)[0] + ".onnx")
    with contextlib.suppress(OSError):
        for name in os.listdir(target.parent):
            if name.startswith(f".{target.name}.") and name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    os.unlink(target.parent / name)


def _death(exits: list[int | None]) -> str:
    """How the worker that converted a graph alone ended (its exit code): 'was killed by SIGKILL', ..."""
    code = next((c for c in exits if c), None)
    if code is None:
        return "died"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _context() -> Any:
    # fork shares the imported modules with the workers (no re-import per worker); elsewhere, spawn
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def convert_tree(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    lower: bool = False,
    jobs: int | None = None,
    opset: int = DEFAULT_OPSET,
    function: str | None = None,
    progress: Callable[[int, int, GraphResult], None] | None = None,
) -> TreeReport:
    """Convert every ``*.json`` under ``src`` into ``out`` (keeping the tree) and report on each graph.

    ``jobs``: worker processes (default: every core; 1 converts in this process). ``lower``: rewrite
    Dequantize into standard ONNX. ``progress(done, total, result)`` is called as each graph finishes.
    ``DequantizeError`` only for bad usage: ``src`` not a folder, ``out`` not a folder, no graphs found.
    """
    t0 = time.perf_counter()
    src_path, out_path = Path(src), Path(out)
    if not src_path.is_dir():
        raise DequantizeError("the source is not a folder", path=str(src))
    if out_path.exists() and not out_path.is_dir():
        raise DequantizeError("the output exists and is not a folder", path=str(out))
    graphs = find_graphs(src_path)
    if not graphs:
        raise DequantizeError("no *.json graphs under the folder", path=str(src))
    if jobs is not None and jobs < 1:
        raise DequantizeError(f"jobs must be at least 1, got {jobs}")
    jobs = min(jobs or os.cpu_count() or 1, len(graphs))
    out_path.mkdir(parents=True, exist_ok=True)
    options = {"lower": lower, "opset": opset, "function": function}
    report = TreeReport(str(src), str(out), jobs)
    done: dict[str, GraphResult] = {}

    def finished(r: GraphResult) -> None:
        done[r.graph] = r
        if progress is not None:
            progress(len(done), len(graphs), r)

    if jobs == 1:
        for rel in graphs:
            finished(_convert_one(str(src_path), rel, str(out_path), options))
    else:
        # A worker that dies (out of memory, a crash in a library) breaks the pool: every graph not yet
        # reported fails with it. Those not started (or done, their result lost) go to a new pool; those
        # under way in a worker then (one of them killed it) are converted alone, each in a worker of its own.
        pending, alone = graphs, []
        while pending:
            pending, under_way, _ = _pool_pass(str(src_path), str(out_path), pending, jobs, options, finished)
            if pending and not under_way:  # a worker died with no graph under way: the rest run alone
                under_way, pending = pending, []
            alone += under_way
        for rel in alone:
            again, died, exits = _pool_pass(str(src_path), str(out_path), [rel], 1, options, finished)
            if again or died:
                finished(GraphResult(rel, "refused", error=f"the worker converting it {_death(exits)}"))
    report.results = [done[g] for g in graphs]
    report.seconds = time.perf_counter() - t0
    return report
