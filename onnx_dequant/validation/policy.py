"""How far each tensor may be from the reference: the precision policy of docs/precision.md, per tensor.

Each tensor of the main graph gets a ``Tolerance`` from the nodes that compute it, in graph order:

- **Exact** (0 ULP): inputs and constants; anything computed from exact tensors by ops whose result is
  fully determined by IEEE rules, so ONNX Runtime and NumPy cannot differ: ops that move or select
  values (Reshape, Transpose, Slice, Concat, Gather, Relu, Max, Where, Floor, Cast, ...), correctly
  rounded arithmetic (Add, Sub, Mul, Div, Sqrt, QuantizeLinear), and integer or boolean results.
- **A Dequantize** (ours, or a standard 8/16-bit DequantizeLinear) of exact tensors: ``exact_ulp`` (0)
  where docs/precision.md says exactness is achievable, ``rounded_ulp`` (1) where ONNX Runtime must round
  twice (16-bit input to f16/bf16 output).
- **Moving, selecting and widening** an inexact tensor keeps its budget; a widening Cast keeps counting
  ULPs of the narrower type (``Tolerance.unit``), a narrowing one allows what is left after rounding.
- **Any other float arithmetic** (MatMul, Conv, Tanh, Softmax, ReduceSum, ...), and correctly rounded
  arithmetic on an inexact tensor: ``float_ulp`` ULP, or an absolute error of ``float_ulp`` ULP of the
  tensor's largest finite magnitude (sums whose terms cancel lose relative precision near zero).
- An integer or boolean result of inexact tensors may differ by 1 (a rounding or comparison flips).

``Policy.ulp``, when set, is one budget for every computed real tensor. NaN equals NaN.
``tolerances(model, policy)`` gives every tensor of the main graph its ``Tolerance``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import onnx

from .. import dtypes
from ..errors import DequantizeError
from ..exactness import mantissa_bits, ort_exact
from ..graphs import subgraphs, value_types
from ..schema import is_dequantize

__all__ = [
    "ALWAYS_EXACT",
    "INTEGER_EXACT",
    "BIT_IDENTICAL",
    "CORRECTLY_ROUNDED",
    "MOVING",
    "Policy",
    "Tolerance",
    "against_expected",
    "dequantize_ulp",
    "tolerances",
]

MOVING = frozenset(
    {
        "Identity",
        "Reshape",
        "Transpose",
        "Squeeze",
        "Unsqueeze",
        "Flatten",
        "Concat",
        "Split",
        "Slice",
        "Gather",
        "GatherElements",
        "GatherND",
        "Expand",
        "Tile",
        "Pad",
        "DepthToSpace",
        "SpaceToDepth",
        "Compress",
        "ReverseSequence",
        "ScatterND",
        "ScatterElements",
        "Optional",
        "OptionalGetElement",
        "Relu",
        "Max",
        "Min",
        "Abs",
        "Neg",
        "Sign",
        "Floor",
        "Ceil",
        "Round",
        "Clip",
        "Where",
        "MaxPool",
        "ReduceMax",
        "ReduceMin",
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "Not",
        "And",
        "Or",
        "Xor",
        "IsNaN",
        "IsInf",
        "ArgMax",
        "ArgMin",
    }
)
"""Standard ops whose outputs are input values moved, selected or exactly transformed (or exact facts
about them): exact inputs give exact outputs, and an inexact input's budget carries over."""

CORRECTLY_ROUNDED = frozenset({"Add", "Sub", "Mul", "Div", "Sqrt", "QuantizeLinear"})
"""Standard ops IEEE arithmetic rounds once, the same way in ONNX Runtime and NumPy: exact on exact inputs
(QuantizeLinear only with an f32 input: for other types the reference divides in the input's type,
ONNX Runtime in f32)."""

INTEGER_EXACT = frozenset({"ConvInteger", "MatMulInteger"})
"""Standard ops of exact integer arithmetic (int32 sums of 8-bit products, no rounding): exact on exact inputs."""

SAME_TYPE = MOVING | {"Add", "Sub", "Mul", "Div"}
"""Standard ops whose output has their first input's type."""

ALWAYS_EXACT = frozenset({"Shape", "Size", "Constant", "ConstantOfShape", "EyeLike"})
"""Standard ops whose outputs do not depend on input values beyond shapes and attributes."""


@dataclass(frozen=True)
class Policy:
    """The allowed distance from the reference, in ULP (units in the last place of the output type).

    ``exact_ulp`` where docs/precision.md says ONNX Runtime can be bit-identical (default 0);
    ``rounded_ulp`` where it must round twice, 16-bit input to f16/bf16 output (default 1);
    ``float_ulp`` for tensors other float arithmetic computes (default 64, see ``docs/validation.md``);
    ``ulp``, when given, replaces all three (one budget for every computed real tensor).
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
        """The policy as JSON-ready values (the ``--json`` report's ``policy``)."""
        return {
            "exact_ulp": self.exact_ulp,
            "rounded_ulp": self.rounded_ulp,
            "float_ulp": self.float_ulp,
            "ulp": self.ulp,
        }


@dataclass(frozen=True)
class Tolerance:
    """A tensor's budget: ``ulp`` per element (for integers: the absolute difference); ``scaled`` also
    accepts an absolute error of ``ulp`` ULP of the tensor's largest finite magnitude; ``unit``, when set,
    is the (narrower) real type whose ULPs are counted (nGraph name); ``why`` says where it comes from."""

    ulp: int
    scaled: bool
    why: str
    unit: str | None = None

    @property
    def exact(self) -> bool:
        return self.ulp == 0 and not self.scaled

    def describe(self) -> str:
        s = f"{self.ulp} ULP" + (f" of {self.unit}" if self.unit else "")
        return s + " (or of max |x|)" if self.scaled else s


dequantize_ulp = ort_exact
"""Whether exactness is achievable for input type ``x`` and output type ``out``, and why (the one rule in
``onnx_dequant.exactness``)."""


def _real(t: dtypes.DType | None) -> bool:
    return t is not None and t.is_real


def _cast_to(node: onnx.NodeProto) -> dtypes.DType | None:
    for a in node.attribute:
        if a.name == "to":
            try:
                return dtypes.parse(int(a.i))
            except DequantizeError:
                return None
    return None


def _weight(t: Tolerance, of: dtypes.DType | None) -> tuple[bool, float]:
    """How loose ``t`` is, comparable across units: (scaled, ULP of ``of``)."""
    if t.unit and _real(of):
        return t.scaled, t.ulp * 2.0 ** (mantissa_bits(of) - mantissa_bits(dtypes.parse(t.unit)))
    return t.scaled, float(t.ulp)


def _narrowed(t: Tolerance, src: dtypes.DType | None, dst: dtypes.DType, label: str) -> Tolerance:
    """An inexact real tensor's budget after a Cast from ``src`` to the real type ``dst``."""
    unit = dtypes.parse(t.unit) if t.unit else src
    if unit is None:
        return Tolerance(t.ulp, t.scaled, t.why)
    if mantissa_bits(unit) <= mantissa_bits(dst):  # widening: the values are still those of ``unit``
        return Tolerance(t.ulp, t.scaled, t.why, None if unit == dst else unit.name)
    if t.scaled:
        return Tolerance(t.ulp, True, t.why)
    left = 1 + (t.ulp >> (mantissa_bits(unit) - mantissa_bits(dst)))
    return Tolerance(left, False, f"{label}: narrowed from {t.describe()} ({t.why})")


def _worst(found: Sequence[Tolerance], of: dtypes.DType | None) -> Tolerance:
    return max(found, key=lambda t: _weight(t, of))


def _loose(
    loose: Tolerance,
    label: str,
    inexact: Sequence[Tolerance],
    why: str = "float arithmetic (ONNX Runtime and NumPy may round differently)",
) -> Tolerance:
    """The float-op budget for a node's output, or an inexact input's when that is looser."""
    if not inexact:
        return Tolerance(loose.ulp, True, f"{label}: {why}")
    source = _worst(inexact, None)
    own = Tolerance(loose.ulp, True, f"{label}: {why} (from {source.why.split(':')[0]})")
    return _worst([own, source], None)


def _rounds_twice(src: dtypes.DType | None, node: onnx.NodeProto) -> bool:
    """Whether ``node`` (a Cast) is one ONNX Runtime 1.32 rounds twice: float64 to f16 or bf16, through f32
    (``scripts/ort_facts.py``: ``cast_f64_to_f16_rounds_twice``), where the reference rounds once."""
    dst = _cast_to(node)
    return src is not None and src.name == "f64" and dst is not None and dst.name in ("f16", "bf16")


def _moved_why(node: onnx.NodeProto, tol: dict[str, Tolerance], label: str) -> str:
    """Where an exact tensor moved by ``node`` comes from: the first input computed by the graph."""
    for n in node.input:
        t = tol.get(n)
        if t is not None and t.why != "input":
            tail = f", then {node.op_type}"
            return t.why if t.why.endswith(tail) else t.why + tail
    return f"{label}: exact op on exact tensors"


def tolerances(model: onnx.ModelProto, policy: Policy | None = None, *, ngraph: bool = False) -> dict[str, Tolerance]:
    """A ``Tolerance`` for every tensor the main graph computes or takes in (by tensor name).

    ``ngraph``: the other side is nGraph's own run, which dequantizes i32 in the output type (the int32
    difference converted, then multiplied: two roundings), so those outputs get ``rounded_ulp``."""
    policy = policy or Policy()
    g = model.graph
    types = {k: v.elem_type for k, v in value_types(g).items()}
    loose = Tolerance(policy.float_ulp, True, "")
    tol: dict[str, Tolerance] = {}
    for name in [vi.name for vi in g.input] + [t.name for t in g.initializer]:
        tol[name] = Tolerance(0, False, "input")

    carried = dict(types)  # with the types Casts, arithmetic and moves carry to their outputs (a Cast's source)
    for i, node in enumerate(g.node):
        label = f"{node.op_type} '{node.name or f'#{i}'}'"
        carry = _cast_to(node) if node.op_type == "Cast" else None
        if node.op_type in SAME_TYPE and node.input:
            carry = carried.get(node.input[0])
        carried.update({o: carry for o in node.output if o and o not in carried and carry is not None})
        standard = node.domain in ("", "ai.onnx")
        inexact_names = [n for n in node.input if n and not tol.get(n, loose).exact]
        inexact = [tol.get(n, loose) for n in inexact_names]

        own: Tolerance | None = None  # one budget for every real output, when the node sets it
        every: Tolerance | None = None  # one budget for every output, whatever its type
        if is_dequantize(node) or (standard and node.op_type == "DequantizeLinear"):
            x = types.get(node.input[0]) if node.input else None
            out = types.get(node.output[0]) if node.output else None
            if inexact:
                flip = "dequantizes inexact tensors (a rounding flip upstream moves a whole step)"
                own = _loose(loose, label, inexact, flip)
            elif x is None or out is None or not x.is_quantized or not out.is_real:
                own = Tolerance(policy.rounded_ulp, False, f"{label}: types unknown")
            elif not is_dequantize(node) and x.name == "i32":
                own = _loose(loose, label, inexact, "the ONNX reference subtracts i32 in f32")
            else:
                achievable, why = dequantize_ulp(x, out)
                if ngraph and x.name == "i32" and out.name != "f64":
                    achievable, why = False, f"i32->{out.name}: nGraph converts the i32 difference, then multiplies"
                own = Tolerance(policy.exact_ulp if achievable else policy.rounded_ulp, False, f"{label}: {why}")
        elif standard and node.op_type == "QuantizeLinear" and getattr(types.get(node.input[0]), "name", None) != "f32":
            x = types.get(node.input[0])
            every = Tolerance(
                1, False, f"{label}: the reference divides in {x or 'its input type'}, ONNX Runtime in f32 (may flip)"
            )
        elif standard and node.op_type in ALWAYS_EXACT:
            own = Tolerance(0, False, f"{label}: depends on shapes only")
        elif standard and node.op_type == "Cast" and not inexact and _rounds_twice(carried.get(node.input[0]), node):
            own = Tolerance(1, False, f"{label}: ONNX Runtime casts f64 to 16-bit floats through f32 (rounds twice)")
        elif standard and node.op_type == "Cast" and inexact:
            dst = _cast_to(node)
            src = types.get(node.input[0])
            if _real(dst) and _real(src):
                own = _narrowed(inexact[0], src, dst, label)
        elif (
            standard
            and not list(subgraphs(node))
            and node.op_type in MOVING | CORRECTLY_ROUNDED | INTEGER_EXACT | {"Cast"}
        ):
            if not inexact and node.op_type in CORRECTLY_ROUNDED | INTEGER_EXACT:
                real = any(_real(types.get(o)) for o in node.output)
                what = "rounds once, as the reference does," if real else "integer arithmetic"
                own = Tolerance(0, False, f"{label}: {what} on exact tensors")
            elif not inexact:
                own = Tolerance(0, False, _moved_why(node, tol, label))
            elif node.op_type in CORRECTLY_ROUNDED | INTEGER_EXACT:
                own = _loose(loose, label, inexact, "arithmetic on inexact tensors")
        held = bool(list(subgraphs(node)))
        moves = standard and not held and node.op_type in MOVING
        for o in node.output:
            if not o:
                continue
            t = types.get(o)
            if every is not None:
                tol[o] = every
            elif own is not None and (own.exact or t is None or t.is_real):
                tol[o] = own
            elif t is not None and not t.is_real:
                if inexact or held:
                    tol[o] = Tolerance(1, False, f"{label}: integer result of inexact tensors (a rounding may flip)")
                else:
                    tol[o] = Tolerance(0, False, f"{label}: integer result of exact tensors")
            elif moves and inexact and all(_real(types.get(n)) for n in inexact_names):
                tol[o] = _worst(inexact, t)
            else:
                tol[o] = _loose(loose, label, inexact)
    if policy.ulp is not None:
        for name, t in tol.items():
            if t.why != "input" and _real(types.get(name)):
                tol[name] = Tolerance(policy.ulp, False, f"one budget for every tensor (ulp={policy.ulp})")
    return tol


BIT_IDENTICAL = "bit-identical: nGraph computes each element with one correctly rounded operation"


def against_expected(computed: Tolerance, ulp: int | None = None, why: str = "") -> Tolerance:
    """The budget for an output compared with results another implementation computed (nGraph's own run).

    ``computed`` is the output's ``Tolerance`` against the reference (``tolerances``). Without a stated
    ``ulp`` the output must be bit-identical, which the policy allows only where every op computing it rounds
    once (``computed`` is exact); otherwise the stated budget, with its reason, counted as ``computed``
    counts (of the largest magnitude too when ``computed`` is scaled). ``DequantizeError`` when an inexact
    output has no stated budget.
    """
    if ulp is None:
        if not computed.exact:
            raise DequantizeError(
                f"no budget stated for an output the policy allows {computed.describe()} ({computed.why})"
            )
        return Tolerance(0, False, BIT_IDENTICAL)
    if not why:
        raise DequantizeError(f"a budget of {ulp} ULP needs its reason")
    return Tolerance(ulp, computed.scaled, why, computed.unit)
