"""A model's inputs for validation: read from an ``.npz`` file by input name, or generated from the
declared types and shapes.

Generated integer inputs are uniform random bits, so they span their type's whole range, and the
first two elements are the type's minimum and maximum, except for a Loop's trip count and the integer
inputs it is computed from, which take small values (``TRIP_COUNTS``: the whole int64 range would run
the loop for ever), indices a Gather or Scatter op reads (any of their Elements and ND forms), which stay
within the axes they index (and, for a Scatter with no reduction, write no element twice), sequence
lengths (ReverseSequence's, an RNN's), which stay within their time axes, integer divisors, which are
never 0 or -1, and an integer Pow's operands (exponents in ``POWERS``, bases whose cube fits). Real
inputs are uniform in a range the caller sets. Symbolic (or unnamed unknown) dims take the size the
caller gives per name, else the size that a constant scale or zero point of a Dequantize node reading
the input fixes at a quantization axis, else ``DEFAULT_DIM``.
The same seed gives the same inputs.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from .. import dtypes, fileio
from ..errors import DequantizeError
from ..graphs import constants
from ..schema import is_dequantize, node_attributes, tensor_type_of
from . import tracing
from .tracing import Size

__all__ = [
    "DEFAULT_DIM",
    "POWERS",
    "TRIP_COUNTS",
    "InputSpec",
    "check_feeds",
    "fixed_sizes",
    "generate",
    "graph_inputs",
    "load_npz",
    "parse_dims",
    "symbolic_sizes",
]

DEFAULT_DIM = 3
"""Size of a symbolic or unknown dim with no ``--dim``: small, and not 1 (1 hides broadcasting mistakes)."""

POWERS = (0, 3)
"""The range (both ends included) of generated exponents of an integer Pow (a negative one is undefined)."""

TRIP_COUNTS = (1, 3)
"""The range (both ends included) of generated values for an integer input that is a Loop's trip count ``M``
or that ``M`` is computed from: small, so the reference's loop ends quickly, and at least one iteration (a
loop that runs zero times is tested with ``--inputs``)."""


@dataclass(frozen=True)
class InputSpec:
    """A graph input the caller must feed: its name, element type and shape (None = unknown rank)."""

    name: str
    elem: int  # ONNX TensorProto data type
    shape: tuple[int | str | None, ...] | None
    trip_count: bool = False  # a Loop's trip count M is, or is computed from, the input (generated small)
    fixed: tuple[tuple[int, int, str], ...] = ()
    """``(axis, size, node)``: a Dequantize node ``node`` reads the input directly with a constant scale or
    zero point whose shape fixes the input's dim ``axis`` to ``size``."""
    divisor: bool = False
    """An integer Div or Mod divides by the input (as it is, or moved or cast): generated without 0 and -1
    (undefined, and ``INT_MIN / -1`` traps on x86)."""
    indexes: tuple[int | str | tuple[str, int], ...] = ()
    """The sizes of the axes a Gather, GatherElements or GatherND indexes with the input (as it is, or
    moved or cast): a size, or ``(input, axis)`` where it is another graph input's; generated within
    ``[-n, n)`` of the smallest (else the whole range, which the reference refuses)."""
    lengths: tuple[int | str | tuple[str, int], ...] = ()
    """The sizes of the time axes the input gives sequence lengths along (ReverseSequence's, an RNN's, GRU's
    or LSTM's; as it is, moved, cast or clamped): generated within ``[1, n]`` of the smallest (1 where
    the axis's size is unknown)."""
    casts: tuple[tuple[int, ...], ...] = ()
    """For a divisor: the types each path to a Div or Mod casts the input to, in order (empty: none casts
    it). A value that is not 0 or -1 may become one when cast (``-2**63`` to int32 is 0, ``0.5`` to int32
    is 0): the check is made on the value as the Div reads it."""
    distinct: tuple[int | str, ...] = ()
    """A Scatter with no reduction writes with the input as its indices, and an element written twice is
    undefined (ONNX Runtime and the reference may keep either write): ``"nd"``, ScatterND's index tuples
    (along the last axis) all differ; an axis, ScatterElements' indices differ along it within each line.
    The first rule is followed; where the indices outnumber the elements they address, none is. Only for
    a Scatter that reads the input as it is or cast (``_IN_PLACE``), once."""
    power: tuple[str, ...] = ()
    """``"base"`` or ``"exponent"`` of an integer Pow: an exponent is drawn in ``[0, 3]`` (a negative one is
    undefined), a base small enough that its cube fits the type and a float64 exactly (ONNX Runtime computes
    an integer Pow in float64; beyond, the result is undefined)."""

    @property
    def numpy(self) -> np.dtype:
        """The input's NumPy (or ml_dtypes) dtype."""
        try:
            return dtypes.parse(self.elem).numpy
        except DequantizeError:  # outside the table (string, float8, ...)
            return onnx.helper.tensor_dtype_to_np_dtype(self.elem)

    def describe(self) -> str:
        dims = "?" if self.shape is None else "(" + ", ".join("?" if d is None else str(d) for d in self.shape) + ")"
        return f"{onnx.TensorProto.DataType.Name(self.elem).lower()} {dims}"


def graph_inputs(model: onnx.ModelProto) -> list[InputSpec]:
    """The main graph's inputs that are not initializers (those are the ones a caller feeds)."""
    inits = {t.name for t in model.graph.initializer} | {t.values.name for t in model.graph.sparse_initializer}
    trips = tracing.trip_sources(model)
    ops = tracing.operand_inputs(model)
    fixed = _fixed_dims(model)
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            raise DequantizeError(f"input '{vi.name}' is not a tensor; validation feeds tensors only")
        shape = tensor_type_of(vi.type).shape
        elem = int(vi.type.tensor_type.elem_type)
        specs.append(
            InputSpec(
                vi.name,
                elem,
                shape,
                vi.name in trips,
                fixed.get(vi.name, ()),
                vi.name in ops.divisors,
                tuple(ops.indexes.get(vi.name, ())),
                tuple(ops.lengths.get(vi.name, ())),
                tuple(sorted(ops.divisors.get(vi.name, ()))),
                tuple(ops.distinct.get(vi.name, ())),
                tuple(sorted(ops.power.get(vi.name, ()))),
            )
        )
    return specs


def _fixed_dims(model: onnx.ModelProto) -> dict[str, tuple[tuple[int, int, str], ...]]:
    """``InputSpec.fixed`` by input name: the dims of graph inputs that the scale or zero point of a
    main-graph Dequantize node reading the input directly fixes, where that has a known shape (a constant, or a graph
    input declared with fixed dims): by the op's contract, it has the input's shape at the quantization axes."""
    main: dict[str, tuple[int, ...]] = {name: tuple(t.dims) for name, t in constants(model.graph)}
    for vi in model.graph.input:
        if vi.name not in main and vi.type.HasField("tensor_type"):
            shape = tensor_type_of(vi.type).shape
            if shape is not None and all(isinstance(d, int) for d in shape):
                main[vi.name] = tuple(int(d) for d in shape)  # type: ignore[arg-type]
    out: dict[str, list[tuple[int, int, str]]] = {}
    for n in model.graph.node:  # the main graph's own: a subgraph's value may shadow an input's name
        if not is_dequantize(n) or len(n.input) < 2 or not n.input[0]:
            continue
        try:
            axes, _ = node_attributes(n)
        except DequantizeError:
            continue  # the checker names it
        for param in n.input[1:3]:
            dims = main.get(param) if param else None
            if dims is not None and len(dims) == len(axes) and axes:
                label = n.name or f"Dequantize -> {n.output[0] if n.output else '?'}"
                out.setdefault(n.input[0], []).extend((a, int(d), label) for a, d in zip(axes, dims))
                break
    return {k: tuple(v) for k, v in out.items()}


def fixed_sizes(specs: list[InputSpec]) -> dict[str, list[tuple[int, str, str, int]]]:
    """What the Dequantize nodes fix of each symbolic dim name (``InputSpec.fixed``): ``(size, node, input,
    axis)`` by name."""
    out: dict[str, list[tuple[int, str, str, int]]] = {}
    for spec in specs:
        for axis, size, node in spec.fixed:
            if spec.shape is not None and axis < len(spec.shape) and isinstance(spec.shape[axis], str):
                out.setdefault(spec.shape[axis], []).append((size, node, spec.name, axis))
    return out


def _dim_sizes(specs: list[InputSpec], dims: Mapping[str, int]) -> dict[str, int]:
    """The sizes of the symbolic dims: the caller's ``dims`` (they win), else the size the nodes fix;
    ``DequantizeError`` naming the node when two nodes fix one name to different sizes."""
    sizes = {}
    for name, entries in fixed_sizes(specs).items():
        if name in dims:
            continue
        size, node, x, _ = entries[0]
        for other, node2, x2, axis in entries[1:]:
            if other != size:
                raise DequantizeError(
                    f"dim '{name}' must be {size} for node '{node}' (input '{x}') but {other} for this node "
                    f"(input '{x2}', dim {axis}): the model cannot run with any size",
                    node=node2,
                )
        sizes[name] = size
    return {**sizes, **dims}


def symbolic_sizes(specs: list[InputSpec], feeds: Mapping[str, np.ndarray]) -> dict[str, int]:
    """The size each symbolic dim name has in ``feeds``, by name."""
    sizes: dict[str, int] = {}
    for spec in specs:
        arr = feeds.get(spec.name)
        if spec.shape is None or arr is None or np.ndim(arr) != len(spec.shape):
            continue
        for d, n in zip(spec.shape, np.shape(arr)):
            if isinstance(d, str):
                sizes.setdefault(d, int(n))
    return sizes


def parse_dims(items: Any) -> dict[str, int]:
    """``{"N": 4}`` from ``["N=4", ...]`` or a mapping; ``DequantizeError`` on anything else."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        pairs = list(items.items())
    else:
        pairs = []
        for item in items:
            name, sep, size = str(item).partition("=")
            if not sep or not name.strip():
                raise DequantizeError(f"--dim wants NAME=SIZE, got '{item}'")
            pairs.append((name.strip(), size.strip()))
    dims = {}
    for name, size in pairs:
        try:
            n = int(size)
        except (TypeError, ValueError):
            raise DequantizeError(f"dim '{name}': size must be an integer, got '{size}'") from None
        if n < 0:
            raise DequantizeError(f"dim '{name}': size must be >= 0, got {n}")
        dims[str(name)] = n
    return dims


def _concrete_shape(spec: InputSpec, dims: Mapping[str, int], default: int) -> tuple[int, ...]:
    if spec.shape is None:
        raise DequantizeError(
            f"input '{spec.name}' has no declared shape, so it cannot be generated; give it with --inputs"
        )
    fixed = {axis: size for axis, size, _ in spec.fixed}
    return tuple(
        d if isinstance(d, int) else int(dims.get(d, default)) if d else fixed.get(i, default)
        for i, d in enumerate(spec.shape)
    )


def _random_bits(rng: np.random.Generator, dt: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform random bits shaped ``shape``, as the unsigned type of ``dt``'s size (a fresh, writable array)."""
    n = int(np.prod(shape, dtype=np.int64))
    nbytes = n * dt.itemsize
    raw = rng.bit_generator.random_raw(-(-nbytes // 8))  # 64 bits a draw, no copy
    return raw.view(np.uint8)[:nbytes].view(f"u{dt.itemsize}").reshape(shape)


def _generate_one(
    spec: InputSpec,
    rng: np.random.Generator,
    shape: tuple[int, ...],
    real_range: tuple[float, float],
    index: int | None = None,
    length: int | None = None,
) -> np.ndarray:
    """Values for ``spec`` of ``shape``; ``index``: the size of the smallest axis the input indexes;
    ``length``: of the smallest time axis it gives sequence lengths along."""
    try:
        dt = dtypes.parse(spec.elem)
    except DequantizeError:
        raise DequantizeError(
            f"input '{spec.name}': cannot generate values of type {onnx.TensorProto.DataType.Name(spec.elem)}; "
            "give it with --inputs"
        ) from None
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind == "real":
        low, high = real_range
        out = rng.uniform(low, high, size=shape).astype(dt.numpy)
        if spec.divisor:  # cast to an integer type on the way: not 0 or -1 there
            out[_zero_or_minus_one(out, spec.casts)] = 1
        return out
    if dt.kind == "boolean":
        return (_random_bits(rng, np.dtype(np.uint8), shape) & 1).astype(np.bool_)
    if spec.trip_count:  # a loop's count, or what it is computed from: small, never negative
        low, high = TRIP_COUNTS
        if index is not None:  # indexes an axis too: within it (from its start), else the reference fails
            high = max(min(high, index - 1), 0)
            low = min(low, high)
        return rng.integers(low, high + 1, size=shape).astype(dt.numpy)
    if index is not None and length is not None:  # a length that indexes too: in [1, T] and within the axes
        return rng.integers(1, max(min(length, index - 1), 1) + 1, size=shape).astype(dt.numpy)
    if index is not None:  # within the axes it indexes, from either end
        index = min(index, int(dt.max) + 1)  # and within its type
        out = _distinct(rng, shape, index, spec.distinct[0], dt.signed) if spec.distinct else None
        if out is None:  # else no element written twice: drawn in [0, n), those past a split from the end
            out = rng.integers(0 if not dt.signed else -index, max(index, 1), size=shape)
        out = out.astype(dt.numpy)
        if spec.divisor and index >= 2:  # a divisor too: 1 is within the axis
            out[_zero_or_minus_one(out, spec.casts)] = 1
        return out
    if length is not None:  # sequence lengths: within the time axis
        return rng.integers(min(1, length), length + 1, size=shape).astype(dt.numpy)
    if spec.power:  # an integer Pow's: exponents in [0, 3], bases whose cube is exact in the type and float64
        limit = min(int(dt.max), 2**53)
        bound = round(limit ** (1 / 3)) + 1
        while bound**3 > limit:
            bound -= 1
        low, high = (-bound if dt.signed else 0), bound
        if "exponent" in spec.power:
            low, high = max(low, POWERS[0]), min(high, POWERS[1])
        out = rng.integers(low, high + 1, size=shape).astype(dt.numpy)
        if spec.divisor:  # a divisor too: 1 is a base and an exponent
            out[_zero_or_minus_one(out, spec.casts)] = 1
        return out
    if dt.bits == 4:  # ml_dtypes 4-bit types: draw a nibble, map to the type's range
        nib = (_random_bits(rng, np.dtype(np.uint8), shape) & 0xF).astype(np.int8)
        out = (nib - 8 if dt.signed else nib).astype(dt.numpy)
    else:
        out = _random_bits(rng, dt.numpy, shape).view(dt.numpy)
    if n >= 2:  # the extremes, always
        flat = out.reshape(-1)
        flat[0] = dt.min
        flat[1] = dt.max
    if spec.divisor:
        out[_zero_or_minus_one(out, spec.casts)] = 1
    return out


def _distinct(
    rng: np.random.Generator, shape: tuple[int, ...], n: int, rule: int | str, signed: bool = False
) -> np.ndarray | None:
    """Indices in ``[0, n)`` of ``shape`` (int64) that a Scatter writes no element twice with, by ``rule``
    (``InputSpec.distinct``); None where there are more of them than elements they can address.

    ``signed``: those at or past a random split (one per tuple component, or per line along the axis) are
    counted from the end (``x - n``). ``n`` is the smallest of the sizes the indices address, and an axis
    of size ``S > n`` reads ``x - n`` as ``S - n + x``: a split keeps the elements apart (``[0, split)``
    from the start, ``[S - n + split, S)`` from the end), a sign drawn per index would not (``x`` and
    ``y - n`` meet where ``x - y == S - n``)."""
    if rule == "nd":  # the tuples along the last axis differ
        if not shape:
            return None
        k, count = shape[-1], int(np.prod(shape[:-1], dtype=np.int64))
        space = n**k  # a Python int: no overflow
        if count > space:
            return None
        if k == 0:  # tuples of no index: one, the whole data
            return np.zeros(shape, np.int64)
        if space < 2**62:  # each tuple as one number (its index in the row-major order of the tuples)
            if space <= max(1 << 24, 4 * count):  # NumPy may shuffle all of [0, space): at most 4x the output
                codes = rng.choice(space, size=count, replace=False)
            else:  # sparse: drawn with repeats, and the repeats redrawn (each round leaves count/space of them)
                codes = rng.integers(0, space, size=count)
                while len(first := np.unique(codes, return_index=True)[1]) < count:
                    again = _others(count, first)
                    codes[again] = rng.integers(0, space, size=len(again))
            out = np.stack(np.unravel_index(codes, (n,) * k), axis=-1).reshape(count, k).astype(np.int64)
        else:  # more tuples than an int64 counts: two drawn alike are so rare they are redrawn row by row
            out = rng.integers(0, n, size=(count, k))
            while len(first := np.unique(out, axis=0, return_index=True)[1]) < count:
                again = _others(count, first)
                out[again] = rng.integers(0, n, size=(len(again), k))
        if signed:  # one split per component: each component's values stay apart, so the tuples do
            out = np.where(out >= rng.integers(0, n + 1, size=k), out - n, out)
        return out.reshape(shape)
    axis = int(rule) % len(shape) if shape else 0
    if not shape or shape[axis] > n:
        return None
    t = shape[axis]
    lines = int(np.prod(shape, dtype=np.int64)) // max(t, 1)
    if lines * n <= 1 << 22:  # a random order of [0, n) per line, its first t
        rows = rng.random((lines, n)).argsort(axis=1)[:, :t]
    else:
        rows = rng.integers(0, n, size=(lines, t))
        # redraw the lines where two meet, while a line is likely to draw none (t * t <= 2n: over 1 in 3)
        for _ in range(8 if t * t <= 2 * n else 0):
            ordered = np.sort(rows, axis=1)
            bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
            if not len(bad):
                break
            rows[bad] = rng.integers(0, n, size=(len(bad), t))
        ordered = np.sort(rows, axis=1)
        bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        step = max(1, (1 << 22) // max(n, 1))  # the rest: a random order of [0, n) each, so many lines at a time
        for start in range(0, len(bad), step):
            chunk = bad[start : start + step]
            rows[chunk] = rng.permuted(np.broadcast_to(np.arange(n), (len(chunk), n)), axis=1)[:, :t]
    rows = rows.astype(np.int64)
    if signed:  # one split per line: the line's values stay apart
        rows = np.where(rows >= rng.integers(0, n + 1, size=(lines, 1)), rows - n, rows)
    moved = (*shape[:axis], *shape[axis + 1 :], t)
    return np.moveaxis(rows.reshape(moved), -1, axis)


def _others(count: int, first: np.ndarray) -> np.ndarray:
    """The positions in ``range(count)`` not in ``first`` (``np.setdiff1d`` sorts both: 5 s at 2M)."""
    mask = np.ones(count, np.bool_)
    mask[first] = False
    return np.flatnonzero(mask)


def _zero_or_minus_one(values: np.ndarray, casts: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """Where ``values`` are 0 or -1 as an integer Div or Mod reads them, after each path's casts."""
    mask = np.zeros(values.shape, np.bool_)
    for path in casts or ((),):
        v = values
        with np.errstate(invalid="ignore", over="ignore"):
            for to in path:
                try:
                    np_type = onnx.helper.tensor_dtype_to_np_dtype(to)
                except (KeyError, TypeError, ValueError):  # not a NumPy type: as int8, the strictest
                    np_type = np.dtype(np.int8)
                v = (np.trunc(v) if v.dtype.kind == "f" and np.dtype(np_type).kind in "iu" else v).astype(np_type)
        if v.dtype.kind not in "iuf" and v.dtype.name.startswith(("int", "uint")):  # ml_dtypes' int4, uint4
            v = v.astype(np.int64)
        if v.dtype.kind in "iu":
            mask |= (v == 0) | (v == -1)
    return mask


def generate(
    specs: list[InputSpec],
    *,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    real_range: tuple[float, float] = (-1.0, 1.0),
    default_dim: int = DEFAULT_DIM,
) -> dict[str, np.ndarray]:
    """Inputs for ``specs``: integers over their whole range, reals uniform in ``real_range``.

    Each input draws from its own stream (seeded by ``seed`` and its position), so adding an input
    does not change the others.
    """
    low, high = float(real_range[0]), float(real_range[1])
    if not (np.isfinite(low) and np.isfinite(high) and low <= high):
        raise DequantizeError(f"real input range must be finite with LOW <= HIGH, got [{low}, {high}]")
    if int(seed) < 0:
        raise DequantizeError(f"seed must be >= 0, got {seed}")
    dims = _dim_sizes(specs, dict(dims or {}))
    shapes = {spec.name: _concrete_shape(spec, dims, default_dim) for spec in specs}

    def size(s: Size) -> int:
        if isinstance(s, str):
            return int(dims.get(s, default_dim))
        return s if isinstance(s, int) else shapes[s[0]][s[1]]

    feeds = {}
    for i, spec in enumerate(specs):
        rng = np.random.default_rng([int(seed), i])
        shape = shapes[spec.name]
        # reals are drawn in float64 first
        fileio.check_memory(int(np.prod(shape, dtype=object)) * 8, f"generating input '{spec.name}' of shape {shape}")
        index = min(map(size, spec.indexes)) if spec.indexes else None
        length = min(map(size, spec.lengths)) if spec.lengths else None
        feeds[spec.name] = _generate_one(spec, rng, shape, (low, high), index, length)
    return feeds


def _npz_nbytes(f: Any) -> int:
    """The bytes the arrays of the open npz ``f`` unpack to, from their headers (nothing is unpacked)."""
    total = 0
    with zipfile.ZipFile(f) as zf:
        for info in zf.infolist():
            with zf.open(info) as member:
                fmt = np.lib.format
                version = fmt.read_magic(member)
                read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                shape, _, dtype = read(member)
                total += int(np.prod(shape, dtype=object)) * dtype.itemsize
    return total


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file by name (no pickles); ``DequantizeError`` for a bad file, a FIFO or
    device (``fileio.open_input``), or arrays that would unpack to more than the machine's memory."""
    try:
        with fileio.open_input(path) as f:
            if zipfile.is_zipfile(f):
                fileio.check_memory(_npz_nbytes(f), "unpacking the arrays", path=os.fspath(path))
            f.seek(0)
            data = np.load(f, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):  # a single .npy array is not a context manager
                raise DequantizeError("not an .npz archive (a single .npy array?)", path=os.fspath(path))
            with data:
                return {k: data[k] for k in data.files}
    except DequantizeError:
        raise
    except FileNotFoundError:
        raise
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise DequantizeError(f"cannot read inputs: {e}", path=os.fspath(path)) from None


_UNSTORABLE = frozenset(dtypes.parse(name).onnx for name in ("bf16", "i4", "u4"))
"""ml_dtypes types that .npz files store as raw bytes ('V2', 'V1')."""


def check_feeds(specs: list[InputSpec], feeds: Mapping[str, Any], *, source: str = "inputs") -> dict[str, np.ndarray]:
    """``feeds`` checked against ``specs``: every input present, no extra names, types and fixed dims
    matching, one size per symbolic dim. Returns the arrays (raw-byte ml_dtypes arrays viewed as their type,
    arrays in the other byte order converted to this machine's)."""
    names = {s.name for s in specs}
    missing = [s.name for s in specs if s.name not in feeds]
    extra = sorted(set(feeds) - names)
    if missing:
        raise DequantizeError(f"{source}: missing input(s) {', '.join(map(repr, missing))}")
    if extra:
        raise DequantizeError(
            f"{source}: unknown input name(s) {', '.join(map(repr, extra))}; the model's inputs are "
            f"{', '.join(map(repr, sorted(names))) or 'none'}"
        )
    out: dict[str, np.ndarray] = {}
    symbols: dict[str, tuple[int, str]] = {}
    for spec in specs:
        value = feeds[spec.name]
        if not isinstance(value, (np.ndarray, np.generic)):
            raise DequantizeError(f"{source}: input '{spec.name}' must be a NumPy array, got {type(value).__name__}")
        arr = np.asarray(value)
        want = spec.numpy
        if spec.elem in _UNSTORABLE and arr.dtype.kind == "V" and arr.dtype.itemsize == np.dtype(want).itemsize:
            arr = arr.view(want)
        if not arr.dtype.isnative and arr.dtype.newbyteorder("=") == want:  # '>f4' saved on another machine
            arr = arr.astype(want)
        if arr.dtype != want:
            raise DequantizeError(f"{source}: input '{spec.name}' must have element type {want}, got {arr.dtype}")
        if spec.shape is not None:
            if arr.ndim != len(spec.shape):
                raise DequantizeError(
                    f"{source}: input '{spec.name}' must have rank {len(spec.shape)} {spec.describe()}, "
                    f"got shape {arr.shape}"
                )
            for axis, (d, n) in enumerate(zip(spec.shape, arr.shape)):
                if isinstance(d, int) and d != n:
                    raise DequantizeError(
                        f"{source}: input '{spec.name}' dim {axis} must be {d}, got shape {arr.shape}"
                    )
                if isinstance(d, str):
                    seen = symbols.setdefault(d, (n, spec.name))
                    if seen[0] != n:
                        raise DequantizeError(
                            f"{source}: dim '{d}' is {seen[0]} in input '{seen[1]}' but {n} in input '{spec.name}'"
                        )
        out[spec.name] = arr
    return out
