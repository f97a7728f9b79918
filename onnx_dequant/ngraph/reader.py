"""Reading nGraph's serialized JSON: the source (path, text or parsed), the functions, their structure.

``load`` returns the parsed list of functions and the file's path (None for text or parsed JSON);
``read_function`` picks one function and checks its structure: required keys, op names unique,
inputs that name ops which exist and come earlier (else the cycle or the misordering is named),
parameters that are Parameter ops, results that exist. Op attributes are checked later, by the op's
converter. Every problem is a ``DequantizeError`` naming the file and the op.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from .. import fileio
from ..errors import DequantizeError

__all__ = ["Op", "Function", "load", "read_function", "function_names"]

_STR = {str}


@dataclass(slots=True)
class Op:
    """One serialized op: its position, name, type, version, inputs and JSON.

    Input ``k`` is output ``indices[k]`` of the op named ``sources[k]``; ``indices`` is None when every
    input is an output 0 (inputs given by name).
    """

    index: int
    name: str
    op: str
    version: int
    sources: list[str]
    indices: list[int] | None
    output_names: Any  # the JSON's "outputs" as it is (only its first name is used, when it is one)
    js: dict[str, Any]

    @property
    def inputs(self) -> list[tuple[str, int]]:
        """The inputs as ``(op name, output index)`` pairs."""
        if self.indices is None:
            return [(s, 0) for s in self.sources]
        return list(zip(self.sources, self.indices))


@dataclass
class Function:
    """One serialized function: ``parameters`` and ``results`` name ops of ``ops`` (in file order)."""

    name: str
    parameters: list[str]
    results: list[str]
    ops: list[Op]
    by_name: dict[str, Op]


def _looks_like_json(text: str) -> bool:
    s = text.lstrip()
    return s[:1] in ("[", "{")


def load(source: Any) -> tuple[list[Any], str | None]:
    """The parsed JSON (a list of functions) and the path it came from (None for text or parsed JSON).

    ``source`` is a path (``str`` or ``os.PathLike``), JSON text (``str`` starting with ``[`` or ``{``,
    or ``bytes``), or already-parsed JSON (a list of functions, or one function as a dict).
    """
    path: str | None = None
    if isinstance(source, (list, dict)):
        data = source
    else:
        if isinstance(source, (bytes, bytearray)):
            raw: Any = bytes(source)
        elif (
            isinstance(source, str) and _looks_like_json(source) and not (len(source) < 4096 and os.path.isfile(source))
        ):
            raw = source
        elif isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            try:
                raw = fileio.read_input(path)  # a FIFO or a device is refused, not read
            except OSError as e:
                raise DequantizeError(f"cannot read the graph: {e.strerror or e}", path=path) from None
        else:
            raise DequantizeError(f"expected a path, JSON text or parsed JSON, got {type(source).__name__}")
        try:
            data = json.loads(raw)
        except UnicodeDecodeError as e:
            raise DequantizeError(f"malformed JSON: not UTF-8 text ({e.reason} at byte {e.start})", path=path) from None
        except json.JSONDecodeError as e:
            raise DequantizeError(f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}", path=path) from None
        except RecursionError:
            raise DequantizeError("malformed JSON: nested too deeply", path=path) from None
        except ValueError:  # an integer literal longer than Python converts to int
            raise DequantizeError(
                f"malformed JSON: an integer literal longer than {_int_digits()} digits", path=path
            ) from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise DequantizeError(f"expected a JSON array of functions, got a JSON {_kind(data)}", path=path)
    if not data:
        raise DequantizeError("the file holds no functions (an empty JSON array)", path=path)
    return data, path


def _is_text(s: str) -> bool:
    """False when ``s`` holds a lone surrogate (a JSON escape such as ``\\ud800`` outside a pair), which
    is no Unicode text: no protobuf string (ONNX's names) and no UTF-8 file can carry it."""
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(s: str) -> str:
    """A JSON string with its lone surrogates written as escapes (``q\\ud800``)."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _not_text(what: str, value: str, *, node: str | None = None, path: str | None = None) -> DequantizeError:
    return DequantizeError(
        f"{what} '{_escaped(value)}' holds a lone surrogate (a \\ud800-\\udfff escape outside a pair): names "
        "must be valid Unicode text",
        node=node,
        path=path,
    )


def _int_digits() -> int:
    """How many digits an integer literal may have (Python's limit on converting text to int)."""
    get = getattr(sys, "get_int_max_str_digits", None)  # Python 3.10.7 and later
    return get() if get is not None else 4300


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def function_names(data: list[Any], path: str | None = None) -> list[str]:
    """The name of every function in the file, in file order."""
    names = []
    for i, fn in enumerate(data):
        if not isinstance(fn, dict):
            raise DequantizeError(f"function #{i} must be a JSON object, got a JSON {_kind(fn)}", path=path)
        name = fn.get("name")
        if not isinstance(name, str):
            raise DequantizeError(f"function #{i} has no 'name' string", path=path)
        names.append(name)
    return names


def _name_list(fn: dict[str, Any], key: str, fname: str, path: str | None) -> list[str]:
    if key not in fn:
        raise DequantizeError(f"function '{fname}' has no '{key}' list", path=path)
    value = fn[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DequantizeError(f"function '{fname}': '{key}' must be a list of op names", path=path)
    return value


def _read_input(v: Any, name: str, k: int, path: str | None) -> tuple[str, int]:
    if isinstance(v, str):
        return v, 0
    if isinstance(v, dict):
        node = v.get("node")
        index = v.get("index", 0)
        if isinstance(node, str) and isinstance(index, int) and not isinstance(index, bool) and index >= 0:
            return node, index
    raise DequantizeError(
        f'input {k} must be an op name or {{"node": name, "index": i}}, got {json.dumps(v)[:80]}',
        node=name,
        path=path,
    )


def _find_cycle(start: str, raw: dict[str, list[str]]) -> list[str] | None:
    """A path start -> ... -> start following inputs, if there is one."""
    stack = [iter(raw.get(start, ()))]  # the inputs still to follow, per op on the path
    on_path = [start]
    seen = {start}
    while stack:
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            on_path.pop()
            continue
        if nxt == start:
            return on_path + [start]
        if nxt in seen or nxt not in raw:
            continue
        seen.add(nxt)
        on_path.append(nxt)
        stack.append(iter(raw[nxt]))
    return None


def read_function(data: list[Any], function: str | None = None, path: str | None = None) -> Function:
    """The function named ``function`` (default: the last one, as nGraph's reader returns), checked."""
    names = function_names(data, path)
    if function is None:
        index = len(data) - 1
    else:
        if function not in names:
            raise DequantizeError(
                f"no function named '{function}' (the file holds: {', '.join(repr(n) for n in names)})", path=path
            )
        index = len(names) - 1 - names[::-1].index(function)
    fn = data[index]
    fname = names[index]
    if not _is_text(fname):
        raise _not_text("the function's name", fname, path=path)
    parameters = _name_list(fn, "parameters", fname, path)
    results = _name_list(fn, "result", fname, path)
    if "ops" not in fn or not isinstance(fn["ops"], list):
        raise DequantizeError(f"function '{fname}' has no 'ops' list", path=path)
    raw_ops = fn["ops"]

    ops: list[Op] = []
    by_name: dict[str, Op] = {}
    pending: tuple[Op, str, str] | None = None  # the first input naming an op not seen yet
    contains = by_name.__contains__
    for i, js in enumerate(raw_ops):
        if type(js) is not dict:
            raise DequantizeError(f"op #{i} must be a JSON object, got a JSON {_kind(js)}", path=path)
        get = js.get
        name = get("name")
        if type(name) is not str or not name:
            raise DequantizeError(f"op #{i} has no 'name' string", path=path)
        if not (name.isascii() or _is_text(name)):
            raise _not_text(f"op #{i}: the op's name", name, node=_escaped(name), path=path)
        op_type = get("op")
        if type(op_type) is not str or not op_type:
            raise DequantizeError(f"op #{i} has no 'op' string (the op's type)", node=name, path=path)
        if not (op_type.isascii() or _is_text(op_type)):
            raise _not_text("the op's type", op_type, node=name, path=path)
        if name in by_name:
            raise DequantizeError(
                f"duplicate op name: op #{i} and op #{by_name[name].index} are both named '{name}'",
                node=name,
                path=path,
            )
        version = get("op_version", 0)
        if type(version) is not int:
            if version is not None:
                raise DequantizeError(
                    f"'op_version' must be a non-negative integer, got {json.dumps(version)}", node=name, path=path
                )
            version = 0
        elif version < 0:
            raise DequantizeError(f"'op_version' must be a non-negative integer, got {version}", node=name, path=path)
        srcs = get("inputs")
        indices: list[int] | None = None
        if srcs is None:
            srcs = []
        elif type(srcs) is not list:
            raise DequantizeError("'inputs' must be a list", node=name, path=path)
        elif srcs and not set(map(type, srcs)) <= _STR:  # some input as {"node": name, "index": i}
            pairs = [(v, 0) if type(v) is str else _read_input(v, name, k, path) for k, v in enumerate(srcs)]
            srcs = [src for src, _ in pairs]
            indices = [idx for _, idx in pairs]
        control = get("control_deps")
        if control is not None and not (type(control) is list and set(map(type, control)) <= _STR):
            raise DequantizeError("'control_deps' must be a list of op names", node=name, path=path)
        # Inputs and control dependencies name ops, whose names are checked; an output name becomes a
        # tensor's name as it is
        outputs = get("outputs")
        if type(outputs) is list:
            for v in outputs:
                if type(v) is str and not (v.isascii() or _is_text(v)):
                    raise _not_text("the op's output name", v, node=name, path=path)
        op = Op(i, name, op_type, version, srcs, indices, outputs, js)
        if pending is None and not (
            (not srcs or all(map(contains, srcs))) and (control is None or all(map(contains, control)))
        ):
            what_src = next(((f"input {k}", src) for k, src in enumerate(srcs) if src not in by_name), None)
            if what_src is None:
                what_src = ("control dependency", next(c for c in control if c not in by_name))
            pending = (op, what_src[1], what_src[0])
        ops.append(op)
        by_name[name] = op

    if pending is not None:  # an input names an op that does not exist, or comes later
        op, src, what = pending
        if src not in by_name:
            raise DequantizeError(f"{what} names op '{_escaped(src)}', which does not exist", node=op.name, path=path)
        cycle = _find_cycle(op.name, {o.name: o.sources for o in ops})
        if cycle is not None:
            raise DequantizeError(f"the ops' inputs form a cycle: {' -> '.join(cycle)}", node=op.name, path=path)
        raise DequantizeError(
            f"{what} names op '{src}', which comes later in 'ops' (nGraph writes ops in topological order)",
            node=op.name,
            path=path,
        )

    for what, names_ in (("parameter", parameters), ("result", results)):  # after the ops: they name ops
        for v in names_:
            if not _is_text(v):
                raise _not_text(f"function '{fname}': the {what}", v, path=path)
    for p in parameters:
        target = by_name.get(p)
        if target is None:
            raise DequantizeError(f"function '{fname}': parameter '{p}' names no op", path=path)
        if target.op != "Parameter":
            raise DequantizeError(
                f"function '{fname}': parameter '{p}' is a {target.op}, not a Parameter", node=p, path=path
            )
    if len(set(parameters)) != len(parameters):
        raise DequantizeError(f"function '{fname}': a parameter is listed twice", path=path)
    if not results:
        raise DequantizeError(f"function '{fname}' has no results", path=path)
    n_result_ops = 0
    for r in results:
        target = by_name.get(r)
        if target is None:
            raise DequantizeError(f"function '{fname}': result '{r}' names no op", path=path)
        n_result_ops += target.op == "Result"
    if n_result_ops not in (0, len(results)):
        raise DequantizeError(
            f"function '{fname}': graph serialization is inconsistent; some Result ops appear to be missing "
            "(the 'result' list mixes Result ops and other ops)",
            path=path,
        )
    return Function(fname, parameters, results, ops, by_name)
