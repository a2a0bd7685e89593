"""``python -m sim``: subcommands ``train`` (here), ``report`` (:mod:`sim.report`; also what
``python -m sim`` runs with no arguments) and ``crosscheck`` (:mod:`sim.crosscheck`, when present).

``train`` flags follow the issue: precision, loss scaling, master weights, clipping (and the
clip-before-unscale bug on purpose), optimizer, budget, seed, JSON report, checkpoint and resume.
With ``--resume``, flags left out are taken from the checkpoint and flags given must agree with
it (only ``--steps`` may grow). Bad combinations exit with status 2 and one clear message, before
anything is written.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from typing import Any, TextIO

from sim.arguments import (
    UsageError, check_writable, momentum, non_negative_float, non_negative_int, positive_float, positive_int,
)
from sim.checkpoint import CheckpointError, load_checkpoint
from sim.diagnostics import StepRecord
from sim.train import DATASETS, LOSS_SCALES, OPTIMIZERS, PRECISIONS, TrainConfig, Trainer

__all__ = ["main", "parse_arguments"]

# argparse destination -> TrainConfig field, for flags whose names differ.
_FIELDS = {
    "precision": "precision",
    "loss_scale": "loss_scale",
    "scale": "scale",
    "growth_interval": "growth_interval",
    "master_weights": "master_weights",
    "clip": "clip",
    "clip_before_unscale": "clip_before_unscale",
    "optimizer": "optimizer",
    "lr": "lr",
    "momentum": "momentum",
    "weight_decay": "weight_decay",
    "steps": "steps",
    "batch_size": "batch_size",
    "seed": "seed",
    "data": "data",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sim",
        description="Training on the softfloat16 emulator: mixed precision, loss scaling, diagnostics.",
    )
    commands = parser.add_subparsers(dest="command", metavar="{train,report,crosscheck}")
    train = commands.add_parser(
        "train",
        help="train the MLP on the digits data with a precision recipe",
        description="Train an MLP with every arithmetic operation emulated bit-exactly.",
    )
    # Defaults are None so that --resume can tell given flags from left-out ones.
    train.add_argument("--precision", choices=tuple(PRECISIONS), help="compute format (default fp16)")
    train.add_argument("--loss-scale", choices=LOSS_SCALES,
                       help="loss scaling (default: dynamic for fp16, none otherwise)")
    train.add_argument("--scale", type=positive_float, metavar="S",
                       help="the static scale, or the initial dynamic scale (default 65536)")
    train.add_argument("--growth-interval", type=positive_int, metavar="N",
                       help="dynamic scaling: clean steps before the scale doubles (default 2000)")
    train.add_argument("--no-master-weights", dest="master_weights", action="store_const", const=False,
                       help="keep weights and optimizer in the compute format (no FP32 master copy)")
    train.add_argument("--clip", type=positive_float, metavar="C", help="clip the global gradient norm to C")
    train.add_argument("--clip-before-unscale", action="store_const", const=True,
                       help="clip the still-scaled gradients (the classic bug, on purpose)")
    train.add_argument("--optimizer", choices=OPTIMIZERS, help="default sgd (momentum 0.9)")
    train.add_argument("--lr", type=positive_float, help="learning rate (default 0.05 for sgd, 1e-3 for adam)")
    train.add_argument("--momentum", type=momentum, metavar="M", help="sgd momentum, 0 <= M < 1 (default 0.9)")
    train.add_argument("--weight-decay", type=non_negative_float, metavar="W",
                       help="L2 weight decay added to the gradient, as torch's SGD and Adam (default 0)")
    train.add_argument("--steps", type=non_negative_int, metavar="N", help="total steps (default 500)")
    train.add_argument("--batch-size", type=positive_int, metavar="B", help="default 32")
    train.add_argument("--seed", type=non_negative_int, metavar="S", help="weights and data order (default 0)")
    train.add_argument("--data", choices=DATASETS, help="digits (default) or a small synthetic set")
    train.add_argument("--json", metavar="PATH", help="write the run's report as JSON")
    train.add_argument("--checkpoint", metavar="PATH", help="save the state here (every 100 steps and at the end)")
    train.add_argument("--resume", metavar="PATH", help="continue from a checkpoint")
    report = commands.add_parser(
        "report",
        help="run the loss-scaling experiment suite and write report.md, results.json and figures (default)",
        description="Run the nine-recipe loss-scaling suite; write DIR/report.md, DIR/results.json and "
                    "PNG figures, and print the results table.",
    )
    from sim.report import add_arguments  # light: sim.report imports matplotlib only when drawing

    add_arguments(report)
    commands.add_parser("crosscheck", help="compare the emulator's training step with a torch reference",
                        add_help=False)
    return parser


def _config_from(args: argparse.Namespace) -> tuple[TrainConfig, Trainer | None]:
    given = {field: getattr(args, dest) for dest, field in _FIELDS.items() if getattr(args, dest) is not None}
    if args.resume is None:
        return _checked(TrainConfig(**given), given), None
    try:
        _, meta = load_checkpoint(args.resume)
        saved = TrainConfig.from_dict(meta["config"])
    except FileNotFoundError:
        raise UsageError(f"--resume: no such file: {args.resume}") from None
    except CheckpointError as error:
        raise UsageError(f"--resume: not a checkpoint: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise UsageError(f"--resume: {args.resume} is not a training checkpoint ({error})") from None
    config = _checked(TrainConfig(**{**saved.to_dict(), "hidden": saved.hidden, **given}), given)
    try:
        trainer = Trainer.resume(args.resume, config)
    except (ValueError, OSError) as error:
        raise UsageError(f"--resume: {error}") from None
    return config, trainer


def _checked(config: TrainConfig, given: dict[str, Any]) -> TrainConfig:
    """The config resolved, or a UsageError naming the flags at fault (``given``: the fields set
    on the command line)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = config.resolved()
    except ValueError as error:
        message = str(error)
        for field, flag in (("static loss scaling", "--loss-scale static"),
                            ("clip_before_unscale", "--clip-before-unscale")):
            message = message.replace(field, flag)
        raise UsageError(message) from None
    if "growth_interval" in given and config.loss_scale != "dynamic":
        raise UsageError(f"--growth-interval only applies to --loss-scale dynamic, not {config.loss_scale}")
    if "momentum" in given and config.optimizer != "sgd":
        raise UsageError(f"--momentum only applies to --optimizer sgd, not {config.optimizer}")
    return config


def _write_json(path: str, document: dict[str, Any]) -> None:
    """Write ``document`` as strict JSON, atomically (temporary file, then rename)."""
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(prefix=".sim-", suffix=".json.tmp", dir=directory)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=1, allow_nan=False)
            file.write("\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


class _Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, start: int, total: int, stream: TextIO) -> None:
        self.start, self.total, self.stream = start, total, stream
        self.enabled = stream.isatty() and total > start
        self.began = time.perf_counter()

    def __call__(self, record: StepRecord) -> None:
        if not self.enabled:
            return
        done = record.step + 1
        width = 30
        filled = width * done // self.total
        elapsed = time.perf_counter() - self.began
        rate = (done - self.start) / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else 0.0
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} "
            f"loss {record.loss:.4f} scale {record.scale:g}{' skip' if record.skipped else '     '} "
            f"eta {eta:4.0f}s"
        )
        self.stream.flush()
        if done == self.total:
            self.stream.write("\n")


def _train(args: argparse.Namespace) -> int:
    check_writable("--json", args.json)
    check_writable("--checkpoint", args.checkpoint)
    config, trainer = _config_from(args)
    for note in config.notes():
        print(f"note: {note}", file=sys.stderr)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = trainer if trainer is not None else Trainer(config)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    start = time.perf_counter()
    try:
        trainer.run(on_step=_Progress(trainer.step, config.steps, sys.stderr), checkpoint=args.checkpoint)
    except KeyboardInterrupt:
        saved = f"; state saved to {args.checkpoint} (resume with --resume)" if args.checkpoint else ""
        print(f"\ninterrupted at step {trainer.step}{saved}", file=sys.stderr)
        return 130
    except OSError as error:  # checked writable at the start; the disk may still fill up
        if args.checkpoint is None:
            raise
        raise UsageError(f"--checkpoint: cannot write {args.checkpoint}: {error.strerror or error}") from None
    summary = trainer.summary(wall_seconds=time.perf_counter() - start)
    if args.json is not None:
        try:
            _write_json(args.json, summary)
        except OSError as error:
            raise UsageError(f"--json: cannot write {args.json}: {error.strerror or error}") from None
    accuracy = summary["final_accuracy"]
    print(
        f"{config.precision} loss_scale={config.loss_scale} steps={summary['steps']} "
        f"skipped={len(summary['skipped_steps'])} final_loss={summary['final_loss']} "
        f"test_accuracy={accuracy:.4f} weights_sha256={summary['weights_sha256'][:16]}..."
    )
    return 0


def _crosscheck(argv: list[str]) -> int:
    """Hand the arguments to :mod:`sim.crosscheck` (imported only now: it needs torch)."""
    try:
        from sim.crosscheck.cli import main as crosscheck_main
    except ModuleNotFoundError as error:
        if error.name not in ("sim.crosscheck", "sim.crosscheck.cli"):
            raise
        print("sim crosscheck: not implemented yet (it comes with the torch reference)")
        return 2
    return crosscheck_main(argv)


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a ``python -m sim`` command line other than ``crosscheck`` (which has its own
    parser); exits with status 2 on a usage error, as argparse does."""
    argv = list(argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["report", *argv]  # bare `python -m sim [--out DIR ...]` is the report
    return _parser().parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status. No subcommand runs the report (with the
    report's flags, if any: ``python -m sim --out DIR``).

    >>> main(["train", "--loss-scale", "static"])
    2
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["crosscheck"]:  # its flags belong to sim.crosscheck, not to this parser
        return _crosscheck(argv[1:])
    args = parse_arguments(argv)
    if args.command == "report":
        from sim.report import run as run_report

        return run_report(args)
    try:
        return _train(args)
    except UsageError as error:
        print(f"python -m sim train: error: {error}", file=sys.stderr)
        return 2
