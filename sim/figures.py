"""The report's six figures, drawn from results.json alone (matplotlib, Agg backend).

Each ``figure_*`` function takes the suite document (:func:`sim.report.suite_document`) and a
path, and draws one PNG. :func:`make_figures` draws them all and returns ``{name: file name}``.
The data come from the runs the captions name; nothing is recomputed here.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["FIGURES", "make_figures"]

FP16_MAX_LOG2 = math.log2(65504.0)
# (name, smallest subnormal, smallest normal, largest finite) as log2 values
FORMATS = (
    ("FP32", -149, -126, math.log2(3.4028234663852886e38)),
    ("BF16", -133, -126, math.log2(3.3895313892515355e38)),
    ("FP16", -24, -14, FP16_MAX_LOG2),
)
COLORS = {"FP32": "#1f77b4", "BF16": "#2ca02c", "FP16": "#ff7f0e"}
RUN_COLORS = ("#000000", "#d62728", "#ff7f0e", "#1f77b4", "#9467bd", "#8c564b", "#2ca02c", "#e377c2", "#7f7f7f")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _histogram(state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(bin exponents, counts) of a Log2Histogram dict."""
    counts = np.asarray(state["counts"], dtype=np.float64)
    return state["low"] + np.arange(counts.size), counts


def _run(document: dict[str, Any], key: str) -> dict[str, Any] | None:
    return document["recipes"].get(key)


def _save(fig: Any, path: str) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)


def _format_bars(axis: Any, rows: dict[str, float]) -> None:
    """Normal (solid) and subnormal (light) ranges of each format, one row each."""
    for name, subnormal, normal, largest in FORMATS:
        y = rows[name]
        axis.barh(y, largest - normal, left=normal, height=0.6, color=COLORS[name], alpha=0.85)
        axis.barh(y, normal - subnormal, left=subnormal, height=0.6, color=COLORS[name], alpha=0.3)


def figure_number_line(document: dict[str, Any], path: str) -> None:
    """a. FP32, BF16 and FP16 on the log2 axis, with the true gradient magnitudes of each layer
    (run 3, all steps) drawn as ridges: where the FP16 floor cuts them off."""
    plt = _pyplot()
    run = _run(document, "fp16-static")
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
        for x, style in ((-24, ":"), (-14, "--")):
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
    _save(fig, path)


def figure_gradient_histograms(document: dict[str, Any], path: str) -> None:
    """b. Per layer: true gradient magnitudes unscaled and multiplied by the static scale S, with
    FP16's floor (2^-14 normal, 2^-24 subnormal) and ceiling (65504)."""
    plt = _pyplot()
    run = _run(document, "fp16-static")
    layers = run["layers"] if run else []
    scale = run["config"]["scale"] if run else 1.0
    shift = math.log2(scale)
    columns = 2
    rows = max(1, math.ceil(len(layers) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(11, 3.2 * rows), squeeze=False)
    for index, axis in enumerate(axes.ravel()):
        if index >= len(layers):
            axis.set_visible(False)
            continue
        exponents, counts = _histogram(run["diagnostics"]["grad_histograms"][index])
        total = counts.sum()
        axis.axvspan(-60, -25, color="#dddddd")
        axis.axvspan(-25, -14, color="#f3e3cf")
        axis.axvspan(FP16_MAX_LOG2, 40, color="#f6cccc")
        curves = ((0.0, "#1f77b4", "unscaled |g|"), (shift, "#ff7f0e", f"scaled |S g|, S = 2^{shift:g}"))
        for offset, color, label in curves:
            below = counts[exponents + offset < -25].sum() / total if total else 0.0
            axis.stairs(counts, np.append(exponents, exponents[-1] + 1) + offset if counts.size else [0],
                        color=color, linewidth=1.5, label=f"{label}: {100 * below:.2g}% below 2^-25 (round to 0)")
        axis.axvline(-24, color="#444444", linestyle=":", linewidth=1)  # smallest subnormal
        axis.axvline(-14, color="#444444", linestyle="--", linewidth=1)
        axis.axvline(FP16_MAX_LOG2, color="#aa0000", linewidth=1)
        axis.set_xlim(-50, 20)
        axis.set_yscale("log")
        axis.set_title(f"{layers[index]} (weights and bias)")
        axis.set_xlabel("log2 |gradient|")
        axis.legend(fontsize=7, loc="upper left")
    fig.suptitle("Run 3: gradient magnitudes vs the FP16 floor and ceiling "
                 "(grey: rounds to 0; tan: subnormal; red: above 65504)", fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def figure_loss_curves(document: dict[str, Any], path: str) -> None:
    """c. Training loss of every run (moving mean over 10 steps; skipped steps included), and
    the test accuracy at each evaluation."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), sharex=True, gridspec_kw={"height_ratios": [1.6, 1]})
    for color, run in zip(RUN_COLORS * 2, document["recipes"].values()):
        label = f"{run['label']}: {run['title']}"
        loss = np.array([np.nan if v is None else v for v in run["per_step"]["loss"]], dtype=np.float64)
        if loss.size:
            window = min(10, loss.size)
            smooth = np.convolve(np.nan_to_num(loss, nan=0.0), np.ones(window) / window, mode="valid")
            top.plot(np.arange(smooth.size) + window - 1, smooth, color=color, linewidth=1.3, label=label)
        curve = run["diagnostics"].get("test_curve")
        if curve and curve["step"]:
            bottom.plot(curve["step"], 100 * np.asarray(curve["accuracy"]), "o-", color=color, markersize=3,
                        linewidth=1, label=label)
    top.set_yscale("log")
    top.set_ylabel("training loss (10-step mean)")
    top.set_title("Loss curves of all runs")
    top.legend(fontsize=7)
    bottom.set_ylim(85, 100)
    bottom.set_xlabel("step")
    bottom.set_ylabel("test accuracy (%)")
    bottom.set_title("Test accuracy (run 6 stays near 10%, below this scale)", fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def _running_median(values: np.ndarray, window: int = 25) -> np.ndarray:
    """Median of the last ``window`` values at each step (fewer at the start); NaNs ignored."""
    out = np.full(values.size, np.nan)
    for i in range(values.size):
        chunk = values[max(0, i - window + 1):i + 1]
        if np.isfinite(chunk).any():
            out[i] = np.nanmedian(chunk)
    return out


def _scale_window(axis: Any, run: dict[str, Any]) -> None:
    """Shade, per step, the loss scales that suit this run's true gradients: below the top no
    weight gradient overflows (2^k * max|g| < 65504), above the bottom 99% of the nonzero ones
    stay above FP16's rounding-to-zero threshold 2^-25. Faint: each step; solid: the running
    median over 25 steps (single batches scatter a lot)."""
    diagnostics = run["diagnostics"]
    largest = np.array([np.nan if v is None else v for v in diagnostics["grad_max"]], dtype=np.float64)
    p01 = np.array([np.nan if v is None else v for v in diagnostics["grad_log2_p01"]], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        top = np.floor(np.log2(65504.0 / largest))
    bottom = -25.0 - p01
    steps = np.arange(top.size)
    axis.fill_between(steps, bottom, top, step="post", color="#cfe3cf", alpha=0.45, linewidth=0)
    axis.fill_between(steps, _running_median(bottom), _running_median(top), color="#8fc48f", alpha=0.6,
                      linewidth=0, label=f"scales that fit run {run['label']}'s gradients (25-step median; "
                                         "faint: each step)")


def figure_dynamic_scale(document: dict[str, Any], path: str) -> None:
    """d. Top: run 4's dynamic scale (the sawtooth) and its skipped steps, over the window of
    scales that suit each step's gradients. Bottom: the static scales of runs 3, 8a and 8b over
    run 3's window: the window moves, a constant does not."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    run = _run(document, "fp16-dynamic")
    if run:
        _scale_window(top, run)
        scale = np.log2(np.asarray(run["loss_scale_history"], dtype=np.float64))
        top.step(np.arange(scale.size), scale, where="post", color="#1f77b4", linewidth=1.5,
                 label=f"run {run['label']}: dynamic scale (growth interval {run['config']['growth_interval']})")
        skipped = np.asarray(run["skipped_steps"], dtype=np.int64)
        top.plot(skipped, scale[skipped], "x", color="#d62728", markersize=7,
                 label=f"run {run['label']}: skipped step ({skipped.size})")
        top.set_title("Dynamic scaling: halve and skip on overflow, double after a run of clean steps")
    reference = _run(document, "fp16-static")
    if reference:
        _scale_window(bottom, reference)
    for key, color in (("fp16-static", "#ff7f0e"), ("fp16-static-too-large", "#e377c2"),
                       ("fp16-static-too-small", "#7f7f7f")):
        other = _run(document, key)
        if not other:
            continue
        level = math.log2(other["config"]["scale"])
        bottom.axhline(level, color=color, linestyle="--", linewidth=1.2,
                       label=f"run {other['label']}: static 2^{level:g}")
        skipped = other["skipped_steps"]
        if skipped:
            bottom.plot(skipped, [level + 0.6] * len(skipped), "|", color=color, markersize=6,
                        label=f"run {other['label']}: skipped steps ({len(skipped)})")
    bottom.set_title("Static scaling: a constant, while the window of good scales drifts upward")
    bottom.set_xlabel("step")
    for axis in (top, bottom):
        axis.set_ylabel("log2 loss scale")
        axis.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    _save(fig, path)


def figure_update_ratios(document: dict[str, Any], path: str) -> None:
    """e. |update| / |weight| with FP32 master weights (run 4) and without (run 5), against the
    2^-11 below which an FP16 weight cannot move."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(10, 4.5))
    for key, color in (("fp16-dynamic", "#1f77b4"), ("fp16-dynamic-no-master", "#d62728")):
        run = _run(document, key)
        if not run:
            continue
        diagnostics = run["diagnostics"]
        exponents, counts = _histogram(diagnostics["update_ratio_histogram"])
        if counts.size == 0:
            continue
        below = counts[exponents < -11].sum() / counts.sum()
        lost = diagnostics["updates_lost"] / max(1, diagnostics["updates_nonzero"])
        axis.stairs(counts / counts.sum(), np.append(exponents, exponents[-1] + 1), color=color, linewidth=1.5,
                    label=f"run {run['label']}: {run['title']}\n  {100 * below:.1f}% below 2^-11; "
                          f"{100 * lost:.1f}% of updates left the weight unchanged")
    axis.axvline(-11, color="#ff7f0e", linestyle="--", label="2^-11: half an FP16 ulp, relative")
    axis.axvline(-24, color="#1f77b4", linestyle=":", label="2^-24: half an FP32 ulp, relative")
    axis.set_xlabel("log2 (|update| / |weight|)")
    axis.set_ylabel("share of updates")
    axis.set_title("Update-to-weight ratio, all steps and parameters")
    axis.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)


def figure_clip_norm(document: dict[str, Any], path: str) -> None:
    """f. The gradient norm the clip compares with its threshold: unscale-then-clip (run 4) vs
    clip-then-unscale (run 6)."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(10, 4.5))
    threshold = None
    for key, color in (("fp16-dynamic", "#1f77b4"), ("fp16-dynamic-clip-bug", "#d62728")):
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
    _save(fig, path)


FIGURES: dict[str, tuple[str, Callable[[dict[str, Any], str], None]]] = {
    "a": ("fig_a_number_line.png", figure_number_line),
    "b": ("fig_b_gradient_histograms.png", figure_gradient_histograms),
    "c": ("fig_c_loss_curves.png", figure_loss_curves),
    "d": ("fig_d_dynamic_scale.png", figure_dynamic_scale),
    "e": ("fig_e_update_ratio.png", figure_update_ratios),
    "f": ("fig_f_clip_norm.png", figure_clip_norm),
}


def make_figures(document: dict[str, Any], out: str) -> dict[str, str]:
    """Draw every figure into ``out``; returns ``{letter: file name}``."""
    written = {}
    for letter, (name, draw) in FIGURES.items():
        draw(document, os.path.join(out, name))
        written[letter] = name
    return written
