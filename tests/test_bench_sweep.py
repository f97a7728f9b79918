"""scripts/bench_sweep.py's report of whether the reference's calls of a case were cut among threads."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import script_module

import onnx_dequant as odq
from onnx_dequant import _fused, _split, reference


@pytest.fixture(scope="module")
def sweep():
    with script_module("bench_sweep") as module:
        yield module


@pytest.mark.skipif(not _fused.available() or _split.cpu_count() < 2, reason="no numba, or one CPU")
def test_cut_share_is_the_cases_calls_cut_over_its_calls(sweep):
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (_split.MIN_ELEMENTS // 64, 64)).astype(np.int8)
    s = rng.uniform(0.01, 0.1, 64).astype(np.float32)
    for _ in range(12):
        odq.dequantize(x, s, axes=(1,))
    cost = reference._checked(x.dtype, x.shape, s.dtype, s.shape, None, None, (1,), None, True)[4][2]
    assert cost.calls >= 12
    cut, cold = sweep.cut_share(x, s, None, (1,))
    assert cut == cost.cuts / cost.calls <= 1.0  # each cut call counted once, cold or not
    assert cold == (cost.colds / cost.cuts if cost.cuts else 0.0) <= 1.0
    small = x[:100]
    odq.dequantize(small, s, axes=(1,))
    assert sweep.cut_share(small, s, None, (1,)) is None  # never cut: under _split.MIN_ELEMENTS


def test_the_references_worst_cases_say_how_much_was_cut(sweep):
    results = [
        sweep.Result("a", 1 << 20, 1.0, ratios={"reference": 2.5, "standalone": 3.0}, cut=0.3, cold=0.0),
        sweep.Result("b", 1 << 20, 1.0, ratios={"reference": 1.5, "standalone": 1.0}),
        sweep.Result("c", 1 << 20, 1.0, ratios={"reference": 1.2, "standalone": 1.0}, cut=0.97, cold=0.9),
    ]
    summ = sweep.summary(results)
    assert summ["reference"]["worst_case"] == "a (cut 30%)"
    assert summ["reference"]["top5"][1:] == [(1.5, "b"), (1.2, "c (cut 97%, 90% cold)")]
    assert summ["standalone"]["worst_case"] == "a"  # the cut share is the reference's alone


@pytest.mark.parametrize(
    "axes,which,named",
    [
        ((1,), "all", [0, 2]),
        ((1,), "batch", [0]),  # the first dim alone
        ((0, 2), "batch", []),  # a quantized first dim is no batch
        ((0, 2), "all", [1]),
    ],
)
def test_symbolic_declares_the_dims_asked_for_by_name(sweep, axes, which, named):
    case = sweep.Case((6, 5, 4), axes, "x", "i8", "f32", True, False)
    x, s, z = sweep.data(case)
    m = sweep.symbolic(sweep.model(case, s, z, consumer="Relu"), which)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    assert [i for i, d in enumerate(dims) if d.dim_param] == named
    assert [d.dim_value for i, d in enumerate(dims) if i not in named] == [
        n for i, n in enumerate(x.shape) if i not in named
    ]


def test_the_scripts_options_of_counts_and_sizes_are_checked_once_for_all(sweep):
    """``benchlib.count`` and ``benchlib.parse_size``, the ``argparse`` types every timing script's
    samples, rounds, threads and sizes go through (``bench_sweep`` takes them from there): a count below
    1 or not a number, or a size that is none, is a usage error naming the option, not a traceback (a
    median of no sample) or a run that measures nothing."""
    import argparse

    count, parse_size = sweep.count, sweep.parse_size
    assert [count("1"), count("12")] == [1, 12]
    assert [parse_size(t) for t in ("4096", "64k", "4M", " 1G ")] == [4096, 64 << 10, 4 << 20, 1 << 30]
    for bad, why in (("0", "at least 1"), ("-3", "at least 1"), ("two", "not a whole number"), ("1.5", "not a whole")):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            count(bad)
    for bad in ("4x", "M", "", "-1K"):
        with pytest.raises(argparse.ArgumentTypeError, match="not a size"):
            parse_size(bad)
    ap = argparse.ArgumentParser(prog="p")
    ap.add_argument("--repeat", type=count)
    with pytest.raises(SystemExit) as e:
        ap.parse_args(["--repeat", "0"])
    assert e.value.code == 2
