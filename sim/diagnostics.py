"""What half precision does to one training step, counted per layer, and the run's record.

- underflow: gradient entries that are exactly zero in the low-precision backward pass but
  nonzero when the same backward pass runs in FP32 on the same forward values;
- swallowed updates: nonzero updates smaller than half an ulp of the weight in the compute
  format (``w - u`` would round back to ``w`` there);
- subnormal and non-finite gradient entries (in the low-precision gradients);
- :class:`Log2Histogram`: magnitudes binned by ``floor(log2|x|)``, read exactly from the binary
  exponent, for the report's pictures of where gradients and update ratios fall.

The measurements are observers of the training step: :meth:`sim.train.Trainer.train_step` runs
the recipe and hands a :class:`StepDetail` to its :class:`RunLog` (which measures the step into a
:class:`StepRecord`) and then to ``Trainer.observers`` (the report's collector, say).

Counting reads bit fields, or exact float64 values of bit patterns (``to_float``), so it adds no
rounding of its own and never feeds back into training.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import softfloat16 as sf
from sim.tensor import Tensor, gradients

__all__ = [
    "Log2Histogram",
    "RunLog",
    "StepDetail",
    "StepRecord",
    "accuracy",
    "count_nonfinite",
    "count_subnormal",
    "count_swallowed",
    "count_underflow",
    "half_ulp",
    "log2_floor",
]


def count_underflow(low: np.ndarray, low_fmt: sf.Format, reference: np.ndarray, reference_fmt: sf.Format) -> int:
    """Entries that are +-0 in ``low`` but not +-0 in ``reference`` (same shape).

    >>> import numpy as np, softfloat16 as sf
    >>> low = sf.fp16.from_float(np.array([0.0, 0.0, 1.0]))
    >>> count_underflow(low, sf.fp16, sf.fp32.from_float(np.array([1e-9, 0.0, 1.0])), sf.fp32)
    1
    """
    return int(np.count_nonzero(low_fmt.is_zero(low) & ~reference_fmt.is_zero(reference)))


def count_subnormal(bits: np.ndarray, fmt: sf.Format) -> int:
    """Subnormal entries (exponent field 0, fraction nonzero).

    >>> import softfloat16 as sf
    >>> count_subnormal(sf.fp16.from_float([2.0**-20, 2.0**-14, 0.0]), sf.fp16)
    1
    """
    return int(np.count_nonzero(fmt.is_subnormal(bits)))


def count_nonfinite(bits: np.ndarray, fmt: sf.Format) -> int:
    """Infinite or NaN entries.

    >>> import numpy as np, softfloat16 as sf
    >>> count_nonfinite(sf.fp16.from_float(np.array([np.inf, np.nan, 65504.0])), sf.fp16)
    2
    """
    return int(np.count_nonzero(~fmt.is_finite(bits)))


def half_ulp(bits: np.ndarray, fmt: sf.Format) -> np.ndarray:
    """Half the spacing of ``fmt`` at each (finite) value: ``2**(max(E, 1) - bias - p)`` with E the
    exponent field and p the fraction bits, as float64 (exact).

    >>> import softfloat16 as sf
    >>> half_ulp(sf.fp16.from_float([1.0, 1.5, 0.0]), sf.fp16).tolist()
    [0.00048828125, 0.00048828125, 2.9802322387695312e-08]
    """
    exponent = fmt.fields(bits)[1].astype(np.int64)  # signed: the subtraction below must not wrap
    return np.ldexp(1.0, np.maximum(exponent, 1) - fmt.bias - fmt.fraction_bits - 1)


def count_swallowed(
    updates: np.ndarray, weights: np.ndarray, fmt: sf.Format, compute: sf.Format
) -> int:
    """Nonzero finite updates (bits of ``fmt``) with ``|u| <`` half an ulp of the weight (bits of
    ``fmt``) once the weight is rounded to ``compute``.

    >>> import numpy as np, softfloat16 as sf
    >>> u = sf.fp32.from_float(np.array([1e-4, 1e-3, 0.0]))
    >>> count_swallowed(u, sf.fp32.from_float(np.ones(3)), sf.fp32, sf.fp16)  # fp16 half-ulp at 1: 4.9e-4
    1
    """
    values = np.abs(np.asarray(fmt.to_float(updates), dtype=np.float64))
    weights_c = weights if compute is fmt else np.asarray(sf.convert(weights, src=fmt, dst=compute))
    finite_weight = compute.is_finite(weights_c)
    swallowed = (values > 0) & np.isfinite(values) & finite_weight & (values < half_ulp(weights_c, compute))
    return int(np.count_nonzero(swallowed))


@dataclasses.dataclass
class StepRecord:
    """Everything recorded for one training step (losses and norms as floats: exact FP32 values)."""

    step: int
    loss: float
    accuracy: float
    scale: float
    skipped: bool
    grad_norm: float  # global norm before clipping (of scaled gradients with --clip-before-unscale)
    grad_norm_clipped: float  # after clipping (== grad_norm when clipping did not fire)
    clipped: bool
    underflow: list[int]  # per layer
    swallowed: list[int]  # per layer (zeros on a skipped step)
    subnormal_grads: int
    nonfinite_grads: int
    # Quantised recipes (fp8, mxfp8, nvfp4), per tensor of RunLog.tensor_names (empty otherwise):
    # amax and scale (None where a recipe has no per-tensor scale), and over the step's uses of
    # the tensor the nonzero values, those quantised to zero, and those beyond the scaled range.
    tensor_amax: list[float | None] = dataclasses.field(default_factory=list)
    tensor_scale: list[float | None] = dataclasses.field(default_factory=list)
    quantized_nonzero: list[int] = dataclasses.field(default_factory=list)
    quantized_underflow: list[int] = dataclasses.field(default_factory=list)
    quantized_saturated: list[int] = dataclasses.field(default_factory=list)


def accuracy(logits: Tensor, labels: np.ndarray) -> float:
    """Share of rows whose largest logit (first on ties) is the label; a NaN row counts wrong.

    >>> logits = Tensor.from_float(np.array([[0.0, 1.0], [2.0, 1.0], [np.nan, 0.0]]), sf.fp32)
    >>> accuracy(logits, np.array([1, 1, 1]))
    0.3333333333333333
    """
    values = logits.value()
    if values.shape[0] == 0:
        return 0.0
    correct = (np.argmax(values, axis=1) == labels) & ~np.isnan(values).any(axis=1)
    return float(np.count_nonzero(correct)) / values.shape[0]


@dataclasses.dataclass(frozen=True)
class StepDetail:
    """Everything one training step computed, handed to the run log and then to
    ``Trainer.observers`` after the step.

    Bit arrays, shared with the trainer: observers read them and never write. ``grads_low`` are
    the compute-format gradients of ``scaled_loss`` (``loss * loss_scale``); ``updates`` (what the
    optimizer subtracted, in ``param_format``) and ``params_after`` are None on a skipped step;
    ``grad_norm`` / ``grad_norm_clipped`` are FP32 bits. ``loss``, ``scaled_loss`` and ``leaves``
    (the compute-format parameters) keep the step's graph, so an observer can run another backward
    pass on it. Measured on first use, once: :attr:`grads_reference` and :attr:`record`.
    """

    step: int
    loss: Tensor
    scaled_loss: Tensor
    logits: Tensor
    labels: np.ndarray
    leaves: list[Tensor]
    loss_scale: np.float32
    compute: sf.Format
    param_format: sf.Format
    grads_low: list[np.ndarray]
    grad_norm: np.ndarray
    grad_norm_clipped: np.ndarray
    clipped: bool
    skipped: bool
    params_before: list[np.ndarray]
    updates: list[np.ndarray] | None
    params_after: list[np.ndarray] | None
    quantized: bool = False  # products computed from quantised operands (fp8, mxfp8, nvfp4)
    tensor_names: tuple[str, ...] = ()  # the quantised tensors, in the order of the record's lists
    quantization: tuple[Any, ...] = ()  # sim.gemm.QuantStat of every quantisation of the step

    @functools.cached_property
    def grads_reference(self) -> list[np.ndarray]:
        """The same backward as ``grads_low`` in FP32, from the same forward values, products of
        unquantised operands (for a plain fp32 run, the gradients themselves)."""
        if self.compute is sf.fp32 and not self.quantized:
            return self.grads_low
        return gradients(self.scaled_loss, self.leaves, promote_to=sf.fp32)

    @functools.cached_property
    def record(self) -> StepRecord:
        """The step measured for the run log: loss, accuracy, scale, norms, and per layer the
        underflowed gradient entries and swallowed updates."""
        f32, compute, layers = sf.fp32, self.compute, range(0, len(self.leaves), 2)
        underflow = [0 for _ in layers]
        if compute is not f32 or self.quantized:
            underflow = [sum(count_underflow(self.grads_low[j], compute, self.grads_reference[j], f32)
                             for j in (i, i + 1)) for i in layers]
        swallowed = [0 for _ in layers]
        if self.updates is not None:
            swallowed = [sum(count_swallowed(self.updates[j], self.params_before[j], self.param_format, compute)
                             for j in (i, i + 1)) for i in layers]
        return StepRecord(
            step=self.step,
            loss=float(f32.to_float(self.loss.data)),
            accuracy=accuracy(self.logits, self.labels),
            scale=float(self.loss_scale),
            skipped=bool(self.skipped),
            grad_norm=float(f32.to_float(self.grad_norm)),
            grad_norm_clipped=float(f32.to_float(self.grad_norm_clipped)),
            clipped=self.clipped,
            underflow=underflow,
            swallowed=swallowed,
            subnormal_grads=sum(count_subnormal(g, compute) for g in self.grads_low),
            nonfinite_grads=sum(count_nonfinite(g, compute) for g in self.grads_low),
            **self._quantization_columns(),
        )

    def _quantization_columns(self) -> dict[str, list[Any]]:
        """Per tensor of ``tensor_names``: amax, scale (first use), and counts summed over uses."""
        index = {name: i for i, name in enumerate(self.tensor_names)}
        n = len(index)
        columns: dict[str, list[Any]] = {"tensor_amax": [None] * n, "tensor_scale": [None] * n}
        columns.update({name: [0] * n for name in ("quantized_nonzero", "quantized_underflow", "quantized_saturated")})
        for stat in self.quantization:
            i = index[stat.tensor]
            if columns["tensor_amax"][i] is None:
                columns["tensor_amax"][i], columns["tensor_scale"][i] = stat.amax, stat.scale
            columns["quantized_nonzero"][i] += stat.nonzero
            columns["quantized_underflow"][i] += stat.underflow
            columns["quantized_saturated"][i] += stat.saturated
        return columns


_QUANTIZATION_FIELDS = (
    "tensor_amax", "tensor_scale", "quantized_nonzero", "quantized_underflow", "quantized_saturated")


def _json_float(value: float) -> float | None:
    return value if math.isfinite(value) else None


class RunLog:
    """The per-step records of a run, and the summaries the JSON output reports. An observer of
    the training step: called with a :class:`StepDetail`, it appends the step's record.

    ``entries``: the number of gradient entries of each layer (weight and bias together).

    >>> log = RunLog(["fc1"], [10])
    >>> log.append(StepRecord(0, 2.3, 0.1, 1.0, False, 1.0, 1.0, False, [2], [5], 0, 0))
    >>> log.append(StepRecord(1, 2.1, 0.2, 1.0, True, float("inf"), float("inf"), False, [0], [0], 0, 3))
    >>> log.underflow_fraction(), log.swallowed_update_fraction(), log.skipped_steps()
    ({'fc1': 0.1}, {'fc1': 0.5}, [1])
    """

    def __init__(self, layer_names: Sequence[str], entries: Sequence[int], tensor_names: Sequence[str] = ()) -> None:
        self.layer_names = list(layer_names)
        self.entries = [int(e) for e in entries]
        self.tensor_names = list(tensor_names)  # the quantised tensors (fp8, mxfp8, nvfp4 recipes)
        self.records: list[StepRecord] = []

    def __call__(self, detail: StepDetail) -> None:
        self.append(detail.record)

    def append(self, record: StepRecord) -> None:
        self.records.append(record)

    def _fraction(self, counts: str, steps: list[StepRecord]) -> dict[str, float]:
        result = {}
        for index, name in enumerate(self.layer_names):
            total = self.entries[index] * len(steps)
            hits = sum(getattr(r, counts)[index] for r in steps)
            result[name] = hits / total if total else 0.0
        return result

    def underflow_fraction(self) -> dict[str, float]:
        """Per layer: underflowed gradient entries / all gradient entries, over all steps."""
        return self._fraction("underflow", self.records)

    def swallowed_update_fraction(self) -> dict[str, float]:
        """Per layer: swallowed updates / all update entries, over the steps not skipped."""
        return self._fraction("swallowed", [r for r in self.records if not r.skipped])

    def quantization_summary(self) -> dict[str, dict[str, float | None]]:
        """Per quantised tensor, over all steps: the share of its nonzero values quantised to
        zero (underflow) and beyond the scaled range (saturated), and its largest amax.

        >>> log = RunLog(["fc1"], [10], ["fc1.input"])
        >>> log.append(StepRecord(0, 2.3, 0.1, 1.0, False, 1.0, 1.0, False, [0], [0], 0, 0,
        ...                       [2.0], [64.0], [8], [2], [0]))
        >>> log.quantization_summary()
        {'fc1.input': {'underflow': 0.25, 'saturated': 0.0, 'amax': 2.0}}
        """
        summary = {}
        for i, name in enumerate(self.tensor_names):
            nonzero = sum(r.quantized_nonzero[i] for r in self.records)
            amaxes = [r.tensor_amax[i] for r in self.records
                      if r.tensor_amax[i] is not None and math.isfinite(r.tensor_amax[i])]
            summary[name] = {
                "underflow": sum(r.quantized_underflow[i] for r in self.records) / nonzero if nonzero else None,
                "saturated": sum(r.quantized_saturated[i] for r in self.records) / nonzero if nonzero else None,
                "amax": max(amaxes) if amaxes else None,
            }
        return summary

    def skipped_steps(self) -> list[int]:
        return [r.step for r in self.records if r.skipped]

    def clip_fraction(self) -> float:
        return sum(r.clipped for r in self.records) / len(self.records) if self.records else 0.0

    def per_step(self) -> dict[str, list[Any]]:
        """Each StepRecord field as a list over the steps (non-finite floats become None)."""
        names = [f.name for f in dataclasses.fields(StepRecord)]
        if not self.tensor_names:  # the quantisation columns only where there is something quantised
            names = [n for n in names if n not in _QUANTIZATION_FIELDS]
        columns: dict[str, list[Any]] = {name: [] for name in names}
        for record in self.records:
            for name in names:
                value = getattr(record, name)
                if isinstance(value, list):
                    value = [_json_float(v) if isinstance(v, float) else v for v in value]
                columns[name].append(_json_float(value) if isinstance(value, float) else value)
        return columns

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state (floats kept exactly, non-finite ones included)."""
        return {
            "layer_names": self.layer_names,
            "entries": self.entries,
            "tensor_names": self.tensor_names,
            "records": [dataclasses.asdict(r) for r in self.records],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("layer_names") != self.layer_names or state.get("entries") != self.entries:
            raise ValueError("run log state belongs to a different network")
        if state.get("tensor_names", []) != self.tensor_names:
            raise ValueError("run log state belongs to a different precision recipe (quantised tensors differ)")
        try:
            self.records = [StepRecord(**r) for r in state["records"]]
        except (KeyError, TypeError) as error:
            raise ValueError(f"run log state is malformed: {error}") from None


def log2_floor(values: np.ndarray) -> np.ndarray:
    """``floor(log2|x|)`` of nonzero finite float64 values, exactly (the binary exponent).

    >>> log2_floor(np.array([1.0, 0.75, 65504.0, 2.0**-24])).tolist()
    [0, -1, 15, -24]
    """
    _, exponent = np.frexp(np.asarray(values, dtype=np.float64))
    return exponent.astype(np.int64) - 1


class Log2Histogram:
    """Counts of magnitudes by ``floor(log2|x|)`` (bin ``e`` holds ``2**e <= |x| < 2**(e+1)``),
    plus zeros and non-finite values. Integer counts from exact exponents: the same values give
    the same histogram on every machine.

    >>> h = Log2Histogram()
    >>> h.add(np.array([0.0, 1.0, 1.5, 2.0**-30, np.inf]))
    >>> h.total, h.zeros, h.nonfinite, h.count_below(-24), h.quantile(0.5)
    (3, 1, 1, 1, 0)
    >>> low, counts = h.bins()
    >>> low, counts[0], sum(counts[1:-1]), counts[-1]
    (-30, 1, 0, 2)
    >>> Log2Histogram.from_dict(h.to_dict()).to_dict() == h.to_dict()
    True
    """

    _OFFSET = 1100  # float64 exponents lie in [-1074, 1023]
    _SIZE = 2200

    def __init__(self) -> None:
        self.counts = np.zeros(self._SIZE, dtype=np.int64)
        self.zeros = 0
        self.nonfinite = 0

    def add(self, values: np.ndarray) -> None:
        """Count float64 ``values`` (any shape)."""
        values = np.abs(np.asarray(values, dtype=np.float64)).ravel()
        finite = np.isfinite(values)
        self.nonfinite += int(np.count_nonzero(~finite))
        nonzero = values[finite & (values != 0.0)]
        self.zeros += int(np.count_nonzero(finite)) - nonzero.size
        self.counts += np.bincount(log2_floor(nonzero) + self._OFFSET, minlength=self._SIZE)

    def merge(self, other: Log2Histogram) -> None:
        self.counts += other.counts
        self.zeros += other.zeros
        self.nonfinite += other.nonfinite

    @property
    def total(self) -> int:
        """Nonzero finite values counted."""
        return int(self.counts.sum())

    def count_below(self, exponent: int) -> int:
        """Nonzero finite values with ``|x| < 2**exponent``."""
        return int(self.counts[: max(0, exponent + self._OFFSET)].sum())

    def quantile(self, q: float) -> int | None:
        """The bin holding the ``q``-quantile of the nonzero finite values (None if there are none)."""
        total = self.total
        if total == 0:
            return None
        cumulative = np.cumsum(self.counts)
        return int(np.searchsorted(cumulative, max(1, math.ceil(q * total)))) - self._OFFSET

    def bins(self) -> tuple[int, list[int]]:
        """(lowest occupied bin, counts from there to the highest occupied bin)."""
        occupied = np.flatnonzero(self.counts)
        if occupied.size == 0:
            return 0, []
        low, high = int(occupied[0]), int(occupied[-1])
        return low - self._OFFSET, self.counts[low:high + 1].tolist()

    def to_dict(self) -> dict[str, Any]:
        low, counts = self.bins()
        return {"low": low, "counts": counts, "zeros": self.zeros, "nonfinite": self.nonfinite}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> Log2Histogram:
        histogram = cls()
        start = int(state["low"]) + cls._OFFSET
        counts = np.asarray(state["counts"], dtype=np.int64)
        histogram.counts[start:start + counts.size] = counts
        histogram.zeros, histogram.nonfinite = int(state["zeros"]), int(state["nonfinite"])
        return histogram
