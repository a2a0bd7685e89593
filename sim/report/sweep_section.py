"""report.md's "Where loss scaling matters": the sweep's design, its table, its claims with their
verdicts, its figures and its runs (the sweep itself: :mod:`sim.report.sweep`).

Every number is read from the suite document's ``sweep`` and judged by the suite's rule: an
accuracy difference is real only when the second-half ranges of test accuracy do not overlap.
"""
from __future__ import annotations

from typing import Any

from sim.report.formatting import binary_exponent, percent
from sim.report.measures import layer_entries, overall_fraction
from sim.report.sweep import SWEEP_RUNS, TRAINS_ABOVE_CHANCE, cell_outcome

__all__ = ["SWEEP_FIGURE_CAPTIONS", "render_sweep", "sweep_claims"]

NOTABLE_COST = 0.05  # a difference of 5 points that the rule calls noise is worth a sentence

SWEEP_FIGURE_CAPTIONS = {
    "g": ("Accuracy cost against underflow, one point per cell",
          "For each cell of the sweep, FP32's mean test accuracy over the second half minus that of FP16 "
          "without loss scaling (circles) and of FP16 with dynamic scaling (squares), in points of accuracy, "
          "both placed at the share of gradient entries that FP16 without scaling lost to underflow over its "
          "run. Filled: the second-half ranges do not overlap (a real difference); hollow: within the spread; "
          "grey: cells where FP32 itself stays near chance, so there is nothing to lose."),
    "h": ("Underflow by layer in the deepest networks", "For each deepest row of the sweep, the share of each "
          "layer's gradient entries lost to underflow over the run, from fc1 (farthest from the loss) to the "
          "output layer; solid: FP16 without scaling, dashed: with dynamic scaling; one colour per initial gain. "
          "Shares of exactly 0 are drawn at the bottom edge."),
}


def _accuracy(outcome: dict[str, Any], run: str) -> str:
    """'19.2% (18.4-22.0%)': second-half mean (range)."""
    value = outcome["accuracy"][run]
    return "n/a" if value is None else f"{percent(value[0])} ({percent(value[1])}-{percent(value[2])})"


def _cost(outcome: dict[str, Any], run: str) -> str:
    """The cost in points of accuracy, bold when real."""
    cost = outcome["cost"][run]
    if cost is None:
        return "n/a"
    text = f"{100 * cost:+.1f}"
    return f"**{text}**" if outcome["real"][run] else text


def _outcomes(sweep: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(key, cell, outcome) for every cell, in grid order."""
    return [(key, cell, cell_outcome(cell, sweep["late_start"])) for key, cell in sweep["cells"].items()]


def _count(n: int, noun: str) -> str:
    """'1 cell', '3 cells'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _name(cell: dict[str, Any]) -> str:
    return f"{cell['label']} ({cell['title']})"


def _first_half_share(layers: dict[str, float]) -> tuple[float, float]:
    """Mean underflow share of the first half of the layers (far from the loss) and of the rest."""
    values = list(layers.values())
    half = len(values) // 2
    first, rest = values[:half], values[half:]
    return (sum(first) / len(first) if first else 0.0), (sum(rest) / len(rest) if rest else 0.0)


def sweep_claims(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(claim, verdict, explanation) for the sweep's two claims; none without a sweep.

    >>> sweep_claims({"recipes": {}})
    []
    """
    sweep = document.get("sweep")
    if not sweep or not sweep["cells"]:
        return []
    outcomes = _outcomes(sweep)
    return [_regime_claim(outcomes, sweep), _early_layers_claim(outcomes)]


def _regime_claim(outcomes: list[tuple[str, dict[str, Any], dict[str, Any]]],
                  sweep: dict[str, Any]) -> tuple[str, str, str]:
    """Somewhere FP16 without scaling fails measurably, and dynamic scaling repairs it."""
    failing = [(c, o) for _, c, o in outcomes if o["fp32_trains"] and o["real"]["fp16-none"]]
    repaired = [(c, o) for c, o in failing if not o["real"]["fp16-dynamic"]]
    parts = []
    if failing:
        parts.append(f"FP16 without loss scaling cost accuracy beyond the run-to-run spread in {len(failing)} of "
                     f"{len(outcomes)} cells. " + " ".join(
                         f"{_name(c)}: {percent(o['underflow'])} of its gradient entries underflowed "
                         f"({', '.join(f'{k} {percent(v)}' for k, v in list(o['layers'].items())[:2])}, ...); test "
                         f"accuracy over the second half {_accuracy(o, 'fp16-none')} against FP32's "
                         f"{_accuracy(o, 'fp32')}, and {_accuracy(o, 'fp16-dynamic')} with dynamic scaling, which "
                         f"skipped {o['skipped_dynamic']} of {sweep['steps']} steps and left "
                         f"{percent(o['underflow_dynamic'])} of the entries underflowing."
                         for c, o in failing))
        behind = [f"{c['label']} by {100 * o['cost']['fp16-dynamic']:.1f} points" for c, o in repaired
                  if o["cost"]["fp16-dynamic"] is not None and o["cost"]["fp16-dynamic"] > 0]
        if len(repaired) == len(failing):
            parts.append(f"Dynamic scaling repaired {'it' if len(failing) == 1 else 'every one of them'} by the "
                         "suite's rule: its range overlaps FP32's"
                         + (f"; its mean stays below FP32's, within the spread ({', '.join(behind)})." if behind
                            else "."))
        else:
            parts.append(f"Dynamic scaling repaired {len(repaired)} of them "
                         f"({', '.join(c['label'] for c, _ in repaired) or 'none'}).")
    else:
        parts.append(f"In none of the {len(outcomes)} cells did FP16 without loss scaling cost accuracy beyond the "
                     "run-to-run spread.")
    failed = {id(c) for c, _ in failing}
    fine = [(c, o) for _, c, o in outcomes if o["fp32_trains"] and id(c) not in failed]
    stuck = [(c, o) for _, c, o in outcomes if not o["fp32_trains"]]
    if fine:
        worst = max(fine, key=lambda item: item[1]["underflow"])
        parts.append(f"Where it did not matter: in {_count(len(fine), 'cell')} FP32 trained and FP16 without "
                     f"scaling stayed within its spread, with up to {percent(worst[1]['underflow'])} of entries "
                     f"underflowing ({_name(worst[0])}).")
        widest = max(fine, key=lambda item: item[1]["cost"]["fp16-none"] or 0.0)
        if (widest[1]["cost"]["fp16-none"] or 0.0) >= NOTABLE_COST:
            parts.append(f"The largest difference among them, {100 * widest[1]['cost']['fp16-none']:.1f} points in "
                         f"{_name(widest[0])}, lies within the spread of its runs (FP16 without scaling "
                         f"{_accuracy(widest[1], 'fp16-none')}, FP32 {_accuracy(widest[1], 'fp32')}), with only "
                         f"{percent(widest[1]['underflow'])} of entries underflowing.")
    if stuck:
        worst = max(stuck, key=lambda item: item[1]["underflow"])
        labels = ", ".join(c["label"] for c, _ in stuck)
        parts.append(f"In {_count(len(stuck), 'cell')} ({labels}) FP32 itself stayed near chance (second-half "
                     f"mean below {TRAINS_ABOVE_CHANCE:g} x {percent(worst[1]['chance'])}): FP16 lost up to "
                     f"{percent(worst[1]['underflow'])} of its gradient entries there ({_name(worst[0])}), but with "
                     "nothing learned in FP32 either there was nothing for a loss scale to save.")
        if failing and worst[1]["underflow"] >= min(o["underflow"] for _, o in failing):
            parts.append("So an underflow share, however large, does not by itself predict an accuracy cost.")
    verdict = ("Supported" if failing and len(repaired) == len(failing) else
               "Partly supported (a failure, not always repaired)" if repaired else
               "Not supported" + (" (a failure, not repaired)" if failing else " (no measurable failure)"))
    return ("Somewhere FP16 without loss scaling fails measurably, and dynamic loss scaling repairs it",
            verdict, " ".join(parts))


def _early_layers_claim(outcomes: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> tuple[str, str, str]:
    """Underflow hits the early layers first, judged on the deepest networks of the grid."""
    deepest = max(c["depth"] for _, c, _ in outcomes)
    deep = [(c, o) for _, c, o in outcomes if c["depth"] == deepest and o["underflow"] > 0.0]
    early = [(c, o) for c, o in deep if _first_half_share(o["layers"])[0] > _first_half_share(o["layers"])[1]]
    lines = []
    for c, o in deep:
        layers = o["layers"]
        first, rest = _first_half_share(layers)
        names = list(layers)
        largest = max(names, key=lambda name: layers[name])
        ends = ", ".join(f"{name} {percent(layers[name])}" for name in (names[0], names[-1]) if name != largest)
        lines.append(f"{_name(c)}: first half of the layers {percent(first)} on average, second half "
                     f"{percent(rest)}; most in {largest} ({percent(layers[largest])}"
                     + (f"; {ends})." if ends else ")."))
    text = (f"Judged on FP16 without scaling in the {deepest}-layer cells: the claim holds in a cell when the first "
            "half of its layers (fc1 onwards, far from the loss) loses a larger mean share than the second half. "
            + " ".join(lines))
    held = {id(c) for c, _ in early}
    if early and len(early) < len(deep):
        def listed(cells: list[dict[str, Any]]) -> str:
            return ", ".join(f"{c['label']} (gain {c['gain']:g})" for c in cells)

        text += (f" It holds in {listed([c for c, _ in early])} and not in "
                 f"{listed([c for c, _ in deep if id(c) not in held])}.")
    verdict = ("Supported" if deep and len(early) == len(deep) else
               f"Partly supported (in {len(early)} of {len(deep)} deep cells)" if early else "Not supported")
    return ("In deeper networks underflow hits the early layers (those far from the loss) first", verdict, text)


def render_sweep(document: dict[str, Any]) -> list[str]:
    """The report.md lines of the sweep section (none without a sweep in ``document``)."""
    from sim.figures import SWEEP_FIGURES

    sweep = document.get("sweep")
    if not sweep or not sweep["cells"]:
        return []
    outcomes = _outcomes(sweep)
    plain = document["recipes"].get("fp16-none")
    rows = ", ".join(f"{'Adam' if o == 'adam' else 'SGD'} with {d} hidden layers" for o, d in sweep["rows"])
    gains = ", ".join(f"{g:g}" for g in sweep["gains"])
    steps, late = sweep["steps"], sweep["late_start"]
    lines = [
        "## Where loss scaling matters: a sweep",
        "",
        (f"Run {plain['label']} above, FP16 without scaling on the suite's network, loses "
         f"{percent(overall_fraction(plain['underflow_fraction'], layer_entries(plain['network'])))} of its "
         "gradient entries to underflow. " if plain else "")
        + f"To find where that changes, the sweep trains {len(outcomes)} networks, each three times: in FP32, in "
        "FP16 without loss scaling, and in FP16 with dynamic scaling. It is a grid, fixed before it was run; its "
        "conclusions are read off it by the rules below.",
        "",
        f"- Grid: {rows}, each {sweep['width']} wide, times initial gains {gains} (the He-uniform bound of every "
        "weight multiplied by the gain; 1 is He initialisation). A gain g shrinks the signal passed back through "
        "each layer by about g, so depth and gain set how close to FP16's floor the gradients start.",
        "- Why these: SGD moves a weight by lr x gradient, so gradients small enough to vanish in FP16 move "
        "nothing in FP32 either; Adam moves it by about lr whatever the gradient's size, so there they still "
        "count. A first exploration (200-step runs, seeds 0 and 1; its numbers are in `sim/report/sweep.py`) "
        "found the window for Adam at 9 layers between gain 0.25, where FP16 without scaling kept up, and 0.18, "
        "where FP32 stalled as well; the grid takes He's 1, 0.25 and 0.2.",
        f"- Each run: {steps} steps (half the suite's), batch {document['suite']['batch_size']}, seed "
        f"{document['suite']['seed']}, data `{document['suite']['data']}`; SGD with the suite's lr 0.05 and "
        "momentum 0.9, Adam with its default lr 1e-3; FP16 runs keep FP32 master weights. Dynamic scaling starts "
        f"at 2^{binary_exponent(sweep['dynamic_init_scale'])} (GradScaler's default: the sweep asks whether the "
        f"scaler repairs underflow, not how it calibrates) and doubles after {sweep['dynamic_growth_interval']} "
        "clean steps (a tenth of the run, as in the suite); no clipping.",
        f"- Accuracy as in the suite: test accuracy every {max(1, steps // 10)} steps, compared over the second "
        f"half (steps {late} to {steps}): mean (range), and a cost is real only when the ranges do not overlap "
        f"(bold). FP32 \"trains\" when its mean reaches {TRAINS_ABOVE_CHANCE:g} x chance. Underflow: FP16 without "
        "scaling, share of all gradient entries over the run, as in the suite.",
        "",
        _cell_table(outcomes),
        "",
        "Underflow by layer, FP16 without scaling, in the deepest cells (percent of each layer's entries):",
        "",
        _layer_table(outcomes),
        "",
    ]
    for index, (claim, verdict, text) in enumerate(sweep_claims(document), start=1):
        lines += [f"### S{index}. {claim}", "", f"**{verdict}.** {text}", ""]
    for letter, (name, _) in SWEEP_FIGURES.items():
        title, caption = SWEEP_FIGURE_CAPTIONS[letter]
        lines += [f"### {letter}. {title}", "", f"![{title}]({name})", "", caption, ""]
    lines += ["### The sweep's runs", "",
              "Each line repeats one run with `python -m sim train` (same weights_sha256, whose first 16 digits "
              "follow the `#`).", "", "```"]
    for _, cell, _ in outcomes:
        for run, _ in SWEEP_RUNS:
            entry = cell["runs"][run]
            lines.append(f"{entry['command']}  # {entry['label']} {entry['weights_sha256'][:16]}")
    lines += ["```", ""]
    return lines


def _cell_table(outcomes: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> str:
    rows = ["| cell | network | FP32 | FP16, no scaling | FP16, dynamic | cost: no scaling | cost: dynamic | "
            "underflow: no scaling (fc1 / last) | dynamic: underflow, skipped, final scale |",
            "|---|---|---|---|---|---|---|---|---|"]
    for _, cell, o in outcomes:
        layers = list(o["layers"].values())
        dynamic = cell["runs"]["fp16-dynamic"]
        trains = "" if o["fp32_trains"] else " (near chance)"
        rows.append(f"| {cell['label']} | {cell['title']} | {_accuracy(o, 'fp32')}{trains} | "
                    f"{_accuracy(o, 'fp16-none')} | {_accuracy(o, 'fp16-dynamic')} | {_cost(o, 'fp16-none')} | "
                    f"{_cost(o, 'fp16-dynamic')} | {percent(o['underflow'])} ({percent(layers[0])} / "
                    f"{percent(layers[-1])}) | {percent(o['underflow_dynamic'])}, {o['skipped_dynamic']}, "
                    f"2^{binary_exponent(dynamic['final_loss_scale'])} |")
    return "\n".join(rows)


def _layer_table(outcomes: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> str:
    deepest = max(c["depth"] for _, c, _ in outcomes)
    deep = [(c, o) for _, c, o in outcomes if c["depth"] == deepest]
    names = list(deep[0][1]["layers"])
    rows = ["| cell | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for cell, o in deep:
        rows.append(f"| {cell['label']} ({cell['title']}) | "
                    + " | ".join(percent(v).removesuffix("%") for v in o["layers"].values()) + " |")
    return "\n".join(rows)
