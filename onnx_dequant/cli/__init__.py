"""The ``onnx-dequant`` command: one module per subcommand, registered in ``COMMANDS``.

Every subcommand module has ``add_parser(subparsers)`` that adds its parser and sets ``func`` (a
function of the parsed arguments returning the exit status). Exit codes: 0 success or agreement,
1 validation found a disagreement, 2 bad input or usage (any failure: one line on stderr, never a
traceback), 130 Ctrl-C, 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from ..errors import DequantizeError, shown_text

__all__ = ["main", "COMMANDS"]

COMMANDS = ("convert", "lower", "run", "validate")
"""Subcommands; each is the module ``onnx_dequant.cli.<name>``."""


class _UsageError(Exception):
    """A bad command line (argparse's error, raised instead of printing usage and exiting)."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that temporary files are removed on the way out."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # a value such as ``--real-range -1e3 1e3`` is a negative number, not an option (argparse before
        # Python 3.13 knows only ``-1`` and ``-1.5``)
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-inf(inity)?$", re.I)

    def error(self, message: str) -> NoReturn:  # one line instead of usage + message
        raise _UsageError(self.prog, f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="onnx-dequant",
        description="nGraph's multi-axis Dequantize in ONNX: convert, lower, run and validate models.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:  # a subcommand not built yet
            if e.name != f"{__name__}.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def one_line(e: BaseException) -> str:
    """The message of ``e`` as one line: what the command prints for any failure."""
    if isinstance(e, OSError) and e.strerror:
        text = f"{e.strerror}: {e.filename}" if e.filename is not None else e.strerror
    elif isinstance(e, MemoryError):
        text = "out of memory: the input needs more memory than this machine has"
    elif isinstance(e, (DequantizeError, _UsageError)):
        text = str(e)
    else:  # a dependency's own error (ONNX Runtime's Fail / InvalidGraph, protobuf's EncodeError, ...)
        module = type(e).__module__.split(".")[0]
        who = {"onnxruntime": "ONNX Runtime", "onnx": "ONNX", "google": "protobuf"}.get(module, "")
        text = f"{who + ' failed: ' if who else ''}{type(e).__name__}: {e}"
    return " ".join(text.split()) or type(e).__name__


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While the command runs, SIGTERM raises ``_Terminated`` (so ``atomic_path`` removes its temporary
    files); only where SIGTERM still has its default action and this is the main thread."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise _Terminated

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _ending(own: bool) -> None:
    """The command (``own``: the process's own command line, ``main()`` without arguments) exits after
    Ctrl-C or SIGTERM: another one from now on is ignored, so it cannot cut the exit short (Python puts back
    the default action, death by the signal, once it finalizes: a second Ctrl-C there made the exit status
    -2 instead of 130)."""
    if not own or threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_IGN)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (also used as the console script).

    The one place where failures become exit statuses: any exception is one line on stderr and exit 2
    (``ONNX_DEQUANT_TRACEBACK=1`` shows the traceback too), Ctrl-C is exit 130, SIGTERM 143.
    """
    command = "onnx-dequant"
    own = argv is None
    argv = sys.argv[1:] if own else list(argv)
    args = None
    try:
        with _sigterm_raises():
            parser = build_parser()  # inside: Ctrl-C while the modules load is handled too
            args = parser.parse_args(argv)
            command = f"onnx-dequant {args.command}"
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        _ending(own)
        return _failed(_json_asked(args, argv), f"{command}: interrupted", "interrupted", 130)
    except BrokenPipeError:  # the reader of the output went away (``| head``): quiet, as a Unix tool is
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except _Terminated:
        _ending(own)
        return _failed(_json_asked(args, argv), f"{command}: terminated", "terminated", 143)
    except SystemExit as e:  # --help, or a subcommand's own exit
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except BaseException as e:  # noqa: BLE001 - the one place: one line, never a traceback
        command = e.prog if isinstance(e, _UsageError) else command
        if os.environ.get("ONNX_DEQUANT_TRACEBACK"):
            traceback.print_exc()
        text = one_line(e)
        return _failed(_json_asked(args, argv), f"{command}: error: {text}", text, 2)


def _json_asked(args: argparse.Namespace | None, argv: Sequence[str]) -> bool:
    """Whether ``--json`` was asked for: the parsed option, or where parsing failed, an argument before
    ``--`` that argparse reads as it (``--json``, or an abbreviation such as ``--js``)."""
    if args is not None:
        return bool(getattr(args, "json", False))
    for a in argv:
        if a == "--":
            return False
        if len(a) >= 3 and "--json".startswith(a):
            return True
    return False


def _failed(json_asked: bool, line: str, error: str, status: int) -> int:
    """``status``, after ``line`` on stderr and, where ``--json`` was asked for, the failure as JSON on
    stdout (``{"ok": false, "exit_code": ..., "error": ...}``: a program reads every outcome there)."""
    print(shown_text(line), file=sys.stderr)  # a file name's undecodable bytes shown as \xff
    if json_asked:
        with contextlib.suppress(OSError):
            print(json.dumps({"ok": False, "exit_code": status, "error": shown_text(error)}), flush=True)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
