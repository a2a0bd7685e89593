"""The report's sweep, "Where loss scaling matters": on a grid of networks whose gradients are
pushed towards FP16's floor, three runs per cell (FP32, FP16 without loss scaling, FP16 with
dynamic scaling), and what each cell shows. One module with the parts of every story, in order:
recipes, runs, claims, figures (g and h) and markdown (its section of report.md).

A cell is an optimizer, a depth and an initial gain (:class:`SweepCell`). A gain g below 1 shrinks
every layer's weights, so the signal passed back to a layer k layers below the loss starts about
g^k times smaller than with He initialisation (and every weight gradient, the product of a
forward and a backward signal, about g^depth): depth and gain set how close to FP16's floor
(2^-24) the gradients start. The optimizer decides whether gradients that small still matter:
SGD moves a weight by lr x gradient, Adam by about lr whatever the gradient's size (down to its
eps, 1e-8, about 2^-27).

>>> [cell.key for cell in sweep_cells()][:2]
['adam-d3-g1', 'adam-d3-g0.25']
>>> sweep_steps(400)
200
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sim.report import keys, plotting
from sim.report.formatting import binary_exponent, mean_range, number, percent
from sim.report.measures import late_accuracy, layer_entries, overall_fraction
from sim.report.plotting import RUN_COLORS, Figures, pyplot, save_figure
from sim.report.recipe import Recipe
from sim.report.scaling.recipes import growth_interval
from sim.train import TrainConfig

__all__ = [
    "SWEEP_DYNAMIC_INIT_SCALE", "SWEEP_FIGURES", "SWEEP_FIGURE_CAPTIONS", "SWEEP_GAINS", "SWEEP_ROWS", "SWEEP_RUNS",
    "SWEEP_WIDTH", "UNDERFLOW_FLOOR", "SweepCell", "SweepRecipe", "cell_outcome", "draw_sweep_figures",
    "render_sweep", "sweep_cells", "sweep_claims", "sweep_document", "sweep_recipes", "sweep_steps",
]


# --- recipes: the grid and its runs ---------------------------------------------------------------

# The grid, fixed from an exploration of 200-step runs on the digits (seed 0 unless stated; "late":
# mean test accuracy over the second half; "lost": FP16-without-scaling's underflow share):
# - SGD (lr 0.05, momentum 0.9), 64 wide: wherever FP16 lost a real share, FP32 did not train
#   either. 9 layers: gain 0.25 lost 41%, gain 0.5 1.5%, FP32 late 9.4% and 9.9% (chance);
#   6 layers, gain 0.25: 3.4%, FP32 9.4%. Where FP32 trained (9 layers, gain 1) the runs were
#   within their spread: FP32 late 66%, 61%, 58% over seeds 0-2, FP16 unscaled 46%, 72%, 69%.
# - Adam (lr 1e-3), 64 wide: 3 and 6 layers lost at most 0.8% at gains 1 to 0.18, and 3.4% at
#   6 x 0.125, at no measurable cost. 9 layers: gain 0.25 lost 3.1% (seed 0) and 2.4% (seed 1), at
#   no cost; gain 0.2 lost 24% and 22% (fc1, fc2: about two thirds) and FP16 unscaled stayed at
#   chance, 8.9-9.2%, while FP32 reached 19% and 24% late and dynamic scaling 17% and 25%; at gain
#   0.18 FP32 stayed at chance too. The window is narrow: Adam's eps (1e-8, about 2^-27) lies less
#   than 3 binades below FP16's smallest subnormal, so gradients that vanish in FP16 are not far
#   from those too small to move Adam itself.
# - Batch 128 at width 64 widened the window (9 x 0.25: FP32 late 46.5%, FP16 unscaled 19%) but
#   costs 2-3 times as much per step; width 32 with batch 128 (the grid's cost) did not (29%, 32%).
# Hence one SGD row (the suite's optimizer), a shallow and a deep Adam row, and gains 1 (He), 0.25
# (the smallest at which FP16 unscaled kept up at 9 layers) and 0.2 (inside the window). A first
# version of the grid also had gain 0.5: it showed nothing that 1 and 0.25 do not (underflow 0.003%
# to 1.5%, no cost where FP32 trained), and dropping it keeps the sweep near 2 minutes on 2 cores.
SWEEP_ROWS: tuple[tuple[str, int], ...] = (("adam", 3), ("adam", 9), ("sgd", 9))  # (optimizer, hidden layers)
SWEEP_GAINS: tuple[float, ...] = (1.0, 0.25, 0.2)
SWEEP_WIDTH = 64  # every hidden layer; half the suite's 128, so that 9 layers fit the time budget
# GradScaler's default: the sweep asks whether the scaler repairs underflow, not how it calibrates
# (the suite's 2^24 start is there to show the calibration).
SWEEP_DYNAMIC_INIT_SCALE = 2.0**16
# (run key, title) of each cell's three runs; the letters a, b, c of their labels follow this order
SWEEP_RUNS = ((keys.FP32, "FP32"), (keys.FP16_NONE, "FP16, no loss scaling"),
              (keys.FP16_DYNAMIC, "FP16, dynamic loss scaling"))
# A run "trains" when its second-half mean test accuracy reaches this multiple of guessing.
TRAINS_ABOVE_CHANCE = 1.5


def sweep_steps(suite_steps: int) -> int:
    """The sweep's steps per run: half the suite's (its 27 runs must fit in about 2.5 minutes).

    >>> sweep_steps(400), sweep_steps(1)
    (200, 1)
    """
    return max(1, suite_steps // 2)


@dataclasses.dataclass(frozen=True)
class SweepCell:
    """One point of the grid: the optimizer (with its default learning rate), the number of
    hidden layers of width :data:`SWEEP_WIDTH`, and the initial gain.

    >>> cell = SweepCell("adam", 9, 0.25)
    >>> cell.key, cell.title
    ('adam-d9-g0.25', 'Adam, 9 x 64, gain 0.25')
    """

    optimizer: str
    depth: int
    gain: float

    @property
    def key(self) -> str:
        return f"{self.optimizer}-d{self.depth}-g{number(self.gain)}"

    @property
    def title(self) -> str:
        name = {"adam": "Adam", "sgd": "SGD"}.get(self.optimizer, self.optimizer)
        return f"{name}, {self.depth} x {SWEEP_WIDTH}, gain {number(self.gain)}"

    def recipe_key(self, run: str) -> str:
        """The key of this cell's ``run`` (one of :data:`SWEEP_RUNS`) among the report's runs."""
        return f"sweep-{self.key}-{run}"

    def recipes(self, label: str, steps: int, seed: int = 0, data: str = "digits",
                batch_size: int = 32) -> list[SweepRecipe]:
        """The cell's three runs, labelled ``label`` + a, b, c. They share everything but the
        arithmetic; dynamic scaling uses the suite's growth interval (a tenth of the run), no clip.

        >>> [r.command() for r in SweepCell("sgd", 2, 0.5).recipes("S1", steps=10)][1]
        'python -m sim train --precision fp16 --loss-scale none --steps 10 --hidden 64,64 --init-gain 0.5'
        """
        base = TrainConfig(optimizer=self.optimizer, steps=steps, seed=seed, data=data, batch_size=batch_size,
                           hidden=(SWEEP_WIDTH,) * self.depth, init_gain=self.gain)
        configs = {
            keys.FP32: dataclasses.replace(base, precision="fp32", loss_scale="none"),
            keys.FP16_NONE: dataclasses.replace(base, precision="fp16", loss_scale="none"),
            keys.FP16_DYNAMIC: dataclasses.replace(base, precision="fp16", loss_scale="dynamic",
                                                   scale=SWEEP_DYNAMIC_INIT_SCALE,
                                                   growth_interval=growth_interval(steps)),
        }
        return [SweepRecipe(self.recipe_key(run), label + letter, f"{self.title}: {title}", f"sweep cell {label}",
                            configs[run], collect=False, cell=self)
                for letter, (run, title) in zip("abc", SWEEP_RUNS)]


@dataclasses.dataclass(frozen=True)
class SweepRecipe(Recipe):
    """A run of the sweep: a :class:`~sim.report.recipe.Recipe` and the cell it belongs to."""

    cell: SweepCell | None = None


def sweep_cells(rows: Iterable[tuple[str, int]] = SWEEP_ROWS, gains: Iterable[float] = SWEEP_GAINS) -> list[SweepCell]:
    """The grid, row by row (optimizer and depth), each row over the gains.

    >>> [cell.title for cell in sweep_cells(rows=[("sgd", 9)], gains=[1.0, 0.2])]
    ['SGD, 9 x 64, gain 1', 'SGD, 9 x 64, gain 0.2']
    """
    gains = tuple(gains)
    return [SweepCell(optimizer, depth, gain) for optimizer, depth in rows for gain in gains]


def sweep_recipes(cells: Sequence[SweepCell], steps: int, seed: int = 0, data: str = "digits",
                  batch_size: int = 32) -> list[SweepRecipe]:
    """The sweep's runs for a suite of ``steps`` steps: three per cell, for half the steps.

    >>> [recipe.label for recipe in sweep_recipes(sweep_cells()[:1], steps=8)]
    ['S1a', 'S1b', 'S1c']
    """
    return [recipe for index, cell in enumerate(cells, start=1)
            for recipe in cell.recipes(f"S{index}", sweep_steps(steps), seed, data, batch_size)]


# --- runs: what results.json keeps, and what a cell shows ----------------------------------------------

# What the sweep keeps of a run's results.json entry: enough to repeat it and to judge it.
_KEPT = ("label", "title", "command", "config", "steps", "final_loss", "final_accuracy", "test_loss",
         "skipped_steps", "final_loss_scale", "underflow_fraction", "weights_sha256", "layers", "network")


def sweep_document(recipes: Sequence[Recipe], results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """results.json's ``sweep``, from the sweep's runs (recipes with a ``cell``, in grid order) and
    their results: the design, then per cell its three runs, each reduced to what the sweep reports
    (no per-step columns).

    >>> recipes = SweepCell("adam", 1, 1.0).recipes("S1", steps=10)
    >>> entry = {"label": "S1a", "diagnostics": {"test_curve": {"step": [1]}, "test_examples": 3}}
    >>> document = sweep_document(recipes, [entry] * 3)
    >>> document["late_start"], list(document["cells"]["adam-d1-g1"]["runs"])
    (5, ['fp32', 'fp16-none', 'fp16-dynamic'])
    """
    def kept(entry: dict[str, Any]) -> dict[str, Any]:
        diagnostics = entry["diagnostics"]
        return {**{k: entry[k] for k in _KEPT if k in entry},
                "diagnostics": {"test_examples": diagnostics["test_examples"], "test_curve": diagnostics["test_curve"]}}

    by_key = {recipe.key: result for recipe, result in zip(recipes, results)}
    cells: list[SweepCell] = list(dict.fromkeys(recipe.cell for recipe in recipes if recipe.cell is not None))
    steps = recipes[0].config.steps if recipes else 0
    return {
        "steps": steps,
        "late_start": steps // 2,
        "width": SWEEP_WIDTH,
        "rows": [list(row) for row in dict.fromkeys((c.optimizer, c.depth) for c in cells)],
        "gains": list(dict.fromkeys(c.gain for c in cells)),
        "dynamic_init_scale": SWEEP_DYNAMIC_INIT_SCALE,
        "dynamic_growth_interval": growth_interval(steps),
        "cells": {
            cell.key: {"label": f"S{index}", "title": cell.title, "optimizer": cell.optimizer, "depth": cell.depth,
                       "gain": cell.gain,
                       "runs": {run: kept(by_key[cell.recipe_key(run)]) for run, _ in SWEEP_RUNS}}
            for index, cell in enumerate(cells, start=1)
        },
    }


def cell_outcome(cell: dict[str, Any], late_start: int) -> dict[str, Any]:
    """What a cell of :func:`sweep_document` shows, as the table, the claims and the figures read
    it: per run the second-half test accuracy (mean, min, max); the accuracy cost of each FP16
    run (FP32's mean minus its own, in points of accuracy) and whether it is real (the
    second-half ranges do not overlap, the suite's rule); whether FP32 trains at all (its mean
    reaches 1.5 x guessing); FP16-none's underflow share, overall and per layer; and the dynamic
    run's skipped steps.

    >>> curve = lambda *a: {"diagnostics": {"test_curve": {"step": [1, 2], "accuracy": list(a)}},
    ...                     "network": [4, 10], "underflow_fraction": {"fc1": 0.5}, "skipped_steps": [0]}
    >>> cell = {"runs": {"fp32": curve(0.9, 0.8), "fp16-none": curve(0.5, 0.6), "fp16-dynamic": curve(0.85, 0.9)}}
    >>> outcome = cell_outcome(cell, 1)
    >>> round(outcome["cost"]["fp16-none"], 2), outcome["real"], outcome["fp32_trains"], outcome["underflow"]
    (0.3, {'fp16-none': True, 'fp16-dynamic': False}, True, 0.5)
    """
    runs = cell["runs"]
    accuracy = {key: late_accuracy(run, late_start) for key, run in runs.items()}
    fp32 = accuracy[keys.FP32]
    cost, real = {}, {}
    for key in (keys.FP16_NONE, keys.FP16_DYNAMIC):
        ours = accuracy[key]
        cost[key] = None if fp32 is None or ours is None else fp32[0] - ours[0]
        real[key] = fp32 is not None and ours is not None and ours[2] < fp32[1]
    plain = runs[keys.FP16_NONE]
    network = plain["network"]
    chance = 1.0 / network[-1]
    return {
        "accuracy": accuracy,
        "cost": cost,
        "real": real,
        "chance": chance,
        "fp32_trains": fp32 is not None and fp32[0] >= TRAINS_ABOVE_CHANCE * chance,
        "underflow": overall_fraction(plain["underflow_fraction"], layer_entries(network)),
        "underflow_dynamic": overall_fraction(runs[keys.FP16_DYNAMIC]["underflow_fraction"], layer_entries(network)),
        "layers": dict(plain["underflow_fraction"]),
        "skipped_dynamic": len(runs[keys.FP16_DYNAMIC]["skipped_steps"]),
    }


# --- claims -------------------------------------------------------------------------------------------

NOTABLE_COST = 0.05  # a difference of 5 points that the rule calls noise is worth a sentence


def _accuracy(outcome: dict[str, Any], run: str) -> str:
    """'19.2% (18.4%-22.0%)': second-half mean (range)."""
    return mean_range(outcome["accuracy"][run])


def _cost(outcome: dict[str, Any], run: str) -> str:
    """The cost in points of accuracy, bold when real."""
    cost = outcome["cost"][run]
    if cost is None:
        return "n/a"
    text = f"{100 * cost:+.1f}"
    return f"**{text}**" if outcome["real"][run] else text


def _outcomes(sweep: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(key, cell, outcome) for every cell, in grid order."""
    return [(key, cell, cell_outcome(cell, sweep["late_start"])) for key, cell in sweep["cells"].items()]


def _count(n: int, noun: str) -> str:
    """'1 cell', '3 cells'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _name(cell: dict[str, Any]) -> str:
    return f"{cell['label']} ({cell['title']})"


def _first_half_share(layers: dict[str, float]) -> tuple[float, float]:
    """Mean underflow share of the first half of the layers (far from the loss) and of the rest."""
    values = list(layers.values())
    half = len(values) // 2
    first, rest = values[:half], values[half:]
    return (sum(first) / len(first) if first else 0.0), (sum(rest) / len(rest) if rest else 0.0)


def sweep_claims(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(claim, verdict, explanation) for the sweep's two claims; none without a sweep.

    >>> sweep_claims({"recipes": {}})
    []
    """
    sweep = document.get("sweep")
    if not sweep or not sweep["cells"]:
        return []
    outcomes = _outcomes(sweep)
    return [_regime_claim(outcomes, sweep), _early_layers_claim(outcomes)]


def _regime_claim(outcomes: list[tuple[str, dict[str, Any], dict[str, Any]]],
                  sweep: dict[str, Any]) -> tuple[str, str, str]:
    """Somewhere FP16 without scaling fails measurably, and dynamic scaling repairs it."""
    failing = [(c, o) for _, c, o in outcomes if o["fp32_trains"] and o["real"][keys.FP16_NONE]]
    repaired = [(c, o) for c, o in failing if not o["real"][keys.FP16_DYNAMIC]]
    parts = []
    if failing:
        parts.append(f"FP16 without loss scaling cost accuracy beyond the run-to-run spread in {len(failing)} of "
                     f"{len(outcomes)} cells. " + " ".join(
                         f"{_name(c)}: {percent(o['underflow'])} of its gradient entries underflowed "
                         f"({', '.join(f'{k} {percent(v)}' for k, v in list(o['layers'].items())[:2])}, ...); test "
                         f"accuracy over the second half {_accuracy(o, keys.FP16_NONE)} against FP32's "
                         f"{_accuracy(o, keys.FP32)}, and {_accuracy(o, keys.FP16_DYNAMIC)} with dynamic scaling, "
                         "which "
                         f"skipped {o['skipped_dynamic']} of {sweep['steps']} steps and left "
                         f"{percent(o['underflow_dynamic'])} of the entries underflowing."
                         for c, o in failing))
        behind = [f"{c['label']} by {100 * o['cost'][keys.FP16_DYNAMIC]:.1f} points" for c, o in repaired
                  if o["cost"][keys.FP16_DYNAMIC] is not None and o["cost"][keys.FP16_DYNAMIC] > 0]
        if len(repaired) == len(failing):
            parts.append(f"Dynamic scaling repaired {'it' if len(failing) == 1 else 'every one of them'} by the "
                         "suite's rule: its range overlaps FP32's"
                         + (f"; its mean stays below FP32's, within the spread ({', '.join(behind)})." if behind
                            else "."))
        else:
            parts.append(f"Dynamic scaling repaired {len(repaired)} of them "
                         f"({', '.join(c['label'] for c, _ in repaired) or 'none'}).")
    else:
        parts.append(f"In none of the {len(outcomes)} cells did FP16 without loss scaling cost accuracy beyond the "
                     "run-to-run spread.")
    failed = {id(c) for c, _ in failing}
    fine = [(c, o) for _, c, o in outcomes if o["fp32_trains"] and id(c) not in failed]
    stuck = [(c, o) for _, c, o in outcomes if not o["fp32_trains"]]
    if fine:
        worst = max(fine, key=lambda item: item[1]["underflow"])
        parts.append(f"Where it did not matter: in {_count(len(fine), 'cell')} FP32 trained and FP16 without "
                     f"scaling stayed within its spread, with up to {percent(worst[1]['underflow'])} of entries "
                     f"underflowing ({_name(worst[0])}).")
        widest = max(fine, key=lambda item: item[1]["cost"][keys.FP16_NONE] or 0.0)
        if (widest[1]["cost"][keys.FP16_NONE] or 0.0) >= NOTABLE_COST:
            parts.append(f"The largest difference among them, {100 * widest[1]['cost'][keys.FP16_NONE]:.1f} points in "
                         f"{_name(widest[0])}, lies within the spread of its runs (FP16 without scaling "
                         f"{_accuracy(widest[1], keys.FP16_NONE)}, FP32 {_accuracy(widest[1], keys.FP32)}), with only "
                         f"{percent(widest[1]['underflow'])} of entries underflowing.")
    if stuck:
        worst = max(stuck, key=lambda item: item[1]["underflow"])
        labels = ", ".join(c["label"] for c, _ in stuck)
        parts.append(f"In {_count(len(stuck), 'cell')} ({labels}) FP32 itself stayed near chance (second-half "
                     f"mean below {TRAINS_ABOVE_CHANCE:g} x {percent(worst[1]['chance'])}): FP16 lost up to "
                     f"{percent(worst[1]['underflow'])} of its gradient entries there ({_name(worst[0])}), but with "
                     "nothing learned in FP32 either there was nothing for a loss scale to save.")
        if failing and worst[1]["underflow"] >= min(o["underflow"] for _, o in failing):
            parts.append("So an underflow share, however large, does not by itself predict an accuracy cost.")
    verdict = ("Supported" if failing and len(repaired) == len(failing) else
               "Partly supported (a failure, not always repaired)" if repaired else
               "Not supported" + (" (a failure, not repaired)" if failing else " (no measurable failure)"))
    return ("Somewhere FP16 without loss scaling fails measurably, and dynamic loss scaling repairs it",
            verdict, " ".join(parts))


def _early_layers_claim(outcomes: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> tuple[str, str, str]:
    """Underflow hits the early layers first, judged on the deepest networks of the grid."""
    deepest = max(c["depth"] for _, c, _ in outcomes)
    deep = [(c, o) for _, c, o in outcomes if c["depth"] == deepest and o["underflow"] > 0.0]
    early = [(c, o) for c, o in deep if _first_half_share(o["layers"])[0] > _first_half_share(o["layers"])[1]]
    lines = []
    for c, o in deep:
        layers = o["layers"]
        first, rest = _first_half_share(layers)
        names = list(layers)
        largest = max(names, key=lambda name: layers[name])
        ends = ", ".join(f"{name} {percent(layers[name])}" for name in (names[0], names[-1]) if name != largest)
        lines.append(f"{_name(c)}: first half of the layers {percent(first)} on average, second half "
                     f"{percent(rest)}; most in {largest} ({percent(layers[largest])}"
                     + (f"; {ends})." if ends else ")."))
    text = (f"Judged on FP16 without scaling in the {deepest}-layer cells: the claim holds in a cell when the first "
            "half of its layers (fc1 onwards, far from the loss) loses a larger mean share than the second half. "
            + " ".join(lines))
    held = {id(c) for c, _ in early}
    if early and len(early) < len(deep):
        def listed(cells: list[dict[str, Any]]) -> str:
            return ", ".join(f"{c['label']} (gain {c['gain']:g})" for c in cells)

        text += (f" It holds in {listed([c for c, _ in early])} and not in "
                 f"{listed([c for c, _ in deep if id(c) not in held])}.")
    verdict = ("Supported" if deep and len(early) == len(deep) else
               f"Partly supported (in {len(early)} of {len(deep)} deep cells)" if early else "Not supported")
    return ("In deeper networks underflow hits the early layers (those far from the loss) first", verdict, text)


# --- figures g and h ----------------------------------------------------------------------------------

# Figure g: the cell's colour says what FP32 did, the marker which FP16 run, the fill whether real.
SWEEP_RUN_MARKERS = {keys.FP16_NONE: ("o", "#d62728", "FP16, no loss scaling"),
                     keys.FP16_DYNAMIC: ("s", "#1f77b4", "FP16, dynamic loss scaling")}
NEAR_CHANCE_COLOR = "#999999"
UNDERFLOW_FLOOR = 1e-6  # shares of 0 are drawn here on the log axes (0.0001%)


def figure_sweep_cost(document: dict[str, Any], path: str) -> Any:
    """g. One point per sweep cell and FP16 run: FP32's second-half mean test accuracy minus the
    run's (points of accuracy), at the share of gradient entries FP16 without scaling lost. Filled
    where the second-half ranges do not overlap; grey where FP32 itself stays near chance."""
    plt = pyplot()
    from matplotlib.lines import Line2D

    sweep = document.get("sweep") or {"cells": {}, "late_start": 0}
    fig, axis = plt.subplots(figsize=(10, 5.6), layout="constrained")
    labelled: list[tuple[float, float]] = []  # (log10 x, y) of the labels placed so far
    for cell in sweep["cells"].values():
        outcome = cell_outcome(cell, sweep["late_start"])
        x = 100 * max(outcome["underflow"], UNDERFLOW_FLOOR)
        costs = [100 * c for c in outcome["cost"].values() if c is not None]
        if len(costs) == 2:
            axis.plot([x, x], costs, color="#cccccc", linewidth=1, zorder=1)
        for run, (marker, color, _) in SWEEP_RUN_MARKERS.items():
            cost = outcome["cost"][run]
            if cost is None:
                continue
            shade = color if outcome["fp32_trains"] else NEAR_CHANCE_COLOR
            axis.plot([x], [100 * cost], marker, markersize=8, color=shade, markeredgewidth=1.5,
                      markerfacecolor=shade if outcome["real"][run] else "white", zorder=2)
        if outcome["cost"][keys.FP16_NONE] is not None:
            y = 100 * outcome["cost"][keys.FP16_NONE]
            # cells that land on the same spot get their labels stacked, not printed over each other
            near = sum(abs(math.log10(x) - u) < 0.15 and abs(y - v) < 1.5 for u, v in labelled)
            labelled.append((math.log10(x), y))
            axis.annotate(cell["label"], (x, y), xytext=(6, 2 + 9 * near), textcoords="offset points", fontsize=8,
                          color="#333333")
    axis.axhline(0.0, color="#333333", linewidth=0.8)
    axis.set_xscale("log")
    axis.set_xlabel("gradient entries lost to underflow by FP16 without scaling, over the run (%, log scale)")
    axis.set_ylabel("FP32 accuracy minus the run's (points, second-half mean)")
    axis.set_title("Where loss scaling matters: accuracy cost against underflow, one point per cell and FP16 run",
                   fontsize=10)
    handles = [Line2D([], [], linestyle="none", marker=marker, color=color, markersize=8, label=label)
               for marker, color, label in SWEEP_RUN_MARKERS.values()]
    handles += [Line2D([], [], linestyle="none", marker="o", color="#555555", markerfacecolor="white", markersize=8,
                       label="hollow: within the run-to-run spread (ranges overlap)"),
                Line2D([], [], linestyle="none", marker="o", color=NEAR_CHANCE_COLOR, markersize=8,
                       label="grey: FP32 itself stays near chance")]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return save_figure(fig, path)


def figure_sweep_layers(document: dict[str, Any], path: str) -> Any:
    """h. Per layer, the underflow share of the deepest rows of the sweep: one panel per row, one
    colour per gain; solid FP16 without scaling, dashed with dynamic scaling."""
    plt = pyplot()
    from matplotlib.lines import Line2D

    sweep = document.get("sweep") or {"cells": {}, "rows": [], "gains": []}
    cells = list(sweep["cells"].values())
    deepest = max((c["depth"] for c in cells), default=0)
    rows = [(optimizer, depth) for optimizer, depth in sweep["rows"] if depth == deepest]
    fig, axes = plt.subplots(1, max(1, len(rows)), figsize=(5.5 * max(1, len(rows)), 4.6), sharey=True,
                             layout="constrained", squeeze=False)
    colors = dict(zip(sweep["gains"], RUN_COLORS[1:]))
    names: list[str] = []
    for axis, (optimizer, depth) in zip(axes.ravel(), rows):
        for cell in (c for c in cells if (c["optimizer"], c["depth"]) == (optimizer, depth)):
            for run, style in ((keys.FP16_NONE, "-"), (keys.FP16_DYNAMIC, "--")):
                shares = cell["runs"][run]["underflow_fraction"]
                names = list(shares)
                values = 100 * np.maximum(np.asarray(list(shares.values()), dtype=np.float64), UNDERFLOW_FLOOR)
                axis.plot(np.arange(len(values)), values, style, marker="o", markersize=3,
                          color=colors.get(cell["gain"], "#333333"), linewidth=1.4)
        axis.set_xticks(range(len(names)), names, fontsize=8)
        axis.set_ylim(100 * UNDERFLOW_FLOOR * 0.7, 100)
        axis.set_yscale("log")
        axis.set_xlabel("layer (fc1: farthest from the loss)")
        axis.set_title(f"{'Adam' if optimizer == 'adam' else 'SGD'}, {depth} hidden layers", fontsize=10)
    axes.ravel()[0].set_ylabel("gradient entries lost to underflow (%, log)")
    handles = [Line2D([], [], color=color, linewidth=1.4, label=f"gain {gain:g}") for gain, color in colors.items()]
    handles += [Line2D([], [], color="#333333", linestyle="-", label="FP16, no loss scaling"),
                Line2D([], [], color="#333333", linestyle="--", label="FP16, dynamic loss scaling")]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle("Underflow by layer in the deepest networks of the sweep", fontsize=11)
    return save_figure(fig, path)


SWEEP_FIGURES: Figures = {
    "g": ("fig_g_sweep_cost.png", figure_sweep_cost),
    "h": ("fig_h_sweep_layers.png", figure_sweep_layers),
}


def draw_sweep_figures(document: dict[str, Any], out: str) -> dict[str, str]:
    """Draw figures g and h of ``document`` (which has a ``sweep``) into ``out``; returns
    ``{letter: file name}``."""
    return plotting.draw_figures(SWEEP_FIGURES, document, out)


# --- markdown: the section of report.md ------------------------------------------------------------------

SWEEP_FIGURE_CAPTIONS = {
    "g": ("Accuracy cost against underflow, one point per cell",
          "For each cell of the sweep, FP32's mean test accuracy over the second half minus that of FP16 "
          "without loss scaling (circles) and of FP16 with dynamic scaling (squares), in points of accuracy, "
          "both placed at the share of gradient entries that FP16 without scaling lost to underflow over its "
          "run. Filled: the second-half ranges do not overlap (a real difference); hollow: within the spread; "
          "grey: cells where FP32 itself stays near chance, so there is nothing to lose."),
    "h": ("Underflow by layer in the deepest networks", "For each deepest row of the sweep, the share of each "
          "layer's gradient entries lost to underflow over the run, from fc1 (farthest from the loss) to the "
          "output layer; solid: FP16 without scaling, dashed: with dynamic scaling; one colour per initial gain. "
          "Shares of exactly 0 are drawn at the bottom edge."),
}


def render_sweep(document: dict[str, Any]) -> list[str]:
    """The report.md lines of the sweep section (none without a sweep in ``document``)."""
    sweep = document.get("sweep")
    if not sweep or not sweep["cells"]:
        return []
    outcomes = _outcomes(sweep)
    plain = document["recipes"].get(keys.FP16_NONE)
    rows = ", ".join(f"{'Adam' if o == 'adam' else 'SGD'} with {d} hidden layers" for o, d in sweep["rows"])
    gains = ", ".join(f"{g:g}" for g in sweep["gains"])
    steps, late = sweep["steps"], sweep["late_start"]
    lines = [
        "## Where loss scaling matters: a sweep",
        "",
        (f"Run {plain['label']} above, FP16 without scaling on the suite's network, loses "
         f"{percent(overall_fraction(plain['underflow_fraction'], layer_entries(plain['network'])))} of its "
         "gradient entries to underflow. " if plain else "")
        + f"To find where that changes, the sweep trains {len(outcomes)} networks, each three times: in FP32, in "
        "FP16 without loss scaling, and in FP16 with dynamic scaling. It is a grid, fixed before it was run; its "
        "conclusions are read off it by the rules below.",
        "",
        f"- Grid: {rows}, each {sweep['width']} wide, times initial gains {gains} (the He-uniform bound of every "
        "weight multiplied by the gain; 1 is He initialisation). A gain g shrinks the signal passed back through "
        "each layer by about g, so depth and gain set how close to FP16's floor the gradients start.",
        "- Why these: SGD moves a weight by lr x gradient, so gradients small enough to vanish in FP16 move "
        "nothing in FP32 either; Adam moves it by about lr whatever the gradient's size, so there they still "
        "count. A first exploration (200-step runs, seeds 0 and 1; its numbers are in `sim/report/sweep.py`) "
        "found the window for Adam at 9 layers between gain 0.25, where FP16 without scaling kept up, and 0.18, "
        "where FP32 stalled as well; the grid takes He's 1, 0.25 and 0.2.",
        f"- Each run: {steps} steps (half the suite's), batch {document['suite']['batch_size']}, seed "
        f"{document['suite']['seed']}, data `{document['suite']['data']}`; SGD with the suite's lr 0.05 and "
        "momentum 0.9, Adam with its default lr 1e-3; FP16 runs keep FP32 master weights. Dynamic scaling starts "
        f"at 2^{binary_exponent(sweep['dynamic_init_scale'])} (GradScaler's default: the sweep asks whether the "
        f"scaler repairs underflow, not how it calibrates) and doubles after {sweep['dynamic_growth_interval']} "
        "clean steps (a tenth of the run, as in the suite); no clipping.",
        f"- Accuracy as in the suite: test accuracy every {max(1, steps // 10)} steps, compared over the second "
        f"half (steps {late} to {steps}): mean (range), and a cost is real only when the ranges do not overlap "
        f"(bold). FP32 \"trains\" when its mean reaches {TRAINS_ABOVE_CHANCE:g} x chance. Underflow: FP16 without "
        "scaling, share of all gradient entries over the run, as in the suite.",
        "",
        _cell_table(outcomes),
        "",
        "Underflow by layer, FP16 without scaling, in the deepest cells (percent of each layer's entries):",
        "",
        _layer_table(outcomes),
        "",
    ]
    for index, (claim, verdict, text) in enumerate(sweep_claims(document), start=1):
        lines += [f"### S{index}. {claim}", "", f"**{verdict}.** {text}", ""]
    for letter, (name, _) in SWEEP_FIGURES.items():
        title, caption = SWEEP_FIGURE_CAPTIONS[letter]
        lines += [f"### {letter}. {title}", "", f"![{title}]({name})", "", caption, ""]
    lines += ["### The sweep's runs", "",
              "Each line repeats one run with `python -m sim train` (same weights_sha256, whose first 16 digits "
              "follow the `#`).", "", "```"]
    for _, cell, _ in outcomes:
        for run, _ in SWEEP_RUNS:
            entry = cell["runs"][run]
            lines.append(f"{entry['command']}  # {entry['label']} {entry['weights_sha256'][:16]}")
    lines += ["```", ""]
    return lines


def _cell_table(outcomes: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> str:
    rows = ["| cell | network | FP32 | FP16, no scaling | FP16, dynamic | cost: no scaling | cost: dynamic | "
            "underflow: no scaling (fc1 / last) | dynamic: underflow, skipped, final scale |",
            "|---|---|---|---|---|---|---|---|---|"]
    for _, cell, o in outcomes:
        layers = list(o["layers"].values())
        dynamic = cell["runs"][keys.FP16_DYNAMIC]
        trains = "" if o["fp32_trains"] else " (near chance)"
        rows.append(f"| {cell['label']} | {cell['title']} | {_accuracy(o, keys.FP32)}{trains} | "
                    f"{_accuracy(o, keys.FP16_NONE)} | {_accuracy(o, keys.FP16_DYNAMIC)} | "
                    f"{_cost(o, keys.FP16_NONE)} | "
                    f"{_cost(o, keys.FP16_DYNAMIC)} | {percent(o['underflow'])} ({percent(layers[0])} / "
                    f"{percent(layers[-1])}) | {percent(o['underflow_dynamic'])}, {o['skipped_dynamic']}, "
                    f"2^{binary_exponent(dynamic['final_loss_scale'])} |")
    return "\n".join(rows)


def _layer_table(outcomes: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> str:
    deepest = max(c["depth"] for _, c, _ in outcomes)
    deep = [(c, o) for _, c, o in outcomes if c["depth"] == deepest]
    names = list(deep[0][1]["layers"])
    rows = ["| cell | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for cell, o in deep:
        rows.append(f"| {cell['label']} ({cell['title']}) | "
                    + " | ".join(percent(v).removesuffix("%") for v in o["layers"].values()) + " |")
    return "\n".join(rows)
