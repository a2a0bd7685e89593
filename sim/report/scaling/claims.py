"""The loss-scaling suite's claims, each checked against the runs with a stated rule, and
explained with the numbers it was judged on. Every sentence that states a number reads it from
the suite document and names the run.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sim.diagnostics import Log2Histogram
from sim.report import keys
from sim.report.formatting import binary_exponent, number, percent
from sim.report.measures import late_accuracy, layer_entries, lost_updates, overall_fraction, share, windowed_underflow
from sim.report.scaling.recipes import ROUND_TRIP_OTHER_SCALE
from sim.report.scaling.runs import PROBE_EVERY

__all__ = ["claims", "layers_text"]


def claims(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(claim, verdict, explanation) for every claim whose runs are in the suite ``document``.

    >>> claims({"recipes": {}, "suite": {"steps": 4, "skip_window_early": [0, 1], "skip_window_late": [2, 4]}})
    []
    """
    return _Claims(document).all()


def _accuracy_text(run: dict[str, Any], late_start: int) -> str:
    """'96.9% at the end; 95.3-97.5% (mean 96.6%) over the evaluations from step N'."""
    late = late_accuracy(run, late_start)
    text = f"{percent(run['final_accuracy'])} at the end"
    if late is not None:
        text += f", {percent(late[1])}-{percent(late[2])} (mean {percent(late[0])}) over the second half"
    return text


def _clearly_below(run: dict[str, Any], baseline: dict[str, Any], late_start: int) -> bool:
    """Whether ``run``'s test accuracy stayed below ``baseline``'s all through the second half
    (the ranges do not overlap): the only accuracy difference this one-seed report calls real."""
    ours, theirs = late_accuracy(run, late_start), late_accuracy(baseline, late_start)
    return ours is not None and theirs is not None and ours[2] < theirs[1]


def layers_text(run: dict[str, Any], key: str = "underflow_fraction") -> str:
    """A per-layer share of a run, as prose.

    >>> layers_text({"underflow_fraction": {"fc1": 0.02, "fc2": 0.0}})
    'fc1 2%, fc2 0%'
    """
    return ", ".join(f"{name} {percent(value)}" for name, value in run[key].items())


class _Claims:
    """The seven claims, each checked against the runs with a stated rule."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.runs = document["recipes"]
        self.steps = document["suite"]["steps"]
        self.early = tuple(document["suite"]["skip_window_early"])
        self.late = tuple(document["suite"]["skip_window_late"])
        self.has_sweep = bool(document.get("sweep"))

    def all(self) -> list[tuple[str, str, str]]:
        """(claim, verdict, explanation) for every claim whose runs are present."""
        checks = [self.underflow, self.recovery, self.dynamic_skips, self.clip_order, self.master_weights,
                  self.bf16, self.static_stale]
        results = []
        for check in checks:
            try:
                results.append(check())
            except KeyError:  # a run this claim needs is not in the suite
                continue
        return results

    def _window_text(self) -> tuple[str, str]:
        return f"steps {self.early[0]}-{self.early[1] - 1}", f"steps {self.late[0]}-{self.late[1] - 1}"

    def underflow(self) -> tuple[str, str, str]:
        fp32, plain = self.runs[keys.FP32], self.runs[keys.FP16_NONE]
        fractions = list(plain["underflow_fraction"].values())
        names = list(plain["underflow_fraction"])
        overall = overall_fraction(plain["underflow_fraction"], layer_entries(plain["network"]))
        early, late = self._window_text()
        zeroes_a_share = overall >= 0.001
        first_is_largest = fractions[0] == max(fractions) and fractions[0] > 0
        text = (f"Run {plain['label']} zeroed {percent(overall)} of all gradient entries over the run "
                f"({layers_text(plain)}): "
                f"entries that are exactly 0 in its FP16 backward pass but not in the same backward pass done in FP32. "
                f"The share grows as the loss falls: {percent(windowed_underflow(plain, self.early))} in {early}, "
                f"{percent(windowed_underflow(plain, self.late))} in {late}. ")
        if first_is_largest:
            text += f"The first layer, {names[0]}, loses the largest share, as the claim says. "
        else:
            largest = names[fractions.index(max(fractions))]
            medians = [Log2Histogram.from_dict(h).quantile(0.5) for h in plain["diagnostics"]["grad_histograms"]]
            median_text = ", ".join(f"{name} 2^{m}" for name, m in zip(names, medians) if m is not None)
            early_larger = medians[0] is not None and medians[-1] is not None and medians[0] > medians[-1]
            text += (f"It is not concentrated in the early layers: {names[0]} loses the smallest share and {largest} "
                     f"the largest. The median true gradient by layer is {median_text} (figure a)"
                     + (": the early layers' gradients are the larger ones here. " if early_larger else ". ")
                     + "The claim describes deep networks whose gradients shrink layer by layer on the way back; "
                     "this four-layer ReLU network with He initialisation does not do that"
                     + ("; the sweep below tests deeper and more weakly initialised ones (claim S2). "
                        if self.has_sweep else ". "))
        if _clearly_below(plain, fp32, self.late[0]):
            text += "The lost gradients cost accuracy: "
        else:
            text += "The lost gradients did not visibly hurt accuracy (the ranges overlap): "
        text += (f"test accuracy {_accuracy_text(plain, self.late[0])}, against "
                 f"{_accuracy_text(fp32, self.late[0])} for run {fp32['label']} (FP32).")
        verdict = ("Supported" if zeroes_a_share and first_is_largest else
                   "Partly supported" if zeroes_a_share else "Not supported")
        if zeroes_a_share and not first_is_largest:
            verdict += " (a share is zeroed; not in the early layers)"
        return ("FP16 without loss scaling zeroes a share of the gradients, concentrated in the early layers",
                verdict, text)

    def recovery(self) -> tuple[str, str, str]:
        plain, static = self.runs[keys.FP16_NONE], self.runs[keys.FP16_STATIC]
        probe = static["diagnostics"]["round_trip"]
        scale = static["config"]["scale"]
        entries = layer_entries(plain["network"])
        before, after = (overall_fraction(r["underflow_fraction"], entries) for r in (plain, static))
        recovered = probe["recovered"] / probe["underflowed"] if probe["underflowed"] else 1.0
        exact = probe["round_trip_exact"] == probe["recovered"] and probe["unscale_exact"] == probe["recovered"]
        differ = probe["both_nonzero"] - probe["identical"]
        early, late = self._window_text()
        text = (f"With the loss multiplied by S = {number(scale)} (run {static['label']}), {percent(after)} of "
                "gradient "
                f"entries underflow over the run, against {percent(before)} in run {plain['label']} "
                f"({layers_text(static)}). On every {PROBE_EVERY}th step of run {static['label']} we also ran the "
                f"unscaled FP16 "
                f"backward pass on the same forward values: it zeroes {probe['underflowed']:,} entries whose true "
                f"gradient is not zero, and the scaled pass keeps {probe['recovered']:,} of them "
                f"({percent(recovered)}). "
                f"For every one of those recovered true gradients g (FP32), (g * {number(scale)}) * "
                f"2^-{binary_exponent(scale)} == g held bit for bit in {probe['round_trip_exact']:,} of "
                f"{probe['recovered']:,} cases, and the trainer's unscaling returned exactly G / S in "
                f"{probe['unscale_exact']:,}; with S = {number(ROUND_TRIP_OTHER_SCALE)}, not a power of two, the same "
                f"round trip comes back bit-identical for only {probe['round_trip_exact_1000']:,} of them "
                f"({percent(probe['round_trip_exact_1000'] / max(1, probe['recovered']))}). Of the "
                f"{probe['both_nonzero']:,} entries nonzero in both passes, "
                f"{percent(probe['identical'] / max(1, probe['both_nonzero']))} "
                f"are bit-identical after unscaling: scaling by a power of two changes nothing but the exponent. "
                f"The other {differ:,} can differ for one reason only: somewhere on their path the unscaled pass "
                f"rounded a value into FP16's subnormal range, where fewer significant bits are kept (in the "
                f"normal range, rounding commutes with a power-of-two scale). There the scaled result is the "
                f"closer one to the FP32 reference in "
                f"{percent(probe['differ_scaled_closer'] / max(1, differ))} of cases. A static 1024 is itself not "
                "enough "
                f"late in the run: underflow in run {static['label']} rises from "
                f"{percent(windowed_underflow(static, self.early))} in {early} to "
                f"{percent(windowed_underflow(static, self.late))} in {late} (see the last claim).")
        verdict = "Supported" if recovered >= 0.5 and exact and after < before else "Not supported"
        return ("A power-of-two loss scale recovers them, and scale/unscale round-trips exactly", verdict, text)

    def dynamic_skips(self) -> tuple[str, str, str]:
        run = self.runs[keys.FP16_DYNAMIC]
        config = run["config"]
        interval = config["growth_interval"]
        early_rate, late_rate = run["skip_rate_early"], run["skip_rate_late"]
        early, late = self._window_text()
        skipped = run["skipped_steps"]
        calibration = 0
        while calibration < len(skipped) and skipped[calibration] == calibration:
            calibration += 1
        text = (f"Run {run['label']} starts at 2^{binary_exponent(config['scale'])} and doubles the scale after "
                f"{interval} clean "
                f"steps. It skipped {len(skipped)} of {run['steps']} steps: {percent(early_rate)} of {early} and "
                f"{percent(late_rate)} of {late}. ")
        if calibration:
            history = run["loss_scale_history"]
            settled = history[calibration] if calibration < len(history) else run["final_loss_scale"]
            text += (f"The first {calibration} step{'s' if calibration != 1 else ''} overflowed while the scale came "
                     f"down from its start to 2^{binary_exponent(settled)}, the calibration the "
                     f"claim describes. ")
        text += (f"Later skips are the scaler probing its ceiling: each growth that overshoots costs one step, so at "
                 f"the ceiling a growth interval of N skips about one step in N + 1 ({percent(1 / (interval + 1))} for "
                 f"our N = {interval}, chosen to show several cycles in {self.steps} steps; "
                 f"{percent(1 / 2001)} for GradScaler's default 2000). The late rate is therefore set by our choice of "
                 "N, "
                 f"not by misbehaving gradients; the scale ends at 2^{binary_exponent(run['final_loss_scale'])}.")
        few_early = 0.01 <= early_rate <= 0.10
        late_small = late_rate <= 0.005
        if few_early and late_small:
            verdict = "Supported"
        elif few_early and late_rate < early_rate:
            verdict = f"Partly supported (late rate {percent(late_rate)}, the 1/(N+1) floor of our short interval)"
        else:
            verdict = "Not supported"
        return ("Dynamic scaling skips a few percent of the early steps and almost none later", verdict, text)

    def clip_order(self) -> tuple[str, str, str]:
        good, bug = self.runs[keys.FP16_DYNAMIC], self.runs[keys.FP16_DYNAMIC_CLIP_BUG]
        threshold = bug["config"]["clip"]
        norms, good_norms = ([n for n in run["per_step"]["grad_norm"] if n is not None] for run in (bug, good))

        def median(values: list[float]) -> str:
            return f"{float(np.median(values)):.3g}" if values else "n/a"

        text = (f"Both runs clip the global gradient norm to {number(threshold)}. Unscaling first "
                f"(run {good['label']}), "
                f"the clip fired on {percent(good['clip_fraction'])} of steps (median norm "
                f"{median(good_norms)}); clipping the still-scaled gradients (run {bug['label']}), it "
                f"fired on {percent(bug['clip_fraction'])} (median norm {median(norms)}); the remaining "
                f"steps "
                f"were skipped for overflow before any clipping. Each clipped step shrinks the true gradient by the "
                f"whole loss scale, so run {bug['label']} barely trains: {percent(bug['final_accuracy'])} test "
                "accuracy "
                f"against {percent(good['final_accuracy'])} for run {good['label']}.")
        verdict = "Supported" if bug["clip_fraction"] >= 0.9 and good["clip_fraction"] <= 0.05 else "Not supported"
        return ("Clipping before unscaling clips on (almost) every step", verdict, text)

    def master_weights(self) -> tuple[str, str, str]:
        master, plain = self.runs[keys.FP16_DYNAMIC], self.runs[keys.FP16_DYNAMIC_NO_MASTER]
        lost_master, lost_plain = lost_updates(master), lost_updates(plain)
        ratios = Log2Histogram.from_dict(plain["diagnostics"]["update_ratio_histogram"])
        below = ratios.count_below(-11) / ratios.total if ratios.total else 0.0
        text = (f"Run {plain['label']} is run {master['label']} with the weights, the momentum and the update kept in "
                f"FP16. {percent(below)} of its nonzero updates were smaller than 2^-11 of their weight, and "
                f"{percent(lost_plain)} left the FP16 weight bit-identical{': they vanished' if lost_plain else ''}. "
                f"With FP32 master weights "
                f"(run {master['label']}) {percent(lost_master)} of nonzero updates left the master weight unchanged; "
                f"{percent(share(master, 'updates_lost_zero_gradient', 'updates_lost'))} of those came from weights "
                f"whose gradient that step was exactly zero: momentum alone, decayed below an FP32 ulp. ")
        vanish = lost_plain >= 0.05 and lost_plain >= 2 * lost_master
        hurt = _clearly_below(plain, master, self.late[0])
        accuracies = (f"test accuracy {_accuracy_text(plain, self.late[0])}, against "
                      f"{_accuracy_text(master, self.late[0])} with master weights")
        if hurt:
            text += f"It costs accuracy: {accuracies}."
        else:
            text += (f"It shows no clear accuracy cost here, the ranges overlap: {accuracies}. "
                     f"The {percent(1 - below)} of updates above the line are the "
                     f"larger ones and still land. The update is proportional to the learning rate, so a rate k "
                     f"times smaller would shift figure e's curves left by log2 k binades and put more of the "
                     f"learning below the line; at our lr 0.05 most of it stays above.")
        verdict = ("Supported" if vanish and hurt else
                   "Partly supported (updates vanish; no clear accuracy cost)" if vanish else "Not supported")
        return ("Without FP32 master weights, small updates vanish", verdict, text)

    def bf16(self) -> tuple[str, str, str]:
        fp32, plain, bf16 = self.runs[keys.FP32], self.runs[keys.FP16_NONE], self.runs[keys.BF16_NONE]
        entries = layer_entries(bf16["network"])
        underflow = overall_fraction(bf16["underflow_fraction"], entries)
        fp16_underflow = overall_fraction(plain["underflow_fraction"], entries)
        text = (f"Run {bf16['label']} (BF16, no scaling) zeroed {percent(underflow)} of gradient entries, against "
                f"{percent(fp16_underflow)} for FP16 without scaling (run {plain['label']}), and skipped "
                f"{len(bf16['skipped_steps'])} steps: BF16's exponent range is FP32's, so the gradients never reach "
                f"its floor. ")
        gap = _clearly_below(bf16, fp32, self.late[0])
        if gap:
            text += (f"It is not free, though: run {bf16['label']}'s test accuracy was "
                     f"{_accuracy_text(bf16, self.late[0])}, against {_accuracy_text(fp32, self.late[0])} in FP32. "
                     f"With the range out of the picture, "
                     f"what separates the two runs is precision: BF16 keeps 8 significant bits in the forward and "
                     f"backward passes, and no loss scale changes that.")
        else:
            text += (f"Its test accuracy was {_accuracy_text(bf16, self.late[0])}, against "
                     f"{_accuracy_text(fp32, self.late[0])} in FP32.")
        verdict = "Supported" if underflow <= max(1e-5, fp16_underflow / 100) else "Not supported"
        if verdict == "Supported" and gap:
            verdict += " (no underflow; BF16 still lost accuracy to precision)"
        return ("BF16 needs no loss scaling", verdict, text)

    def static_stale(self) -> tuple[str, str, str]:
        large, small = self.runs[keys.FP16_STATIC_TOO_LARGE], self.runs[keys.FP16_STATIC_TOO_SMALL]
        early, late = self._window_text()
        small_early, small_late = (windowed_underflow(small, w) for w in (self.early, self.late))
        text = (f"Run {large['label']} holds the scale at 2^{binary_exponent(large['config']['scale'])}: while the "
                "early "
                f"gradients are large it overflows, and skipped {percent(large['skip_rate_early'])} of {early}; as "
                "they "
                f"shrink the same constant fits and it skipped {percent(large['skip_rate_late'])} of {late} "
                f"({len(large['skipped_steps'])} in all; it still reached {percent(large['final_accuracy'])}, later "
                "than "
                f"the others, figure c). Run {small['label']} holds 2^{binary_exponent(small['config']['scale'])}: "
                "underflow "
                f"was {percent(small_early)} of entries in {early} and {percent(small_late)} in {late}, as the "
                "gradients "
                f"shrink below what the constant lifts. Figure d draws each against the window of scales that fit "
                f"its own gradients step by step: the window climbs during training, a static constant stays put.")
        verdict = ("Supported" if large["skip_rate_early"] >= 0.1 and large["skip_rate_late"] < large["skip_rate_early"]
                   and small_late > 2 * small_early else "Not supported")
        return ("A static scale goes stale: too large overflows and skips steps, too small lets underflow return",
                verdict, text)
