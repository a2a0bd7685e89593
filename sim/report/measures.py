"""Quantities the report derives from a results.json run entry, shared by the tables and the
claims: per-layer entry counts, weighted and windowed underflow, shares of updates, and the test
accuracy over the second half of a run.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["late_accuracy", "layer_entries", "lost_updates", "overall_fraction", "share", "windowed_underflow"]


def layer_entries(network: Sequence[int]) -> list[int]:
    """Weight and bias entries per layer of an MLP with these widths.

    >>> layer_entries([64, 128, 10])
    [8320, 1290]
    """
    return [n_in * n_out + n_out for n_in, n_out in zip(network[:-1], network[1:])]


def overall_fraction(per_layer: dict[str, float], entries: Sequence[int]) -> float:
    """The entries-weighted mean of per-layer fractions (each layer's share of all entries).

    >>> overall_fraction({"fc1": 0.5, "fc2": 0.0}, [10, 30])
    0.125
    """
    total = sum(entries)
    return sum(f * n for f, n in zip(per_layer.values(), entries)) / total if total else 0.0


def windowed_underflow(run: dict[str, Any], window: tuple[int, int]) -> float:
    """Underflowed gradient entries / all entries over the steps ``[start, stop)`` of ``window``.

    >>> run = {"network": [2, 1], "per_step": {"underflow": [[0], [3], [1]]}}
    >>> windowed_underflow(run, (1, 3))
    0.6666666666666666
    """
    start, stop = window
    counts = run["per_step"]["underflow"][start:stop]
    total = sum(layer_entries(run["network"])) * len(counts)
    return sum(sum(c) for c in counts) / total if total else 0.0


def share(run: dict[str, Any], part: str, whole: str) -> float:
    """``diagnostics[part] / diagnostics[whole]`` of a run, 0 when the whole is 0.

    >>> share({"diagnostics": {"updates_lost": 5, "updates_nonzero": 20}}, "updates_lost", "updates_nonzero")
    0.25
    """
    diagnostics = run["diagnostics"]
    return diagnostics[part] / diagnostics[whole] if diagnostics[whole] else 0.0


def lost_updates(run: dict[str, Any]) -> float:
    """The share of nonzero updates that left the stored weight bit-identical."""
    return share(run, "updates_lost", "updates_nonzero")


def late_accuracy(run: dict[str, Any], late_start: int) -> tuple[float, float, float] | None:
    """(mean, min, max) of the test accuracy over the evaluations at steps >= ``late_start``.

    >>> late_accuracy({"diagnostics": {"test_curve": {"step": [1, 2, 3], "accuracy": [0.2, 0.5, 0.7]}}}, 2)
    (0.6, 0.5, 0.7)
    """
    curve = run["diagnostics"]["test_curve"]
    values = [a for step, a in zip(curve["step"], curve["accuracy"]) if step >= late_start]
    return (sum(values) / len(values), min(values), max(values)) if values else None
