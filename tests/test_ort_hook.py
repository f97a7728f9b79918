"""The private onnxruntime-extensions API the kernel relies on: pinned, present, and actually in use.

An upgrade of onnxruntime-extensions that moves or drops these must fail here, loudly, rather than
make users' sessions 40x slower (or abort them).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import onnxruntime_extensions as ox
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnxruntime_extensions import _ocos

import onnx_dequant as odq
from onnx_dequant.compare import same_bits
from onnx_dequant.ort import kernels

ROOT = Path(__file__).resolve().parents[1]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _model():
    node = odq.make_node(["x", "s"], ["y"], axes=[1], name="dq")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TP.INT8, [2, 3]), helper.make_tensor_value_info("s", TP.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)], ir_version=10
    )


def test_installed_version_is_inside_the_pinned_and_tested_range():
    low, high = kernels.SUPPORTED_EXTENSIONS
    assert low <= _version(ox.__version__) < high, f"onnxruntime-extensions {ox.__version__} is untested"
    pin = re.search(r'"onnxruntime[-_]extensions([^"]*)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert f">={'.'.join(map(str, low))}" in pin and f"<{'.'.join(map(str, high[:2]))}" in pin, pin


def test_private_api_is_where_the_kernel_expects_it():
    assert callable(getattr(ox.PyCustomOpDef, "install_hooker", None))
    stock = _ocos._on_pyop_invocation
    assert list(inspect.signature(stock).parameters) == ["k_id", "feed", "attributes"]
    assert isinstance(_ocos.Opdef._odlist, dict)
    create = inspect.getsource(_ocos.Opdef.create)  # the keywords the kernel defines its ops with
    for keyword in ("op_type", "inputs", "outputs", "attrs"):
        assert f'kwargs.get("{keyword}"' in create, keyword
    # every op the kernel defined is in the registry under its id (the hook's k_id), with a replaceable body
    kernels.ensure_registered()
    ours = {od.op_type: (k, od) for k, od in _ocos.Opdef._odlist.items() if od.op_type.startswith(odq.DOMAIN + "::")}
    for spec in kernels._all_specs():
        k, od = ours[f"{odq.DOMAIN}::{spec.op_type}"]
        assert k == id(od) and callable(od.body)
        assert len(od._nativedef.input_types) == spec.inputs
        assert set(od._nativedef.attrs) == {"odq_axes", "odq_node"}
    # the stock handler still turns outputs into Python lists: the reason for the hook
    assert "tolist" in inspect.getsource(stock)


def test_the_fast_hook_carries_every_kernel_call():
    sess = odq.session(_model())
    assert kernels.fast_bridge_installed()
    before = kernels.stats()
    x = np.array([[1, -2, 3], [4, 5, -128]], np.int8)
    s = np.array([0.5, 2.0, -1.0], np.float32)
    for _ in range(3):
        (y,) = sess.run(None, {"x": x, "s": s})
        assert same_bits(y, odq.dequantize(x, s, axes=[1]))
    after = kernels.stats()
    assert after["calls"] - before["calls"] == 3
    assert after["fast"] - before["fast"] == 3  # none went through the stock list bridge


def test_stock_bridge_still_gives_the_same_bits_if_the_hook_is_replaced():
    sess = odq.session(_model())
    loose = odq.session(_model_unknown_scale())
    x = np.array([[1, -2, 3], [4, 5, -128]], np.int8)
    s = np.array([0.5, 2.0, -1.0], np.float32)
    before = kernels.stats()
    ox.PyCustomOpDef.install_hooker(_ocos._on_pyop_invocation)  # what another package might do
    try:
        (y,) = sess.run(None, {"x": x, "s": s})
        with pytest.raises(odq.DequantizeError, match="node 'dq'"):  # errors still never abort
            loose.run(None, {"x": x, "s": np.ones(5, np.float32)})
    finally:
        kernels.reinstall_hook()
    after = kernels.stats()
    assert after["fast"] == before["fast"] and after["calls"] - before["calls"] == 2
    assert same_bits(y, odq.dequantize(x, s, axes=[1]))
    sess.run(None, {"x": x, "s": s})
    assert kernels.stats()["fast"] == after["fast"] + 1  # a new session or reinstall restores the hook


def _model_unknown_scale():
    m = _model()
    m.graph.input[1].type.tensor_type.ClearField("shape")
    return m


def test_registration_is_idempotent():
    kernels.ensure_registered()
    kernels.ensure_registered()
    names = [od.op_type for od in _ocos.Opdef._odlist.values() if od.op_type.startswith(odq.DOMAIN + "::")]
    assert len(names) == len(set(names)) == len(kernels._all_specs()) == 40


_LAST_RESORT = """
import sys
import numpy as np
import onnx_dequant as odq
from onnx import helper, TensorProto as TP
from onnxruntime_extensions import _ocos

node = odq.make_node(["x", "s"], ["y"], axes=[1], name="dq")
g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.INT8, [2, 3]),
    helper.make_tensor_value_info("s", TP.FLOAT, [3])], [helper.make_tensor_value_info("y", TP.FLOAT, None)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ngraph", 1)], ir_version=10)
sess = odq.session(m)
def raising(*a, **k):
    raise OSError("body replaced")
for od in _ocos.Opdef._odlist.values():
    if od.op_type.startswith("ngraph::Dequantize_i8_f32"):
        od.body = raising
try:
    sess.run(None, {"x": np.ones((2, 3), np.int8), "s": np.ones(3, np.float32)})
except RuntimeError as e:
    print("CAUGHT", e)
    sys.exit(3)
sys.exit(10)
"""


def test_the_hook_itself_never_lets_an_exception_escape():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _LAST_RESORT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "node 'dq'" in proc.stdout and "body replaced" in proc.stdout
