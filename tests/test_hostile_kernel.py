"""Hostile use of the Python kernel: signals while ONNX Runtime runs it, run_async and interpreter exit.

Each attack aborted the process before (SIGABRT: pybind11's error_already_set escaping a C++ thread, or
"terminate called without an active exception"); they run in one child process, whose exit status and
output are checked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each child starts as a command typed at a shell in the foreground does, Ctrl-C raising
# KeyboardInterrupt: a harness that runs the tests in the background (``cmd &`` in a script) starts
# them with SIGINT ignored, which Python keeps, and the signals the tests send would do nothing.
_FOREGROUND = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"

# A child's SIGINT handler that raises KeyboardInterrupt only while ``armed[0]`` (a run under way), once
# per arming: a signal taken at the child loop's own bytecodes (its backward jump, outside any try) would
# otherwise end the child rather than the run. Children run it with ``exec(ARMED_SIGINT)``.
_ARMED_SIGINT = (
    "armed = [False]\n"
    "def _interrupt(signum, frame):\n"
    "    if armed[0]:\n"
    "        armed[0] = False\n"
    "        raise KeyboardInterrupt\n"
    "signal.signal(signal.SIGINT, _interrupt)\n"
)
_PRELUDE = f"ARMED_SIGINT = {_ARMED_SIGINT!r}\n"

_CHILD = textwrap.dedent(
    """
    import os, random, signal, threading, time
    import numpy as np
    import onnx_dequant as odq
    from onnx import TensorProto, helper, numpy_helper
    from onnx_dequant.ort import kernels

    n = 60
    nodes = [odq.make_node(["x", "s"], [f"y{i}"], axes=(0,), name=f"dq{i}") for i in range(n)]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT8, [64, 256])],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [64, 256]) for i in range(n)],
        [numpy_helper.from_array(np.full(64, 0.25, np.float32), "s")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), odq.schema.opset_import()])
    sess = odq.session(model)
    feed = {"x": np.ones((64, 256), np.int8)}

    # 1. Ctrl-C raised inside a kernel: held back until the run is over, the kernel not interrupted
    original = kernels.dequantize
    def interrupting(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10000):  # bytecodes: a handler not held back runs here
            pass
        return original(*args, **kwargs)
    kernels.dequantize = interrupting
    errors = kernels.stats()["errors"]
    try:
        sess.run(None, feed)
        print("not interrupted", flush=True)
    except KeyboardInterrupt:
        print("deferred, kernel errors:", kernels.stats()["errors"] - errors, flush=True)
    kernels.dequantize = original

    # 2. a storm of SIGINTs at random moments while runs follow one another. The handler raises only
    # while a run is under way, once per arming: a signal the loop's own bytecodes take (its backward
    # jump, outside any try) would otherwise end the test script rather than the run.
    exec(ARMED_SIGINT)
    stop = time.monotonic() + 1.5
    def storm():
        rng = random.Random(0)
        while time.monotonic() < stop:
            time.sleep(rng.uniform(0.003, 0.02))
            os.kill(os.getpid(), signal.SIGINT)
    t = threading.Thread(target=storm)
    t.start()
    interrupts = 0
    while t.is_alive():
        try:
            armed[0] = True
            y = sess.run(["y0"], feed)[0]
            armed[0] = False
            assert float(y[0, 0]) == 0.25
        except KeyboardInterrupt:
            interrupts += 1
    armed[0] = False
    t.join()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("storm interrupts:", interrupts, flush=True)

    # 3. run_async, then the script ends while the run may still be going
    def done(results, data, err):
        print("async done:", err == "" and float(results[0][0, 0]) == 0.25, flush=True)
    sess.run_async(None, feed, done, None)
    """
)


def test_signals_and_exit_never_abort():
    proc = subprocess.run(
        [sys.executable, "-c", _FOREGROUND + _PRELUDE + _CHILD], capture_output=True, text=True, timeout=240, cwd=ROOT
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "deferred, kernel errors: 0" in proc.stdout, proc.stdout
    assert "storm interrupts:" in proc.stdout and "storm interrupts: 0" not in proc.stdout, proc.stdout
    assert "async done: True" in proc.stdout, proc.stdout
    assert "terminate called" not in proc.stderr


_CLI_CHILD = textwrap.dedent(
    """
    import sys
    from onnx_dequant import cli  # what the console script does first
    heavy = sorted(m for m in ("numpy", "onnx", "onnxruntime") if m in sys.modules)
    build_parser = cli.build_parser
    def announced():  # inside main: the parent sends SIGINT as soon as it reads this line
        print("loaded before main:", heavy, flush=True)
        return build_parser()  # imports the subcommands, and with them NumPy, ONNX, ONNX Runtime
    cli.build_parser = announced
    sys.exit(cli.main(sys.argv[1:]))
    """
)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_ctrl_c_while_the_command_loads_exits_130_with_one_line():
    """The console script imports only the light ``onnx_dequant.cli`` before ``main``; Ctrl-C while
    ``main`` loads NumPy, ONNX and ONNX Runtime is exit 130 with one line, no traceback."""
    graph = ROOT / "models" / "qdq_chain.json"
    cmd = [sys.executable, "-c", _FOREGROUND + _CLI_CHILD, "validate", str(graph), "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    first = proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert first == "loaded before main: []\n", first
    assert proc.returncode == 130, (proc.returncode, err)
    assert err == "onnx-dequant: interrupted\n" or err == "onnx-dequant validate: interrupted\n", err


_RESTORE_CHILD = textwrap.dedent(
    """
    import os, signal, threading, time
    from onnx_dequant.ort import signals

    def on_term(signum, frame):
        pass

    signal.signal(signal.SIGTERM, on_term)
    exec(ARMED_SIGINT)
    stop = time.monotonic() + 2.0
    def storm():
        while time.monotonic() < stop:
            time.sleep(2e-5)
            os.kill(os.getpid(), signal.SIGINT)
    t = threading.Thread(target=storm)
    t.start()
    interrupts = 0
    while t.is_alive() and signal.getsignal(signal.SIGTERM) is on_term:
        try:
            armed[0] = True
            with signals.deferred():
                sum(range(50))
            armed[0] = False
        except KeyboardInterrupt:
            interrupts += 1
    armed[0] = False
    t.join()
    print("SIGTERM", signal.getsignal(signal.SIGTERM).__name__, "interrupts", interrupts > 0, flush=True)
    """
)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_a_signal_while_the_handlers_go_back_leaves_every_other_handler_in_place():
    """A SIGINT handled while ``deferred`` puts the handlers back raises there: the handlers of the other
    signals still go back (a raise between two left SIGTERM's with the stand-in, swallowed for good)."""
    child = [sys.executable, "-c", _PRELUDE + _RESTORE_CHILD]
    proc = subprocess.run(child, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "SIGTERM on_term interrupts True\n", proc.stdout


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals")
def test_a_stand_in_left_by_a_restore_cut_short_is_taken_for_the_handler_it_replaced():
    """A restore that a raising handler cut short leaves later signals with the stand-in: the next run's
    deferral takes it for the handler it replaced, so that handler is back once the run ends, and a
    signal that arrived meanwhile is delivered to it then."""
    signals = __import__("onnx_dequant.ort.signals", fromlist=["deferred"])
    got = []

    def mine(signum, frame):
        got.append(signum)

    old = signal.signal(signal.SIGUSR1, mine)
    try:
        with signals.deferred():
            assert signal.getsignal(signal.SIGUSR1) is signals._note
        assert signal.getsignal(signal.SIGUSR1) is mine
        signal.signal(signal.SIGUSR1, signals._note)  # as a restore cut short leaves it
        os.kill(os.getpid(), signal.SIGUSR1)  # noted, not delivered: no run is under way
        assert got == []
        with signals.deferred():
            pass
        assert signal.getsignal(signal.SIGUSR1) is mine and got == [signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, old)


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals")
def test_a_handler_raising_while_the_handlers_go_back_leaves_none_behind(monkeypatch):
    """A put-back handler that raises while the others go back (here the second ``signal.signal`` call
    raises, as one does where Python runs a pending handler before it sets): every handler is still put
    back, the signals noted during the run are delivered, and then the exception is raised. Until now
    SIGINT stayed with the stand-in after such a run (Ctrl-C swallowed between runs) and the noted
    signals were dropped."""
    signals = __import__("onnx_dequant.ort.signals", fromlist=["deferred"])
    got = []

    def mine(signum, frame):
        got.append(signum)

    real = signals._calls

    class Flaky:
        puts = 0

        def getsignal(self, sig):
            return real.getsignal(sig)

        def signal(self, sig, handler):
            if handler is not signals._note:
                Flaky.puts += 1
                if Flaky.puts == 2:
                    raise KeyboardInterrupt
            return real.signal(sig, handler)

    old = {s: signal.signal(s, mine) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    int_handler = signal.getsignal(signal.SIGINT)
    try:
        monkeypatch.setattr(signals, "_calls", Flaky())
        with pytest.raises(KeyboardInterrupt):
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGUSR1)
        monkeypatch.undo()
        assert [signal.getsignal(s) for s in old] == [mine, mine]
        assert signal.getsignal(signal.SIGINT) is int_handler and got == [signal.SIGUSR1]
        assert signals._pending == [] and signals._saved == {}
    finally:
        for s, h in old.items():
            signal.signal(s, h)
