"""The report's sweep ("Where loss scaling matters"): the commands that repeat its runs, its cells'
runs differing in the arithmetic only, the rules behind its verdicts (each able to fail), and its
two figures, drawn from small hand-made documents."""
from __future__ import annotations

import argparse
import dataclasses
import shlex

import numpy as np
import pytest

from sim.arguments import add_train_arguments, given_train_fields, train_config
from sim.report import run_recipe, suite_recipes, sweep, sweep_cells, sweep_recipes
from sim.report.recipe import train_command
from sim.report.sweep import SWEEP_RUNS, SweepCell, cell_outcome, render_sweep, sweep_claims
from sim.train import TrainConfig, Trainer

SUITE_COMMANDS = [  # the nine commands as the report printed them before the command became generic
    "python -m sim train --precision fp32 --loss-scale none --steps 400",
    "python -m sim train --precision fp16 --loss-scale none --steps 400",
    "python -m sim train --precision fp16 --loss-scale static --scale 1024 --steps 400",
    "python -m sim train --precision fp16 --loss-scale dynamic --scale 16777216 --growth-interval 40 --clip 5 "
    "--steps 400",
    "python -m sim train --precision fp16 --loss-scale dynamic --scale 16777216 --growth-interval 40 "
    "--no-master-weights --clip 5 --steps 400",
    "python -m sim train --precision fp16 --loss-scale dynamic --scale 16777216 --growth-interval 40 --clip 5 "
    "--clip-before-unscale --steps 400",
    "python -m sim train --precision bf16 --loss-scale none --steps 400",
    "python -m sim train --precision fp16 --loss-scale static --scale 262144 --steps 400",
    "python -m sim train --precision fp16 --loss-scale static --scale 8 --steps 400",
]


def _parsed(command: str) -> TrainConfig:
    """The resolved config ``python -m sim train`` builds from ``command``'s flags."""
    words = shlex.split(command)
    assert words[:4] == ["python", "-m", "sim", "train"]
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    return train_config(given_train_fields(parser.parse_args(words[4:])))


def test_the_suite_commands_are_unchanged():
    assert [recipe.command() for recipe in suite_recipes()] == SUITE_COMMANDS
    assert suite_recipes(steps=8, seed=2, data="synthetic")[0].command() == (
        "python -m sim train --precision fp32 --loss-scale none --steps 8 --seed 2 --data synthetic")


def test_every_command_parses_back_to_its_run():
    recipes = suite_recipes(steps=8, data="synthetic", batch_size=16) + sweep_recipes(sweep_cells(), steps=8)
    for recipe in recipes:
        assert _parsed(recipe.command()) == recipe.config.resolved(), recipe.command()


def test_the_command_writes_any_field_that_differs_from_its_default():
    config = TrainConfig(precision="bf16", optimizer="adam", lr=0.002, weight_decay=0.01, hidden=(32, 16),
                         init_gain=0.5, master_weights=False, steps=3)
    command = train_command(config)
    assert command == ("python -m sim train --precision bf16 --loss-scale none --no-master-weights --optimizer adam "
                       "--lr 0.002 --weight-decay 0.01 --steps 3 --hidden 32,16 --init-gain 0.5")
    assert _parsed(command) == config.resolved()
    assert "--init-gain" not in train_command(TrainConfig(init_gain=1.0, steps=3))  # the default is left out


def test_a_cells_runs_differ_in_the_arithmetic_only():
    arithmetic = dict(precision="fp32", loss_scale="none", scale=None, growth_interval=2000)
    for cell in sweep_cells():
        configs = [r.config for r in cell.recipes("S1", steps=200)]
        assert len({dataclasses.replace(c, **arithmetic) for c in configs}) == 1
        assert [(c.precision, c.loss_scale) for c in configs] == [("fp32", "none"), ("fp16", "none"),
                                                                  ("fp16", "dynamic")]
        assert configs[2].scale == 2.0**16 and configs[2].growth_interval == 20
        assert configs[0].hidden == (64,) * cell.depth and configs[0].init_gain == cell.gain


def test_a_sweep_run_is_the_run_its_command_describes():
    recipe = SweepCell("adam", 3, 0.25).recipes("S1", steps=2, data="synthetic")[1]
    result = run_recipe(recipe)
    trainer = Trainer(_parsed(recipe.command()))
    trainer.run()
    assert trainer.weights_sha256() == result["weights_sha256"]
    assert "grad_histograms" not in result["diagnostics"]  # the sweep runs without the suite's observer
    assert result["diagnostics"]["test_curve"]["step"] == [1, 2]


# --- the verdicts, on hand-made documents ------------------------------------------------------

def _run(accuracies, underflow=(0.0, 0.0), skipped=0, label="S1x"):
    """A sweep run entry whose second-half test accuracies (steps 2 and 3) are ``accuracies``."""
    layers = {f"fc{i + 1}": share for i, share in enumerate(underflow)}
    return {"label": label, "command": f"python -m sim train  # {label}", "weights_sha256": "0" * 64,
            "network": [4] + [2] * (len(layers) - 1) + [10], "underflow_fraction": layers,
            "skipped_steps": list(range(skipped)), "final_loss_scale": 1024.0,
            "diagnostics": {"test_curve": {"step": [1, 2, 3], "accuracy": [0.1, *accuracies]}}}


def _cell(label, fp32, none, dynamic, underflow, depth=2, gain=1.0, optimizer="adam"):
    return {"label": label, "title": f"{optimizer} {depth} {gain}", "optimizer": optimizer, "depth": depth,
            "gain": gain, "runs": {"fp32": _run(fp32, label=label + "a"),
                                   "fp16-none": _run(none, underflow, label=label + "b"),
                                   "fp16-dynamic": _run(dynamic, skipped=3, label=label + "c")}}


def _document(*cells):
    rows = list(dict.fromkeys((c["optimizer"], c["depth"]) for c in cells))
    return {"suite": {"batch_size": 32, "seed": 0, "data": "digits"}, "recipes": {},
            "sweep": {"steps": 4, "late_start": 2, "width": 64, "rows": [list(r) for r in rows],
                      "gains": list(dict.fromkeys(c["gain"] for c in cells)), "dynamic_init_scale": 65536.0,
                      "dynamic_growth_interval": 1, "cells": {c["label"]: c for c in cells}}}


FINE = ("S1", (0.90, 0.92), (0.91, 0.93), (0.90, 0.92), (0.001, 0.0))
FAILS = ("S2", (0.60, 0.70), (0.10, 0.12), (0.62, 0.68), (0.6, 0.1))
STUCK = ("S3", (0.10, 0.11), (0.10, 0.10), (0.09, 0.10), (0.9, 0.5))


def test_cell_outcome_calls_a_cost_real_only_when_the_ranges_do_not_overlap():
    outcome = cell_outcome(_cell(*FAILS), late_start=2)
    assert outcome["real"] == {"fp16-none": True, "fp16-dynamic": False}
    assert outcome["cost"]["fp16-none"] == pytest.approx(0.65 - 0.11)
    assert outcome["fp32_trains"] and not cell_outcome(_cell(*STUCK), 2)["fp32_trains"]
    assert outcome["underflow"] == pytest.approx((0.6 * 10 + 0.1 * 30) / 40)  # weighted by entries: 4x2+2, 2x10+10
    lower_but_overlapping = cell_outcome(_cell("S4", (0.80, 0.90), (0.75, 0.85), (0.70, 0.79), (0.1, 0.1)), 2)
    assert lower_but_overlapping["cost"]["fp16-none"] == pytest.approx(0.05)
    assert lower_but_overlapping["real"] == {"fp16-none": False, "fp16-dynamic": True}


@pytest.mark.parametrize("cells, verdict", [
    ([FINE, FAILS, STUCK], "Supported"),
    ([FINE, STUCK], "Not supported (no measurable failure)"),
    ([FINE, ("S2", (0.6, 0.7), (0.1, 0.12), (0.3, 0.4), (0.6, 0.1))], "Not supported (a failure, not repaired)"),
])
def test_the_regime_claim_needs_a_failure_that_dynamic_scaling_repairs(cells, verdict):
    claim, found, text = sweep_claims(_document(*(_cell(*c) for c in cells)))[0]
    assert found == verdict, text


def test_a_large_underflow_share_where_fp32_does_not_train_is_not_a_failure():
    _, verdict, text = sweep_claims(_document(_cell(*FINE), _cell(*STUCK)))[0]
    assert verdict.startswith("Not supported") and "FP32 itself stayed near chance" in text and "S3" in text


@pytest.mark.parametrize("shares, verdict", [
    ([(0.5, 0.4, 0.1, 0.0), (0.3, 0.2, 0.1, 0.1)], "Supported"),
    ([(0.5, 0.4, 0.1, 0.0), (0.0, 0.1, 0.1, 0.3)], "Partly supported (in 1 of 2 deep cells)"),
    ([(0.0, 0.0, 0.1, 0.2)], "Not supported"),
])
def test_the_early_layer_claim_compares_the_first_half_of_the_layers_with_the_rest(shares, verdict):
    cells = [_cell(f"S{i}", (0.9, 0.9), (0.9, 0.9), (0.9, 0.9), share, depth=3, gain=1 / (i + 1))
             for i, share in enumerate(shares)]
    cells.append(_cell("S9", (0.9, 0.9), (0.9, 0.9), (0.9, 0.9), (1.0, 0.0), depth=1))  # shallower: not judged
    claim, found, text = sweep_claims(_document(*cells))[1]
    assert found == verdict, text
    assert "S9" not in text


def test_the_section_lists_every_run_with_its_command():
    document = _document(_cell(*FINE), _cell(*FAILS))
    text = "\n".join(render_sweep(document))
    assert "## Where loss scaling matters" in text and "### S1." in text and "### S2." in text
    for cell in document["sweep"]["cells"].values():
        for run, _ in SWEEP_RUNS:
            assert f"# {cell['runs'][run]['label']} " in text
    assert "| S2 |" in text and "**+54.0**" in text  # the real cost, in bold
    assert render_sweep({"recipes": {}}) == []


# --- the figures ----------------------------------------------------------------------------------

pytest.importorskip("matplotlib")


def _points(axis):
    """{(x, y): filled} of the single-point markers drawn on ``axis``."""
    return {(round(float(line.get_xdata()[0]), 9), round(float(line.get_ydata()[0]), 9)):
            line.get_markerfacecolor() != "white"
            for line in axis.get_lines() if len(line.get_xdata()) == 1}


def test_figure_g_puts_each_run_at_its_cells_underflow_and_cost(tmp_path):
    document = _document(_cell(*FINE), _cell(*FAILS), _cell(*STUCK))
    fig = sweep.figure_sweep_cost(document, str(tmp_path / "g.png"))
    [axis] = fig.axes
    points = _points(axis)
    for cell in document["sweep"]["cells"].values():
        outcome = cell_outcome(cell, 2)
        x = round(100 * max(outcome["underflow"], sweep.UNDERFLOW_FLOOR), 9)
        for run in ("fp16-none", "fp16-dynamic"):
            key = (x, round(100 * outcome["cost"][run], 9))
            assert key in points, (cell["label"], run)
            assert points[key] == outcome["real"][run]
    assert len(points) == 6 and axis.get_xscale() == "log"
    assert (tmp_path / "g.png").stat().st_size > 1000


def test_figure_h_draws_both_fp16_runs_of_every_deepest_cell(tmp_path):
    cells = [_cell(*FINE, depth=3), _cell(*FAILS, depth=3, gain=0.25),
             _cell("S4", (0.9, 0.9), (0.9, 0.9), (0.9, 0.9), (0.2, 0.1), depth=3, optimizer="sgd"),
             _cell(*STUCK, depth=1)]
    for cell in cells:
        cell["runs"]["fp16-dynamic"]["underflow_fraction"] = {"fc1": 0.0, "fc2": 0.001, "fc3": 0.0}
        cell["runs"]["fp16-none"]["underflow_fraction"].setdefault("fc3", 0.0)
    fig = sweep.figure_sweep_layers(_document(*cells), str(tmp_path / "h.png"))
    panels = [axis for axis in fig.axes if axis.get_visible()]
    assert [axis.get_title() for axis in panels] == ["Adam, 3 hidden layers", "SGD, 3 hidden layers"]
    assert [len(axis.get_lines()) for axis in panels] == [4, 2]
    fails = 100 * np.maximum([0.6, 0.1, 0.0], sweep.UNDERFLOW_FLOOR)
    assert any(np.allclose(line.get_ydata(), fails) for line in panels[0].get_lines())
    assert len(fig.legends) == 1 and all(axis.get_legend() is None for axis in panels)
