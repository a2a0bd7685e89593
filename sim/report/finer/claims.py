"""Finer scales and accumulation, claims: each verdict a function of the measured numbers with
its thresholds stated here (numbers in, a verdict out), then the claims that apply them to the
section's runs and GEMM sweep, with the numbers they were judged on.

>>> underflow_verdict(global_underflow=0.05, per_tensor_underflow=0.001)
'Supported'
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sim.report import keys
from sim.report.finer.recipes import GLOBAL_LOSS_SCALE, KEPT_FRACTION_BITS, MLP_PROMOTE_EVERY, PROMOTE_EVERY
from sim.report.formatting import binary_exponent, number, percent, scientific

__all__ = [
    "ACCUMULATION_GROWS", "ACCUMULATION_MATTERS", "ACCURACY_TOLERANCE", "FEWER_BY", "PROMOTION_BOUNDED",
    "PROMOTION_GAIN", "UNDERFLOW_MATTERS", "accumulation_verdict", "accuracy_verdict", "combine_verdicts",
    "finer_claims", "granularity_verdict", "late_range", "rounding_verdict", "underflow_verdict",
]

DEEPSEEK_K, DEEPSEEK_ERROR = 4096, 0.02  # DeepSeek-V3: "a maximum relative error of nearly 2%" at K = 4096

# --- thresholds of the verdicts ------------------------------------------------------------------
ACCURACY_TOLERANCE = 0.01  # 1 point of test accuracy (3.6 of digits' 360 test examples), second-half mean
UNDERFLOW_MATTERS = 0.01  # a recipe "loses gradients" when >= 1% of all gradient entries underflow
FEWER_BY = 2.0  # "recovers" / "finer loses fewer": at least this factor fewer
ACCUMULATION_GROWS = 10.0  # the 14-bit error at the largest K is >= 10x that at the smallest K
ACCUMULATION_MATTERS = 1e-3  # ... and reaches 0.1% (relative to the sum of |products|)
PROMOTION_BOUNDED = 2.0  # promoted error at the largest K <= 2x its error at K = PROMOTE_EVERY
PROMOTION_GAIN = 10.0  # ... and <= 1/10 of the unpromoted error there


# --- verdicts: numbers in, a verdict out -----------------------------------------------------------------

SUPPORTED, PARTLY, NOT_SUPPORTED = "Supported", "Partly supported", "Not supported"


def underflow_verdict(global_underflow: float, per_tensor_underflow: float) -> str:
    """"FP8 without per-tensor scaling loses gradients to underflow": Supported when at least
    ``UNDERFLOW_MATTERS`` of the gradient entries underflow without scaling and per-tensor
    scaling cuts that by ``FEWER_BY``; Partly when they underflow but per-tensor scaling does
    not help that much; else Not supported.

    >>> [underflow_verdict(*pair) for pair in ((0.05, 0.001), (0.05, 0.04), (0.001, 0.0))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    if global_underflow < UNDERFLOW_MATTERS:
        return NOT_SUPPORTED
    return SUPPORTED if per_tensor_underflow * FEWER_BY <= global_underflow else PARTLY


def accuracy_verdict(gap: float, run_high: float, reference_low: float) -> str:
    """"A run matches a reference's accuracy", from the run's second-half mean accuracy minus the
    reference's (``gap``), the run's highest and the reference's lowest second-half accuracy:
    Supported when the gap is within ``ACCURACY_TOLERANCE`` (or the run does better); Partly when
    it is larger but the second-half ranges overlap (one seed cannot tell such a difference from
    noise); Not supported when the run stays below the reference all through the second half
    (the main suite's rule for a real difference).

    >>> [accuracy_verdict(*n) for n in ((-0.005, 0.95, 0.9), (-0.02, 0.95, 0.9), (-0.05, 0.9, 0.95))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    if gap >= -ACCURACY_TOLERANCE:
        return SUPPORTED
    return PARTLY if run_high >= reference_low else NOT_SUPPORTED


def combine_verdicts(verdicts: Sequence[str]) -> str:
    """One verdict for a claim about several runs: Supported (or Not supported) when every run's
    is, else Partly supported.

    >>> combine_verdicts(["Supported", "Supported"]), combine_verdicts(["Supported", "Not supported"])
    ('Supported', 'Partly supported')
    """
    verdicts = list(verdicts)
    for verdict in (SUPPORTED, NOT_SUPPORTED):
        if verdicts and all(v == verdict for v in verdicts):
            return verdict
    return PARTLY


def rounding_verdict(sr_gap: float, rne_gap: float) -> str:
    """"NVFP4 with SR gradients is closer to FP32 than with RNE", from each one's gap to FP32
    (second-half mean accuracy minus FP32's): Supported when SR's gap is smaller by more than
    ``ACCURACY_TOLERANCE``; Partly when smaller by less (within one seed's noise); else Not
    supported.

    >>> [rounding_verdict(*gaps) for gaps in ((-0.01, -0.05), (-0.01, -0.015), (-0.03, -0.01))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    sr, rne = abs(sr_gap), abs(rne_gap)
    if sr >= rne:
        return NOT_SUPPORTED
    return SUPPORTED if rne - sr > ACCURACY_TOLERANCE else PARTLY


def granularity_verdict(lost: Sequence[float]) -> str:
    """"Finer scales lose fewer values", from the shares lost (underflow + saturation) of the
    granularities from coarsest to finest: Supported when each finer one loses at least
    ``FEWER_BY`` times fewer; Partly when the finest loses ``FEWER_BY`` times fewer than the
    coarsest but not at every step; else Not supported.

    >>> [granularity_verdict(s) for s in ((0.2, 0.05, 0.01), (0.2, 0.01, 0.02), (0.05, 0.06, 0.04))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    if all(finer * FEWER_BY <= coarser for coarser, finer in zip(lost, lost[1:])):
        return SUPPORTED
    return PARTLY if lost[-1] * FEWER_BY <= lost[0] else NOT_SUPPORTED


def accumulation_verdict(kept: Sequence[float], promoted: Sequence[float], k_values: Sequence[int]) -> str:
    """"14-bit accumulation loses accuracy as K grows, promotion every 128 fixes it", from the
    mean errors per K: the kept-bits error grows (``ACCUMULATION_GROWS`` times from the
    smallest K to the largest, and reaches ``ACCUMULATION_MATTERS``); promotion bounds it (at
    the largest K within ``PROMOTION_BOUNDED`` times its error at K = ``PROMOTE_EVERY``, and
    ``PROMOTION_GAIN`` times below the unpromoted one). Supported when both hold, Partly when
    the error grows and promotion helps without meeting both bounds, else Not supported.

    >>> k = (128, 4096)
    >>> [accumulation_verdict(*c, k) for c in (((1e-4, 0.05), (1e-4, 1.2e-4)), ((1e-4, 0.05), (1e-4, 0.01)),
    ...                                         ((1e-4, 2e-4), (1e-4, 1e-4)))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    grows = kept[-1] >= ACCUMULATION_GROWS * kept[0] and kept[-1] >= ACCUMULATION_MATTERS
    at_interval = promoted[k_values.index(PROMOTE_EVERY)] if PROMOTE_EVERY in k_values else promoted[0]
    bounded = promoted[-1] <= PROMOTION_BOUNDED * at_interval
    better = promoted[-1] * PROMOTION_GAIN <= kept[-1]
    if grows and bounded and better:
        return SUPPORTED
    return PARTLY if grows and promoted[-1] < kept[-1] else NOT_SUPPORTED


# --- claims: the verdicts with their numbers ---------------------------------------------------------

def _points(gap: float) -> str:
    return f"{100 * gap:+.1f} points"


def _accuracy(run: dict[str, Any]) -> str:
    late = run["late_accuracy"]
    if late is None:
        return f"{percent(run['final_accuracy'])} at the end"
    return (f"{percent(late['mean'])} (second half, {percent(late['min'])}-{percent(late['max'])}; "
            f"{percent(run['final_accuracy'])} at the end)")


def _gap(run: dict[str, Any], reference: dict[str, Any]) -> float:
    """Second-half mean accuracy of ``run`` minus ``reference``'s (final accuracy without curves)."""
    def mean(r: dict[str, Any]) -> float:
        return r["late_accuracy"]["mean"] if r["late_accuracy"] else r["final_accuracy"]
    return mean(run) - mean(reference)


def late_range(run: dict[str, Any]) -> tuple[float, float]:
    """The lowest and highest test accuracy of ``run``'s second half (its final accuracy without curves)."""
    late = run["late_accuracy"]
    return (late["min"], late["max"]) if late else (run["final_accuracy"], run["final_accuracy"])


def _judge(run: dict[str, Any], reference: dict[str, Any]) -> str:
    """:func:`accuracy_verdict` of ``run`` against ``reference``."""
    return accuracy_verdict(_gap(run, reference), late_range(run)[1], late_range(reference)[0])


def _hurt_text(run: dict[str, Any], reference: dict[str, Any]) -> str:
    """Whether ``run``'s accuracy is clearly below ``reference``'s, as a clause."""
    if late_range(run)[1] < late_range(reference)[0]:
        return f"run {run['label']} stays below run {reference['label']} all through the second half"
    return f"the second-half ranges of runs {run['label']} and {reference['label']} overlap"


def _layers(run: dict[str, Any]) -> str:
    return ", ".join(f"{name} {percent(value)}" for name, value in run["underflow_fraction"].items())


def _roles(run: dict[str, Any], share: str) -> str:
    return ", ".join(f"{role} {percent(counts[share])}" for role, counts in run["roles"].items())


_ACCURACY_RULE = (f"Rule: Supported within {100 * ACCURACY_TOLERANCE:.1f} points of {{reference}} second-half mean "
                  "(or above); Partly when further below but the second-half ranges overlap (one seed cannot tell "
                  "that from noise); Not supported when the run stays below all through the second half.")


def finer_claims(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(claim, verdict, explanation) for each claim whose runs are in ``document`` (the dict
    :func:`sim.report.finer.runs.finer_results` builds, before its claims).

    >>> finer_claims({"runs": {}, "accumulation": {"k": []}, "section": {}})
    []
    """
    out = []
    for check in (_claim_underflow, _claim_granularity, _claim_per_tensor, _claim_mxfp8, _claim_nvfp4,
                  _claim_accumulation, _claim_short_reductions):
        try:
            out.append(check(document))
        except (KeyError, ValueError, IndexError):  # a run or a measurement this claim needs is missing
            continue
    return out


def _claim_underflow(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    plain, scaled, delayed = runs[keys.FP8_GLOBAL], runs[keys.FP8_GLOBAL_LOSS_SCALE], runs[keys.FP8_DELAYED]
    verdict = underflow_verdict(plain["underflow_overall"], delayed["underflow_overall"])
    grad = plain["roles"]["grad_output"]
    text = (f"Without any scaling (run {plain['label']}), {percent(plain['underflow_overall'])} of all gradient "
            f"entries are zero though the FP32 backward pass on the same forward values gives a nonzero value "
            f"({_layers(plain)}); {percent(grad['underflow_share'])} of the nonzero output gradients quantised to "
            f"E5M2 became zero. With one scale per tensor (run {delayed['label']}, delayed) "
            f"{percent(delayed['underflow_overall'])} underflow ({_layers(delayed)}). One global scale, the loss "
            f"scale {number(GLOBAL_LOSS_SCALE)} (run {scaled['label']}), brings it to "
            f"{percent(scaled['underflow_overall'])} ({_layers(scaled)}); it lifts every gradient by the same "
            f"{binary_exponent(GLOBAL_LOSS_SCALE)} binades and does nothing for the forward operands. Test accuracy: "
            f"{_accuracy(plain)} without scaling, {_accuracy(scaled)} with the loss scale, {_accuracy(delayed)} "
            f"per tensor, against {_accuracy(runs['fp32'])} in FP32: {_hurt_text(plain, runs['fp32'])}. "
            f"Rule: at least {percent(UNDERFLOW_MATTERS)} of entries underflow, and per-tensor scaling "
            f"divides that by {number(FEWER_BY)} or more.")
    return "FP8 without per-tensor scaling loses gradients to underflow", verdict, text


_GRANULARITY_RUNS = (keys.FP8_GLOBAL, keys.FP8_DELAYED, keys.MXFP8)


def _claim_granularity(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    chosen = [runs[key] for key in _GRANULARITY_RUNS]
    lost = [run["lost_share"] for run in chosen]
    verdict = granularity_verdict(lost)
    parts = "; ".join(f"{run['granularity']} (run {run['label']}, {run['title']}): {percent(run['lost_share'])} "
                      f"(underflow {_roles(run, 'underflow_share')}; saturated {_roles(run, 'saturated_share')})"
                      for run in chosen)
    others = [runs[k] for k in (keys.FP8_GLOBAL_LOSS_SCALE, keys.FP8_CURRENT, keys.NVFP4_RNE) if k in runs]
    other_text = ", ".join(f"run {r['label']} {percent(r['lost_share'])}" for r in others)
    text = (f"Share of the nonzero values of all quantised tensors (every layer, step and use) that became zero "
            f"or were beyond the scaled range: {parts}. For comparison: {other_text} (figure finer-b). ")
    block = [runs[k] for k in (keys.MXFP8, keys.NVFP4_RNE) if k in runs]
    if block:
        text += ("Per block, what is lost comes less from the granularity than from the recipes' other choices: "
                 + "; ".join(_block_losses(run) for run in block) + ". ")
    text += f"Rule: each finer granularity loses at least {number(FEWER_BY)} times fewer."
    return "Finer scales lose fewer values: global, then per tensor, then per block", verdict, text


def _block_losses(run: dict[str, Any]) -> str:
    """Why a block-scaled run loses values, with its measured shares."""
    roles = run["roles"]
    saturated = _roles(run, "saturated_share")
    if run["config"]["precision"] == "mxfp8":
        return (f"MXFP8 (run {run['label']}) saturates {saturated}: the OCP scale 2^(floor(log2 amax) - 8) maps a "
                "block's amax into [256, 512), and E4M3 ends at 448; and its gradients are E4M3, 17.8 binades from "
                "2^-9 to 448, where per-tensor FP8 gives them E5M2's 31.8, so "
                f"{percent(roles['grad_output']['underflow_share'])} of them become zero")
    return (f"NVFP4 (run {run['label']}) saturates {saturated}: its block scale is amax / 6 rounded to nearest in "
            "E4M3, and where that rounds down the block's largest values lie beyond 6 times it; and E2M1's nonzero "
            f"values span only 3.6 binades (0.5 to 6), so {_roles(run, 'underflow_share')} become zero")


def _claim_per_tensor(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    fp32 = runs[keys.FP32]
    modes = [runs[keys.FP8_DELAYED], runs[keys.FP8_CURRENT]]
    gaps = [_gap(run, fp32) for run in modes]
    text = (f"Second-half test accuracy against FP32 (run {fp32['label']}, {_accuracy(fp32)}): "
            + "; ".join(f"run {run['label']} ({run['title']}) {_accuracy(run)}, {_points(gap)}"
                        for run, gap in zip(modes, gaps))
            + ". Saturation under delayed scaling, where a tensor's amax outgrows its history: "
            + _roles(modes[0], "saturated_share")
            + f"; under current scaling: {_roles(modes[1], 'saturated_share')}. "
            + _ACCURACY_RULE.format(reference="FP32's"))
    verdict = combine_verdicts([_judge(run, fp32) for run in modes])
    return "Per-tensor scaling recovers FP32 accuracy", verdict, text


def _claim_mxfp8(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    mx, fp8 = runs[keys.MXFP8], runs[keys.FP8_DELAYED]
    gap = _gap(mx, fp8)
    text = (f"Run {mx['label']} (MXFP8) {_accuracy(mx)}, against {_accuracy(fp8)} for run {fp8['label']} (FP8 "
            f"per-tensor delayed): {_points(gap)}. Gradient underflow: {percent(mx['underflow_overall'])} against "
            f"{percent(fp8['underflow_overall'])}; values lost in quantisation {percent(mx['lost_share'])} against "
            f"{percent(fp8['lost_share'])}. " + _ACCURACY_RULE.format(reference=f"run {fp8['label']}'s"))
    return "MXFP8 matches per-tensor FP8", _judge(mx, fp8), text


def _claim_nvfp4(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    fp32, rne, sr = runs[keys.FP32], runs[keys.NVFP4_RNE], runs[keys.NVFP4_SR]
    rne_gap, sr_gap = _gap(rne, fp32), _gap(sr, fp32)
    text = (f"Against FP32's {_accuracy(fp32)}: RNE gradients (run {rne['label']}) {_accuracy(rne)}, "
            f"{_points(rne_gap)}; SR gradients (run {sr['label']}) {_accuracy(sr)}, {_points(sr_gap)}. "
            f"Output gradients quantised to zero: {percent(rne['roles']['grad_output']['underflow_share'])} with RNE, "
            f"{percent(sr['roles']['grad_output']['underflow_share'])} with SR (SR keeps a small value with a "
            f"probability proportional to it, so it is unbiased where RNE flushes); gradient entries underflowed "
            f"{percent(rne['underflow_overall'])} and {percent(sr['underflow_overall'])}. Rule: SR's gap to FP32 "
            f"smaller than RNE's by more than {_points(ACCURACY_TOLERANCE)[1:]} (one seed: a smaller difference is "
            "noise).")
    return "NVFP4 with SR gradients is closer to FP32 than with RNE", rounding_verdict(sr_gap, rne_gap), text


def _claim_accumulation(document: dict[str, Any]) -> tuple[str, str, str]:
    sweep = document["accumulation"]
    k_values = sweep["k"]
    curves = sweep["nonnegative"]
    kept, promoted, fp32 = (curves[name]["mean"] for name in ("kept", "promoted", "fp32"))
    verdict = accumulation_verdict(kept, promoted, k_values)
    signed = sweep["signed"]
    calibration = sweep["calibration"]
    bits_text = ", ".join(f"{b + 1} bits {scientific(e)}" for b, e in zip(calibration["fraction_bits"],
                                                                   calibration["mean"]))
    text = (f"E4M3 x E4M3 products, {sweep['shape'][0]}x{sweep['shape'][1]} outputs per K, nonnegative operands, "
            f"mean relative error against the exact sum: with {sweep['fraction_bits'] + 1} kept bits "
            f"(blocks of {sweep['tc_block']}), {scientific(kept[0])} at K = {k_values[0]} and "
            f"{scientific(kept[-1])} at K = "
            f"{k_values[-1]} (max {scientific(curves['kept']['max'][-1])}); promoted into FP32 every "
            f"{sweep['promote_every']} products, {scientific(promoted[-1])} at K = {k_values[-1]}; FP32 accumulation "
            f"{scientific(fp32[-1])}. The adder truncates each term to the quantum of the running sum, so each "
            "product loses a share of itself that grows with the sum: the error grows about linearly in K until "
            f"promotion restarts the sum. With signed operands the sums cancel and the errors are smaller "
            f"(relative to the sum of |products|: {scientific(signed['kept']['mean'][-1])} kept, "
            f"{scientific(signed['promoted']['mean'][-1])} promoted at K = {k_values[-1]}). At K = {calibration['k']} "
            f"the mean error by kept bits is {bits_text}")
    if calibration["k"] == DEEPSEEK_K:
        enough = [b + 1 for b, e in zip(calibration["fraction_bits"], calibration["max"]) if e <= DEEPSEEK_ERROR]
        text += (f" (maximum {', '.join(scientific(e) for e in calibration['max'])}): in this model DeepSeek-V3's "
                 f"\"maximum relative error of nearly {percent(DEEPSEEK_ERROR)}\" at K = {DEEPSEEK_K} takes "
                 + (f"{enough[0]} kept bits" if enough else "more kept bits than measured")
                 + " rather than their \"about 14\": the model truncates every term without guard bits, which "
                 "the hardware may not")
    text += (f". Rule: the kept-bits error grows {number(ACCUMULATION_GROWS)}x from the smallest to the largest K "
             f"and reaches {scientific(ACCUMULATION_MATTERS)}; promoted, it stays within "
             f"{number(PROMOTION_BOUNDED)}x of "
             f"its value at K = {PROMOTE_EVERY} and {number(PROMOTION_GAIN)}x below the unpromoted error.")
    return (f"{KEPT_FRACTION_BITS + 1}-bit accumulation loses accuracy as K grows; promotion every {PROMOTE_EVERY} "
            "fixes it", verdict, text)


def _claim_short_reductions(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    reference, kept, promoted = runs[keys.FP8_DELAYED], runs[keys.FP8_TC14], runs[keys.FP8_TC14_PROMOTE]
    gap = _gap(kept, reference)
    sweep = document["accumulation"]
    mlp_k = document["section"]["reduction_lengths"]
    errors = {k: e for k, e in zip(sweep["k"], sweep["signed"]["kept"]["mean"]) if k in mlp_k}
    error_text = ", ".join(f"K = {k}: {scientific(e)}" for k, e in errors.items())
    text = (f"The products of our MLP reduce over {', '.join(map(str, mlp_k))} terms (the layers' inputs in the "
            "forward pass, their outputs for input gradients, the batch for weight gradients), where the sweep's "
            f"signed-operand error of {KEPT_FRACTION_BITS + 1} kept bits is "
            f"{error_text or 'not measured'}. Run {kept['label']} ({kept['title']}) {_accuracy(kept)}, against "
            f"{_accuracy(reference)} for run {reference['label']} (FP32 accumulation), {_points(gap)}; promoted "
            f"every {MLP_PROMOTE_EVERY} products (run {promoted['label']}) {_accuracy(promoted)}, "
            f"{_points(_gap(promoted, reference))}. " + _ACCURACY_RULE.format(reference=f"run {reference['label']}'s"))
    return (f"On our MLP's short reductions, {KEPT_FRACTION_BITS + 1}-bit accumulation does not hurt training",
            _judge(kept, reference), text)
