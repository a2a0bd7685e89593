"""The report's figures, drawn from the committed docs/report/results.json: every point on the
chart, each static run over its own window, the measured lost-update shares in figure e, the
sweep's cells in figure g, and no legend over the curves."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from sim.diagnostics import Log2Histogram
from sim.report.scaling import figures
from sim.report.sweep import SWEEP_FIGURES

pytest.importorskip("matplotlib")

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "report" / "results.json"


@pytest.fixture(scope="module")
def document():
    return json.loads(RESULTS.read_text())


@pytest.fixture(scope="module")
def drawn(document, tmp_path_factory):
    """Each figure drawn once, as the report draws it: {letter: matplotlib Figure}."""
    out = tmp_path_factory.mktemp("figures")
    every = {**figures.FIGURES, **SWEEP_FIGURES}
    return {letter: draw(document, str(out / name)) for letter, (name, draw) in every.items()}


@pytest.mark.parametrize("letter", "bcdegh")
def test_no_legend_covers_a_panel(drawn, letter):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = drawn[letter]
    canvas = FigureCanvasAgg(fig)  # the figure is closed: lay it out again on a canvas of its own
    canvas.draw()

    def extent(artist):
        return artist.get_window_extent(canvas.get_renderer())

    panels = [axis for axis in fig.axes if axis.get_visible()]
    legends = list(fig.legends) + [axis.get_legend() for axis in panels if axis.get_legend()]
    assert legends, "the figure has no legend"
    for legend in legends:
        for axis in panels:
            assert not extent(legend).overlaps(extent(axis)), (
                f"a legend covers the panel {axis.get_title()!r}")


def test_figure_b_has_no_legend_inside_a_panel_and_labels_every_y_axis(drawn):
    fig = drawn["b"]
    panels = [axis for axis in fig.axes if axis.get_visible()]
    assert len(panels) == 4
    for axis in panels:
        assert axis.get_legend() is None, axis.get_title()
        assert axis.get_ylabel(), f"no y label on {axis.get_title()!r}"
    assert len(fig.legends) == 1


def test_figure_c_shows_every_accuracy_point(document, drawn):
    fig = drawn["c"]
    checked = 0
    for run in document["recipes"].values():
        curve = run["diagnostics"]["test_curve"]
        accuracy = 100 * np.asarray(curve["accuracy"])
        panels = [axis for axis in fig.axes for line in axis.get_lines()
                  if np.array_equal(np.asarray(line.get_ydata(), dtype=float), accuracy)]
        assert panels, f"run {run['label']}'s accuracy is not drawn"
        for step, value in zip(curve["step"], accuracy):
            assert any(min(a.get_ylim()) < value < max(a.get_ylim()) for a in panels), (
                f"run {run['label']} at step {step}: {value:.1f}% is off the chart")
            checked += 1
    assert checked == sum(len(r["diagnostics"]["test_curve"]["step"]) for r in document["recipes"].values())
    # the runs that train keep their resolution: a 20-point span, not 0-100
    upper = max((a for a in fig.axes if a.get_ylabel().startswith("test accuracy")), key=lambda a: a.get_ylim()[1])
    assert upper.get_ylim()[1] - upper.get_ylim()[0] <= 25


def _band_values(axis, label):
    """The y values of the vertices of the shaded band whose legend label names run ``label``."""
    bands = [c for c in axis.collections if f"run {label}'s gradients" in str(c.get_label())]
    assert len(bands) == 1, f"{axis.get_title()!r} has {len(bands)} windows of run {label}"
    vertices = np.concatenate([path.vertices for path in bands[0].get_paths()])
    return np.unique(vertices[:, 1])


def _expected_band(run):
    values = np.concatenate([figures._running_median(edge) for edge in figures.scale_window(run)])
    return np.unique(values[np.isfinite(values)])


@pytest.mark.parametrize("key", ["fp16-static", "fp16-static-too-large", "fp16-static-too-small"])
def test_figure_d_draws_each_static_run_against_its_own_window(document, drawn, key):
    run = document["recipes"][key]
    label = run["label"]
    panels = [axis for axis in drawn["d"].axes if axis.get_title().startswith(f"Run {label}:")]
    assert len(panels) == 1, f"no panel of its own for run {label}"
    axis = panels[0]
    np.testing.assert_array_equal(_band_values(axis, label), _expected_band(run))
    level = math.log2(run["config"]["scale"])
    assert any(np.all(np.asarray(line.get_ydata(), dtype=float) == level) for line in axis.get_lines())


def test_figure_d_run_8a_skips_where_its_own_window_says_and_run_3s_does_not(document):
    """Run 8a skipped most early steps, so its gradients stayed large longer than run 3's: over run
    3's window its late skips look unexplained, over its own each skip is a step whose window top
    lies below its scale."""
    runs = document["recipes"]
    large = runs["fp16-static-too-large"]
    level = math.log2(large["config"]["scale"])
    skipped = np.asarray(large["skipped_steps"])
    late = skipped[skipped >= document["suite"]["skip_window_late"][0]]
    assert late.size > 0
    _, own_top = figures.scale_window(large)
    _, reference_top = figures.scale_window(runs["fp16-static"])
    assert np.all(own_top[skipped] < level)
    assert not np.all(reference_top[late] < level)


def test_figure_c_caption_names_the_break(document):
    from sim.report import FIGURE_CAPTIONS

    assert f"broken at {figures.ACCURACY_BREAK:g}%" in FIGURE_CAPTIONS["c"][1]


def test_figure_e_shows_the_measured_lost_shares(document, drawn):
    fig = drawn["e"]
    bars = [axis for axis in fig.axes if axis.patches]
    assert len(bars) == 1
    heights: dict[float, float] = {}
    for patch in bars[0].patches:
        centre = round(patch.get_x() + patch.get_width() / 2, 6)
        heights[centre] = heights.get(centre, 0.0) + patch.get_height()
    texts = {text.get_text() for text in bars[0].texts}
    expected = []
    for key in ("fp16-dynamic", "fp16-dynamic-no-master"):
        diagnostics = document["recipes"][key]["diagnostics"]
        lost = 100 * diagnostics["updates_lost"] / diagnostics["updates_nonzero"]
        expected.append(lost)
        assert f"{lost:.1f}%" in texts
    np.testing.assert_allclose([heights[x] for x in sorted(heights)], expected, rtol=1e-12)
    assert [f"{value:.1f}" for value in expected] == ["6.1", "35.3"]  # the shares the report quotes


def test_figure_e_marks_each_run_where_it_meets_its_own_weight_line(document, drawn):
    curves = next(axis for axis in drawn["e"].axes if not axis.patches)
    markers = {(float(line.get_xdata()[0]), round(float(line.get_ydata()[0]), 9))
               for line in curves.get_lines() if len(line.get_xdata()) == 1}
    for key, threshold in (("fp16-dynamic", -24), ("fp16-dynamic-no-master", -11)):
        ratios = Log2Histogram.from_dict(document["recipes"][key]["diagnostics"]["update_ratio_histogram"])
        assert (threshold, round(100 * ratios.count_below(threshold) / ratios.total, 9)) in markers


def test_figure_g_has_one_point_per_cell_and_fp16_run_filled_where_the_cost_is_real(document, drawn):
    from sim.report.sweep import UNDERFLOW_FLOOR, cell_outcome

    sweep = document["sweep"]
    [axis] = drawn["g"].axes
    points = {(round(float(line.get_xdata()[0]), 9), round(float(line.get_ydata()[0]), 9)):
              line.get_markerfacecolor() != "white" for line in axis.get_lines() if len(line.get_xdata()) == 1}
    assert len(points) == 2 * len(sweep["cells"])
    for cell in sweep["cells"].values():
        outcome = cell_outcome(cell, sweep["late_start"])
        x = round(100 * max(outcome["underflow"], UNDERFLOW_FLOOR), 9)
        for run in ("fp16-none", "fp16-dynamic"):
            assert points[(x, round(100 * outcome["cost"][run], 9))] == outcome["real"][run], (cell["label"], run)
