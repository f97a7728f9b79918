"""The one exception type the library raises for bad input."""

from __future__ import annotations

__all__ = ["DequantizeError"]


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
