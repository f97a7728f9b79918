"""How much the fused loop compiles: a new combination of types and layout costs its first call seconds
(and the suite most of its time), so no walk is compiled that the loop does not call."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from onnx_dequant import _fused

CHILD = r"""
import collections, json
import numpy as np
from numba.core import event

compiled = collections.Counter()


class Count(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        compiled[ev.data["dispatcher"].py_func.__qualname__] += 1


event.register("numba:compile", Count())

import onnx_dequant as odq
from onnx_dequant import reference

layouts = []
for shape, axes in (((64, 200), (0,)), ((64, 200), (0, 1))):
    x = np.arange(np.prod(shape), dtype=np.int64).astype(np.int8).reshape(shape)
    s = np.full([shape[a] for a in axes], 0.5, np.float32)
    got = odq.dequantize(x, s, axes=axes)
    assert (got == x * np.float32(0.5)).all()
    blocks = reference._blocks_for(x.dtype, s.dtype)
    layouts.append(reference._loop_layout(reference._plan(reference._layout(shape, axes), blocks), blocks))
print(json.dumps({"layouts": layouts, "compiled": compiled}))
"""


@pytest.mark.skipif(not _fused.available(), reason="no numba")
def test_each_loop_compiles_its_walk_once(tmp_path):
    """A fresh loop (an empty Numba cache, in a process of its own) compiles one walk: Numba types a call
    again when an argument's type widens (a literal 0 that a loop makes an int64), and it compiled the
    walk for each typing, the first in vain (about 1.3 s a loop). Rows: the layouts that compile fewest
    helpers ("tiles spread" shares their path, and takes 15 s more)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["layouts"] == ["rows held", "rows varying"]
    loops, walks = report["compiled"]["fused_for.<locals>.loop"], report["compiled"]["_tiles_for.<locals>.walk"]
    assert loops == 2
    assert walks == loops
