"""Finer scales and accumulation, markdown: the section's part of report.md (setup, results tables,
the GEMM sweep, claims with verdicts, figures with their captions, and the runs' commands).
"""
from __future__ import annotations

from typing import Any

from sim.config import DEFAULT_AMAX_HISTORY
from sim.report import keys
from sim.report.finer.claims import late_range
from sim.report.finer.figures import FINER_FIGURES
from sim.report.finer.recipes import KEPT_FRACTION_BITS, PROMOTE_EVERY, ROLES
from sim.report.formatting import percent, scientific

__all__ = ["FINER_FIGURE_CAPTIONS", "render_finer_markdown"]


FINER_FIGURE_CAPTIONS = {
    "finer-a": ("Per-tensor delayed scaling: amax against the scaled range", "Run F4 (FP8, delayed scaling, "
                f"amax history {DEFAULT_AMAX_HISTORY}). Per tensor, the amax of each step (black) and the largest "
                "value its scale represents, fmax / scale (blue); the band reaches down to the smallest "
                "subnormal / scale. The "
                f"scale follows the largest amax of the previous {DEFAULT_AMAX_HISTORY} uses: it lags a rising amax "
                f"(red: steps where values saturated) and keeps a falling one's headroom for {DEFAULT_AMAX_HISTORY} "
                "steps."),
    "finer-b": ("Values lost, by scaling granularity and tensor role", "Share of the nonzero values of each role "
                "(all layers, steps and uses) quantised to zero (solid) or beyond the scaled range (hatched), for "
                "one global scale (none, or the loss scale), one per tensor (delayed, current) and one per block "
                "(MXFP8: 32, NVFP4: 16)."),
    "finer-c": ("Test accuracy of every run", "Test accuracy at each evaluation: left the finer-scales runs, "
                "right the accumulation runs with their FP32-accumulated reference (F4)."),
    "finer-d": ("GEMM error against the reduction length", "E4M3 x E4M3 products with FP32 output: mean "
                "(lines) and maximum (dotted) error over the outputs against the exact sum, relative to the sum "
                f"of |products|, for FP32 accumulation, {KEPT_FRACTION_BITS + 1} kept bits, and "
                f"{KEPT_FRACTION_BITS + 1} kept bits promoted into FP32 every {PROMOTE_EVERY} products. Left: "
                "nonnegative operands (relative error); right: signed operands. Grey: the "
                "reduction lengths of our MLP. A statistic that is exactly 0 (every output exact) is not drawn."),
}


def _run_row(run: dict[str, Any]) -> str:
    late = run["late_accuracy"]
    late_text = "n/a" if late is None else f"{percent(late['mean'])} ({percent(late['min'])}-{percent(late['max'])})"
    roles = run["roles"]

    def cell(share: str) -> str:
        return " / ".join(percent(roles[r][share]) if r in roles else "-" for r in ROLES) if roles else "-"

    layers = " / ".join(percent(v) for v in run["underflow_fraction"].values())
    return (f"| {run['label']} | {run['title']} | {percent(run['final_accuracy'])} | {late_text} | "
            f"{percent(run['underflow_overall'])} ({layers}) | {cell('underflow_share')} | "
            f"{cell('saturated_share')} | {run['weights_sha256'][:16]} |")


def _noise_text(runs: dict[str, Any]) -> str:
    """How far one evaluation of the FP32 run moves, in words (the scale of noise in the claims)."""
    fp32 = runs.get(keys.FP32)
    if not fp32 or not fp32["late_accuracy"]:
        return ""
    low, high = late_range(fp32)
    return (f" Even the FP32 run's evaluations in its second half span {percent(low)}-{percent(high)}: with one "
            "seed, accuracy differences of a point or two are noise, and the quantisation counts are the sharper "
            "evidence.")


def render_finer_markdown(results: dict[str, Any]) -> str:
    """This section of report.md: setup, results tables, the GEMM sweep, claims with verdicts,
    figures (by file name, as :func:`~sim.report.finer.figures.draw_finer_figures` writes them) and the
    runs' commands.

    >>> text = render_finer_markdown({"section": {"steps": 4, "seed": 0, "data": "synthetic", "batch_size": 8,
    ...     "network": [64, 10], "evaluation_interval": 1, "late_start": 2, "constants": {}},
    ...     "runs": {}, "accumulation": {"k": []}, "claims": []})
    >>> text.splitlines()[0]
    '## Finer scales'
    """
    section, runs = results["section"], results["runs"]
    constants = section["constants"]
    network = "-".join(map(str, section["network"]))
    header = ("| run | recipe | test acc. | second half: mean (range) | gradient underflow, all (per layer) | "
              "quantised to 0: input / weight / grad_output | saturated: input / weight / grad_output | "
              "weights_sha256 |\n|---|---|---|---|---|---|---|---|")
    lines = [
        "## Finer scales",
        "",
        f"Every run below trains the MLP {network} on `{section['data']}` with SGD (lr 0.05, momentum 0.9), batch "
        f"{section['batch_size']}, {section['steps']} steps, seed {section['seed']}, the same weights and batches "
        f"as the main suite; they differ only in how the operands of the matrix products are scaled and "
        f"quantised (FP32 between the products). FP8: E4M3FN activations and weights, E5M2 gradients, one "
        f"power-of-two scale per tensor (delayed: from the largest amax of the last "
        f"{constants.get('amax_history', 16)} uses; current: from the tensor's own amax) or none; MXFP8: E4M3 "
        f"elements with an E8M0 scale per block of 32 along each product's reduction axis; NVFP4: E2M1 elements "
        f"with an E4M3 scale per block of 16 and an FP32 scale per tensor.",
        "",
        "**Gradient underflow**: gradient entries that are zero in the run but not in an FP32 backward pass of the "
        "same forward values, share of all entries and steps. **Quantised to 0 / saturated**: per tensor role, over "
        "all layers, steps and uses, the nonzero values that became zero / that lay beyond the largest value the "
        "scale represents (they saturate to it). Test accuracy is measured every "
        f"{section['evaluation_interval']} steps; the claims compare the mean over the evaluations from step "
        f"{section['late_start']} on (the second half): one final accuracy is one draw from a noisy curve."
        + _noise_text(runs),
        "",
        header,
        *(_run_row(run) for run in runs.values() if run["part"] == "finer"),
        "",
        "## Accumulation",
        "",
    ]
    sweep = results["accumulation"]
    if sweep["k"]:
        kept_bits = sweep["fraction_bits"] + 1
        lines += [
            f"An FP8 GEMM on a tensor core that keeps {kept_bits} bits ({sweep['fraction_bits']} fraction bits below "
            f"the leading one: the model of `softfloat16.linalg.TensorCore`, blocks of {sweep['tc_block']} exact "
            f"products aligned to the largest term, the running sum included, each truncated), with and without "
            f"adding the partial sum into an FP32 accumulator every {sweep['promote_every']} products (DeepSeek-V3's "
            f"remedy), against FP32 accumulation in k order. Operands: random E4M3FN values, magnitudes uniform on "
            f"[0, 2); {sweep['shape'][0]}x{sweep['shape'][1]} outputs per K. Error of an output: |computed - exact| / "
            f"sum |a_k b_k| (the relative error for nonnegative operands); the exact sum is a float64 matmul, exact "
            f"for E4M3 products. Mean (max) over the outputs:",
            "",
            "| K | FP32, nonneg. | " + f"{kept_bits} bits, nonneg. | {kept_bits} bits + promote, nonneg. | "
            f"FP32, signed | {kept_bits} bits, signed | {kept_bits} bits + promote, signed |",
            "|---|---|---|---|---|---|---|",
        ]
        for i, k in enumerate(sweep["k"]):
            cells = [f"{scientific(sweep[kind][name]['mean'][i])} ({scientific(sweep[kind][name]['max'][i])})"
                     for kind in ("nonnegative", "signed") for name in ("fp32", "kept", "promoted")]
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        f"On our MLP the reductions are short, so the training runs promote every {constants.get('mlp_promote_every')} "
        f"products (a promotion every {constants.get('promote_every')} would never trigger); both use FP8 with "
        "per-tensor delayed scaling and are compared with run F4, its FP32-accumulated twin.",
        "",
        header,
        *(_run_row(run) for key, run in runs.items() if run["part"] == "accumulation" or key == keys.FP8_DELAYED),
        "",
        "## Finer scales and accumulation: what the numbers say",
        "",
    ]
    for index, claim in enumerate(results["claims"], start=1):
        lines += [f"### {index}. {claim['claim']}", "", f"**{claim['verdict']}.** {claim['text']}", ""]
    lines += ["## Finer scales and accumulation: figures", ""]
    for key, (name, _) in FINER_FIGURES.items():
        title, caption = FINER_FIGURE_CAPTIONS[key]
        lines += [f"### {key}. {title}", "", f"![{title}]({name})", "", caption, ""]
    lines += ["## Finer scales and accumulation: the runs", ""]
    for key, run in runs.items():
        lines += [f"### Run {run['label']}: {run['title']}", "", f"Shows {run['purpose']}. Key `{key}`.", "",
                  f"    {run['command']}", "", f"weights_sha256: `{run['weights_sha256']}`", ""]
    return "\n".join(lines).rstrip() + "\n"
