"""How far each tensor may be from the reference: the precision policy of DESIGN section 2, per tensor.

- A tensor computed by our Dequantize (then only by value-preserving ops such as Reshape, Transpose,
  Relu, Max) must be **bit-identical** (0 ULP) where exactness is achievable: 8/16-bit input with f32 or
  f64 output, 8-bit (and 4-bit) input with f16 or bf16 output, and i32 input (our lowering subtracts
  without wrapping and rounds once). **1 ULP** where ONNX Runtime must round twice: 16-bit input with
  f16 or bf16 output.
- A tensor computed by any other float op (Add, MatMul, Conv, Exp, ...) may differ by ``float_ulp`` ULP
  (ONNX Runtime and NumPy sum in different orders and use different math libraries); since sums of terms
  that cancel lose relative precision near zero, an element also passes when its absolute error is at
  most ``float_ulp`` ULP of the tensor's largest finite magnitude.
- Everything else (inputs, constants, integer arithmetic, shapes) must be identical. NaN equals NaN.

``Policy`` holds the knobs; ``tolerances(model, policy)`` gives every tensor of the main graph its
``Tolerance``.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from .. import dtypes
from ..errors import DequantizeError
from ..schema import is_dequantize

__all__ = ["Policy", "Tolerance", "tolerances", "dequantize_ulp", "VALUE_PRESERVING"]

VALUE_PRESERVING = frozenset(
    {
        "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Split", "Slice",
        "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Pad", "Relu", "Max", "Min", "Abs", "Neg",
        "MaxPool", "Cast", "CastLike", "DepthToSpace", "SpaceToDepth", "ReduceMax", "ReduceMin", "Shape", "Size",
        "Optional", "OptionalGetElement",
    }
)
"""Ops whose output is within the largest ULP error of their inputs (they move, select or exactly
negate values; Cast to a narrower type keeps a 1-ULP error within 1 ULP)."""


@dataclass(frozen=True)
class Policy:
    """The allowed distance from the reference, in ULP (units in the last place of the output type).

    ``exact_ulp`` where DESIGN section 2 says ONNX Runtime can be bit-identical (default 0);
    ``rounded_ulp`` where it must round twice, 16-bit input to f16/bf16 output (default 1);
    ``float_ulp`` for tensors computed by other float ops (default 8, see the module docstring);
    ``ulp``, when given, replaces all three (a single budget for every real tensor).
    """

    exact_ulp: int = 0
    rounded_ulp: int = 1
    float_ulp: int = 64
    ulp: int | None = None

    def __post_init__(self) -> None:
        for name in ("exact_ulp", "rounded_ulp", "float_ulp", "ulp"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise DequantizeError(f"policy: {name} must be a non-negative integer, got {v!r}")

    def to_dict(self) -> dict[str, int | None]:
        return {
            "exact_ulp": self.exact_ulp,
            "rounded_ulp": self.rounded_ulp,
            "float_ulp": self.float_ulp,
            "ulp": self.ulp,
        }


@dataclass(frozen=True)
class Tolerance:
    """A tensor's budget: ``ulp`` per element; ``scaled`` also accepts an absolute error of ``ulp`` ULP of
    the tensor's largest magnitude; ``why`` says where the budget comes from."""

    ulp: int
    scaled: bool
    why: str

    def describe(self) -> str:
        s = f"{self.ulp} ULP"
        return s + " (or of max |x|)" if self.scaled else s


def dequantize_ulp(x: dtypes.DType, out: dtypes.DType) -> tuple[bool, str]:
    """Whether exactness is achievable for input type ``x`` and output type ``out``, and why (DESIGN 2)."""
    if x.name == "i32":
        return True, "i32: the exact lowering subtracts without wrapping and rounds once"
    diff_bits = x.bits + 1
    mantissa = {"bf16": 8, "f16": 11, "f32": 24, "f64": 53}[out.name]
    if out.name in ("f32", "f64") or diff_bits + mantissa <= 24:
        return True, f"{x.name}->{out.name} rounds once"
    return False, f"{x.name}->{out.name}: ONNX Runtime rounds twice (via f32)"


def _elem(type_proto: onnx.TypeProto | None) -> int:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return 0
    return int(type_proto.tensor_type.elem_type)


def _is_float(elem: int) -> bool:
    try:
        return dtypes.parse(elem).is_real
    except DequantizeError:
        return elem in (onnx.TensorProto.FLOAT8E4M3FN, onnx.TensorProto.FLOAT8E5M2)


def tolerances(model: onnx.ModelProto, policy: Policy | None = None) -> dict[str, Tolerance]:
    """A ``Tolerance`` for every tensor the main graph computes or takes in (by tensor name)."""
    policy = policy or Policy()
    g = model.graph
    types: dict[str, int] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        types[vi.name] = _elem(vi.type)
    for t in g.initializer:
        types[t.name] = int(t.data_type)
    exact = Tolerance(0, False, "computed from inputs by value-preserving ops")
    tol: dict[str, Tolerance] = {}
    for name in [vi.name for vi in g.input] + [t.name for t in g.initializer]:
        tol[name] = Tolerance(0, False, "input")

    def rank(t: Tolerance) -> tuple[bool, int, bool]:
        return (t.scaled, t.ulp, t.why != "input")

    def worst(names: list[str]) -> Tolerance | None:
        found = [tol[n] for n in names if n and n in tol]
        return max(found, key=rank) if found else None

    for i, node in enumerate(g.node):
        label = f"{node.op_type} '{node.name or f'#{i}'}'"
        upstream = worst(list(node.input))
        if is_dequantize(node):
            try:
                x = dtypes.parse(types.get(node.input[0], 0))
                out = dtypes.parse(types.get(node.input[1], 0))
            except DequantizeError:
                x = out = None
            if x is None or out is None:
                budget = policy.rounded_ulp if policy.ulp is None else policy.ulp
                own = Tolerance(budget, False, f"{label}: types unknown")
            else:
                achievable, why = dequantize_ulp(x, out)
                budget = policy.exact_ulp if achievable else policy.rounded_ulp
                own = Tolerance(budget if policy.ulp is None else policy.ulp, False, f"{label}: {why}")
            result = own if upstream is None or rank(own) >= rank(upstream) else upstream
        elif node.op_type in VALUE_PRESERVING and node.domain in ("", "ai.onnx"):
            result = upstream if upstream is not None and upstream.why != "input" else exact
        else:
            outs_int = all(not _is_float(types.get(o, 0)) and types.get(o, 0) for o in node.output if o)
            if (upstream is None or not (upstream.ulp or upstream.scaled)) and outs_int:
                result = Tolerance(exact.ulp, False, f"{label}: integer op")
            else:
                budget = policy.float_ulp if policy.ulp is None else policy.ulp
                why = f"{label}: float op (ORT and NumPy may round differently)"
                result = Tolerance(budget, policy.ulp is None, why)
                if upstream is not None and rank(upstream) > rank(result):
                    result = upstream
        for o in node.output:
            if o:
                tol[o] = result
    return tol
