"""The loss-scaling suite's figures a to f, drawn from results.json alone (:mod:`sim.report.plotting`).

Each ``figure_*`` function takes the report's document (:func:`sim.report.writing.suite_document`)
and a path, draws one PNG and returns the (closed) matplotlib Figure; :func:`draw_figures` draws
them all and returns ``{letter: file name}``. The data come from the runs the captions name;
nothing is recomputed here but the windows of suitable loss scales (:func:`scale_window`), which
are derived from the measured gradients.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import softfloat16 as sf
from sim.report import keys, plotting
from sim.report.plotting import RUN_COLORS, Figures, pyplot, save_figure, series

__all__ = ["ACCURACY_BREAK", "FIGURES", "FP16_MAX", "draw_figures", "scale_window"]


def _largest_log2(fmt: sf.Format) -> float:
    return math.log2(float(fmt.value(fmt.max_finite)))


FP16_MAX = float(sf.fp16.value(sf.fp16.max_finite))  # 65504
FP16_MAX_LOG2 = _largest_log2(sf.fp16)
FP16_SUBNORMAL, FP16_NORMAL = sf.fp16.min_subnormal_exponent, sf.fp16.emin  # -24, -14
FP16_ZERO_BELOW = FP16_SUBNORMAL - 1  # below half the smallest subnormal, a value rounds to zero
# (name, smallest subnormal, smallest normal, largest finite) as log2 values
FORMATS = tuple((name, fmt.min_subnormal_exponent, fmt.emin, _largest_log2(fmt))
                for name, fmt in (("FP32", sf.fp32), ("BF16", sf.bf16), ("FP16", sf.fp16)))
COLORS = {"FP32": "#1f77b4", "BF16": "#2ca02c", "FP16": "#ff7f0e"}
# Figure c's accuracy axis is broken here: above, the runs that train, at full resolution; below,
# everything else (run 6 near chance, run 8a's first evaluations), so every point is on the chart.
ACCURACY_BREAK = 80.0
def _histogram(state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(bin exponents, counts) of a Log2Histogram dict."""
    counts = np.asarray(state["counts"], dtype=np.float64)
    return state["low"] + np.arange(counts.size), counts


def _run(document: dict[str, Any], key: str) -> dict[str, Any] | None:
    return document["recipes"].get(key)


def _format_bars(axis: Any, rows: dict[str, float]) -> None:
    """Normal (solid) and subnormal (light) ranges of each format, one row each."""
    for name, subnormal, normal, largest in FORMATS:
        y = rows[name]
        axis.barh(y, largest - normal, left=normal, height=0.6, color=COLORS[name], alpha=0.85)
        axis.barh(y, normal - subnormal, left=subnormal, height=0.6, color=COLORS[name], alpha=0.3)


def figure_number_line(document: dict[str, Any], path: str) -> Any:
    """a. FP32, BF16 and FP16 on the log2 axis, with the true gradient magnitudes of each layer
    (run 3, all steps) drawn as ridges: where the FP16 floor cuts them off."""
    plt = pyplot()
    run = _run(document, keys.FP16_STATIC)
    layers = run["layers"] if run else []
    fig, axes = plt.subplots(2, 1, figsize=(11, 6.5), gridspec_kw={"height_ratios": [1, 1.3]})
    rows = {"FP32": len(layers) + 2, "BF16": len(layers) + 1, "FP16": len(layers)}
    for axis, (low, high) in zip(axes, ((-155, 132), (-45, 20))):
        _format_bars(axis, rows)
        if run:
            for index in range(len(layers)):
                exponents, counts = _histogram(run["diagnostics"]["grad_histograms"][index])
                if counts.size:
                    y = len(layers) - 1 - index
                    axis.bar(exponents + 0.5, 0.85 * counts / counts.max(), width=1.0, bottom=y - 0.4,
                             color="#555555", alpha=0.8)
        for x, style in ((FP16_SUBNORMAL, ":"), (FP16_NORMAL, "--")):
            axis.axvline(x, color=COLORS["FP16"], linestyle=style, linewidth=1)
        axis.set_xlim(low, high)
        axis.set_yticks(list(rows.values()) + list(range(len(layers))))
        axis.set_yticklabels(list(rows) + [f"{name} |g|" for name in reversed(layers)])
        axis.set_xlabel("log2 of magnitude")
    axes[0].set_title("Representable magnitudes (solid: normal, light: subnormal) and measured gradients")
    axes[1].set_title("Zoom: the FP16 floor (dashed 2^-14 smallest normal, dotted 2^-24 smallest subnormal)")
    fig.text(0.01, -0.01, "Gradients: true (FP32 reference) per-layer gradients of run 3, all steps, "
             "binned by floor(log2|g|); ridges are scaled to each layer's peak.", fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def figure_gradient_histograms(document: dict[str, Any], path: str) -> Any:
    """b. Per layer: true gradient magnitudes unscaled and multiplied by the static scale S, with
    FP16's floor (2^-14 normal, 2^-24 subnormal) and ceiling (65504)."""
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    run = _run(document, keys.FP16_STATIC)
    layers = run["layers"] if run else []
    scale = run["config"]["scale"] if run else 1.0
    shift = math.log2(scale)
    columns = 2
    rows = max(1, math.ceil(len(layers) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(11, 3.2 * rows + 0.8), squeeze=False, layout="constrained")
    curves = ((0.0, "#1f77b4", "unscaled |g|"), (shift, "#ff7f0e", f"scaled |S g|, S = 2^{shift:g}"))
    for index, axis in enumerate(axes.ravel()):
        if index >= len(layers):
            axis.set_visible(False)
            continue
        exponents, counts = _histogram(run["diagnostics"]["grad_histograms"][index])
        total = counts.sum()
        axis.axvspan(-60, FP16_ZERO_BELOW, color="#dddddd")
        axis.axvspan(FP16_ZERO_BELOW, FP16_NORMAL, color="#f3e3cf")
        axis.axvspan(FP16_MAX_LOG2, 40, color="#f6cccc")
        below = []
        for offset, color, _ in curves:
            below.append(counts[exponents + offset < FP16_ZERO_BELOW].sum() / total if total else 0.0)
            axis.stairs(counts, np.append(exponents, exponents[-1] + 1) + offset if counts.size else [0],
                        color=color, linewidth=1.5)
        axis.axvline(FP16_SUBNORMAL, color="#444444", linestyle=":", linewidth=1)
        axis.axvline(FP16_NORMAL, color="#444444", linestyle="--", linewidth=1)
        axis.axvline(FP16_MAX_LOG2, color="#aa0000", linewidth=1)
        axis.set_xlim(-50, 20)
        axis.set_yscale("log")
        # the per-layer shares live in the title, so no legend sits on the curves
        axis.set_title(f"{layers[index]}: {100 * below[0]:.2g}% of entries round to 0 unscaled, "
                       f"{100 * below[1]:.2g}% scaled", fontsize=10)
        axis.set_xlabel("log2 |gradient|")
        axis.set_ylabel("entries per binade (all steps)")
    handles = [Line2D([], [], color=color, linewidth=1.5, label=label) for _, color, label in curves]
    handles += [Patch(color="#dddddd", label="below 2^-25: rounds to 0"),
                Patch(color="#f3e3cf", label="2^-25 to 2^-14: subnormal"),
                Patch(color="#f6cccc", label="above 65504: overflows"),
                Line2D([], [], color="#444444", linestyle=":", label="2^-24: smallest subnormal"),
                Line2D([], [], color="#444444", linestyle="--", label="2^-14: smallest normal"),
                Line2D([], [], color="#aa0000", label="65504: largest finite")]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle("Run 3: gradient magnitudes of each layer (weights and bias) vs the FP16 floor and ceiling",
                 fontsize=11)
    return save_figure(fig, path)


def _broken_axis_marks(upper: Any, lower: Any) -> None:
    """The two diagonal ticks that say an axis is broken between ``upper`` and ``lower``."""
    marks = dict(marker=[(-1, -0.5), (1, 0.5)], markersize=10, linestyle="none", color="k", mec="k", mew=1,
                 clip_on=False)
    upper.plot([0, 1], [0, 0], transform=upper.transAxes, **marks)
    lower.plot([0, 1], [1, 1], transform=lower.transAxes, **marks)
    upper.spines["bottom"].set_visible(False)
    lower.spines["top"].set_visible(False)
    upper.tick_params(axis="x", bottom=False)


def figure_loss_curves(document: dict[str, Any], path: str) -> Any:
    """c. Training loss of every run (moving mean over 10 steps; skipped steps included), and
    the test accuracy at each evaluation on an axis broken at ``ACCURACY_BREAK``: every point
    is on the chart, and the runs that train keep their resolution."""
    plt = pyplot()
    fig, (top, upper, lower) = plt.subplots(3, 1, figsize=(10, 10), sharex=True, layout="constrained",
                                            gridspec_kw={"height_ratios": [1.6, 1, 0.55]})
    for color, run in zip(RUN_COLORS * 2, document["recipes"].values()):
        label = f"{run['label']}: {run['title']}"
        loss = series(run["per_step"]["loss"])
        if loss.size:
            window = min(10, loss.size)
            smooth = np.convolve(np.nan_to_num(loss, nan=0.0), np.ones(window) / window, mode="valid")
            top.plot(np.arange(smooth.size) + window - 1, smooth, color=color, linewidth=1.3, label=label)
        curve = run["diagnostics"].get("test_curve")
        if curve and curve["step"]:
            accuracy = 100 * np.asarray(curve["accuracy"], dtype=np.float64)
            for axis in (upper, lower):  # each point lands in one of the two, the line crosses the break
                axis.plot(curve["step"], accuracy, "o-", color=color, markersize=3, linewidth=1)
    top.set_yscale("log")
    top.set_ylabel("training loss (10-step mean)")
    top.set_title("Loss curves of all runs")
    upper.set_ylim(ACCURACY_BREAK, 100.5)
    lower.set_ylim(-3.0, ACCURACY_BREAK)
    _broken_axis_marks(upper, lower)
    upper.set_ylabel("test accuracy (%)")
    lower.set_ylabel("test accuracy (%)")
    upper.set_title(f"Test accuracy at each evaluation, every point shown (axis broken at {ACCURACY_BREAK:g}%)",
                    fontsize=9)
    lower.set_xlabel("step")
    # below the panels, where it covers no curve
    fig.legend(*top.get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    return save_figure(fig, path)


def _running_median(values: np.ndarray, window: int = 25) -> np.ndarray:
    """Median of the last ``window`` values at each step (fewer at the start); NaNs ignored."""
    out = np.full(values.size, np.nan)
    for i in range(values.size):
        chunk = values[max(0, i - window + 1):i + 1]
        if np.isfinite(chunk).any():
            out[i] = np.nanmedian(chunk)
    return out


def scale_window(run: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(bottom, top) per step: the log2 loss scales that suit ``run``'s own true gradients.

    Below ``top`` no weight gradient overflows (2^k * max|g| < 65504); above ``bottom`` 99% of
    the nonzero ones stay above FP16's rounding-to-zero threshold 2^-25. NaN where the step has
    no measurement. Each run has its own window: its gradients depend on how it trained.

    >>> bottom, top = scale_window({"diagnostics": {"grad_max": [0.5, None], "grad_log2_p01": [-20, None]}})
    >>> bottom.tolist()[0], top.tolist()[0], bool(np.isnan(top[1]))
    (-5.0, 16.0, True)
    """
    diagnostics = run["diagnostics"]
    largest, p01 = series(diagnostics["grad_max"]), series(diagnostics["grad_log2_p01"])
    with np.errstate(divide="ignore", invalid="ignore"):
        top = np.floor(np.log2(FP16_MAX / largest))
    return FP16_ZERO_BELOW - p01, top


def _draw_scale_window(axis: Any, run: dict[str, Any]) -> None:
    """Shade :func:`scale_window` of ``run``. Faint: each step; solid: the running median over
    25 steps (single batches scatter a lot)."""
    bottom, top = scale_window(run)
    steps = np.arange(top.size)
    axis.fill_between(steps, bottom, top, step="post", color="#cfe3cf", alpha=0.45, linewidth=0)
    axis.fill_between(steps, _running_median(bottom), _running_median(top), color="#8fc48f", alpha=0.6,
                      linewidth=0, label=f"scales that fit run {run['label']}'s gradients\n"
                                         "(25-step median; faint: each step)")


STATIC_RUNS = ((keys.FP16_STATIC, "#ff7f0e"), (keys.FP16_STATIC_TOO_LARGE, "#e377c2"),
               (keys.FP16_STATIC_TOO_SMALL, "#7f7f7f"))


def figure_dynamic_scale(document: dict[str, Any], path: str) -> Any:
    """d. Top: run 4's dynamic scale (the sawtooth) and its skipped steps, over the window of
    scales that suit each step's gradients. Below: the static scales of runs 3, 8a and 8b, each
    over its own run's window (8a's gradients stay large while it skips, so its window differs
    from run 3's): the window moves, a constant does not."""
    plt = pyplot()
    statics = [(run, color) for key, color in STATIC_RUNS if (run := _run(document, key))]
    fig, axes = plt.subplots(1 + len(statics), 1, figsize=(11, 3.4 + 2.4 * len(statics)), sharex=True,
                             sharey=True, layout="constrained",
                             gridspec_kw={"height_ratios": [1.3] + [1] * len(statics)}, squeeze=False)
    axes = axes.ravel()
    top = axes[0]
    run = _run(document, keys.FP16_DYNAMIC)
    if run:
        _draw_scale_window(top, run)
        scale = np.log2(np.asarray(run["loss_scale_history"], dtype=np.float64))
        top.step(np.arange(scale.size), scale, where="post", color="#1f77b4", linewidth=1.5,
                 label=f"dynamic scale\n(growth interval {run['config']['growth_interval']})")
        skipped = np.asarray(run["skipped_steps"], dtype=np.int64)
        top.plot(skipped, scale[skipped], "x", color="#d62728", markersize=7,
                 label=f"skipped step ({skipped.size})")
        top.set_title(f"Run {run['label']}: dynamic scaling, halve and skip on overflow, double after a run of "
                      "clean steps", fontsize=10)
    for axis, (other, color) in zip(axes[1:], statics):
        _draw_scale_window(axis, other)
        level = math.log2(other["config"]["scale"])
        axis.axhline(level, color=color, linestyle="--", linewidth=1.2, label=f"static 2^{level:g}")
        skipped = other["skipped_steps"]
        if skipped:
            axis.plot(skipped, [level] * len(skipped), "|", color=color, markersize=9, markeredgewidth=1.2,
                      label=f"skipped steps ({len(skipped)})")
        axis.set_title(f"Run {other['label']}: {other['title']}, against its own window", fontsize=10)
    axes[-1].set_xlabel("step")
    for axis in axes:
        axis.set_ylabel("log2 loss scale")
        # outside the axes, on the right: the band fills most of each panel
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return save_figure(fig, path)


def _weight_threshold(run: dict[str, Any]) -> int:
    """log2 of the relative update below which the stored weight cannot move: half an ulp of the
    format the weights are kept in (FP32 with master weights, the compute format without)."""
    config = run["config"]
    stored = sf.fp32 if config["master_weights"] else getattr(sf, config["precision"])
    return -stored.precision


def figure_update_ratios(document: dict[str, Any], path: str) -> Any:
    """e. With FP32 master weights (run 4) and without (run 5). Left: the cumulative share of
    updates below each |update| / |weight|, marked where each run meets its own weight format's
    line (2^-11 for FP16, 2^-24 for FP32). Right: the share of nonzero updates that actually left
    the weight unchanged, split by whether the gradient was zero (momentum alone)."""
    plt = pyplot()
    from matplotlib.patches import Patch

    fig, (curves, bars) = plt.subplots(1, 2, figsize=(11, 4.8), layout="constrained",
                                       gridspec_kw={"width_ratios": [2.3, 1]})
    summary: list[str] = []
    ticks: list[str] = []
    for key, color in ((keys.FP16_DYNAMIC, "#1f77b4"), (keys.FP16_DYNAMIC_NO_MASTER, "#d62728")):
        run = _run(document, key)
        if not run:
            continue
        diagnostics = run["diagnostics"]
        exponents, counts = _histogram(diagnostics["update_ratio_histogram"])
        if counts.size:
            edges = np.append(exponents, exponents[-1] + 1)
            cumulative = 100 * np.concatenate([[0.0], np.cumsum(counts)]) / counts.sum()
            curves.plot(edges, cumulative, color=color, linewidth=1.6, label=f"run {run['label']}: {run['title']}")
            threshold = _weight_threshold(run)
            below = 100 * counts[exponents < threshold].sum() / counts.sum()
            curves.plot([threshold], [below], "o", color=color, markersize=7)
            curves.hlines(below, edges[0], threshold, color=color, linestyle=":", linewidth=1)
            # left of a low marker (the curve is flat there), right of a high one (it is steep)
            low = below < 20
            curves.annotate(f"run {run['label']}: {below:.1f}% below 2^{threshold}", (threshold, below),
                            xytext=(-8, 5) if low else (8, -5), textcoords="offset points", fontsize=8,
                            color=color, ha="right" if low else "left", va="bottom" if low else "top")
            stored = "FP32 master weights" if run["config"]["master_weights"] else "FP16 weights"
            summary.append(f"{below:.1f}% of run {run['label']}'s below 2^{threshold} ({stored})")
        nonzero = max(1, diagnostics["updates_nonzero"])
        lost = 100 * diagnostics["updates_lost"] / nonzero
        lost_zero = 100 * diagnostics["updates_lost_zero_gradient"] / nonzero
        position = len(ticks)
        bars.bar(position, lost_zero, color=color, alpha=0.35, hatch="//", edgecolor=color)
        bars.bar(position, lost - lost_zero, bottom=lost_zero, color=color)
        bars.annotate(f"{lost:.1f}%", (position, lost), xytext=(0, 3), textcoords="offset points", ha="center",
                      fontsize=10)
        stored = "FP32 master weights" if run["config"]["master_weights"] else "FP16 weights"
        ticks.append(f"run {run['label']}\n{stored}")
    bars.set_xticks(range(len(ticks)), ticks)
    bars.set_xlim(-0.6, max(2, len(ticks)) - 0.4)
    bars.set_ylim(0, 1.2 * max([p.get_y() + p.get_height() for p in bars.patches] + [1.0]))
    bars.set_ylabel("nonzero updates that left the weight unchanged (%)", fontsize=9)
    bars.set_title("Measured: updates lost", fontsize=10)
    curves.axvline(-11, color="#ff7f0e", linestyle="--", label="2^-11: half an FP16 ulp, relative")
    curves.axvline(-24, color="#1f77b4", linestyle=":", label="2^-24: half an FP32 ulp, relative")
    curves.set_xlabel("log2 (|update| / |weight|)")
    curves.set_ylabel("updates with a smaller ratio (%, cumulative)")
    curves.set_ylim(0, 100)
    curves.set_title("Update-to-weight ratio, all steps and parameters", fontsize=10)
    handles, labels = curves.get_legend_handles_labels()
    handles += [Patch(facecolor="#bbbbbb", hatch="//", edgecolor="#666666"), Patch(color="#666666")]
    labels += ["lost; the gradient was exactly zero (momentum alone)", "lost; the gradient was nonzero"]
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle("An update below half an ulp of its stored weight is lost: " + "; ".join(summary), fontsize=10)
    return save_figure(fig, path)


def figure_clip_norm(document: dict[str, Any], path: str) -> Any:
    """f. The gradient norm the clip compares with its threshold: unscale-then-clip (run 4) vs
    clip-then-unscale (run 6)."""
    plt = pyplot()
    fig, axis = plt.subplots(figsize=(10, 4.5))
    threshold = None
    for key, color in ((keys.FP16_DYNAMIC, "#1f77b4"), (keys.FP16_DYNAMIC_CLIP_BUG, "#d62728")):
        run = _run(document, key)
        if not run:
            continue
        threshold = run["config"]["clip"]
        norm = np.array([np.nan if v is None else v for v in run["per_step"]["grad_norm"]], dtype=np.float64)
        clipped = np.asarray(run["per_step"]["clipped"], dtype=bool)
        steps = np.arange(norm.size)
        axis.plot(steps, norm, color=color, linewidth=1,
                  label=f"run {run['label']}: {run['title']} (clipped on {100 * clipped.mean():.1f}% of steps)")
        axis.plot(steps[clipped], norm[clipped], ".", color=color, markersize=3)
    if threshold is not None:
        axis.axhline(threshold, color="#333333", linestyle="--", label=f"clip threshold {threshold:g}")
    axis.set_yscale("log")
    axis.set_xlabel("step")
    axis.set_ylabel("global gradient norm seen by the clip")
    axis.set_title("The clipping-order bug: the clip sees gradients still multiplied by the loss scale")
    axis.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


FIGURES: Figures = {
    "a": ("fig_a_number_line.png", figure_number_line),
    "b": ("fig_b_gradient_histograms.png", figure_gradient_histograms),
    "c": ("fig_c_loss_curves.png", figure_loss_curves),
    "d": ("fig_d_dynamic_scale.png", figure_dynamic_scale),
    "e": ("fig_e_update_ratio.png", figure_update_ratios),
    "f": ("fig_f_clip_norm.png", figure_clip_norm),
}


def draw_figures(document: dict[str, Any], out: str) -> dict[str, str]:
    """Draw figures a to f of ``document`` into ``out``; returns ``{letter: file name}``."""
    return plotting.draw_figures(FIGURES, document, out)
