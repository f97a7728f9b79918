"""The one exception type the library raises for bad input, and how its messages show a user's values."""

from __future__ import annotations

import os
import reprlib
from typing import Any

__all__ = ["DequantizeError", "shown", "shown_text"]

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxtuple = _SHOWN.maxlist = _SHOWN.maxset = _SHOWN.maxfrozenset = _SHOWN.maxdict = 10
_SHOWN.maxstring = _SHOWN.maxother = 80


def shown(value: Any) -> str:
    """A user's value as an error message shows it: its ``repr``, cut short where it is long or deeply
    nested (a hostile value never makes the message itself fail)."""
    try:
        return _SHOWN.repr(value)
    except Exception:  # noqa: BLE001 - a __repr__ that raises, or recurses without end
        return f"<{type(value).__name__}>"


def shown_text(text: str) -> str:
    """``text`` (a path or a name) as valid Unicode text, for protobuf strings and JSON output.

    A file name's undecodable bytes (``os.fsdecode``'s surrogates) are shown as ``\\xff``, any other
    lone surrogate as ``\\ud800``; valid text is returned as it is.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that is not an undecodable byte of a file name
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


class DequantizeError(ValueError):
    """Bad input: a model, graph, tensor or argument that breaks a rule of the op or of a file format.

    The message names what is wrong (and, where known, the node and the file).
    ``node`` and ``path`` carry the same facts for programs.
    """

    def __init__(self, message: str, *, node: str | None = None, path: str | None = None) -> None:
        self.rule = message
        self.node = node
        self.path = path
        where = []
        if path:
            where.append(f"{path}")
        if node:
            where.append(f"node '{node}'")
        super().__init__(f"{': '.join(where)}: {message}" if where else message)

    def at(self, *, node: str | None = None, path: str | None = None) -> DequantizeError:
        """The same error with the node and/or file filled in where they were missing."""
        return type(self)(self.rule, node=self.node or node, path=self.path or path)
