"""``python -m sim``: subcommands ``train`` (here), ``report`` (:mod:`sim.report`; also what
``python -m sim`` runs with no arguments) and ``crosscheck`` (:mod:`sim.crosscheck`, when present).

``train`` flags: precision, loss scaling, master weights, clipping (and the
clip-before-unscale bug on purpose), optimizer, budget, seed, JSON report, checkpoint and resume.
With ``--resume``, flags left out are taken from the checkpoint and flags given must agree with
it (only ``--steps`` may grow). Bad combinations exit with status 2 and one clear message, before
anything is written.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TextIO

from tqdm import tqdm

from sim.arguments import (
    UsageError, add_train_arguments, check_writable, given_train_fields, train_config, write_text_atomically,
)
from sim.checkpoint import CheckpointError, load_checkpoint
from sim.diagnostics import StepRecord
from sim.train import TrainConfig, Trainer
from softfloat16.compiling import CompileNotices

__all__ = ["main", "parse_arguments"]


def _parser() -> argparse.ArgumentParser:
    from sim import report  # light: sim.report imports matplotlib only when drawing

    parser = argparse.ArgumentParser(
        prog="python -m sim",
        description="Training on the softfloat16 emulator: mixed precision, loss scaling, diagnostics.",
        epilog=_bare_command_help(report.add_arguments),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="{train,report,crosscheck}")
    train = commands.add_parser(
        "train",
        help="train the MLP on the digits data with a precision recipe",
        description="Train an MLP with every arithmetic operation emulated bit-exactly.",
    )
    add_train_arguments(train)
    train.add_argument("--json", metavar="PATH", help="write the run's report as JSON")
    train.add_argument("--checkpoint", metavar="PATH", help="save the state here (every 100 steps and at the end)")
    train.add_argument("--resume", metavar="PATH", help="continue from a checkpoint")
    runs = sum(report.run_counts().values())
    reporting = commands.add_parser(
        "report",
        help=f"run the report's {runs} training runs and write report.md, results.json and figures (the default)",
        description=report.description(),
    )
    report.add_arguments(reporting)
    commands.add_parser("crosscheck", help="compare the emulator's training step with a torch reference",
                        add_help=False)
    return parser


def _bare_command_help(add_report_arguments: Callable[[argparse.ArgumentParser], None]) -> str:
    """The end of ``python -m sim --help``: with no subcommand, ``python -m sim`` runs the report,
    and these are the report's options (the report parser's own, formatted by argparse)."""
    bare = argparse.ArgumentParser(prog="python -m sim", add_help=False)
    add_report_arguments(bare)
    return ("With no subcommand, python -m sim runs the report (python -m sim report) with the report's "
            "options:\n\n" + bare.format_help())


def _config_from(args: argparse.Namespace) -> tuple[TrainConfig, Trainer | None]:
    given = given_train_fields(args)
    if args.resume is None:
        return train_config(given), None
    try:
        arrays, meta = load_checkpoint(args.resume)  # read and checked once: the trainer is restored from it
        saved = TrainConfig.from_dict(meta["config"])
    except FileNotFoundError:
        raise UsageError(f"--resume: no such file: {args.resume}") from None
    except CheckpointError as error:
        raise UsageError(f"--resume: not a checkpoint: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise UsageError(f"--resume: {args.resume} is not a training checkpoint ({error})") from None
    config = train_config(given, base=saved)
    try:
        trainer = Trainer.restore(arrays, meta, config, path=args.resume)
    except (ValueError, OSError) as error:
        raise UsageError(f"--resume: {error}") from None
    return config, trainer


class _Progress:
    """The run's progress on ``stream``: a tqdm bar on a terminal (loss, scale, skipped steps so
    far), nothing otherwise (a log stays clean)."""

    def __init__(self, start: int, total: int, stream: TextIO) -> None:
        self.skipped = 0
        self.bar = tqdm(initial=start, total=total, unit="step", file=stream, dynamic_ncols=True,
                        disable=not stream.isatty() or total <= start)

    def __call__(self, record: StepRecord) -> None:
        self.skipped += record.skipped
        self.bar.set_postfix_str(f"loss {record.loss:.4f} scale {record.scale:g} skipped {self.skipped}",
                                 refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


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
    progress = _Progress(trainer.step, config.steps, sys.stderr)
    try:
        trainer.run(on_step=progress, checkpoint=args.checkpoint)
    except KeyboardInterrupt:
        progress.close()
        saved = f"; state saved to {args.checkpoint} (resume with --resume)" if args.checkpoint else ""
        print(f"interrupted at step {trainer.step}{saved}", file=sys.stderr)
        return 130
    except OSError as error:  # checked writable at the start; the disk may still fill up
        if args.checkpoint is None:
            raise
        raise UsageError(f"--checkpoint: cannot write {args.checkpoint}: {error.strerror or error}") from None
    finally:
        progress.close()
    summary = trainer.summary(wall_seconds=time.perf_counter() - start)
    if args.json is not None:
        try:
            write_text_atomically(args.json, json.dumps(summary, indent=1, allow_nan=False) + "\n")
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
    # A first run on a machine compiles kernels for minutes: say so while it lasts.
    with CompileNotices(sys.stderr, label="sim: "):
        if args.command == "report":
            from sim.report import run as run_report

            return run_report(args)
        try:
            return _train(args)
        except UsageError as error:
            print(f"python -m sim train: error: {error}", file=sys.stderr)
            return 2
