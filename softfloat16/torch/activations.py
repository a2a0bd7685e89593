"""Activation functions and the pointwise ops of optimizers: tanh, erf, expm1, gelu, silu, leaky_relu,
hardtanh, elu (selu, celu), hardsigmoid, hardswish and their backwards; pow; addcmul, addcdiv, lerp.

Every op follows the opmath rule of the mode: operands widened exactly to FP32, each step an
emulated FP32 operation with the machine's rounding, NaN profile and FTZ, one final rounding
into the result's format. The steps are those of torch 2.13's CPU kernels (their vectorised
loops, where the scalar tail differs), fused multiply-adds included where GCC contracts torch's
source into one (measured: ``addcmul`` is ``fma(value * t1, t2, self)``, ``lerp`` is
``fma(w, end - self, self)``, ``tanh_backward`` is ``g * fma(-y, y, 1)``): the ops built from
``+ - * /`` and fma alone are bit-identical to torch CPU. tanh, erf, expm1, exp and general powers
are the emulated FP32 algorithms of :mod:`softfloat16.fp32math` (always rounded to nearest even,
under 1 ulp), not torch's (Sleef, MKL, its own erf polynomial, oneDNN): the ops that use them
agree with torch to within their final rounding, not bit for bit (docs/torch.md has the numbers).
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch

import softfloat16 as sf

from .. import fp32math
from .elementwise import ONE32, _native, clamp
from .machine import FP32, Machine, scalar_bits
from .operands import elementwise_result, is_scalar, operand32, operand_bits
from .registry import NotEmulated, aten, aten_arg, implements
from .tensors import DTYPE_FORMATS, format_of, from_bits, is_emulated

__all__ = ["erf32", "exp32", "pow32", "tanh32"]


def _const(value: float) -> np.uint32:
    """A constant as torch's kernels hold it: the double rounded once to float32 (RNE)."""
    return np.uint32(FP32.from_float(np.float64(value)))


HALF32, MINUS_HALF32, THREE32 = _const(0.5), _const(-0.5), _const(3.0)
SQRT1_2 = _const(math.sqrt(0.5))  # M_SQRT1_2
GELU_BETA = _const(math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5)  # M_SQRT2 * M_2_SQRTPI * 0.5
GELU_KAPPA = _const(0.044715)
GELU_PDF = _const((2.0 / math.sqrt(math.pi)) * math.sqrt(0.5) * 0.5)  # M_2_SQRTPI * M_SQRT1_2 * 0.5
GELU_THREE_KAPPA = np.uint32(FP32.mul(THREE32, GELU_KAPPA))  # kThreeVec * kKappaVec, in float


def _with_nan(machine: Machine, core):
    """An fp32math function whose NaN results follow the machine's NaN profile (the input NaN
    quieted, under "x86" and "ieee"; the canonical one otherwise), as the arithmetic steps do."""

    def compute(x):
        x = np.asarray(x)
        result = core(x)
        nan = FP32.is_nan(x)
        return np.where(nan, machine.propagate_nan(FP32, x), result) if nan.any() else result

    return compute


def exp32(machine: Machine, x):
    """e**x of FP32 patterns: fp32math.exp, NaN per the machine's profile."""
    return _with_nan(machine, fp32math.exp)(x)


def tanh32(machine: Machine, x):
    """tanh of FP32 patterns: fp32math.tanh, NaN per the machine's profile.

    >>> [hex(b) for b in tanh32(Machine(), np.array([0x3F000000, 0x7FC00005], np.uint32))]  # 0.5, a NaN
    ['0x3eec9a9f', '0x7fc00005']
    """
    return _with_nan(machine, fp32math.tanh)(x)


def erf32(machine: Machine, x):
    """erf of FP32 patterns: fp32math.erf, NaN per the machine's profile."""
    return _with_nan(machine, fp32math.erf)(x)


def _compute(machine: Machine, func, args, kwargs, operands, steps):
    """The shared frame of the ops below: the result's dtype and shape (torch's promotion), the
    operands named by ``operands`` (argument index, name) as FP32 patterns of that dtype's opmath,
    ``steps(*operands32)`` (FP32 patterns), one rounding into the result's format."""
    _no_out(func, kwargs)
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    values = [operand32(machine, aten_arg(args, kwargs, index, name), out.dtype) for index, name in operands]
    result = np.broadcast_to(steps(*values), out.shape)
    return from_bits(machine.narrow(result, DTYPE_FORMATS[out.dtype]), out.dtype, out.shape)


def _no_out(func, kwargs) -> None:
    """``out=`` overloads are refused rather than computed into a new tensor (``out`` ignored)."""
    if kwargs.get("out") is not None:
        raise NotEmulated(f"{func}: out= is not emulated")


def _scalar32(machine: Machine, value, what: str) -> np.uint32:
    """A Python number as torch's reduced-float kernels read it: the double rounded to float32."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise NotEmulated(f"{what}: a tensor of shape {tuple(value.shape)} where a scalar was expected")
        value = value.item()
    if not is_scalar(value):
        raise TypeError(f"{what}: expected a real number, got {value!r}")
    return scalar_bits(value, FP32, machine.nan)


# -- tanh, erf, gelu, silu -------------------------------------------------------------------------
@implements("tanh")
def tanh(machine, func, args, kwargs):
    """tanh: the emulated FP32 tanh (fp32math.tanh), rounded once into the format."""
    return _compute(machine, func, args, kwargs, [(0, "self")], lambda x: tanh32(machine, x))


@implements("tanh_backward", inplace=False)
def tanh_backward(machine, func, args, kwargs):
    """``grad * (1 - y * y)``, with ``1 - y * y`` one fma (torch CPU: GCC contracts it)."""
    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "output")],
                    lambda g, y: machine.mul(g, machine.fma(machine.neg(y), y, ONE32)))


@implements("erf")
def erf(machine, func, args, kwargs):
    """The error function: the emulated FP32 erf (fp32math.erf), rounded once into the format."""
    return _compute(machine, func, args, kwargs, [(0, "self")], lambda x: erf32(machine, x))


def _approximate(args, kwargs, index: int, func) -> str:
    approximate = aten_arg(args, kwargs, index, "approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"{func}: approximate must be 'none' or 'tanh', got {approximate!r}")
    return approximate


def _gelu_tanh_inner(machine: Machine, x):
    """``beta * (x + kappa * x**3)`` as torch CPU computes it: ``x * x * x``, then one fma."""
    cube = machine.mul(machine.mul(x, x), x)
    return machine.mul(GELU_BETA, machine.fma(GELU_KAPPA, cube, x))


@implements("gelu")
def gelu(machine, func, args, kwargs):
    """``x * 0.5 * (1 + erf(x * sqrt(1/2)))``; with ``approximate="tanh"``:
    ``0.5 * x * (1 + tanh(beta * (x + kappa * x**3)))`` (beta = sqrt(2/pi), kappa = 0.044715).
    FP32 steps in torch CPU's order, one rounding."""
    approximate = _approximate(args, kwargs, 1, func)

    def steps(x):
        if approximate == "tanh":
            t = tanh32(machine, _gelu_tanh_inner(machine, x))
            return machine.mul(machine.mul(HALF32, x), machine.add(ONE32, t))
        e = erf32(machine, machine.mul(x, SQRT1_2))
        return machine.mul(machine.mul(x, HALF32), machine.add(ONE32, e))

    return _compute(machine, func, args, kwargs, [(0, "self")], steps)


@implements("gelu_backward", inplace=False)
def gelu_backward(machine, func, args, kwargs):
    """``g * (cdf + x * pdf)``, ``cdf = 0.5 * (1 + erf(x / sqrt 2))``, ``pdf = exp(-x*x/2) / sqrt(2 pi)``;
    with ``approximate="tanh"`` torch's derivative of the tanh form (``1 - t*t`` and ``1 + 3 kappa
    x*x`` are fmas, as GCC compiles torch). FP32 steps, one rounding."""
    approximate = _approximate(args, kwargs, 2, func)
    mul, add = machine.mul, machine.add

    def steps(g, x):
        if approximate == "tanh":
            square = mul(x, x)
            t = tanh32(machine, _gelu_tanh_inner(machine, x))
            left, right = mul(HALF32, x), add(ONE32, t)
            tanh_derivative = machine.fma(machine.neg(t), t, ONE32)
            inner_derivative = mul(GELU_BETA, machine.fma(GELU_THREE_KAPPA, square, ONE32))
            return mul(g, add(mul(HALF32, right), mul(mul(left, tanh_derivative), inner_derivative)))
        cdf = mul(HALF32, add(ONE32, erf32(machine, mul(x, SQRT1_2))))
        pdf = mul(GELU_PDF, exp32(machine, mul(mul(x, x), MINUS_HALF32)))
        return mul(g, add(cdf, mul(x, pdf)))

    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "self")], steps)


@implements("silu")
def silu(machine, func, args, kwargs):
    """``x / (1 + exp(-x))``: FP32 steps (emulated exp), one rounding."""
    return _compute(machine, func, args, kwargs, [(0, "self")],
                    lambda x: machine.div(x, machine.add(ONE32, exp32(machine, machine.neg(x)))))


@implements("silu_backward", inplace=False)
def silu_backward(machine, func, args, kwargs):
    """``g * s * (1 + x * (1 - s))`` with ``s = 1 / (1 + exp(-x))``; ``1 + x * (1 - s)`` is one fma
    (torch CPU, measured). FP32 steps, one rounding."""

    def steps(g, x):
        s = machine.div(ONE32, machine.add(ONE32, exp32(machine, machine.neg(x))))
        return machine.mul(machine.mul(g, s), machine.fma(x, machine.sub(ONE32, s), ONE32))

    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "self")], steps)


@implements("expm1")
def expm1(machine, func, args, kwargs):
    """e**x - 1: the emulated FP32 expm1 (fp32math.expm1), rounded once into the format."""
    return _compute(machine, func, args, kwargs, [(0, "self")], _with_nan(machine, fp32math.expm1))


# -- piecewise activations -----------------------------------------------------------------------------
def _positive(x):
    """FP32 patterns greater than +0 (NaN: False)."""
    return FP32.lt(np.uint32(0), x)


def _scalar_or(machine: Machine, args, kwargs, index: int, name: str, default, func) -> np.uint32:
    return _scalar32(machine, aten_arg(args, kwargs, index, name, default), f"{func}: {name}")


@implements("leaky_relu")
def leaky_relu(machine, func, args, kwargs):
    """``x > 0 ? x : x * negative_slope`` (the slope an FP32 number, as torch reads it), one rounding."""
    slope = _scalar_or(machine, args, kwargs, 1, "negative_slope", 0.01, func)
    return _compute(machine, func, args, kwargs, [(0, "self")],
                    lambda x: np.where(_positive(x), x, machine.mul(x, slope)))


@implements("leaky_relu_backward", inplace=False)
def leaky_relu_backward(machine, func, args, kwargs):
    """``self > 0 ? grad : grad * negative_slope``."""
    slope = _scalar_or(machine, args, kwargs, 2, "negative_slope", 0.01, func)
    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "self")],
                    lambda g, x: np.where(_positive(x), g, machine.mul(g, slope)))


@implements("hardtanh")
def hardtanh(machine, func, args, kwargs):
    """``clamp(x, min_val, max_val)`` (torch computes hardtanh and relu6 as clamp)."""
    low = aten_arg(args, kwargs, 1, "min_val", -1)
    high = aten_arg(args, kwargs, 2, "max_val", 1)
    _no_out(func, kwargs)
    return clamp(machine, aten.clamp.default, (args[0], low, high), {})


@implements("hardtanh_backward", inplace=False)
def hardtanh_backward(machine, func, args, kwargs):
    """``min_val < self < max_val ? grad : 0``, compared in FP32 with the bounds as FP32 numbers;
    the gradient's bits are kept. A NaN ``self`` gives 0, as torch's vectorised loop (its scalar
    tail, ``self <= min or self >= max ? 0 : grad``, passes the gradient)."""
    low = _scalar_or(machine, args, kwargs, 2, "min_val", -1, func)
    high = _scalar_or(machine, args, kwargs, 3, "max_val", 1, func)
    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "self")],
                    lambda g, x: np.where(FP32.lt(low, x) & FP32.lt(x, high), g, np.uint32(0)))


@implements("celu")
def celu(machine, func, args, kwargs):
    """``elu(x, alpha, scale=1, input_scale=1/alpha)`` (torch's definition; 1/alpha in double)."""
    alpha = aten_arg(args, kwargs, 1, "alpha", 1.0)
    _no_out(func, kwargs)
    return elu(machine, aten.elu.default, (args[0], alpha, 1.0, 1.0 / alpha), {})


@implements("elu")
def elu(machine, func, args, kwargs):
    """``x > 0 ? x * scale : expm1(x * input_scale) * (alpha * scale)`` (``alpha * scale`` one FP32
    product), one rounding. The emulated expm1, not ``exp(.) - 1`` (ATen's source, which cancels
    near 0): torch 2.13 CPU's results (oneDNN for FP32 and BF16) are those of an accurate expm1
    (measured: FP16/BF16 bit-identical on every input, FP32 within 2 ulps)."""
    alpha = _scalar_or(machine, args, kwargs, 1, "alpha", 1, func)
    scale = _scalar_or(machine, args, kwargs, 2, "scale", 1, func)
    input_scale = _scalar_or(machine, args, kwargs, 3, "input_scale", 1, func)
    negative_coefficient = machine.mul(alpha, scale)

    def steps(x):
        below = machine.mul(_with_nan(machine, fp32math.expm1)(machine.mul(x, input_scale)), negative_coefficient)
        return np.where(_positive(x), machine.mul(x, scale), below)

    return _compute(machine, func, args, kwargs, [(0, "self")], steps)


@implements("elu_backward", inplace=False)
def elu_backward(machine, func, args, kwargs):
    """``y > 0 ? g * scale : g * input_scale * (y + alpha * scale)`` from the result ``y``
    (``is_result``), else ``g * input_scale * (alpha * scale) * exp(x * input_scale)``; FP32 steps
    in torch's order, one rounding."""
    alpha = _scalar_or(machine, args, kwargs, 1, "alpha", 1, func)
    scale = _scalar_or(machine, args, kwargs, 2, "scale", 1, func)
    input_scale = _scalar_or(machine, args, kwargs, 3, "input_scale", 1, func)
    is_result = bool(aten_arg(args, kwargs, 4, "is_result", False))
    negative_coefficient = machine.mul(alpha, scale)
    mul = machine.mul

    def steps(g, b):
        scaled = mul(g, input_scale)
        if is_result:
            below = mul(scaled, machine.add(b, negative_coefficient))
        else:
            below = mul(mul(scaled, negative_coefficient), exp32(machine, mul(b, input_scale)))
        return np.where(_positive(b), mul(g, scale), below)

    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (5, "self_or_result")], steps)


SIX32, ONE_SIXTH32, MINUS_THREE32 = _const(6.0), np.uint32(FP32.div(_const(1.0), _const(6.0))), _const(-3.0)


def _relu6_of_shifted(machine: Machine, x):
    """``min(max(x + 3, 0), 6)`` (NaN kept)."""
    t = machine.add(x, THREE32)
    t = np.where(FP32.lt(t, np.uint32(0)), np.uint32(0), t)
    return np.where(FP32.lt(SIX32, t), SIX32, t)


@implements("hardsigmoid")
def hardsigmoid(machine, func, args, kwargs):
    """``min(max(x + 3, 0), 6) / 6``: FP32 steps, one rounding."""
    return _compute(machine, func, args, kwargs, [(0, "self")],
                    lambda x: machine.div(_relu6_of_shifted(machine, x), SIX32))


@implements("hardsigmoid_backward", inplace=False)
def hardsigmoid_backward(machine, func, args, kwargs):
    """``-3 < x < 3 ? grad * (1/6) : 0`` (``1/6`` the FP32 quotient, as torch's ``1.0f / 6.0f``)."""
    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "self")],
                    lambda g, x: np.where(FP32.lt(MINUS_THREE32, x) & FP32.lt(x, THREE32),
                                          machine.mul(g, ONE_SIXTH32), np.uint32(0)))


@implements("hardswish")
def hardswish(machine, func, args, kwargs):
    """``x * min(max(x + 3, 0), 6) / 6``: FP32 steps (multiply, then divide), one rounding."""
    return _compute(machine, func, args, kwargs, [(0, "self")],
                    lambda x: machine.div(machine.mul(x, _relu6_of_shifted(machine, x)), SIX32))


@implements("hardswish_backward", inplace=False)
def hardswish_backward(machine, func, args, kwargs):
    """``x <= -3 ? 0 : x >= 3 ? grad : grad * (x / 3 + 0.5)`` (torch, measured at +-3): its
    vectorised loop; a NaN ``x`` gives NaN there (torch's scalar tail passes the gradient)."""

    def steps(g, x):
        middle = machine.mul(g, machine.add(machine.div(x, THREE32), HALF32))
        return np.where(FP32.le(x, MINUS_THREE32), np.uint32(0), np.where(FP32.le(THREE32, x), g, middle))

    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "self")], steps)


# -- addcmul, addcdiv, lerp ------------------------------------------------------------------------
@implements("addcmul", "addcdiv")
def addcmul(machine, func, args, kwargs):
    """``self + value * t1 * t2`` as one fma, ``fma(value * t1, t2, self)``, and ``self + value *
    t1 / t2`` (three steps); ``value`` enters as an FP32 number (torch: ``value.to<float>()``)."""
    value = _scalar32(machine, aten_arg(args, kwargs, 3, "value", 1), f"{func}: value")
    divide = func.overloadpacket is aten.addcdiv

    def steps(self, t1, t2):
        scaled = machine.mul(value, t1)
        if divide:
            return machine.add(self, machine.div(scaled, t2))
        return machine.fma(scaled, t2, self)

    return _compute(machine, func, args, kwargs, [(0, "self"), (1, "tensor1"), (2, "tensor2")], steps)


def _lerp32(machine: Machine, start, end, weight):
    """torch CPU's lerp: ``|w| < 0.5 ? fma(w, end - start, start) : fma(w - 1, end - start, end)``."""
    difference = machine.sub(end, start)
    small = FP32.lt(np.asarray(weight) & np.uint32(0x7FFFFFFF), HALF32)
    coefficient = np.where(small, weight, machine.sub(weight, ONE32))
    return machine.fma(coefficient, difference, np.where(small, start, end))


@implements("lerp")
def lerp(machine, func, args, kwargs):
    """``self + w * (end - self)`` for ``|w| < 0.5``, else ``end - (end - self) * (1 - w)``, each as
    one fma after the subtraction (torch 2.13 CPU's vectorised kernel and, measured, its tail). A
    Python weight enters as an FP32 number; a weight tensor is read in the result's dtype."""
    weight = aten_arg(args, kwargs, 2, "weight")
    if isinstance(weight, torch.Tensor):
        return _compute(machine, func, args, kwargs, [(0, "self"), (1, "end"), (2, "weight")],
                        lambda s, e, w: _lerp32(machine, s, e, w))
    w = _scalar32(machine, weight, f"{func}: weight")
    return _compute(machine, func, args, kwargs, [(0, "self"), (1, "end")], lambda s, e: _lerp32(machine, s, e, w))


# -- pow ---------------------------------------------------------------------------------------------
def _exact_exponent(value) -> float | None:
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or value.dtype.is_complex:
            return None
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def _power_steps(machine: Machine, exponent: float, fmt):
    """The FP32 steps of ``x ** exponent`` for the exponents torch CPU special-cases, or None.

    torch computes BF16 ``x**3`` and ``x**-2`` with BFloat16 arithmetic (``x*x`` rounded to BF16
    first) and every FP16 power with ``powf``, whose C99 special cases differ from sqrt's at -0 and
    -inf; both are reproduced."""
    mul, div = machine.mul, machine.div
    if fmt is sf.bf16:
        square = lambda x: machine.widen(machine.narrow(mul(x, x), fmt), fmt)  # noqa: E731
    else:
        square = lambda x: mul(x, x)  # noqa: E731
    steps = {
        2.0: lambda x: mul(x, x),
        3.0: lambda x: mul(square(x), x),
        0.5: machine.sqrt,
        -0.5: lambda x: div(ONE32, machine.sqrt(x)),
        -1.0: lambda x: div(ONE32, x),
        -2.0: lambda x: div(ONE32, square(x)),
    }
    step = steps.get(exponent)
    if step is None or fmt is not sf.fp16 or exponent not in (0.5, -0.5):
        return step
    # powf: pow(-0, 0.5) = +0, pow(-inf, 0.5) = +inf; pow(-0, -0.5) = +inf, pow(-inf, -0.5) = +0.
    zero, inf = np.uint32(0), np.uint32(FP32.inf)
    at_minus_zero, at_minus_inf = (zero, inf) if exponent > 0 else (inf, zero)

    def c99(x):
        x = np.asarray(x)
        result = step(x)
        return np.where(x == np.uint32(FP32.sign_mask), at_minus_zero,
                        np.where(x == np.uint32(FP32.sign_mask | FP32.inf), at_minus_inf, result))

    return c99


def pow32(machine: Machine, x, y):
    """x**y of FP32 patterns: fp32math.pow (C99 special cases), NaN operands per the machine's
    profile, the invalid case (a negative base, a non-integer exponent) its invalid-operation NaN.

    >>> two, half, minus_two = np.uint32(0x40000000), np.uint32(0x3F000000), np.uint32(0xC0000000)
    >>> [hex(b) for b in pow32(Machine(nan="x86"), [two, minus_two], [half, half])]  # sqrt 2, NaN
    ['0x3fb504f3', '0xffc00000']
    """
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    result = fp32math.pow(x, y)
    nan = FP32.is_nan(result)
    if not nan.any():
        return result
    operand_nan = FP32.is_nan(x) | FP32.is_nan(y)
    invalid = machine.sub(np.uint32(FP32.inf), np.uint32(FP32.inf))  # inf - inf: the profile's invalid NaN
    return np.where(nan & operand_nan, machine.propagate_nan(FP32, x, y), np.where(nan, invalid, result))


@implements("pow")
def pow_(machine, func, args, kwargs):
    """``self ** exponent``. A scalar exponent: 0 gives ones (NaN included) and 1 a copy (torch's
    ``pow_out``); for FP16/BF16 the exponent is first rounded to the format (torch converts it);
    2, 3, -1, -2: ``x*x``, ``x*x*x``, ``1/x``, ``1/(x*x)``; 0.5 and -0.5: ``sqrt(x)``,
    ``1/sqrt(x)`` (torch's sqrt / rsqrt kernels), with torch's BF16 and FP16 particulars
    (:func:`_power_steps`); any other exponent, and tensor exponents (``x ** t``, ``2 ** t``):
    the emulated FP32 pow (fp32math.pow, under 1 ulp, C99's special cases). FP32 steps, one
    rounding."""
    _no_out(func, kwargs)
    if func._overloadname != "Tensor_Scalar":
        return _compute(machine, func, args, kwargs, [(0, "self"), (1, "exponent")],
                        lambda x, y: pow32(machine, x, y))
    self, exponent = args[0], aten_arg(args, kwargs, 1, "exponent")
    value = _exact_exponent(exponent)
    if value is None:
        raise NotEmulated(f"{func}: exponent {exponent!r}")
    out = elementwise_result(func, args, kwargs)
    fmt = format_of(out.dtype)
    if fmt is None:
        return _native(func, args, kwargs)
    if value == 0.0:
        return from_bits(np.full(out.shape, fmt.one, dtype=fmt.dtype), out.dtype, out.shape)
    if value == 1.0:
        return from_bits(operand_bits(machine, self, out.dtype), out.dtype, out.shape)
    if fmt is not FP32:  # torch converts the exponent to half / bfloat16 (to nearest even)
        value = float(fmt.to_float(scalar_bits(value, fmt, machine.nan)))
    steps = _power_steps(machine, value, fmt)
    if steps is None:
        y = scalar_bits(value, FP32, machine.nan)
        steps = lambda x: pow32(machine, x, y)  # noqa: E731
    return _compute(machine, func, args, kwargs, [(0, "self")], steps)


def _logit_result(func, operands, kwargs):
    """The result (dtype, shape) of logit or its backward on these operands, None where it runs
    natively; torch CPU computes them for FP16, BF16 and FP32 only."""
    _no_out(func, kwargs)
    out = elementwise_result(func, operands, {})
    if not is_emulated(out.dtype):
        return None
    if out.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise NotEmulated(f"{func} of {out.dtype} (torch CPU has no such kernel)")
    return out


@implements("logit_backward", inplace=False)
def logit_backward(machine, func, args, kwargs):
    """``lo <= x <= hi ? g / (x * (1 - x)) : outside``, each operation rounded into the tensor's
    format (FP16, BF16: torch's ``Vectorized<Half/BFloat16>``; FP32 steps), as torch CPU's
    vectorised loop computes it: ``eps`` (a double, converted to the format as torch converts a
    scalar) gives ``lo = eps``, ``hi = 1 - eps`` (rounded) and ``outside = 0``; no ``eps`` (or one
    below 0 in the format) gives ``lo = 0``, ``hi = 1`` and the profile's NaN outside."""
    out = _logit_result(func, args[:2], kwargs)
    if out is None:
        return _native(func, args, kwargs)
    fmt, step = DTYPE_FORMATS[out.dtype], machine.step
    g, x = (np.broadcast_to(operand_bits(machine, t, out.dtype), out.shape) for t in args[:2])
    eps = aten_arg(args, kwargs, 2, "eps")
    one, zero = fmt.dtype(fmt.one), fmt.dtype(0)
    lo = scalar_bits(-1.0 if eps is None else eps, fmt, machine.nan)
    if fmt.lt(lo, zero):
        lo, hi, outside = zero, one, fmt.sub(fmt.dtype(fmt.inf), fmt.dtype(fmt.inf), **step)  # kNanVec: the invalid NaN
    else:
        hi, outside = fmt.sub(one, lo, **step), zero
    inside = np.asarray(fmt.le(lo, x)) & np.asarray(fmt.le(x, hi))
    value = fmt.div(g, fmt.mul(x, fmt.sub(one, x, **step), **step), **step)
    return from_bits(np.where(inside, value, outside).astype(fmt.dtype), out.dtype, out.shape)


@implements("logit")
def logit(machine, func, args, kwargs):
    """``log(x / (1 - x))``, with ``eps`` (a double converted to the format) ``x`` first clamped to
    ``[eps, 1 - eps]`` (``1 - eps`` rounded into the format; no ``eps``, or one below 0 in the
    format: no clamp). The quotient in the tensor's arithmetic, as torch CPU's kernel forms it
    (FP16, BF16: each of the two operations rounded into the format; FP32 steps), then the
    emulated FP32 log, rounded once into the format."""
    out = _logit_result(func, args[:1], kwargs)
    if out is None:
        return _native(func, args, kwargs)
    fmt, step = DTYPE_FORMATS[out.dtype], machine.step
    x = np.broadcast_to(operand_bits(machine, args[0], out.dtype), out.shape)
    eps = aten_arg(args, kwargs, 1, "eps")
    one, zero = fmt.dtype(fmt.one), fmt.dtype(0)
    lo = scalar_bits(-1.0 if eps is None else eps, fmt, machine.nan)
    if not fmt.lt(lo, zero):
        hi = fmt.sub(one, lo, **step)
        x = np.where(np.asarray(fmt.lt(x, lo)), lo, np.where(np.asarray(fmt.lt(hi, x)), hi, x)).astype(fmt.dtype)
    quotient = fmt.div(x, fmt.sub(one, x, **step), **step)
    log = _with_nan(machine, fp32math.log)(machine.widen(quotient, fmt))
    return from_bits(machine.narrow(log, fmt), out.dtype, out.shape)
