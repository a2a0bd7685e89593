"""Finer scales and accumulation, figures finer-a to finer-d (:mod:`sim.report.plotting`).

Each ``figure_*`` function takes the section's results (:func:`sim.report.finer.runs.finer_results`)
and a path, draws one PNG and returns the (closed) matplotlib Figure, so that tests can inspect
it; :func:`draw_finer_figures` draws them all. Nothing is recomputed here but the representable
range under a scale (:func:`scaled_range`).

>>> FINER_FIGURES["finer-a"][0]
'fig_finer_a_amax_scales.png'
"""
from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

import softfloat16 as sf
from sim.report import keys, plotting
from sim.report.finer.recipes import ROLES
from sim.report.plotting import Figures, pyplot, save_figure, series

__all__ = ["AMAX_TENSORS", "FINER_FIGURES", "draw_finer_figures", "scaled_range"]

# Figure a's tensors: an activation, a weight, and the output gradients of the first and last layers.
AMAX_TENSORS = ("fc2.input", "fc1.weight", "fc1.grad_output", "fc4.grad_output")
ROLE_COLORS = {"input": "#1f77b4", "weight": "#2ca02c", "grad_output": "#d62728"}
# Figure b's groups, coarsest first: (run key, label)
GRANULARITY_RUNS = (
    (keys.FP8_GLOBAL, "global: none\n(F2)"),
    (keys.FP8_GLOBAL_LOSS_SCALE, "global: loss scale\n(F3)"),
    (keys.FP8_DELAYED, "per tensor: delayed\n(F4)"),
    (keys.FP8_CURRENT, "per tensor: current\n(F5)"),
    (keys.MXFP8, "per block of 32\nMXFP8 (F6)"),
    (keys.NVFP4_RNE, "per block of 16\nNVFP4 (F7)"),
)
RUN_COLORS = ("#000000", "#d62728", "#ff7f0e", "#1f77b4", "#17becf", "#9467bd", "#2ca02c", "#8c564b",
              "#e377c2", "#7f7f7f")
ACCUMULATION_STYLES = {"fp32": ("#1f77b4", "FP32 accumulation"), "kept": ("#d62728", "{bits} kept bits"),
                       "promoted": ("#2ca02c", "{bits} kept bits, promoted every {every}")}


def scaled_range(tensor: str, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log2 smallest subnormal / scale, log2 fmax / scale) of an FP8 tensor (E5M2 for
    gradients, E4M3FN otherwise) under per-step ``scale`` values.

    >>> low, high = scaled_range("fc1.weight", np.array([1.0, 4.0]))
    >>> low.tolist(), [round(h, 3) for h in high.tolist()]
    ([-9.0, -11.0], [8.807, 6.807])
    """
    fmt = sf.fp8_e5m2 if tensor.endswith("grad_output") else sf.fp8_e4m3fn
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.log2(scale)
    return fmt.min_subnormal_exponent - shift, math.log2(float(fmt.value(fmt.max_finite))) - shift


def figure_amax_scales(results: dict[str, Any], path: str) -> Any:
    """finer-a. The delayed run's amax per step against fmax / scale, for ``AMAX_TENSORS``."""
    plt = pyplot()
    run = results["runs"].get(keys.FP8_DELAYED)
    trace = run.get("tensor_trace") if run else None
    tensors = [t for t in AMAX_TENSORS if trace and t in trace["tensors"]] or (trace["tensors"][:4] if trace else [])
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.8), squeeze=False, layout="constrained")
    for axis, tensor in zip(axes.ravel(), tensors):
        column = trace["tensors"].index(tensor)
        amax = series([step[column] for step in trace["amax"]])
        scale = series([step[column] for step in trace["scale"]])
        saturated = np.array([step[column] > 0 for step in trace["saturated"]], dtype=bool)
        steps = np.arange(amax.size)
        low, high = scaled_range(tensor, scale)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_amax = np.log2(amax)
        axis.fill_between(steps, low, high, step="post", color="#c6dbef", alpha=0.6, linewidth=0,
                          label="representable under the scale")
        axis.step(steps, high, where="post", color="#1f77b4", linewidth=1.4, label="fmax / scale")
        axis.plot(steps, log_amax, color="#000000", linewidth=1.0, label="amax of the step")
        if saturated.any():
            axis.plot(steps[saturated], log_amax[saturated], "x", color="#d62728", markersize=5,
                      label=f"values saturated ({int(saturated.sum())} steps)")
        finite = log_amax[np.isfinite(log_amax)]
        if finite.size:
            axis.set_ylim(min(np.nanmin(low), finite.min()) - 1, max(np.nanmax(high), finite.max()) + 1)
        fmt = "E5M2" if tensor.endswith("grad_output") else "E4M3"
        axis.set_title(f"{tensor} ({fmt})", fontsize=10)
        axis.set_xlabel("step")
        axis.set_ylabel("log2 magnitude")
    for axis in axes.ravel()[len(tensors):]:
        axis.set_visible(False)
    if tensors:
        handles, labels = {}, {}
        for axis in axes.ravel()[:len(tensors)]:
            for handle, label in zip(*axis.get_legend_handles_labels()):
                key = label.split(" (")[0]
                handles.setdefault(key, handle)
                labels.setdefault(key, "values saturated" if key == "values saturated" else label)
        fig.legend(list(handles.values()), list(labels.values()), loc="outside lower center", ncol=4, fontsize=8,
                   frameon=False)
    history = run["config"].get("amax_history") if run else None
    fig.suptitle(f"Run F4, per-tensor delayed scaling (amax history {history}): the amax against the largest "
                 "value its scale represents", fontsize=11)
    return save_figure(fig, path)


def figure_granularity(results: dict[str, Any], path: str) -> Any:
    """finer-b. Per scaling granularity and tensor role: the share of nonzero values quantised to
    zero (solid) and beyond the scaled range (hatched)."""
    plt = pyplot()
    from matplotlib.patches import Patch

    groups = [(results["runs"][key], label) for key, label in GRANULARITY_RUNS if key in results["runs"]]
    roles = ROLES
    fig, axis = plt.subplots(figsize=(11, 4.8), layout="constrained")
    width = 0.26
    for g, (run, _) in enumerate(groups):
        for r, role in enumerate(roles):
            counts = run["roles"].get(role)
            if not counts:
                continue
            x = g + (r - 1) * width
            under, over = 100 * counts["underflow_share"], 100 * counts["saturated_share"]
            color = ROLE_COLORS[role]
            axis.bar(x, under, width * 0.92, color=color)
            axis.bar(x, over, width * 0.92, bottom=under, color=color, alpha=0.35, hatch="//", edgecolor=color)
            axis.annotate(f"{under + over:.2g}", (x, under + over), xytext=(0, 2), textcoords="offset points",
                          ha="center", fontsize=7)
    axis.set_xticks(range(len(groups)), [label for _, label in groups], fontsize=8)
    axis.set_ylabel("nonzero values lost (%)")
    axis.set_title("Values quantised to zero (solid) or saturated (hatched), by scaling granularity and tensor role",
                   fontsize=10)
    axis.set_ylim(0, 1.18 * max([p.get_y() + p.get_height() for p in axis.patches] + [1.0]))
    handles = [Patch(color=ROLE_COLORS[role], label=role) for role in roles]
    handles += [Patch(facecolor="#bbbbbb", hatch="//", edgecolor="#666666", label="saturated (beyond the range)")]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    return save_figure(fig, path)


def figure_accuracy(results: dict[str, Any], path: str) -> Any:
    """finer-c. Test accuracy at each evaluation: the finer-scales runs, and the accumulation
    runs with their FP32-accumulated reference."""
    plt = pyplot()
    fig, panels = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True, layout="constrained")
    runs = list(results["runs"].items())
    for color, (key, run) in zip(RUN_COLORS * 2, runs):
        curve = run["test_curve"]
        if not curve["step"]:
            continue
        targets = [panels[0]] if run["part"] == "finer" else [panels[1]]
        if key == keys.FP8_DELAYED:
            targets.append(panels[1])
        for axis in targets:
            axis.plot(curve["step"], 100 * series(curve["accuracy"]), "o-", color=color, markersize=3, linewidth=1,
                      label=f"{run['label']}: {run['title']}")
    for axis, title in zip(panels, ("Finer scales", "Accumulation (FP8 delayed)")):
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("step")
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.15), ncol=1, frameon=False)
    panels[0].set_ylabel("test accuracy (%)")
    return save_figure(fig, path)


def figure_accumulation_error(results: dict[str, Any], path: str) -> Any:
    """finer-d. GEMM error against K: FP32, kept bits, kept bits with promotion; nonnegative and
    signed operands; our MLP's reduction lengths marked."""
    plt = pyplot()
    sweep = results["accumulation"]
    fig, panels = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    mlp_k = results["section"]["reduction_lengths"]
    k = np.asarray(sweep["k"], dtype=np.float64)
    for axis, kind in zip(panels, ("nonnegative", "signed")):
        curves = sweep.get(kind, {})
        for name, (color, label) in ACCUMULATION_STYLES.items():
            if name not in curves:
                continue
            text = label.format(bits=sweep["fraction_bits"] + 1, every=sweep["promote_every"])
            # an exact result (error 0) has no place on a log axis: it is left out, and the caption says so
            mean, largest = (np.where(np.asarray(curves[name][key]) > 0, curves[name][key], np.nan)
                             for key in ("mean", "max"))
            axis.plot(k, mean, "o-", color=color, linewidth=1.4, markersize=4, label=f"{text} (mean)")
            axis.plot(k, largest, ":", color=color, linewidth=1.2)
        for value in mlp_k:
            axis.axvline(value, color="#999999", linewidth=0.8, linestyle="--")
        axis.axvline(sweep["promote_every"], color="#2ca02c", linewidth=0.8, alpha=0.5)
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("reduction length K")
        axis.set_title(f"{kind} operands" + (": relative error" if kind == "nonnegative" else
                                              ": error / sum |products|"), fontsize=10)
    panels[0].set_ylabel("error against the exact sum (exact: not drawn)")
    handles, labels = panels[0].get_legend_handles_labels()
    from matplotlib.lines import Line2D

    handles += [Line2D([], [], color="#666666", linestyle=":"), Line2D([], [], color="#999999", linestyle="--")]
    labels += ["maximum over the outputs", f"our MLP's reductions (K = {', '.join(map(str, mlp_k))})"]
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"E4M3 GEMM error against K ({sweep['shape'][0]}x{sweep['shape'][1]} outputs per K, "
                 f"blocks of {sweep['tc_block']} products)", fontsize=11)
    return save_figure(fig, path)


FINER_FIGURES: Figures = {
    "finer-a": ("fig_finer_a_amax_scales.png", figure_amax_scales),
    "finer-b": ("fig_finer_b_granularity.png", figure_granularity),
    "finer-c": ("fig_finer_c_accuracy.png", figure_accuracy),
    "finer-d": ("fig_finer_d_accumulation_error.png", figure_accumulation_error),
}


def draw_finer_figures(results: dict[str, Any], out_dir: str) -> list[str]:
    """Draw this section's figures into ``out_dir`` (matplotlib); returns the paths written."""
    return [os.path.join(out_dir, name) for name in plotting.draw_figures(FINER_FIGURES, results, out_dir).values()]
