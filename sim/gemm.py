"""How the training step's matrix products are computed: accumulation, and the quantised recipes.

Every layer computes ``y = x @ W`` in the forward pass and ``dx = dy @ W^T`` (dgrad) and
``dW = x^T @ dy`` (wgrad) in the backward pass. A :class:`Products` object decides how:

- :class:`Accumulation`: products are exact; they are summed in FP32 in k order (``fp32``), or
  as the tensor-core adder of :class:`softfloat16.linalg.TensorCore` says (``tensorcore``: blocks
  of exact products aligned as the hardware aligns them and truncated to a number of fraction
  bits), optionally adding the partial sum into an FP32 accumulator every ``promote_every``
  products (DeepSeek-V3's remedy for the ~14 bits an H800 FP8 GEMM keeps).
- :class:`PlainProducts` (fp32, fp16, bf16): operands in the compute format, as before.
- :class:`Fp8Products` (``fp8``): FP32 tensors between the products; each product quantises its
  operands with one scale per tensor (E4M3FN for activations and weights, E5M2 for gradients:
  the "hybrid" recipe), multiplies them exactly, accumulates in FP32 and multiplies the result by
  the two inverse scales. Scales are powers of two: ``2**(floor(log2(fmax / amax)) - margin)``,
  from the tensor's own amax (``current``), from the largest amax of its last N uses (``delayed``,
  Transformer Engine's default), or 1 (``none``).
- :class:`BlockProducts` (``mxfp8``, ``nvfp4``): every operand quantised along the reduction axis
  of its product with :func:`softfloat16.mx.quantize` (so the weight, the input and the gradient
  are each quantised twice, once per product they meet), multiplied by :func:`softfloat16.mx.matmul`.

Every quantisation is measured (:class:`QuantStat`: amax, scale, values that became zero, values
beyond the format's range), and reported to :mod:`sim.trace` under the layer's name.

>>> import numpy as np, softfloat16 as sf
>>> scale_exponent(448.0, 3.5, margin=0)   # 448 / 3.5 = 128: the scale 2**7 maps 3.5 to 448
7
>>> scale_exponent(448.0, 3.6, margin=1)
5
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import softfloat16 as sf
import softfloat16.linalg as linalg
import softfloat16.mx as mx
from sim import trace

__all__ = [
    "Accumulation", "BlockProducts", "Fp8Products", "PlainProducts", "Products", "QuantStat", "TensorScaling",
    "amax_bits", "make_products", "scale_exponent",
]

F32 = sf.fp32
FORWARD_FP8 = sf.fp8_e4m3fn  # activations and weights: precision
BACKWARD_FP8 = sf.fp8_e5m2  # gradients: range
# Scales are FP32 powers of two 2**e with |e| <= 127: both the scale and its inverse are exact.
MAX_SCALE_EXPONENT = 127
_SR_STREAM = 11  # distinct from sim.data's and sim.nn's stream tags
_MAGNITUDE = np.uint32(0x7FFFFFFF)
_ROLES = ("input", "weight", "grad_output")


# --- accumulation ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Accumulation:
    """How a product's exact terms are summed: ``order`` "sequential" (FP32, k ascending) or
    "tensorcore" (``tensor_core``'s adder, softfloat16.tensor_cores.TensorCore: each block's sum
    rounded toward zero into FP32), and, for the tensor core, ``promote_every`` (a multiple of its
    block): every K products the partial sum (from +0) is added into an FP32 accumulator (RNE),
    which is rounded once to the output format at the end (softfloat16.mma.gemm).

    >>> import numpy as np, softfloat16 as sf
    >>> a = sf.fp16.from_float(np.array([[1.0] + [2.0**-12] * 31]))
    >>> b = sf.fp16.from_float(np.ones((32, 1)))
    >>> kept = linalg.TensorCore(products_per_block=16, fraction_bits=10)
    >>> [float(sf.fp32.to_float(acc.matmul(a, b, sf.fp16, sf.fp32))[0, 0]) for acc in (
    ...     Accumulation(), Accumulation("tensorcore", kept), Accumulation("tensorcore", kept, promote_every=16))]
    [1.007568359375, 1.0, 1.00390625]
    """

    order: str = "sequential"
    tensor_core: linalg.TensorCore | str | None = None
    promote_every: int | None = None

    def matmul(self, a: np.ndarray, b: np.ndarray, fmt: sf.Format, out_format: sf.Format,
               b_format: sf.Format | None = None) -> np.ndarray:
        """``a @ b`` of bit arrays (``a`` of ``fmt``, ``b`` of ``b_format`` or ``fmt``), products
        exact, summed as this accumulation says, rounded once to ``out_format``."""
        if self.order == "sequential":
            return linalg.matmul(a, b, fmt, accumulate=F32, out_format=out_format, b_format=b_format)
        return linalg.matmul(a, b, fmt, accumulate=F32, out_format=out_format, order="tensorcore",
                             tensor_core=self.tensor_core, b_format=b_format, promote_every=self.promote_every)

    def describe(self) -> dict[str, Any]:
        """The accumulation as trace attributes."""
        if self.order == "sequential":
            return {"accumulate": "fp32"}
        tc = self.tensor_core
        if not isinstance(tc, linalg.TensorCore):  # a GPU or an instruction, by name
            return {"accumulate": "tensorcore", "tensor_core": getattr(tc, "name", tc),
                    "promote_every": self.promote_every}
        return {"accumulate": "tensorcore", "tc_block": tc.products_per_block, "tc_fraction_bits": tc.fraction_bits,
                "promote_every": self.promote_every}


# --- per-tensor scaling ----------------------------------------------------------------------------

def amax_bits(bits: np.ndarray) -> np.uint32:
    """The FP32 bits of max |x| over FP32 ``bits`` (+0 for an empty array). With the sign bit
    cleared, unsigned order is magnitude order, and a NaN sorts above inf: any NaN gives a NaN.

    >>> hex(amax_bits(sf.fp32.from_float(np.array([-3.0, 2.0]))))
    '0x40400000'
    """
    if bits.size == 0:
        return np.uint32(0)
    return np.uint32(np.max(bits & _MAGNITUDE))


def _fp32_value(bits: np.uint32 | int) -> float:
    return float(np.uint32(bits).view(np.float32))


def scale_exponent(fmax: float, amax: float, margin: int) -> int:
    """``floor(log2(fmax / amax)) - margin``, exactly (from the binary exponents, no division),
    clamped to [-127, 127]. ``amax`` must be positive and finite.

    >>> scale_exponent(57344.0, 2.0**-20, 0), scale_exponent(448.0, 1e-45, 0)
    (35, 127)
    """
    fraction_max, exponent_max = math.frexp(fmax)
    fraction_amax, exponent_amax = math.frexp(amax)
    exponent = exponent_max - exponent_amax - (fraction_max < fraction_amax) - margin
    return max(-MAX_SCALE_EXPONENT, min(MAX_SCALE_EXPONENT, exponent))


class TensorScaling:
    """The scale of one tensor role (``fc1.input``, ...) for the ``fp8`` recipe.

    ``mode``: "delayed" (the scale of a use comes from the largest amax of the last ``history``
    uses before it; while that is 0 or not finite, the previous scale stays: 1 at first),
    "current" (from this use's own amax), or "none" (always 1). ``margin``: binades left free
    above the amax. The amax of each use enters the history after the scale is chosen.

    >>> s = TensorScaling(sf.fp8_e4m3fn, "delayed", history=2, margin=0)
    >>> [float(s.scale_for(np.float32(a))) for a in (3.5, 0.4, 100.0)]  # first use: no history yet
    [1.0, 128.0, 128.0]
    >>> s.history
    [0.4000000059604645, 100.0]
    """

    def __init__(self, fmt: sf.Format, mode: str, history: int | None = None, margin: int | None = None) -> None:
        self.fmt, self.mode = fmt, mode
        self.length = history or 1
        self.margin = margin or 0
        self.fmax = float(fmt.value(fmt.max_finite))
        self.scale = np.float32(1.0)
        self.history: list[float] = []  # FP32 amax values (exact as Python floats)

    def _from_amax(self, amax: float) -> np.float32:
        if not (math.isfinite(amax) and amax > 0.0):
            return self.scale
        return np.float32(2.0 ** scale_exponent(self.fmax, amax, self.margin))

    def scale_for(self, amax: np.float32, record: bool = True) -> np.float32:
        """The scale of a use whose amax is ``amax`` (FP32); ``record``: enter it in the history
        (evaluation passes do not)."""
        if self.mode == "none":
            scale = np.float32(1.0)
        elif self.mode == "current":
            scale = self._from_amax(float(amax))
        else:
            scale = self._from_amax(max(self.history, key=_nan_first)) if self.history else self.scale
        if record:
            self.scale = scale
            if self.mode == "delayed":
                self.history = [*self.history, float(amax)][-self.length:]
        return scale

    def state_dict(self) -> dict[str, Any]:
        return {"scale": float(self.scale), "history": list(self.history)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        scale, history = state.get("scale"), state.get("history")
        if not isinstance(scale, (int, float)) or not (0.0 < scale < math.inf):
            raise ValueError(f"fp8 scale must be a positive finite number, got {scale!r}")
        if not isinstance(history, list) or len(history) > self.length or not all(
                isinstance(v, (int, float)) for v in history):
            raise ValueError(f"amax history must be a list of at most {self.length} numbers")
        self.scale, self.history = np.float32(scale), [float(v) for v in history]


def _nan_first(value: float) -> float:
    """Sort key that makes a NaN the largest, as the amax of a tensor holding one."""
    return math.inf if math.isnan(value) else value


# --- measurements --------------------------------------------------------------------------------

@dataclasses.dataclass
class QuantStat:
    """One tensor quantised once: its amax (FP32 value), the scale used (per-tensor recipes;
    nvfp4: the per-tensor decode scale; None for MX), and counts of its nonzero values, of those
    that became zero (underflow) and of those beyond the largest value the scale allows
    (saturated to it)."""

    tensor: str
    amax: float
    scale: float | None
    nonzero: int
    underflow: int
    saturated: int


# --- the products ----------------------------------------------------------------------------------

class Products:
    """A layer's three products and their quantisation state; see the module docstring."""

    quantized = False
    seed = 0  # the run's seed, for stochastic rounding (the quantised recipes set it)

    def __init__(self, accumulation: Accumulation, layer_names: Sequence[str]) -> None:
        self.accumulation = accumulation
        self.tensor_names = [f"{layer}.{role}" for layer in layer_names for role in _ROLES] if self.quantized else []
        self.stats: list[QuantStat] = []
        self.step = 0
        self.training = True

    def begin_step(self, step: int) -> None:
        """A new training step: its index seeds stochastic rounding; the step's stats restart."""
        self.step, self.stats, self.training = step, [], True

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError("checkpoint holds quantisation state, but this recipe has none")

    def seed_for(self, tensor: str, use: int) -> int:
        """The stochastic-rounding seed of one quantisation: a function of the run's seed, the
        step, the tensor and its use, so a resumed run draws the same bits."""
        words = np.random.SeedSequence([self.seed, _SR_STREAM, self.step, self.tensor_names.index(tensor), use])
        return int(words.generate_state(1, np.uint64)[0])


class PlainProducts(Products):
    """fp32 / fp16 / bf16: operands in the compute format (nothing to quantise)."""


class Fp8Products(Products):
    """The ``fp8`` recipe: per-tensor scaled E4M3FN forward operands, E5M2 gradients."""

    quantized = True

    def __init__(self, accumulation: Accumulation, layer_names: Sequence[str], mode: str, history: int | None,
                 margin: int | None, grad_rounding: str, seed: int) -> None:
        super().__init__(accumulation, layer_names)
        self.mode, self.grad_rounding, self.seed = mode, grad_rounding, seed
        self.scalings = {name: TensorScaling(BACKWARD_FP8 if name.endswith("grad_output") else FORWARD_FP8,
                                             mode, history, margin) for name in self.tensor_names}

    def quantize(self, tensor: str, bits: np.ndarray) -> tuple[np.ndarray, np.float32]:
        """FP32 ``bits`` scaled and cast (saturating) to the tensor's FP8 format; returns the
        FP8 bits and the inverse scale. Traced as ``<tensor>.scale`` and ``<tensor>.quantize``."""
        scaling = self.scalings[tensor]
        fmt = scaling.fmt
        amax = amax_bits(bits)
        history, previous = scaling.history, scaling.scale  # before this use (scale_for replaces both)
        scale = scaling.scale_for(np.uint32(amax).view(np.float32), record=self.training)
        inverse = np.float32(1.0) / scale  # exact: a power of two within [2**-127, 2**127]
        gradient = tensor.endswith("grad_output") and self.grad_rounding == "sr"
        options: dict[str, Any] = {"saturate": True}
        if gradient:
            options.update(rounding="sr", seed=self.seed_for(tensor, 0))
        scaled = np.asarray(F32.mul(bits, _bits(scale)))
        q = np.asarray(sf.convert(scaled, src=F32, dst=fmt, **options))
        if self.training:
            fmax = np.uint32(np.float32(scaling.fmax).view(np.uint32))
            nonzero = (bits & _MAGNITUDE) != 0
            self.stats.append(QuantStat(
                tensor, _fp32_value(amax), float(scale), int(np.count_nonzero(nonzero)),
                int(np.count_nonzero(nonzero & fmt.is_zero(q))),
                int(np.count_nonzero((scaled & _MAGNITUDE) > fmax))))
        if trace.active() and self.training:
            attrs = {"format": fmt.name, "mode": self.mode, "margin": scaling.margin, "length": scaling.length}
            # The whole scaling state goes in and comes out, so the op is a pure function of its
            # inputs (a reference keeps its own state; a replay can judge the op alone).
            trace.op("fp8_scale", f"{tensor}.scale",
                     {"x": (bits, "fp32"), "history": (_bits(history), "fp32"), "previous": (_bits(previous), "fp32")},
                     {"amax": (np.asarray(amax), "fp32"), "scale": (_bits(scale), "fp32"),
                      "scale_inv": (_bits(inverse), "fp32"), "history": (_bits(scaling.history), "fp32")},
                     **attrs)
            trace.op("fp8_quantize", f"{tensor}.quantize", {"x": (bits, "fp32"), "scale": (_bits(scale), "fp32")},
                     {"out": (q, fmt.name)}, dst=fmt.name, rounding="sr" if gradient else "rne",
                     seed=options.get("seed"))
        return q, inverse

    def _product(self, name: str, a: np.ndarray, a_fmt: sf.Format, a_inv: np.float32, b: np.ndarray,
                 b_fmt: sf.Format, b_inv: np.float32) -> np.ndarray:
        """``(a @ b) * a_inv * b_inv``: exact products, the accumulation's FP32 sum, then two
        FP32 multiplications by the inverse scales (exact unless the result leaves FP32's range)."""
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        total = self.accumulation.matmul(a, b, a_fmt, F32, b_format=b_fmt)
        out = np.asarray(F32.mul(F32.mul(total, _bits(a_inv)), _bits(b_inv)))
        if trace.active() and self.training:
            trace.op("scaled_matmul", name,
                     {"a": (a, a_fmt.name), "b": (b, b_fmt.name), "a_scale_inv": (_bits(a_inv), "fp32"),
                      "b_scale_inv": (_bits(b_inv), "fp32")}, {"out": (out, "fp32")}, **self.accumulation.describe())
        return out

    def forward(self, layer: str, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, Any]:
        """``x @ w`` (FP32 bits in and out); returns the result and what the backward needs."""
        xq, x_inv = self.quantize(f"{layer}.input", x)
        wq, w_inv = self.quantize(f"{layer}.weight", w)
        y = self._product(f"{layer}.matmul", xq, FORWARD_FP8, x_inv, wq, FORWARD_FP8, w_inv)
        return y, (xq, x_inv, wq, w_inv)

    def backward(self, layer: str, grad: np.ndarray, saved: Any, need_x: bool, need_w: bool
                 ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(dx, dw) from the FP32 output gradient: it is quantised to E5M2 once and meets the
        forward's quantised weight (dgrad) and input (wgrad)."""
        xq, x_inv, wq, w_inv = saved
        gq, g_inv = self.quantize(f"{layer}.grad_output", grad)
        dx = self._product(f"{layer}.dgrad", gq, BACKWARD_FP8, g_inv, wq.T, FORWARD_FP8, w_inv) if need_x else None
        dw = self._product(f"{layer}.wgrad", xq.T, FORWARD_FP8, x_inv, gq, BACKWARD_FP8, g_inv) if need_w else None
        return dx, dw

    def state_dict(self) -> dict[str, Any]:
        return {"scalings": {name: s.state_dict() for name, s in self.scalings.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        scalings = state.get("scalings") if isinstance(state, dict) else None
        if not isinstance(scalings, dict) or sorted(scalings) != sorted(self.scalings):
            raise ValueError(f"fp8 scaling state must name the tensors {self.tensor_names}")
        for name, scaling in self.scalings.items():
            scaling.load_state_dict(scalings[name])


class BlockProducts(Products):
    """The ``mxfp8`` (E4M3 elements, E8M0 scale per block) and ``nvfp4`` (E2M1 elements, E4M3
    scale per block, FP32 per tensor) recipes: each operand quantised along its product's
    reduction axis; gradients rounded to nearest even or stochastically."""

    quantized = True

    def __init__(self, accumulation: Accumulation, layer_names: Sequence[str], fmt: str, block_size: int,
                 grad_rounding: str, seed: int) -> None:
        super().__init__(accumulation, layer_names)
        self.fmt, self.block_size, self.grad_rounding, self.seed = fmt, block_size, grad_rounding, seed
        self._uses: dict[str, int] = {}

    def begin_step(self, step: int) -> None:
        super().begin_step(step)
        self._uses = {}

    def quantize(self, tensor: str, bits: np.ndarray, axis: int) -> mx.MXTensor:
        """FP32 ``bits`` quantised in blocks along ``axis``; traced as ``<tensor>.quantize`` (its
        first use in the step) or ``<tensor>.quantize<n>``."""
        use = self._uses.get(tensor, 0)
        self._uses[tensor] = use + 1
        options: dict[str, Any] = {}
        if tensor.endswith("grad_output") and self.grad_rounding == "sr":
            options.update(rounding="sr", seed=self.seed_for(tensor, use))
        q = mx.quantize(bits, self.fmt, axis=axis, block_size=self.block_size, src=F32, **options)
        if self.training:
            self.stats.append(self._measure(tensor, bits, q))
        if trace.active() and self.training:
            trace.op("mx_quantize", f"{tensor}.quantize{use or ''}", {"x": (bits, "fp32")},
                     {"elements": (np.asarray(q.elements), q.element_format.name),
                      "scales": (np.asarray(q.scales), q.scale_format.name),
                      **({"tensor_scale": (np.asarray(q.tensor_scale), "fp32")} if q.tensor_scale is not None else {})},
                     format=self.fmt, axis=axis, block_size=self.block_size,
                     rounding=options.get("rounding", "rne"), seed=options.get("seed"))
        return q

    @staticmethod
    def _measure(tensor: str, bits: np.ndarray, q: mx.MXTensor) -> QuantStat:
        """Underflow: nonzero values quantised to zero. Saturation: values beyond the largest
        element times their block's scale (times the tensor scale for nvfp4), exactly."""
        values = np.asarray(F32.to_float(bits))
        largest = dataclasses.replace(q, elements=np.full(q.shape, q.element_format.max_finite, np.uint8))
        nonzero = values != 0.0
        with np.errstate(invalid="ignore"):  # NaN blocks compare False
            saturated = np.abs(values) > largest.dequantize(np.float64)
        tensor_scale = None if q.tensor_scale is None else _fp32_value(q.tensor_scale)
        return QuantStat(tensor, _fp32_value(amax_bits(bits)), tensor_scale, int(np.count_nonzero(nonzero)),
                         int(np.count_nonzero(nonzero & (q.dequantize(np.float64) == 0.0))),
                         int(np.count_nonzero(saturated)))

    def _product(self, name: str, a: mx.MXTensor, b: mx.MXTensor) -> np.ndarray:
        out = mx.matmul(a, b)
        if trace.active() and self.training:
            trace.op("mx_matmul", name, {"a": (np.asarray(a.elements), a.fmt), "b": (np.asarray(b.elements), b.fmt)},
                     {"out": (out, "fp32")}, format=self.fmt, block_size=self.block_size)
        return out

    def forward(self, layer: str, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, Any]:
        y = self._product(f"{layer}.matmul", self.quantize(f"{layer}.input", x, axis=1),
                          self.quantize(f"{layer}.weight", w, axis=0))
        return y, (x, w)

    def backward(self, layer: str, grad: np.ndarray, saved: Any, need_x: bool, need_w: bool
                 ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """dgrad blocks run along the output width, wgrad blocks along the batch: each product
        quantises the FP32 operands it meets along its own reduction axis."""
        x, w = saved
        dx = dw = None
        if need_x:
            dx = self._product(f"{layer}.dgrad", self.quantize(f"{layer}.grad_output", grad, axis=1),
                               self.quantize(f"{layer}.weight", np.ascontiguousarray(w.T), axis=0))
        if need_w:
            dw = self._product(f"{layer}.wgrad", self.quantize(f"{layer}.input", np.ascontiguousarray(x.T), axis=1),
                               self.quantize(f"{layer}.grad_output", grad, axis=0))
        return dx, dw


def _bits(value: Any) -> np.ndarray:
    """FP32 bits of a value or a list of values (an amax history)."""
    return np.asarray(value, dtype=np.float32).view(np.uint32)


def make_products(config: Any, layer_names: Sequence[str]) -> Products:
    """The :class:`Products` of a resolved :class:`~sim.config.TrainConfig`.

    >>> from sim.config import TrainConfig
    >>> type(make_products(TrainConfig(precision="fp8").resolved(), ["fc1"])).__name__
    'Fp8Products'
    """
    if config.accumulate == "tensorcore":
        core = linalg.TensorCore(products_per_block=config.tc_block, fraction_bits=config.tc_fraction_bits)
        accumulation = Accumulation("tensorcore", core, config.promote_every)
    else:
        accumulation = Accumulation()
    if config.precision == "fp8":
        return Fp8Products(accumulation, layer_names, config.fp8_scaling, config.amax_history, config.fp8_margin,
                           config.grad_rounding, config.seed)
    if config.precision in ("mxfp8", "nvfp4"):
        fmt = "mxfp8_e4m3" if config.precision == "mxfp8" else "nvfp4"
        return BlockProducts(accumulation, layer_names, fmt, config.block_size, config.grad_rounding, config.seed)
    return PlainProducts(accumulation, layer_names)
