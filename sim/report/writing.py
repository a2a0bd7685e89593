"""Writing the report: the document (what results.json holds: the suite, the sweep, the FP8/MX
story), its stable JSON layout, and the output folder (results.json, each story's figures,
report.md with each story's part), staged so that a failure leaves nothing half-written.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from typing import Any

from sim.arguments import write_text_atomically
from sim.report.finer.figures import draw_finer_figures
from sim.report.finer.markdown import render_finer_markdown
from sim.report.recipe import Recipe, suite_command
from sim.report.scaling.figures import draw_figures
from sim.report.scaling.markdown import format_table, render_report
from sim.report.scaling.recipes import (
    CLIP_NORM, DYNAMIC_INIT_SCALE, ROUND_TRIP_OTHER_SCALE, STATIC_SCALE, TOO_LARGE_SCALE, TOO_SMALL_SCALE,
    growth_interval, skip_windows,
)
from sim.report.sweep import SweepRecipe, draw_sweep_figures, render_sweep, sweep_document
from sim.train import TrainConfig

__all__ = ["suite_document", "write_json", "write_report"]


def suite_document(recipes: Sequence[Recipe], results: Sequence[dict[str, Any]],
                   finer: dict[str, Any] | None = None) -> dict[str, Any]:
    """results.json: how the suite was run, then one entry per recipe of the suite (keyed by recipe
    key), then, when ``recipes`` include the sweep's runs (:class:`~sim.report.sweep.SweepRecipe`),
    the ``sweep`` (:func:`sim.report.sweep.sweep_document`), then ``finer``, the second story's
    section (:func:`sim.report.finer.runs.finer_results`), when given.

    >>> from sim.report.scaling.recipes import suite_recipes
    >>> recipes = suite_recipes(steps=8, data="synthetic")  # the suite alone: --no-sweep --no-finer
    >>> document = suite_document(recipes, [{} for _ in recipes])
    >>> document["suite"]["command"], document["suite"]["skip_window_late"], list(document["recipes"])[:2]
    ('python -m sim report --steps 8 --data synthetic --no-sweep --no-finer', [4, 8], ['fp32', 'fp16-none'])
    """
    pairs = list(zip(recipes, results))
    swept = [(recipe, result) for recipe, result in pairs if isinstance(recipe, SweepRecipe)]
    recipes = [recipe for recipe, _ in pairs if not isinstance(recipe, SweepRecipe)]
    results = [result for recipe, result in pairs if not isinstance(recipe, SweepRecipe)]
    first = recipes[0].config.resolved() if recipes else TrainConfig().resolved()
    early, late = skip_windows(first.steps)
    document = {
        "suite": {
            "command": suite_command(first.steps, first.seed, first.data, sweep=bool(swept), finer=finer is not None),
            "steps": first.steps,
            "seed": first.seed,
            "data": first.data,
            "batch_size": first.batch_size,
            "skip_window_early": list(early),
            "skip_window_late": list(late),
            "constants": {
                "clip_norm": CLIP_NORM, "static_scale": STATIC_SCALE, "dynamic_init_scale": DYNAMIC_INIT_SCALE,
                "dynamic_growth_interval": growth_interval(first.steps), "too_large_scale": TOO_LARGE_SCALE,
                "too_small_scale": TOO_SMALL_SCALE, "round_trip_other_scale": ROUND_TRIP_OTHER_SCALE,
            },
        },
        "recipes": {recipe.key: result for recipe, result in zip(recipes, results)},
    }
    if swept:
        document["sweep"] = sweep_document([recipe for recipe, _ in swept], [result for _, result in swept])
    if finer is not None:
        document["finer"] = finer
    return document


def write_json(path: str, document: dict[str, Any]) -> None:
    """Strict JSON in a stable, diff-friendly layout: nested dicts indented, every list and every
    small flat dict on one line (a per-step column is one line, not five hundred).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "example.json")
    >>> write_json(path, {"run": {"loss": [0.5, 0.25], "config": {"seed": 0}}})
    >>> print(open(path).read(), end="")
    {
     "run": {
      "loss": [0.5, 0.25],
      "config": {"seed": 0}
     }
    }
    """
    def encode(value: Any, indent: int) -> str:
        if isinstance(value, dict) and value and not _one_line(value):
            inner = " " * (indent + 1)
            items = [f"{inner}{json.dumps(k)}: {encode(v, indent + 1)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
        return json.dumps(value, allow_nan=False)

    write_text_atomically(path, encode(document, 0) + "\n")


def _one_line(value: dict[str, Any]) -> bool:
    return len(value) <= 12 and not any(isinstance(v, (dict, list)) for v in value.values())


def write_report(out: str, document: dict[str, Any], figures: bool = True) -> list[str]:
    """Write results.json, the figures (unless ``figures`` is False) and report.md into ``out``;
    returns the paths written. Everything is written into a temporary folder inside ``out`` first
    and moved into place at the end, so a failure (a full disk, say) leaves no half-written file.

    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> [os.path.basename(path) for path in write_report(out, suite_document([], []), figures=False)]
    ['results.json', 'report.md']
    >>> sorted(os.listdir(out))
    ['report.md', 'results.json']
    """
    os.makedirs(out, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".sim-report-", dir=out)
    try:
        names = ["results.json"]
        write_json(os.path.join(staging, "results.json"), document)
        if figures:
            names += list(draw_figures(document, staging).values())
            if document.get("sweep"):
                names += list(draw_sweep_figures(document, staging).values())
            if "finer" in document:
                names += [os.path.basename(path) for path in draw_finer_figures(document["finer"], staging)]
        text = render_report(document, format_table(document["recipes"]), render_sweep(document))
        if "finer" in document:
            text += "\n" + render_finer_markdown(document["finer"])
        with open(os.path.join(staging, "report.md"), "w", encoding="utf-8") as file:
            file.write(text)
        names.append("report.md")
        for name in names:
            os.replace(os.path.join(staging, name), os.path.join(out, name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [os.path.join(out, name) for name in names]
