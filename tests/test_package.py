"""The package's shape: no import cycle between its modules, and every module's ``__all__`` lists what
the other modules import from it (and only names it defines); no module imports another's private name
(but the nGraph op converters of ``ngraph/ops/``, which share helpers among themselves)."""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx_dequant
import onnx_dequant as odq

ROOT = Path(onnx_dequant.__file__).parent
OPS = "onnx_dequant.ngraph.ops."
"""The nGraph op converters: they register themselves, export nothing, and share helpers among themselves."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(name: str) -> bool:
    return (ROOT.parent / name.replace(".", "/") / "__init__.py").exists()


def _exists(name: str) -> bool:
    return _is_package(name) or (ROOT.parent / (name.replace(".", "/") + ".py")).exists()


def _imports() -> dict[str, list[tuple[str, list[str]]]]:
    """Per module: every module of the package it imports (at any depth of its code), with the names."""
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for path in sorted(p for p in ROOT.rglob("*.py") if p.name != "__main__.py"):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = out.setdefault(name, [])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith("onnx_dequant"):
                    continue
                names = [a.name for a in node.names]
                for n in names:  # ``from . import dtypes`` imports a module
                    if _exists(f"{target}.{n}"):
                        found.append((f"{target}.{n}", []))
                found.append((target, [n for n in names if not _exists(f"{target}.{n}")]))
            elif isinstance(node, ast.Import):
                found.extend((a.name, []) for a in node.names if a.name.startswith("onnx_dequant"))
    return out


def _edges() -> dict[str, set[str]]:
    """Module -> the modules importing it runs: its imports and, for a submodule, its packages' ``__init__``."""
    edges: dict[str, set[str]] = {}
    for name, imported in _imports().items():
        deps = edges.setdefault(name, set())
        for target, _ in imported:
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix != name and not name.startswith(prefix + "."):
                    deps.add(prefix)
    return edges


def test_no_import_cycle():
    edges = _edges()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(edges.get(m, ())):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(d) :] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert len(edges) > 40  # the walk saw the package


def test_every_all_is_true():
    """What one module imports from another is in that module's ``__all__``; ``__all__`` names only what
    the module has."""
    checked = 0
    for name, imported in _imports().items():
        for target, names in imported:
            module = importlib.import_module(target)
            exported = getattr(module, "__all__", None)
            if exported is None:
                assert not names or target.startswith(OPS), f"{target} has no __all__"
                continue
            private = [n for n in names if n.startswith("_")]
            siblings = name.startswith(OPS) and target.startswith(OPS)
            assert not private or siblings, f"{name} imports private {private} from {target}"
            missing = [n for n in names if n not in exported]
            assert not missing, f"{name} imports {missing} from {target}, which its __all__ leaves out"
            checked += len(names)
    for path in (p for p in ROOT.rglob("*.py") if p.name != "__main__.py"):
        module = importlib.import_module(_module_name(path))
        for n in getattr(module, "__all__", ()):
            assert hasattr(module, n), f"{module.__name__}.__all__ names {n!r}, which it does not define"
    assert checked > 100


def _public(name: str, obj: Any, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """Every public function, class, method and property reachable from ``odq.__all__`` (by module
    ``__all__`` for modules such as ``odq.dtypes``), with the dotted name a user writes."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if inspect.ismodule(obj):
        for n in getattr(obj, "__all__", ()):
            yield from _public(f"{name}.{n}", getattr(obj, n), seen)
        return
    if not (getattr(obj, "__module__", None) or "").startswith("onnx_dequant"):
        return
    if inspect.isclass(obj):
        yield name, obj
        for n, member in vars(obj).items():
            f = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            if not n.startswith("_") and inspect.isfunction(f):
                yield f"{name}.{n}", f
    elif inspect.isfunction(obj):
        yield name, obj


def test_every_public_name_says_what_it_does_with_type_hints():
    """The package's public functions, classes and their public methods have docstrings; the functions
    have type hints on every parameter and the return."""
    seen: set[int] = set()
    public = [item for n in odq.__all__ for item in _public(f"odq.{n}", getattr(odq, n), seen)]
    assert len(public) > 50  # the walk reached the package's classes and their methods
    assert [n for n, obj in public if not (obj.__doc__ or "").strip()] == []
    unhinted = []
    for n, obj in public:
        if inspect.isfunction(obj) and "." not in obj.__qualname__:  # functions, not methods
            sig = inspect.signature(obj)
            if sig.return_annotation is inspect.Signature.empty or any(
                p.annotation is inspect.Parameter.empty for p in sig.parameters.values()
            ):
                unhinted.append(n)
    assert unhinted == []
