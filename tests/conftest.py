"""Shared test set-up."""

from __future__ import annotations

import importlib

import pytest

from onnx_dequant import reference

# Test modules that use the reference only as the oracle of other paths (the lowering's forms in ONNX
# Runtime): there it runs its NumPy loop, whatever the input's size. Which loop computes the oracle does not
# change what they test (test_reference.py checks that both loops give the same bits), and the compiled
# loop's kernels for their types and layouts cost 5-15 s of compiling each, on a cold cache.
NUMPY_ORACLE = {"test_lowering.py", "test_lowering_property.py", "test_lowering_model.py", "test_planner.py"}


@pytest.fixture(autouse=True)
def _oracle_loop(request, monkeypatch):
    if request.path.name in NUMPY_ORACLE:
        monkeypatch.setattr(reference, "FUSED_MIN_ELEMENTS", 1 << 62)


@pytest.fixture(params=["ort-run", "bound"])
def placement(request, monkeypatch):
    """Both ways ``KernelSession.run`` runs: ONNX Runtime's own ``run`` (the test's outputs are too small
    to bind), and every kernel's graph output bound, computed in place, however small."""
    if request.param == "bound":
        monkeypatch.setattr(importlib.import_module("onnx_dequant.ort.session"), "PLACE_MIN_BYTES", 1)
    return request.param
