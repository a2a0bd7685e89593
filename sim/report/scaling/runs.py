"""The loss-scaling suite's runs: what they measure besides the run log. The :class:`Collector`,
an observer of the training step, measures what the suite's figures and claims need (true
gradients on the log2 axis, update-to-weight ratios, lost updates, and the scale/unscale round
trip); :func:`sim.report.runner.run_recipe` attaches it to every recipe with ``collect``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import softfloat16 as sf
from sim.diagnostics import Log2Histogram
from sim.report.scaling.recipes import ROUND_TRIP_OTHER_SCALE
from sim.tensor import gradients
from sim.train import StepDetail

__all__ = ["PROBE_EVERY", "ROUND_TRIP_KEYS", "Collector"]

PROBE_EVERY = 5  # the round-trip probe costs a backward pass: every 5th step is plenty of entries

# the round-trip probe's counts, in results.json order (see Collector._probe)
ROUND_TRIP_KEYS = ("underflowed", "recovered", "round_trip_exact", "round_trip_exact_1000", "unscale_exact",
                   "both_nonzero", "identical", "differ_scaled_closer", "differ_plain_closer")


def _floats(bits: np.ndarray, fmt: sf.Format) -> np.ndarray:
    """Exact float64 values of FP32, FP16 or BF16 bit arrays (a reinterpretation, no rounding)."""
    bits = np.asarray(bits)
    with np.errstate(invalid="ignore"):  # widening a signaling NaN "raises" invalid; it stays a NaN
        if fmt is sf.fp32:
            return bits.astype(np.uint32).view(np.float32).astype(np.float64)
        if fmt is sf.fp16:
            return bits.astype(np.uint16).view(np.float16).astype(np.float64)
        if fmt is sf.bf16:  # BF16 is the top half of an FP32
            return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return np.asarray(fmt.to_float(bits), dtype=np.float64)


class Collector:
    """A :attr:`Trainer.observers` entry that measures what the report's figures and claims need.

    Per layer, the exponent histogram of the true gradient (the FP32 reference backward divided
    by the loss scale: exact in float64 for a power-of-two scale); per step, the largest true
    gradient magnitude and the log2 bins of the 1% quantile and the median; the histogram of
    ``|update| / |weight|``; the nonzero updates that left the stored weight bit-identical; and
    with ``probe_round_trip`` the scale/unscale round trip (:meth:`_probe`, on every
    ``PROBE_EVERY``-th step: it costs a backward pass).

    >>> from sim.train import TrainConfig, Trainer
    >>> trainer = Trainer(TrainConfig(steps=2, batch_size=8, data="synthetic", hidden=(8,)))
    >>> collector = Collector(len(trainer.model.layer_names))
    >>> trainer.observers.append(collector)
    >>> _ = trainer.run()
    >>> result = collector.result()
    >>> len(result["grad_max"]), result["round_trip"], result["updates_nonzero"] > 0
    (2, None, True)
    """

    def __init__(self, layers: int, probe_round_trip: bool = False) -> None:
        self.grad_histograms = [Log2Histogram() for _ in range(layers)]
        self.grad_max: list[float | None] = []
        self.grad_log2_p01: list[int | None] = []
        self.grad_log2_median: list[int | None] = []
        self.update_ratios = Log2Histogram()
        self.updates_nonzero = 0
        self.updates_lost = 0
        self.updates_lost_zero_gradient = 0
        self.round_trip: dict[str, int] | None = dict.fromkeys(ROUND_TRIP_KEYS, 0) if probe_round_trip else None

    def __call__(self, detail: StepDetail) -> None:
        scale = float(detail.loss_scale)
        step = Log2Histogram()
        largest = None
        for layer, histogram in enumerate(self.grad_histograms):
            pair = detail.grads_reference[2 * layer:2 * layer + 2]
            true = np.concatenate([_floats(g, sf.fp32).ravel() for g in pair]) / scale
            histogram.add(true)
            step.add(true)
            finite = np.abs(true[np.isfinite(true)])
            if finite.size:
                largest = max(largest or 0.0, float(finite.max()))
        self.grad_max.append(largest)
        self.grad_log2_p01.append(step.quantile(0.01))
        self.grad_log2_median.append(step.quantile(0.5))
        if detail.updates is not None and detail.params_after is not None:
            self._count_updates(detail)
        if self.round_trip is not None and detail.record.step % PROBE_EVERY == 0:
            self._probe(detail)

    def _count_updates(self, detail: StepDetail) -> None:
        fmt = detail.param_format
        for update, before, after, gradient in zip(detail.updates, detail.params_before, detail.params_after,
                                                   detail.grads_reference):
            u, w = np.abs(_floats(update, fmt)).ravel(), np.abs(_floats(before, fmt)).ravel()
            moving = (u > 0.0) & np.isfinite(u)
            self.updates_nonzero += int(np.count_nonzero(moving))
            lost = moving & (np.asarray(after).ravel() == np.asarray(before).ravel())
            self.updates_lost += int(np.count_nonzero(lost))
            # a nonzero update with a zero gradient is momentum alone, decaying
            zero_gradient = _floats(gradient, sf.fp32).ravel() == 0.0
            self.updates_lost_zero_gradient += int(np.count_nonzero(lost & zero_gradient))
            ratio = moving & (w > 0.0) & np.isfinite(w)
            self.update_ratios.add(u[ratio] / w[ratio])

    def _probe(self, detail: StepDetail) -> None:
        """Compare this step's scaled backward with the unscaled one on the same forward values.

        ``underflowed``: entries the unscaled compute-format backward zeroes though the FP32
        reference is not zero; ``recovered``: those the scaled backward keeps. For the recovered
        true gradients g (FP32), ``(g * S) * (1/S) == g`` bitwise is checked for the run's scale and
        for 1000; and the trainer's own unscale of the scaled gradient is checked to be exactly
        ``G / S``. Entries nonzero in both backward passes are ``identical`` when the unscaled
        scaled gradient equals the unscaled one bit for bit; otherwise the one nearer the FP32
        reference is counted.
        """
        f32, compute, count = sf.fp32, detail.compute, self.round_trip
        assert count is not None
        scale = float(detail.loss_scale)
        inverse = f32.from_float(float(np.float32(1.0 / scale)))  # as LossScaler.inv_scale
        scale_bits = f32.from_float(scale)
        other, other_inverse = f32.from_float(ROUND_TRIP_OTHER_SCALE), f32.from_float(1.0 / ROUND_TRIP_OTHER_SCALE)
        unscaled_run = gradients(detail.loss, detail.leaves)
        for scaled, plain, reference in zip(detail.grads_low, unscaled_run, detail.grads_reference):
            scaled32 = np.asarray(sf.convert(scaled, src=compute, dst=f32)).ravel()
            plain32 = np.asarray(sf.convert(plain, src=compute, dst=f32)).ravel()
            true = np.asarray(f32.mul(reference.ravel(), inverse))  # the true gradient, in FP32
            true_values = _floats(reference.ravel(), f32) / scale
            scaled_zero, plain_zero = _floats(scaled32, f32) == 0.0, _floats(plain32, f32) == 0.0
            finite = np.isfinite(_floats(scaled32, f32))
            underflowed = plain_zero & (true_values != 0.0)
            recovered = underflowed & ~scaled_zero & finite
            count["underflowed"] += int(np.count_nonzero(underflowed))
            count["recovered"] += int(np.count_nonzero(recovered))
            g = true[recovered]
            count["round_trip_exact"] += int(np.count_nonzero(f32.mul(f32.mul(g, scale_bits), inverse) == g))
            count["round_trip_exact_1000"] += int(np.count_nonzero(f32.mul(f32.mul(g, other), other_inverse) == g))
            unscaled = np.asarray(f32.mul(scaled32, inverse))
            exact = _floats(unscaled[recovered], f32) == _floats(scaled32[recovered], f32) / scale
            count["unscale_exact"] += int(np.count_nonzero(exact))
            both = ~scaled_zero & ~plain_zero & finite & np.isfinite(_floats(plain32, f32))
            identical = both & (unscaled == plain32)
            count["both_nonzero"] += int(np.count_nonzero(both))
            count["identical"] += int(np.count_nonzero(identical))
            differ = both & ~identical
            error_scaled = np.abs(_floats(unscaled[differ], f32) - true_values[differ])
            error_plain = np.abs(_floats(plain32[differ], f32) - true_values[differ])
            count["differ_scaled_closer"] += int(np.count_nonzero(error_scaled < error_plain))
            count["differ_plain_closer"] += int(np.count_nonzero(error_scaled > error_plain))

    def result(self) -> dict[str, Any]:
        """The measurements, as results.json stores them under ``diagnostics``."""
        return {
            "grad_histograms": [h.to_dict() for h in self.grad_histograms],
            "grad_max": self.grad_max,
            "grad_log2_p01": self.grad_log2_p01,
            "grad_log2_median": self.grad_log2_median,
            "update_ratio_histogram": self.update_ratios.to_dict(),
            "updates_nonzero": self.updates_nonzero,
            "updates_lost": self.updates_lost,
            "updates_lost_zero_gradient": self.updates_lost_zero_gradient,
            "round_trip": self.round_trip,
        }
