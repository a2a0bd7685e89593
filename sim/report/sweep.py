"""The sweep behind "Where loss scaling matters": on a grid of networks whose gradients are pushed
towards FP16's floor, three runs per cell (FP32, FP16 without loss scaling, FP16 with dynamic
scaling), and what each cell shows.

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
from collections.abc import Iterable, Sequence
from typing import Any

from sim.report.formatting import number
from sim.report.measures import late_accuracy, layer_entries, overall_fraction
from sim.report.recipes import Recipe, growth_interval
from sim.train import TrainConfig

__all__ = [
    "SWEEP_DYNAMIC_INIT_SCALE", "SWEEP_GAINS", "SWEEP_ROWS", "SWEEP_RUNS", "SWEEP_WIDTH", "SweepCell",
    "cell_outcome", "sweep_cells", "sweep_document", "sweep_steps",
]

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
SWEEP_RUNS = (("fp32", "FP32"), ("fp16-none", "FP16, no loss scaling"),
              ("fp16-dynamic", "FP16, dynamic loss scaling"))
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
                batch_size: int = 32) -> list[Recipe]:
        """The cell's three runs, labelled ``label`` + a, b, c. They share everything but the
        arithmetic; dynamic scaling uses the suite's growth interval (a tenth of the run), no clip.

        >>> [r.command() for r in SweepCell("sgd", 2, 0.5).recipes("S1", steps=10)][1]
        'python -m sim train --precision fp16 --loss-scale none --steps 10 --hidden 64,64 --init-gain 0.5'
        """
        base = TrainConfig(optimizer=self.optimizer, steps=steps, seed=seed, data=data, batch_size=batch_size,
                           hidden=(SWEEP_WIDTH,) * self.depth, init_gain=self.gain)
        configs = {
            "fp32": dataclasses.replace(base, precision="fp32", loss_scale="none"),
            "fp16-none": dataclasses.replace(base, precision="fp16", loss_scale="none"),
            "fp16-dynamic": dataclasses.replace(base, precision="fp16", loss_scale="dynamic",
                                                scale=SWEEP_DYNAMIC_INIT_SCALE, growth_interval=growth_interval(steps)),
        }
        return [Recipe(self.recipe_key(run), label + letter, f"{self.title}: {title}", f"sweep cell {label}",
                       configs[run], collect=False, cell=self)
                for letter, (run, title) in zip("abc", SWEEP_RUNS)]


def sweep_cells(rows: Iterable[tuple[str, int]] = SWEEP_ROWS, gains: Iterable[float] = SWEEP_GAINS) -> list[SweepCell]:
    """The grid, row by row (optimizer and depth), each row over the gains.

    >>> [cell.title for cell in sweep_cells(rows=[("sgd", 9)], gains=[1.0, 0.2])]
    ['SGD, 9 x 64, gain 1', 'SGD, 9 x 64, gain 0.2']
    """
    gains = tuple(gains)
    return [SweepCell(optimizer, depth, gain) for optimizer, depth in rows for gain in gains]


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
    fp32 = accuracy["fp32"]
    cost, real = {}, {}
    for key in ("fp16-none", "fp16-dynamic"):
        ours = accuracy[key]
        cost[key] = None if fp32 is None or ours is None else fp32[0] - ours[0]
        real[key] = fp32 is not None and ours is not None and ours[2] < fp32[1]
    plain = runs["fp16-none"]
    network = plain["network"]
    chance = 1.0 / network[-1]
    return {
        "accuracy": accuracy,
        "cost": cost,
        "real": real,
        "chance": chance,
        "fp32_trains": fp32 is not None and fp32[0] >= TRAINS_ABOVE_CHANCE * chance,
        "underflow": overall_fraction(plain["underflow_fraction"], layer_entries(network)),
        "underflow_dynamic": overall_fraction(runs["fp16-dynamic"]["underflow_fraction"], layer_entries(network)),
        "layers": dict(plain["underflow_fraction"]),
        "skipped_dynamic": len(runs["fp16-dynamic"]["skipped_steps"]),
    }
