"""A recipe: one training run of the report (:class:`Recipe`), and the commands that repeat a run
(:func:`train_command`) or the whole report (:func:`suite_command`). Every story of the report
(:mod:`~sim.report.scaling`, :mod:`~sim.report.sweep`, :mod:`~sim.report.finer`) builds its runs
as recipes; :mod:`~sim.report.runner` runs them.
"""
from __future__ import annotations

import dataclasses

from sim.report.formatting import number
from sim.train import TrainConfig

__all__ = ["DEFAULT_STEPS", "Recipe", "evaluation_interval", "suite_command", "train_command"]

DEFAULT_STEPS = 400  # the 9 recipes: about 1.5 minutes on 2 idle cores; the sweep (half the steps) 2 more


def evaluation_interval(steps: int) -> int:
    """Test-set evaluations happen every this many steps (ten per run): one final accuracy is a
    single draw from a noisy curve, and the report compares runs over the second half instead.

    >>> evaluation_interval(400), evaluation_interval(4)
    (40, 1)
    """
    return max(1, steps // 10)


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
    collect: bool = True  # measure with the suite's Collector (the figures' data); False: run log only

    def command(self) -> str:
        """The ``python -m sim train`` command that repeats this run (same weights_sha256).

        >>> Recipe("k", "1", "t", "p", TrainConfig(loss_scale="static", scale=1024.0, steps=20)).command()
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
