"""The loss-scaling suite's recipes: its constants and its nine runs.

Nine runs share the network, the data, the seed and the step budget, and differ only in
precision, loss scaling, master weights and the order of unscaling and clipping.

>>> [recipe.key for recipe in suite_recipes(steps=10)][:3]
['fp32', 'fp16-none', 'fp16-static']
>>> skip_windows(400)
((0, 80), (200, 400))
"""
from __future__ import annotations

import dataclasses
import math

from sim.report import keys
from sim.report.formatting import binary_exponent
from sim.report.recipe import DEFAULT_STEPS, Recipe
from sim.train import TrainConfig

__all__ = [
    "CLIP_NORM", "DYNAMIC_INIT_SCALE", "ROUND_TRIP_OTHER_SCALE", "STATIC_SCALE", "TOO_LARGE_SCALE", "TOO_SMALL_SCALE",
    "growth_interval", "skip_windows", "suite_recipes",
]

# The suite's constants, chosen from the gradient ranges measured on this network (report.md
# explains each choice; docs/walkthrough.md shows the pictures they come from).
CLIP_NORM = 5.0  # above the gradient norms of the correctly ordered runs: it rarely fires there
STATIC_SCALE = 1024.0  # the textbook static scale
DYNAMIC_INIT_SCALE = 2.0**24  # "far too high on purpose": 7 binades above our headroom at step 0
TOO_LARGE_SCALE = 2.0**18  # overflows FP16 while the early gradients are large
TOO_SMALL_SCALE = 2.0**3  # lifts the early gradients, not the late ones
ROUND_TRIP_OTHER_SCALE = 1000.0  # a non-power-of-two scale, for contrast in the round-trip check


def growth_interval(steps: int) -> int:
    """The dynamic scaler's growth interval: a tenth of the run, so the sawtooth has room for
    several cycles (GradScaler's 2000 would never grow in a run this short).

    >>> growth_interval(400), growth_interval(3)
    (40, 1)
    """
    return max(1, steps // 10)


def skip_windows(steps: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The step ranges ``[start, stop)`` over which ``skip_rate_early`` (the first fifth of the
    run) and ``skip_rate_late`` (the second half) are measured.

    >>> skip_windows(500)
    ((0, 100), (250, 500))
    """
    return (0, max(1, math.ceil(steps / 5))), (steps // 2, steps)


def suite_recipes(
    steps: int = DEFAULT_STEPS, seed: int = 0, data: str = "digits", batch_size: int = 32
) -> list[Recipe]:
    """The nine runs of the report, all on the default MLP with SGD (lr 0.05, momentum 0.9).

    Runs 4, 5 and 6 share one configuration except for the one thing each changes (master
    weights, clip order), so their differences are caused by that change alone.

    >>> [recipe.label for recipe in suite_recipes(steps=10)]
    ['1', '2', '3', '4', '5', '6', '7', '8a', '8b']
    """
    base = TrainConfig(steps=steps, seed=seed, data=data, batch_size=batch_size)
    fp16 = dataclasses.replace(base, precision="fp16")
    dynamic = dataclasses.replace(fp16, loss_scale="dynamic", scale=DYNAMIC_INIT_SCALE,
                                  growth_interval=growth_interval(steps), clip=CLIP_NORM)
    replace = dataclasses.replace
    return [
        Recipe(keys.FP32, "1", "FP32 baseline", "the reference every other run is compared with",
               replace(base, precision="fp32", loss_scale="none")),
        Recipe(keys.FP16_NONE, "2", "FP16 mixed, no loss scaling", "how many gradients FP16 zeroes on its own",
               replace(fp16, loss_scale="none")),
        Recipe(keys.FP16_STATIC, "3", "FP16 mixed, static scale 1024",
               "whether a power-of-two scale recovers them, and the exact round trip",
               replace(fp16, loss_scale="static", scale=STATIC_SCALE), probe_round_trip=True),
        Recipe(keys.FP16_DYNAMIC, "4", "FP16 mixed, dynamic scaling, clip after unscale",
               "the dynamic scale's sawtooth and its skipped steps; the correct clipping order", dynamic),
        Recipe(keys.FP16_DYNAMIC_NO_MASTER, "5", "FP16, dynamic scaling, no FP32 master weights",
               "run 4 with the weights kept in FP16: swallowed updates", replace(dynamic, master_weights=False)),
        Recipe(keys.FP16_DYNAMIC_CLIP_BUG, "6", "FP16 mixed, dynamic scaling, clip before unscale",
               "run 4 with the classic bug: the clip sees scaled gradients",
               replace(dynamic, clip_before_unscale=True)),
        Recipe(keys.BF16_NONE, "7", "BF16 mixed, no loss scaling", "whether BF16's range makes scaling unnecessary",
               replace(base, precision="bf16", loss_scale="none")),
        Recipe(keys.FP16_STATIC_TOO_LARGE, "8a",
               f"FP16 mixed, static scale 2^{binary_exponent(TOO_LARGE_SCALE)} (too large)",
               "a static scale above the early gradients' headroom: overflow and skipped steps",
               replace(fp16, loss_scale="static", scale=TOO_LARGE_SCALE)),
        Recipe(keys.FP16_STATIC_TOO_SMALL, "8b",
               f"FP16 mixed, static scale 2^{binary_exponent(TOO_SMALL_SCALE)} (too small)",
               "a static scale that fits the early gradients but not the late ones: underflow returns",
               replace(fp16, loss_scale="static", scale=TOO_SMALL_SCALE)),
    ]
