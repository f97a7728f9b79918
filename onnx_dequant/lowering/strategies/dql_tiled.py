"""Tiled DequantizeLinear: a scale that runs along a few trailing elements under one broadcast axis (a
per-channel scale on a last axis of 5 under 2M rows) makes ONNX Runtime's blocked kernel walk rows of
those few elements. As in ``cast-sub-mul-tiled``, the input is reshaped to join ``k`` runs into one row,
the scale (and zero point) tiled ``k`` times to match; then a blocked DequantizeLinear whose rows are ``k``
times longer, and the result reshaped back: ``Reshape -> DequantizeLinear -> Reshape``, the same kernel on
the same values (the same bits)."""

from __future__ import annotations

import dataclasses

from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Refusal, Strategy, dql_refusal
from .blocked import Blocked
from .costs import nodes_cost, reshaped_output_cost
from .dql import Layout, emit_layout, layout_cost, reshape, reshape_back
from .tiled import joined_axes, joined_rows, joined_shape, quantized_lead, rows_target, tiled_param, tiled_param_cost

__all__ = ["DQLTiled", "DQLTiling"]

_BLOCKED = Blocked()


@dataclasses.dataclass(frozen=True)
class DQLTiling:
    """The reshaped input's dims (``joined_rows``), the runs ``k`` joined per row, and the blocked layout over
    those dims."""

    dims: tuple[int | None, ...]
    k: int
    layout: Layout


class DQLTiled(Strategy[DQLTiling]):
    name = "dql-tiled"
    portable = False  # a blocked DequantizeLinear

    def check(self, info: NodeInfo) -> DQLTiling | Refusal:
        if info.opset < 21:
            return Refusal("blocked DequantizeLinear needs opset 21")
        refusal = dql_refusal(info)
        if refusal is not None:
            return refusal
        rows = joined_rows(info)
        if isinstance(rows, Refusal):
            return rows
        dims, k = rows
        layout = _BLOCKED.layout(self._joined(info, joined_shape(info, dims, k)))
        return layout if isinstance(layout, Refusal) else DQLTiling(dims, k, layout)

    def cost(self, info: NodeInfo, choice: DQLTiling) -> float:
        # the reshaped input, its scale (and zero point) k times as large, tiled when the model runs where it
        # is not a constant, and the Reshape back
        joined = layout_cost(self._joined(info, joined_shape(info, choice.dims, choice.k)), choice.layout)
        return joined + reshaped_output_cost(info) + nodes_cost(2) + tiled_param_cost(info, choice.k)

    @staticmethod
    def _joined(info: NodeInfo, dims: tuple[int | None, ...]) -> NodeInfo:
        """The node as the DequantizeLinear over the reshaped input computes it (no Reshape of its own)."""
        return dataclasses.replace(info, shape=dims, axes=joined_axes(info, dims), graph_output=False)

    def emit(self, info: NodeInfo, choice: DQLTiling, em: Emitter) -> None:
        lead = quantized_lead(info)
        joined = dataclasses.replace(
            self._joined(info, choice.dims),
            x=reshape(em, info, info.x, rows_target(em, info, choice.dims), hint="rows"),
            scale=tiled_param(info, em, info.scale, info.scale_const, choice.k, lead),
            zero_point=(
                tiled_param(info, em, info.zero_point, info.zp_const, choice.k, lead)
                if info.has_zp and info.zero_point is not None
                else None
            ),
            output=em.fresh("y_rows"),
            zp_zero=False,
        )
        emit_layout(joined, em, choice.layout)
        reshape_back(em, info, joined.output, flatten=False)
