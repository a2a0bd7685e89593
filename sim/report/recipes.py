"""The suite: its constants, its nine runs (:class:`Recipe`) and the commands that repeat them.

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
from typing import TYPE_CHECKING

from sim.report.formatting import binary_exponent, number
from sim.train import TrainConfig

if TYPE_CHECKING:
    from sim.report.sweep import SweepCell

__all__ = [
    "CLIP_NORM", "DEFAULT_STEPS", "DYNAMIC_INIT_SCALE", "ROUND_TRIP_OTHER_SCALE", "STATIC_SCALE", "TOO_LARGE_SCALE",
    "TOO_SMALL_SCALE", "Recipe", "evaluation_interval", "growth_interval", "skip_windows", "suite_command",
    "suite_recipes", "train_command",
]

DEFAULT_STEPS = 400  # the 9 recipes: about 1.5 minutes on 2 idle cores; the sweep (half the steps) 2 more
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


def evaluation_interval(steps: int) -> int:
    """Test-set evaluations happen every this many steps (ten per run): one final accuracy is a
    single draw from a noisy curve, and the report compares runs over the second half instead.

    >>> evaluation_interval(400), evaluation_interval(4)
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


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One run of the report: a key for files and JSON, the report's label and title, what it is
    there to show, and the exact training configuration."""

    key: str
    label: str
    title: str
    purpose: str
    config: TrainConfig
    probe_round_trip: bool = False
    collect: bool = True  # measure with the report's Collector (the figures' data); False: run log only
    cell: SweepCell | None = None  # the sweep cell this run belongs to; None for the suite's runs

    def command(self) -> str:
        """The ``python -m sim train`` command that repeats this run (same weights_sha256).

        >>> suite_recipes(steps=20)[2].command()
        'python -m sim train --precision fp16 --loss-scale static --scale 1024 --steps 20'
        """
        return train_command(self.config)


# Always on the command line, whatever their value: what the run computes in, and for how long.
_ALWAYS_GIVEN = ("precision", "loss_scale", "steps")


def train_command(config: TrainConfig) -> str:
    """The ``python -m sim train`` command for ``config``: precision, loss scale and steps, then
    every other field that differs from its default, in field order, as its flag.

    A field's flag is its name with dashes (``--init-gain 0.25``); a boolean is a switch named
    after the non-default value (``--no-master-weights``, ``--clip-before-unscale``); layer
    widths are a comma list. So a field added to TrainConfig gets its flag here with no change.

    >>> train_command(TrainConfig(optimizer="adam", hidden=(64, 64), init_gain=0.25, steps=10))[20:]
    '--precision fp16 --loss-scale dynamic --optimizer adam --steps 10 --hidden 64,64 --init-gain 0.25'
    >>> train_command(TrainConfig(precision="fp32", master_weights=False, steps=10))
    'python -m sim train --precision fp32 --loss-scale none --no-master-weights --steps 10'
    """
    resolved = config.resolved()
    flags = []
    for field in dataclasses.fields(TrainConfig):
        name = field.name
        value = getattr(resolved if name in _ALWAYS_GIVEN else config, name)
        if name not in _ALWAYS_GIVEN and (value is None or value == field.default):
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):  # a switch: present means "not the default"
            flags.append(flag if value else "--no-" + name.replace("_", "-"))
        elif isinstance(value, (tuple, list)):
            flags += [flag, ",".join(str(v) for v in value)]
        elif isinstance(value, float):
            flags += [flag, number(value)]
        else:
            flags += [flag, str(value)]
    return "python -m sim train " + " ".join(flags)


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
        Recipe("fp32", "1", "FP32 baseline", "the reference every other run is compared with",
               replace(base, precision="fp32", loss_scale="none")),
        Recipe("fp16-none", "2", "FP16 mixed, no loss scaling", "how many gradients FP16 zeroes on its own",
               replace(fp16, loss_scale="none")),
        Recipe("fp16-static", "3", "FP16 mixed, static scale 1024",
               "whether a power-of-two scale recovers them, and the exact round trip",
               replace(fp16, loss_scale="static", scale=STATIC_SCALE), probe_round_trip=True),
        Recipe("fp16-dynamic", "4", "FP16 mixed, dynamic scaling, clip after unscale",
               "the dynamic scale's sawtooth and its skipped steps; the correct clipping order", dynamic),
        Recipe("fp16-dynamic-no-master", "5", "FP16, dynamic scaling, no FP32 master weights",
               "run 4 with the weights kept in FP16: swallowed updates", replace(dynamic, master_weights=False)),
        Recipe("fp16-dynamic-clip-bug", "6", "FP16 mixed, dynamic scaling, clip before unscale",
               "run 4 with the classic bug: the clip sees scaled gradients",
               replace(dynamic, clip_before_unscale=True)),
        Recipe("bf16-none", "7", "BF16 mixed, no loss scaling", "whether BF16's range makes scaling unnecessary",
               replace(base, precision="bf16", loss_scale="none")),
        Recipe("fp16-static-too-large", "8a",
               f"FP16 mixed, static scale 2^{binary_exponent(TOO_LARGE_SCALE)} (too large)",
               "a static scale above the early gradients' headroom: overflow and skipped steps",
               replace(fp16, loss_scale="static", scale=TOO_LARGE_SCALE)),
        Recipe("fp16-static-too-small", "8b",
               f"FP16 mixed, static scale 2^{binary_exponent(TOO_SMALL_SCALE)} (too small)",
               "a static scale that fits the early gradients but not the late ones: underflow returns",
               replace(fp16, loss_scale="static", scale=TOO_SMALL_SCALE)),
    ]


def suite_command(steps: int, seed: int, data: str, sweep: bool = True, finer: bool = True) -> str:
    """The command that regenerates a suite (flags that change results only; --out and --workers
    do not).

    >>> suite_command(DEFAULT_STEPS, 0, "digits"), suite_command(8, 0, "synthetic", sweep=False)
    ('python -m sim report', 'python -m sim report --steps 8 --data synthetic --no-sweep')
    >>> suite_command(DEFAULT_STEPS, 0, "digits", finer=False)
    'python -m sim report --no-finer'
    """
    flags = [(f"--{name}", str(value)) for name, value, default in
             (("steps", steps, DEFAULT_STEPS), ("seed", seed, 0), ("data", data, "digits")) if value != default]
    skipped = [flag for flag, included in (("--no-sweep", sweep), ("--no-finer", finer)) if not included]
    return " ".join(["python -m sim report", *(" ".join(flag) for flag in flags), *skipped])
