"""The loss-scaling suite's part of report.md: the setup, the results tables (the first one is also
what ``python -m sim report`` prints, :func:`format_table`), the claims with their verdicts, the
figures with their captions, the runs with their commands, and why the suite's constants are what
they are.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from sim.report import keys
from sim.report.formatting import binary_exponent, fixed_percent, mean_range, number, percent
from sim.report.measures import late_accuracy, layer_entries, lost_updates, overall_fraction, windowed_underflow
from sim.report.recipe import evaluation_interval
from sim.report.scaling.claims import claims, layers_text
from sim.report.scaling.figures import FIGURES, FP16_MAX

__all__ = ["FIGURE_CAPTIONS", "TABLE_COLUMNS", "format_table", "render_report", "table_rows"]

TABLE_COLUMNS = ("run", "recipe", "test acc.", "test loss", "final loss", "skipped (early / late)", "clipped",
                 "underflow % fc1/fc2/...", "swallowed", "weights_sha256")


def table_rows(results: dict[str, dict[str, Any]]) -> list[list[str]]:
    """One row of strings per recipe, in the order of ``results``."""
    rows = []
    for run in results.values():
        entries = layer_entries(run["network"])
        skipped = len(run["skipped_steps"])
        loss = run["final_loss"]
        rows.append([
            run["label"],
            run["title"],
            fixed_percent(run["final_accuracy"]),
            "n/a" if run["test_loss"] is None else f"{run['test_loss']:.4g}",
            "n/a" if loss is None else f"{loss:.4g}",
            f"{skipped} ({fixed_percent(run['skip_rate_early'])} / {fixed_percent(run['skip_rate_late'])})",
            fixed_percent(run["clip_fraction"]),
            # underflow spans binades: significant digits, and the column's header carries the % sign
            " / ".join(percent(v).removesuffix("%") for v in run["underflow_fraction"].values()),
            fixed_percent(overall_fraction(run["swallowed_update_fraction"], entries)),
            run["weights_sha256"][:16],
        ])
    return rows


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """The results table as an aligned markdown table (it reads well in a terminal too).

    >>> format_table({}).splitlines()[0].split(" | ")[:3]
    ['| run', 'recipe', 'test acc.']
    """
    rows = table_rows(results)
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(TABLE_COLUMNS)] if rows else None
    if widths is None:
        return "| " + " | ".join(TABLE_COLUMNS) + " |\n|" + "---|" * len(TABLE_COLUMNS)

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    separator = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(TABLE_COLUMNS), separator, *(line(r) for r in rows)])


FIGURE_CAPTIONS = {
    "a": ("The number line", "FP32, BF16 and FP16 on a log2 axis (solid: normal numbers, light: subnormals), with "
          "the true gradient magnitudes of every layer of run 3 over all its steps. FP16's floor cuts into the "
          "left tail of every layer; BF16 and FP32 reach far beyond it."),
    "b": ("Gradients against FP16's floor and ceiling", "Per layer, the true gradient magnitudes of run 3 as "
          "computed (blue) and multiplied by its scale (orange): entries per binade, all steps, log axis. Grey: "
          "values that round to zero in FP16 (below 2^-25); tan: subnormals (fewer significant bits); red: above "
          "65504 (overflow). Each panel's title gives the share of its entries that round to zero, unscaled "
          "and scaled."),
    "c": ("Loss curves", "Top: the training loss of every run (10-step moving mean). Below: test accuracy, "
          "measured every tenth of the run, on an axis broken at 80% so that every point is on the chart: "
          "the upper panel holds the runs that train, at full resolution; the lower one run 6, near chance "
          "throughout, and run 8a's first evaluations."),
    "d": ("The dynamic scale, and static scales going stale", "Top: run 4's scale over the steps, with its skipped "
          "steps, over the window of scales that suit the gradients (top edge: the largest power of two that "
          "keeps the largest weight gradient below 65504; bottom edge: the smallest that lifts 99% of the nonzero "
          "gradients above 2^-25; faint: each step, solid: 25-step running median). Below: the constant scales "
          "of runs 3, 8a and 8b, each over its own run's window (the gradients, and so the window, depend on "
          "how the run trained: run 8a skips most early steps, its gradients stay large longer and its "
          "window's top edge stays low); ticks mark skipped steps."),
    "e": ("Updates against weights", "With FP32 master weights (run 4) and without (run 5). Left: the "
          "cumulative share of updates whose ratio |update| / |weight| is below each value, over all steps and "
          "parameters. An FP16 weight does not move for ratios below about 2^-11 (half its ulp), an FP32 master "
          "weight only below about 2^-24; the dots mark each run against its own line. Right: the share of "
          "nonzero updates that actually left the stored weight unchanged (hatched: those whose gradient was "
          "exactly zero that step, momentum alone)."),
    "f": ("The clipping-order bug", "The global gradient norm the clip compares with its threshold, unscaling "
          "first (run 4) and clipping first (run 6); dots mark the steps where clipping fired."),
}


def render_report(document: dict[str, Any], table: str, inserted: Sequence[str] = ()) -> str:
    """report.md for a suite document: setup, table, claims with verdicts, figures, the lines
    ``inserted`` (the sweep's section), the runs, the choices."""
    suite = document["suite"]
    runs = document["recipes"]
    constants = suite["constants"]
    first = next(iter(runs.values()), None)
    network = "-".join(str(n) for n in first["network"]) if first else "?"
    (e0, e1), (l0, l1) = suite["skip_window_early"], suite["skip_window_late"]
    lines = [
        "# Loss scaling on the emulator: what FP16 does to our MLP's gradients",
        "",
        f"Generated by `{suite['command']}` (any `--out DIR`). The same command gives this file and "
        f"`results.json` byte for byte; the figures are drawn from `results.json`. Every number here comes from "
        f"one of the {len(runs)} runs listed under [The runs](#the-runs)"
        + (f" or the {3 * len(document['sweep']['cells'])} runs of the sweep "
           "([Where loss scaling matters](#where-loss-scaling-matters-a-sweep))" if document.get("sweep") else "")
        + ", each an ordinary `python -m sim train` run whose command is given, and `results.json` holds all of "
        "them (the suite's step by step).",
        "",
        "## Setup",
        "",
        f"- Network: MLP {network} (ReLU, He-uniform weights, zero biases), the simulator's default; "
        f"data: `{suite['data']}`; SGD, lr 0.05, momentum 0.9; batch {suite['batch_size']}; "
        f"{suite['steps']} steps; seed {suite['seed']}. Every run of the suite uses these; they differ only as "
        "stated (the sweep has its own setup).",
        "- Every arithmetic operation is emulated bit-exactly: FP16/BF16 forward and backward passes with "
        "FP32 accumulation in the matmuls, the loss in FP32, unscaling and clipping in FP32.",
        "- **Underflow**: gradient entries that are exactly zero in the run's low-precision backward pass but "
        "not in the same backward pass computed in FP32 from the same forward values; share of all entries of "
        "all steps.",
        "- **Swallowed**: nonzero updates smaller than half an ulp of their weight in the compute format "
        "(they would not move a weight stored in that format); share of update entries. **Lost updates**: "
        "nonzero updates that actually left the stored weight bit-identical.",
        f"- **Skip rates**: skipped steps / steps, early = steps {e0}-{e1 - 1} (the first fifth), "
        f"late = steps {l0}-{l1 - 1} (the second half).",
        f"- Constants: clip threshold {number(constants['clip_norm'])} (runs 4-6); static scale "
        f"{number(constants['static_scale'])} (run 3); dynamic scaling with GradScaler's rules (x2 after "
        f"{constants['dynamic_growth_interval']} clean steps, x0.5 and skip on inf/NaN) from "
        f"2^{binary_exponent(constants['dynamic_init_scale'])} (runs 4-6); "
        f"2^{binary_exponent(constants['too_large_scale'])} and "
        f"2^{binary_exponent(constants['too_small_scale'])} as the too-large and too-small static scales (runs 8a, "
        "8b). "
        "Why these values: [Choices](#choices).",
        "",
        "## Results",
        "",
        "Test accuracy and test loss: on the held-out split at the end; final loss: the training loss of the last "
        "step; skipped: steps skipped for inf/NaN gradients (early / late rate); clipped: share of steps "
        "where clipping fired; underflow: per layer, in percent; swallowed: over all layers.",
        "",
        "One final accuracy is one draw from a noisy curve (figure c, accuracy panels), so the second table also gives "
        f"the test accuracy measured every {evaluation_interval(suite['steps'])} steps over the second half of "
        "each run. The claims below call an accuracy difference real only when those ranges do not overlap.",
        "",
        table,
        "",
        _detail_table(runs, suite),
        "",
        "## What the numbers say",
        "",
    ]
    for index, (claim, verdict, text) in enumerate(claims(document), start=1):
        lines += [f"### {index}. {claim}", "", f"**{verdict}.** {text}", ""]
    lines += ["## Figures", ""]
    for letter, (name, _) in FIGURES.items():
        title, caption = FIGURE_CAPTIONS[letter]
        lines += [f"### {letter}. {title}", "", f"![{title}]({name})", "", caption, ""]
    lines += inserted
    lines += ["## The runs", ""]
    for key, run in runs.items():
        config = json.dumps({k: v for k, v in run["config"].items()}, separators=(", ", ": "))
        lines += [
            f"### Run {run['label']}: {run['title']}",
            "",
            f"Shows {run['purpose']}. Key `{key}` in results.json.",
            "",
            f"    {run['command']}",
            "",
            f"Configuration: `{config}`  ",
            f"weights_sha256: `{run['weights_sha256']}`",
            "",
        ]
    lines += _choices(document)
    return "\n".join(lines).rstrip() + "\n"


def _detail_table(runs: dict[str, dict[str, Any]], suite: dict[str, Any]) -> str:
    """Test accuracy over the second half, underflow early/late, and lost updates per run."""
    early, late = tuple(suite["skip_window_early"]), tuple(suite["skip_window_late"])
    rows = ["| run | test acc., second half: mean (range) | underflow, early | underflow, late | "
            "swallowed per layer | lost updates | final scale |",
            "|---|---|---|---|---|---|---|"]
    for run in runs.values():
        rows.append(f"| {run['label']} | {mean_range(late_accuracy(run, late[0]))} | "
                    f"{percent(windowed_underflow(run, early))} | "
                    f"{percent(windowed_underflow(run, late))} | {layers_text(run, 'swallowed_update_fraction')} | "
                    f"{percent(lost_updates(run))} | {number(run['final_loss_scale'])} |")
    return "\n".join(rows)


def _choices(document: dict[str, Any]) -> list[str]:
    """Why the suite's constants are what they are, with the measurements behind them."""
    runs, constants = document["recipes"], document["suite"]["constants"]
    lines = ["## Choices", ""]
    dynamic = runs.get(keys.FP16_DYNAMIC)
    if dynamic and dynamic["diagnostics"]["grad_max"] and dynamic["diagnostics"]["grad_max"][0]:
        largest = dynamic["diagnostics"]["grad_max"][0]
        headroom = math.floor(math.log2(FP16_MAX / largest))
        lines.append(
            f"- **Dynamic start 2^{binary_exponent(constants['dynamic_init_scale'])}.** At step 0 the largest true "
            "gradient "
            f"of run {dynamic['label']} is {largest:.3g}, so scales up to 2^{headroom} fit. GradScaler's default "
            f"2^16 would already fit, and the calibration phase the claim is about would not happen; starting "
            f"{binary_exponent(constants['dynamic_init_scale']) - headroom} binades too high reproduces the situation "
            "of a "
            f"large model, whose gradients are far smaller than ours.")
    lines += [
        f"- **Growth interval {constants['dynamic_growth_interval']}** (a tenth of the run) instead of 2000, so "
        "the sawtooth completes several cycles; its price is a late skip rate near 1/(N+1).",
        f"- **Clip threshold {number(constants['clip_norm'])}**, above the gradient norms of the correctly "
        "ordered runs (figure f), so that in the right order it almost never fires and any difference comes "
        "from the order alone.",
        f"- **Static 1024** is the textbook value. **2^{binary_exponent(constants['too_large_scale'])}** overflows on "
        "most "
        "early batches of this network and fits once the gradients shrink; "
        f"**2^{binary_exponent(constants['too_small_scale'])}** lifts the gradients by only "
        f"{binary_exponent(constants['too_small_scale'])} binades, which covers fewer of them as they shrink.",
        "- **Network.** We kept the simulator's default MLP, so the report describes what `python -m sim "
        "train` does. We did not reshape it to make the early-layer claim come out: He initialisation is "
        "designed to keep gradient magnitudes level from layer to layer in a ReLU network. Deeper and more "
        "weakly initialised networks are the sweep's business"
        + (" ([Where loss scaling matters](#where-loss-scaling-matters-a-sweep)), which measures where the "
           "early-layer pattern appears." if document.get("sweep") else "."),
        "",
    ]
    return lines
