"""A Dequantize read only by Gathers: the Gathers moved before it (``lowering/gather_first.py``), so that
only the gathered elements are dequantized, bit for bit the same values."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import model_of, run_ort, vi
from onnx import helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant import dtypes
from onnx_dequant.cli import main as cli_main
from onnx_dequant.compare import same_bits
from onnx_dequant.lowering import LowerOptions, lower_model

RNG = np.random.default_rng(11)
TABLE = (40, 6)
WIDE = (40, 64)
STAY = (160, 64)


def _table_model(
    axes,
    readers,
    *,
    qt="i8",
    ids_shape=(2, 3),
    gather_axis=0,
    x_fed=False,
    x_shape=TABLE,
    ids_fed=True,
    ids_dims=None,
    zp=True,
    params_fed=False,
    out="f32",
):
    """A Dequantize of a table (an initializer, or fed) read by ``readers``: "Gather" (ids along
    ``gather_axis``, fed unless ``ids_fed=False``, declared with ``ids_dims`` when given), "Gemm" (a fed
    matrix by the table's rows, not compared) or another op (compared as Relu);
    with a zero point unless ``zp=False``, the scale and zero point fed with ``params_fed``, output ``out``."""
    q = dtypes.parse(qt).numpy
    info = np.iinfo(q)
    x = RNG.integers(max(info.min, -(2**20)), min(info.max, 2**20), x_shape).astype(q)
    sshape = [x_shape[a] for a in axes]
    s = RNG.uniform(0.001, 0.1, sshape).astype(dtypes.parse(out).numpy)
    z = RNG.integers(-5, 5, sshape).astype(q) if zp else None
    ids = RNG.integers(-x_shape[gather_axis], x_shape[gather_axis], ids_shape).astype(np.int64)  # negatives too
    inits, inputs, feed = [], [], {}
    values = [("x", x, x_fed, qt), ("ids", ids, ids_fed, "i64"), ("s", s, params_fed, out), ("z", z, params_fed, qt)]
    for name, value, fed, elem in values:
        if value is None:
            continue
        if fed:
            dims = list(ids_dims) if name == "ids" and ids_dims is not None else list(value.shape)
            inputs.append(vi(name, elem, dims))
            feed[name] = value
        else:
            inits.append(numpy_helper.from_array(value, name))
    nodes = [odq.make_node(["x", "s", "z"] if zp else ["x", "s"], ["d"], axes=list(axes), name="dq")]
    outs, want = [], []
    y = odq.dequantize(x, s, z, axes=axes)  # the output type is the scale's
    for i, op in enumerate(readers):
        if op == "Gather":
            nodes.append(helper.make_node("Gather", ["d", "ids"], [f"r{i}"], axis=gather_axis, name=f"g{i}"))
            want.append(np.take(y, ids, axis=gather_axis))
        elif op == "Gemm":  # a language model's head reading the table (tied embeddings): not compared
            inputs.append(vi(f"h{i}", out, [2, x_shape[1]]))
            feed[f"h{i}"] = RNG.standard_normal((2, x_shape[1])).astype(y.dtype)
            nodes.append(helper.make_node("Gemm", [f"h{i}", "d"], [f"r{i}"], transB=1))
            want.append(None)
            outs.append(vi(f"r{i}", out, [2, x_shape[0]]))
            continue
        else:
            nodes.append(helper.make_node(op, ["d"], [f"r{i}"]))
            want.append(np.maximum(y, 0))
        dims = list(want[-1].shape) if ids_dims is None else None
        outs.append(vi(f"r{i}", out, dims))
    return model_of(nodes, inputs, outs, inits), feed, want


def _lower(m, **options):
    return lower_model(onnx.ModelProto.FromString(m.SerializeToString()), LowerOptions(**options))


@pytest.mark.parametrize(
    "axes,gather_axis,ids_shape,qt",
    [
        ((), 0, (2, 3), "i8"),  # per tensor, two-dimensional ids
        ((1,), 0, (5,), "u8"),  # a scale per column, rows gathered (an embedding table)
        ((1,), 0, (2, 2), "i16"),  # the quantization axis moves one place right
        ((0,), 1, (3,), "i8"),  # a scale per row, columns gathered
        ((0,), -1, (4,), "i16"),  # a negative axis
    ],
)
def test_the_gather_moves_before_the_dequantize(axes, gather_axis, ids_shape, qt):
    m, feed, want = _table_model(axes, ["Gather"], qt=qt, ids_shape=ids_shape, gather_axis=gather_axis)
    result = _lower(m)
    first = result.model.graph.node[0]
    assert (first.op_type, first.input[0]) == ("Gather", "x")  # the quantized table's rows, gathered first
    node = result.nodes[0]
    assert (node.node, node.gather_moved) == ("dq", "'g0' of 'dq'")
    (got,) = run_ort(result.model, feed)
    assert same_bits(got, want[0])


def test_each_gather_gets_its_own_dequantize():
    m, feed, want = _table_model((1,), ["Gather", "Gather"], x_fed=True)
    result = _lower(m)
    assert [n.gather_moved for n in result.nodes] == ["'g0' of 'dq'", "'g1' of 'dq'"]
    assert len({n.node for n in result.nodes}) == 2
    for got, w in zip(run_ort(result.model, feed), want):
        assert same_bits(got, w)


@pytest.mark.parametrize(
    "axes,gather_axis,ids_shape,kwargs",
    [
        ((0,), 0, (2, 3), {}),  # a scale per row (the usual embedding): the ids' axes are quantized
        ((0,), 0, (5,), {"zp": False}),  # no zero point: only the scale is gathered
        ((0,), 0, (2, 2), {"params_fed": True, "qt": "u8"}),  # a fed scale and zero point
        ((0, 1), 0, (3, 2), {"qt": "i16"}),  # a scale as large as the table
        ((0, 1), 1, (2, 2), {"x_shape": (3, 9, 64)}),  # the scale's second axis gathered
        ((1, 2), 1, (), {"x_shape": (3, 9, 64)}),  # scalar ids: the gathered axis goes from the scale
        ((0,), 0, (4,), {"out": "f16"}),  # an f16 scale
        ((0,), 0, (3, 5), {"x_shape": (4096, 64), "ids_dims": ("n", "t")}),  # ids of unknown size
    ],
)
def test_a_gather_along_a_quantized_axis_gathers_the_scale_too(axes, gather_axis, ids_shape, kwargs):
    """``Dequantize(t, s, z, axes) -> Gather(ids)`` along a quantized axis becomes ``Dequantize(Gather(t),
    Gather(s), Gather(z))``: the scale and zero point by the same ids, along their own axis for it."""
    kwargs = {"x_shape": WIDE} | kwargs  # (rows of 64: worth the scale's Gathers, ``PARAM_GATHER_COST``)
    m, feed, want = _table_model(axes, ["Gather"], ids_shape=ids_shape, gather_axis=gather_axis, **kwargs)
    result = _lower(m)
    assert result.nodes[0].gather_moved == "'g0' of 'dq'"
    gathers = [n for n in result.model.graph.node if n.op_type == "Gather"]
    assert [n.input[0] for n in gathers] == ["x", "s", "z"][: 2 if kwargs.get("zp") is False else 3]
    k = axes.index(gather_axis)
    assert [helper.get_attribute_value(n.attribute[0]) for n in gathers[1:]] == [k] * (len(gathers) - 1)
    (got,) = run_ort(result.model, feed)  # a scale per gathered row: any other axes would differ
    assert got.dtype == want[0].dtype and same_bits(got, want[0])


@pytest.mark.parametrize(
    "kwargs,why",
    [
        ({"axes": (), "readers": ["Gather"], "ids_shape": (50, 2)}, "the Gather repeats more than the table holds"),
    ],
)
def test_no_move_where_it_does_not_apply(kwargs, why):
    m, feed, want = _table_model(**kwargs)
    result = _lower(m)
    assert all(n.gather_moved == "" for n in result.nodes), why
    assert result.model.graph.node[0].op_type != "Gather", why
    for got, w in zip(run_ort(result.model, feed), want):
        assert np.array_equal(got, w), why


def test_the_whole_outputs_value_info_goes():
    m, feed, want = _table_model((1,), ["Gather"])
    m.graph.value_info.append(vi("d", "f32", list(TABLE)))
    result = _lower(m)
    assert "d" not in {v.name for v in result.model.graph.value_info}
    onnx.checker.check_model(result.model, full_check=True)
    (got,) = run_ort(result.model, feed)
    assert same_bits(got, want[0])


def test_no_move_for_a_node_not_lowered():
    m, *_ = _table_model((), ["Gather"])
    kept = _lower(m, only=lambda n: False).model
    assert [n.op_type for n in kept.graph.node] == ["Dequantize", "Gather"]


@pytest.mark.parametrize(
    "axes,readers,returned,x_fed",
    [
        ((), ["Gather", "Gemm"], False, False),  # tied embeddings: a language model's head reads the table
        ((0,), ["Gemm", "Gather", "Gather"], False, True),  # two Gathers of a fed table, a scale per row
        ((1,), ["Gather", "Gemm"], True, False),  # the graph returns the whole output too
        ((1,), ["Gather"], True, False),  # a constant table the graph returns (ORT would copy its DQL)
        ((), ["Gather", "Relu"], False, False),  # a constant table beside a Relu
        ((), ["Gather", "Gather", "Gemm"], False, False),  # the Gathers take more than the table holds
    ],
)
def test_the_node_stays_for_the_readers_not_moved(axes, readers, returned, x_fed):
    """Where ORT would give a Gather its own copy of the DequantizeLinear over the whole table (a constant
    table read or returned otherwise too, a fed one beside a reader that may fuse), the Gathers move and the
    node stays."""
    ids = (2, 3) if readers.count("Gather") < 2 or axes else (200, 2)
    m, feed, want = _table_model(axes, readers, ids_shape=ids, x_shape=STAY, x_fed=x_fed)
    if returned:
        m.graph.output.append(vi("d", "f32", list(STAY)))
        arrays = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        want.append(odq.dequantize(arrays["x"], arrays["s"], arrays["z"], axes=axes))
    result = _lower(m)
    moved = [n.gather_moved for n in result.nodes]
    expect = sum(r == "Gather" for r in readers) if ids == (2, 3) else 0
    assert sorted(moved) == [""] + sorted(f"'g{i}' of 'dq'" for i, r in enumerate(readers) if r == "Gather")[:expect]
    assert result.nodes[moved.index("")].node == "dq"  # the node stays, lowered for the other readers
    for got, w in zip(run_ort(result.model, feed), want):
        assert w is None or same_bits(got, w)


@pytest.mark.parametrize(
    "kwargs,why",
    [
        ({"readers": ["Gather", "Relu"], "x_fed": True}, "a fed table, no reader fuses: run_once runs it once"),
        ({"ids_shape": (30, 2)}, "the moved readers would take more than a quarter of the table (KEPT_SHARE)"),
        ({"weights": "float"}, "the staying node is folded to a float weight the Gather reads as it is"),
    ],
)
def test_no_move_beside_a_staying_node_where_it_does_not_pay(kwargs, why):
    options = {"weights": kwargs.pop("weights")} if "weights" in kwargs else {}
    readers = kwargs.pop("readers", ["Gather", "Gemm"])
    m, feed, want = _table_model((0,), readers, x_shape=STAY, **kwargs)
    result = _lower(m, **options)
    assert [n.gather_moved for n in result.nodes] == [""], why
    for got, w in zip(run_ort(result.model, feed), want):
        assert w is None or same_bits(got, w), why


def test_scalar_ids_and_axes_after_the_gathered_one():
    """Ids of rank 0 remove the gathered axis: the quantization axes after it move one place left."""
    m, feed, want = _table_model((0, 2), ["Gather"], ids_shape=(), gather_axis=1, x_shape=(3, 9, 4))
    result = _lower(m)
    assert result.nodes[0].gather_moved == "'g0' of 'dq'"
    (got,) = run_ort(result.model, feed)
    assert got.shape == (3, 4) and same_bits(got, want[0])


def test_a_constant_table_gathered_by_constant_ids_stays():
    """ORT folds a Gather of constants into a constant weight, and fuses its DequantizeLinear with the MatMul
    after it into MatMulNBits, which quantizes the activations (not exact): the node stays where it is."""
    m, feed, want = _table_model((1,), ["Gather"], ids_fed=False)
    assert [n.gather_moved for n in _lower(m).nodes] == [""]
    w = np.random.default_rng(2).integers(0, 100, (128, 64)).astype(np.int8)
    s = np.random.default_rng(3).uniform(0.01, 0.1, 64).astype(np.float32)
    ids = np.arange(0, 128, 2)
    nodes = [
        odq.make_node(["w", "s"], ["d"], axes=[1], name="dq"),
        helper.make_node("Gather", ["d", "ids"], ["wg"], axis=0, name="g"),
        helper.make_node("MatMul", ["a", "wg"], ["y"], name="mm"),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s"), numpy_helper.from_array(ids, "ids")]
    mm = model_of(nodes, [vi("a", "f32", [8, 64])], [vi("y", "f32", [8, 64])], inits)
    a = np.random.default_rng(4).standard_normal((8, 64)).astype(np.float32)
    want_y = run_ort(
        model_of(
            [helper.make_node("MatMul", ["a", "wg"], ["y"])],
            [vi("a", "f32", [8, 64])],
            [vi("y", "f32", [8, 64])],
            [numpy_helper.from_array(np.take(odq.dequantize(w, s, None, axes=(1,)), ids, 0), "wg")],
        ),
        {"a": a},
    )[0]
    for weights in ("quantized", "float"):
        result = _lower(mm, weights=weights)
        assert result.nodes[0].gather_moved == ""
        assert same_bits(run_ort(result.model, {"a": a})[0], want_y), weights


def test_a_constant_i32_table_stays_without_wrap_int32():
    """The i32 guard checks a constant table once, when lowering; a gathered one it would check every run."""
    m, feed, want = _table_model((1,), ["Gather"], qt="i32")
    assert [n.gather_moved for n in _lower(m).nodes] == [""]
    assert [n.gather_moved for n in _lower(m, wrap_int32=True).nodes] == ["'g0' of 'dq'"]
    (got,) = run_ort(_lower(m).model, feed)
    assert same_bits(got, want[0])


@pytest.mark.parametrize("rows,moved", [(8, False), (4096, True)])
def test_ids_of_unknown_size_move_only_for_a_large_table(rows, moved):
    """A codebook read by more ids than it has rows dequantizes fewer elements where it is (3.5-4x faster);
    an embedding table's ids seldom outnumber its rows (``MIN_ROWS``)."""
    m, feed, want = _table_model((1,), ["Gather"], x_shape=(rows, 4), ids_shape=(3, 5), ids_dims=("n", "t"))
    result = _lower(m)
    assert bool(result.nodes[0].gather_moved) is moved
    (got,) = run_ort(result.model, feed)
    assert same_bits(got, want[0])


def test_only_selects_the_node_and_the_ones_it_becomes():
    """``only`` picks the Dequantize before the move; the Dequantize nodes it becomes are lowered with it (a
    selector by input or by name no longer matches them)."""
    for only in (lambda n: n.input[0] == "x", lambda n: n.name == "dq"):
        m, feed, want = _table_model((1,), ["Gather", "Gather"])
        result = _lower(m, only=only)
        assert len(result.nodes) == 2 and all(n.gather_moved for n in result.nodes)
        assert not any(n.domain == odq.DOMAIN for n in result.model.graph.node)
        for got, w in zip(run_ort(result.model, feed), want):
            assert same_bits(got, w)


def test_lower_command_says_which_gathers_moved(tmp_path, capsys):
    m, *_ = _table_model((1,), ["Gather"])
    src, dst = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(m, str(src))
    assert cli_main(["lower", str(src), "-o", str(dst), "--quiet"]) == 0
    assert "1 Gather(s) or Slice(s) moved before the Dequantize they read" in capsys.readouterr().out


def _sliced_model(
    axes, starts, ends, slice_axes, steps=None, *, x_shape=(12, 10), qt="i8", x_fed=False, fed_ends=False, index="i64"
):
    """``Dequantize(table) -> Slice(starts, ends, slice_axes, steps)`` (``slice_axes`` None: the input absent);
    the ends fed with ``fed_ends``, every index of type ``index``; and the output wanted, ORT's Slice of the
    reference's output."""
    q = dtypes.parse(qt)
    x = RNG.integers(int(q.min), int(q.max) + 1, x_shape).astype(q.numpy)
    sshape = [x_shape[a] for a in axes]
    s = RNG.uniform(0.001, 0.1, sshape).astype(np.float32)
    z = RNG.integers(-5, 5, sshape).astype(q.numpy)
    params = {"starts": starts, "ends": ends, "axes": slice_axes, "steps": steps}
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    inputs, feed = [], {}
    names = []
    for k, v in params.items():
        if v is None:
            names.append("")
            continue
        names.append(k)
        if k == "ends" and fed_ends:
            inputs.append(vi(k, index, [len(v)]))
            feed[k] = np.array(v, dtypes.parse(index).numpy)
        else:
            inits.append(numpy_helper.from_array(np.array(v, dtypes.parse(index).numpy), k))
    while names and not names[-1]:
        names.pop()
    if x_fed:
        inputs.append(vi("x", qt, list(x_shape)))
        feed["x"] = x
    else:
        inits.append(numpy_helper.from_array(x, "x"))
    nodes = [
        odq.make_node(["x", "s", "z"], ["d"], axes=list(axes), name="dq"),
        helper.make_node("Slice", ["d", *names], ["r"], name="sl"),
    ]
    m = model_of(nodes, inputs, [vi("r", "f32", ["r0", "r1"])], inits)
    ref = odq.dequantize(x, s, z, axes=axes)
    plain = model_of(
        [helper.make_node("Slice", ["d", *names], ["r"])],
        [vi("d", "f32", list(x_shape))] + [i for i in inputs if i.name != "x"],
        [vi("r", "f32", None)],
        [i for i in inits if i.name in params],
    )
    want = run_ort(plain, {"d": ref} | {k: v for k, v in feed.items() if k != "x"})[0]
    return m, feed, want


@pytest.mark.parametrize(
    "axes,starts,ends,slice_axes,steps,kwargs",
    [
        ((1,), [0], [5], [0], None, {"fed_ends": True}),  # a scale per column, the first rows (positions)
        ((0,), [2], [30], [0], [3], {"fed_ends": True}),  # a scale per row: the rows' scales sliced too
        ((0,), [0], [4], [0], None, {"x_fed": True, "qt": "u8"}),  # a fed table, constant bounds
        ((0, 1), [-1, 1], [-20, 9], [0, 1], [-2, 2], {"x_fed": True, "qt": "i16"}),  # negative steps
        ((0,), [-20], [-30], [0], [-1], {"x_fed": True}),  # ONNX's clamping: a start before the axis is 0
        ((0, 1), [1, -3], [-1, 100], None, None, {"x_fed": True}),  # no axes input: every axis, in order
        ((1,), [-3], [100], [-1], None, {"x_fed": True}),  # a negative axis
        ((0,), [3], [3], [0], None, {"x_fed": True}),  # empty
        ((0,), [2], [9], [0], [2], {"x_fed": True, "index": "i32"}),  # int32 indices: the scale's axes int32 too
        ((0,), [2], [9], None, None, {"fed_ends": True, "index": "i32"}),
        ((0,), [5], [2**63 - 1], [0], [-1], {"x_fed": True}),  # ORT reads this end as "to the first"
        ((0,), [5], [2**31 - 1], [0], [-2], {"x_fed": True, "index": "i32"}),
    ],
)
def test_a_slice_moves_before_the_dequantize(axes, starts, ends, slice_axes, steps, kwargs):
    """``Dequantize -> Slice`` becomes ``Slice -> Dequantize``, the scale and zero point sliced the same
    where the Slice's axes are quantized; the values are ORT's Slice of the reference's, bit for bit."""
    m, feed, want = _sliced_model(axes, starts, ends, slice_axes, steps, **kwargs)
    result = _lower(m)
    assert result.nodes[0].gather_moved == "'sl' of 'dq'"
    slices = [n for n in result.model.graph.node if n.op_type == "Slice"]
    quantized = set(axes) & {a % 2 for a in (slice_axes if slice_axes is not None else range(len(starts)))}
    assert sorted({n.input[0] for n in slices} & {"x", "s", "z"}) == (["s", "x", "z"] if quantized else ["x"])
    onnx.checker.check_model(result.model, full_check=True)
    (got,) = run_ort(result.model, feed)
    assert got.shape == want.shape and same_bits(got, want)


@pytest.mark.parametrize(
    "kwargs,why",
    [
        ({"axes": (0,), "slice_axes": [0, 1], "x_fed": True}, "one axis quantized, the other not"),
        ({"axes": (0,), "slice_axes": [0]}, "a constant table sliced by constants: ORT folds it into a weight"),
    ],
)
def test_no_slice_move_where_it_does_not_apply(kwargs, why):
    axes, slice_axes = kwargs["axes"], kwargs["slice_axes"]
    starts, ends = [1] * len(slice_axes), [4] * len(slice_axes)
    m, feed, want = _sliced_model(axes, starts, ends, slice_axes, x_fed=kwargs.get("x_fed", False))
    result = _lower(m)
    assert result.nodes[0].gather_moved == "", why
    (got,) = run_ort(result.model, feed)
    assert same_bits(got, want), why


@pytest.mark.parametrize(
    "x_shape,ids_shape,ids_dims,moved",
    [
        ((512, 8), (16,), None, True),  # a few rows of a scale per row: moved
        ((512, 8), (358,), None, False),  # 70% of the rows: the scale's Gathers cost more than they save
        ((512, 64), (200,), None, True),  # wide rows pay for them
        ((4096, 8), (3, 5), ("n", "t"), False),  # ids of unknown size, rows narrower than MIN_ROW_WIDTH
        ((4096, 64), (3, 5), ("n", "t"), True),
    ],
)
def test_a_scale_gathered_by_index_is_priced(x_shape, ids_shape, ids_dims, moved):
    """Along a quantized axis each index costs the scale's and zero point's Gathers ``PARAM_GATHER_COST``
    elements: narrow rows read by most of the table stay dequantized where they are (1.2-1.9x slower moved)."""
    m, feed, want = _table_model((0,), ["Gather"], x_shape=x_shape, ids_shape=ids_shape, ids_dims=ids_dims)
    result = _lower(m)
    assert bool(result.nodes[0].gather_moved) is moved
    (got,) = run_ort(result.model, feed)
    assert same_bits(got, want[0])
