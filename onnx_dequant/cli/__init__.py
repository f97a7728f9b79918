"""The ``onnx-dequant`` command: one module per subcommand, registered in ``COMMANDS``.

Every subcommand module has ``add_parser(subparsers)`` that adds its parser and sets ``func`` (a
function of the parsed arguments returning the exit status). Exit codes: 0 success or agreement,
1 validation found a disagreement, 2 bad input or usage. Bad input never shows a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import DequantizeError

__all__ = ["main", "COMMANDS"]

COMMANDS = ("convert", "lower", "run", "validate")
"""Subcommands; each is the module ``onnx_dequant.cli.<name>``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onnx-dequant",
        description="nGraph's multi-axis Dequantize in ONNX: convert, lower, run and validate models.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:  # a subcommand not built yet
            if e.name != f"{__name__}.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (also used as the console script)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DequantizeError as e:
        print(f"onnx-dequant {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(
            f"onnx-dequant {args.command}: error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr
        )
        return 2
    except KeyboardInterrupt:
        print(f"onnx-dequant {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
