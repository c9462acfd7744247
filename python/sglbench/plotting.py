"""The report's figure helpers: one PNG per matplotlib figure, the plot record, colours and legends.

Shared by ``sglbench.report`` and the deployment answer's plots (``sglbench.deploy.plots``): a figure is
drawn on the Agg canvas (no display) and saved as PNG bytes with no timestamp in its metadata, so the
same data gives the same file.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100
PALETTE = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#7f7f7f", "#393b79", "#ad494a",
]  # fmt: skip


@dataclass
class Plot:
    """One figure of the report: its PNG, or why it is not shown (``png`` None)."""

    key: str
    title: str
    png: bytes | None
    caption: str
    empty_reason: str = ""


def png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def config_colors(configs: Sequence[str]) -> dict[str, str]:
    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(sorted(set(configs)))}


def tp_axes(n: int, width: float = 4.6, height: float = 3.4) -> tuple[Figure, list[Any]]:
    """One row of ``n`` axes (one per TP size)."""
    fig = Figure(figsize=(max(width * n, 6.0), height))
    axes = [fig.add_subplot(1, n, i + 1) for i in range(n)]
    return fig, axes


def legend(axes: Sequence[Any], *, sort: bool = True) -> None:
    """One legend (right of the last axis) with every series of every axis, once each."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    labels = sorted(seen) if sort else list(seen)
    axes[-1].legend(
        [seen[k] for k in labels],
        labels,
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        frameon=False,
    )
