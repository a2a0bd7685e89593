"""The results table: one row per run, printed on the terminal and placed at the top of report.md.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sim.report.formatting import fixed_percent, percent
from sim.report.measures import layer_entries, overall_fraction

__all__ = ["TABLE_COLUMNS", "format_table", "table_rows"]

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
