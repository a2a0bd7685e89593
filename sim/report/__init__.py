"""The report behind ``python -m sim``: three stories told on the simulator's MLP, each an ordinary
set of ``python -m sim train`` runs, measured, judged and drawn.

- :mod:`~sim.report.scaling`: loss scaling, nine runs ("recipes") that differ only in precision,
  loss scaling, master weights and the order of unscaling and clipping;
- :mod:`~sim.report.sweep` (skipped with ``--no-sweep``): a grid of deeper and more weakly
  initialised networks, each trained in FP32, in FP16 without loss scaling and in FP16 with
  dynamic scaling, for half the suite's steps, to find where loss scaling matters;
- :mod:`~sim.report.finer` (skipped with ``--no-finer``): FP8, MX and NVFP4 scaling granularity,
  and tensor-core accumulation (with a GEMM sweep).

Every story has the same parts: recipes (its runs and constants), runs (what is measured and kept
of them), claims (verdicts by stated rules), figures and markdown (its part of report.md). The
runs of all three share one pool of worker processes (or a Dask cluster). Shared by the stories:

- :mod:`~sim.report.keys`: every recipe key, spelt once;
- :mod:`~sim.report.recipe`: a run (:class:`Recipe`) and the commands that repeat it;
- :mod:`~sim.report.runner`: running recipes, in worker processes or on a Dask cluster;
- :mod:`~sim.report.progress`: the progress bar (tqdm, on a terminal only);
- :mod:`~sim.report.formatting`, :mod:`~sim.report.measures`: how numbers are written, and what is
  derived from a run;
- :mod:`~sim.report.plotting`: what the figures share (matplotlib, imported only when drawing);
- :mod:`~sim.report.writing`: the document, results.json, report.md and the output folder;
- here: the command line (:func:`add_arguments`, :func:`run`, :func:`main`).

Outputs, in ``DIR``: ``results.json`` (per recipe of the suite: the keys of ``python -m sim train
--json``, plus ``skip_rate_early``, ``skip_rate_late`` and the observer's measurements; under
``sweep``, the grid and its runs; under ``finer``, the second story), ``report.md`` (setup, results
tables, claims with verdicts, figures, the runs' commands) and the PNG figures. The same arguments
give byte-identical ``results.json`` and ``report.md``, whatever the number of worker processes:
nothing in them depends on time or scheduling.

>>> [recipe.key for recipe in suite_recipes(steps=10)][:3]
['fp32', 'fp16-none', 'fp16-static']
>>> skip_windows(400)
((0, 80), (200, 400))
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from sim.arguments import UsageError, non_negative_int, output_dir, positive_int
from sim.report.finer.recipes import finer_recipes
from sim.report.finer.runs import finer_results
from sim.report.measures import layer_entries, overall_fraction
from sim.report.progress import SuiteProgress
from sim.report.recipe import DEFAULT_STEPS, Recipe, suite_command
from sim.report.runner import run_recipe, run_suite
from sim.report.scaling.markdown import FIGURE_CAPTIONS, format_table, render_report
from sim.report.scaling.recipes import skip_windows, suite_recipes
from sim.report.scaling.runs import Collector
from sim.report.sweep import sweep_cells, sweep_document, sweep_recipes, sweep_steps
from sim.report.writing import suite_document, write_json, write_report
from softfloat16.verify import SchedulerError

__all__ = [
    "DEFAULT_STEPS", "FIGURE_CAPTIONS", "Collector", "Recipe", "SuiteProgress", "add_arguments", "description",
    "format_table", "layer_entries", "main", "overall_fraction", "render_report", "run", "run_counts", "run_recipe",
    "run_suite", "skip_windows", "suite_command", "suite_document", "suite_recipes", "sweep_cells", "sweep_document",
    "sweep_recipes", "sweep_steps", "write_json", "write_report",
]

DEFAULT_OUT = "sim-report"

# The command lives in the package itself: run() reads run_suite, suite_document and write_report
# from this namespace, the one callers import and tests patch.


def run_counts(steps: int = DEFAULT_STEPS) -> dict[str, int]:
    """The training runs of each story, counted from their recipes (the sweep's grid as
    :func:`sweep_cells` gives it).

    >>> run_counts()
    {'suite': 9, 'sweep': 27, 'finer': 10}
    """
    return {"suite": len(suite_recipes(steps)), "sweep": len(sweep_recipes(sweep_cells(), steps)),
            "finer": len(finer_recipes(steps))}


def description() -> str:
    """What ``python -m sim report`` does, with its run counts (:func:`run_counts`).

    >>> description().split(":")[0]
    "Run the report's 46 training runs"
    """
    counts = run_counts()
    return (f"Run the report's {sum(counts.values())} training runs: the loss-scaling suite ({counts['suite']} "
            f"recipes), the sweep of deeper networks ({counts['sweep']} runs of half the steps; --no-sweep skips it) "
            f"and the FP8/MX story ({counts['finer']} runs and a GEMM sweep; --no-finer skips it). Write "
            "DIR/report.md, DIR/results.json and the PNG figures, and print the results table.")


def add_arguments(parser: Any) -> None:
    """The report's flags (shared with ``python -m sim report``'s subparser).

    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> parser.parse_args(["--steps", "8"]).steps, parser.parse_args([]).out
    (8, 'sim-report')
    """
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output directory (default ./{DEFAULT_OUT})")
    parser.add_argument("--steps", type=positive_int, default=DEFAULT_STEPS, metavar="N",
                        help=f"steps per recipe (default {DEFAULT_STEPS})")
    parser.add_argument("--seed", type=non_negative_int, default=0, metavar="S",
                        help="weights and data order (default 0)")
    parser.add_argument("--data", choices=("digits", "synthetic"), default="digits",
                        help="digits (default) or the small synthetic set (for tests)")
    parser.add_argument("--workers", type=positive_int, default=min(2, os.cpu_count() or 1), metavar="N",
                        help="worker processes (default 2; results do not depend on it)")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="run the training runs as tasks on the Dask cluster of this scheduler "
                             "(tcp://host:8786; needs the dask extra) instead of local worker processes")
    parser.add_argument("--no-figures", dest="figures", action="store_false", help="skip the PNG figures")
    counts = run_counts()
    parser.add_argument("--no-finer", dest="finer", action="store_false",
                        help="skip the second story: FP8 / MX / NVFP4 scaling and accumulation "
                             f"({counts['finer']} runs and a GEMM sweep)")
    parser.add_argument("--no-sweep", dest="sweep", action="store_false",
                        help=f"skip the sweep of deeper networks ({counts['sweep']} runs of half the steps)")


def run(args: Any) -> int:
    """Run the suite for parsed ``args`` (see :func:`add_arguments`); returns the exit status.
    The output directory is checked (made, and written to) before any training, and the files
    appear in it only once all of them are written.

    >>> import argparse, tempfile
    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> with tempfile.NamedTemporaryFile() as existing:  # a file where the folder should be: refused
    ...     run(parser.parse_args(["--out", existing.name, "--no-figures", "--data", "synthetic"]))
    2
    """
    def fail(message: str) -> int:
        print(f"python -m sim report: error: {message}", file=sys.stderr)
        return 2

    needed = [("matplotlib", "the figures")] if args.figures else []
    needed += [("sklearn", "the digits data")] if args.data == "digits" else []
    for module, what in needed:
        try:
            __import__(module)
        except ImportError:
            return fail(f"{what} need {module}: pip install -e '.[report]'")
    try:
        with output_dir("--out", args.out):
            recipes = suite_recipes(steps=args.steps, seed=args.seed, data=args.data)
            sweep = sweep_recipes(sweep_cells(), args.steps, args.seed, args.data) if args.sweep else []
            finer = finer_recipes(steps=args.steps, seed=args.seed, data=args.data) if args.finer else []
            jobs = recipes + sweep + finer
            scheduler = getattr(args, "scheduler", None)
            where = (f"Dask scheduler {scheduler}" if scheduler is not None
                     else f"{args.workers} worker{'s' if args.workers > 1 else ''}")
            print(f"running {len(recipes)} recipes x {args.steps} steps"
                  + (f", a sweep of {len(sweep)} runs x {sweep_steps(args.steps)} steps" if sweep else "")
                  + (f", {len(finer)} FP8/MX runs x {args.steps} steps" if finer else "")
                  + f" on {args.data} ({where})", file=sys.stderr)
            progress = SuiteProgress(jobs, sys.stderr)
            began = time.perf_counter()
            try:
                results = run_suite(jobs, args.workers, progress, scheduler=scheduler)
            finally:
                progress.close()
            first_story = len(recipes) + len(sweep)
            document = suite_document(jobs[:first_story], results[:first_story],
                                      finer_results(finer, results[first_story:]) if finer else None)
            try:
                written = write_report(args.out, document, figures=args.figures)
            except OSError as error:
                raise UsageError(f"--out: cannot write {error.filename or args.out}: {error.strerror or error}; "
                                 "nothing was written") from None
    except (UsageError, SchedulerError) as error:
        return fail(str(error))
    except KeyboardInterrupt:
        print("interrupted; nothing written", file=sys.stderr)
        return 130
    print(format_table(document["recipes"]))
    print(f"\nwrote {', '.join(written)} in {time.perf_counter() - began:.0f}s", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sim report``: run the suite, write DIR/{report.md,results.json,*.png}, print
    the table. Returns the exit status.

    >>> main(["--steps", "2", "--data", "synthetic", "--out", "/dev/null", "--no-figures"])
    2
    """
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m sim report", description=description())
    add_arguments(parser)
    return run(parser.parse_args(argv))
