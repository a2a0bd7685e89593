"""What every story's figures share (matplotlib with the Agg backend, imported only when drawing):
one pyplot setup, one way to save a PNG, results.json series as arrays, the report's run palette,
and drawing a story's table of figures into a folder.

A story's figures are a dict ``{key: (file name, draw)}`` (:data:`sim.report.scaling.figures.FIGURES`,
:data:`sim.report.sweep.SWEEP_FIGURES`, :data:`sim.report.finer.figures.FINER_FIGURES`); each
``draw(data, path)`` draws one PNG from the story's part of results.json and returns the (closed)
matplotlib Figure, so that tests can inspect what was drawn.

>>> series([0.5, None]).tolist()[0]
0.5
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["RUN_COLORS", "Figures", "draw_figures", "pyplot", "save_figure", "series"]

# one colour per run of the loss-scaling suite (figure c), reused for the sweep's gains (figure h)
RUN_COLORS = ("#000000", "#d62728", "#ff7f0e", "#1f77b4", "#9467bd", "#8c564b", "#2ca02c", "#e377c2", "#7f7f7f")

Figures = Mapping[str, tuple[str, Callable[[Any, str], Any]]]


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str) -> Any:
    """Write ``fig`` as a PNG with no time or version in it (the same figure, the same bytes) and
    close it; returns it."""
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    pyplot().close(fig)
    return fig


def series(values: list[float | None]) -> np.ndarray:
    """A results.json series as float64, None (not measured) as NaN."""
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def draw_figures(figures: Figures, data: Any, out: str) -> dict[str, str]:
    """Draw every figure of ``figures`` from ``data`` into the folder ``out``; returns
    ``{key: file name}``."""
    written = {}
    for key, (name, draw) in figures.items():
        draw(data, os.path.join(out, name))
        written[key] = name
    return written
