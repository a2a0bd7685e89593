"""The finishing touches of the op table: vector norms (``clip_grad_norm_``), log1p and the activations
built on it (softplus, mish, log-sigmoid), sign, division with a rounding mode, remainder and fmod,
and the floating-point range factories (arange, linspace, logspace).

Each op is written as torch 2.13's CPU kernel computes it (x86-64: the AVX2 kernels, which torch
also runs on AVX-512 machines), with the mode's conventions: operands widened exactly to FP32, each
step an emulated FP32 operation with the machine's rounding, NaN profile and FTZ, one final rounding
into the result's format. Where torch's kernel itself rounds into FP16/BF16 between steps (division
with ``rounding_mode="floor"`` of two half tensors, linspace), the mode rounds there too. exp, log1p
and tanh are the emulated FP32 algorithms of :mod:`softfloat16.fp32math`, not Sleef's. The double
precision steps of ``arange``/``logspace`` for FP32 (torch computes them in double on the host) are
host IEEE doubles, as in torch. docs/torch.md lists what is computed and the measured differences.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch

import softfloat16 as sf
from softfloat16.formats import Format

from .. import fp32math
from .activations import _compute, _no_out, _scalar32, _with_nan, exp32, pow32, tanh32
from .elementwise import ONE32, _native, mul_div
from .machine import FP32, Machine, scalar_bits
from .operands import elementwise_result, fill_bits, is_scalar, meta_call, operand32, operand_bits
from .reductions import _dims, _rows, row_extreme, row_sums
from .registry import NotEmulated, aten, aten_arg, implements
from .tensors import DTYPE_FORMATS, INTEGER_VIEWS, bits, from_bits, is_emulated

__all__ = ["fmod32", "integral", "log1p32"]

ZERO32 = np.uint32(0)
HALF32 = np.uint32(0x3F000000)
MAGNITUDE32 = np.uint32(0x7FFFFFFF)
SIGN32 = np.uint32(0x80000000)


# -- exact helpers -----------------------------------------------------------------------------------
def integral(machine: Machine, fmt: Format, x, direction: str) -> np.ndarray:
    """``floor`` or ``trunc`` (``direction``) of ``fmt`` patterns: exact (every integral value of a
    format is in it), signed zeros kept (``floor(-0.5) = -1``, ``trunc(-0.5) = -0``); a NaN gives the
    profile's propagated NaN.

    >>> [hex(b) for b in integral(Machine(), sf.fp16, np.array([0x3E00, 0xB800], np.uint16), "floor")]  # 1.5, -0.5
    ['0x3c00', '0xbc00']
    """
    x = np.asarray(x)
    value = np.asarray(fmt.to_float(x), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        whole = np.floor(value) if direction == "floor" else np.trunc(value)
    result = np.asarray(fmt.from_float(np.where(np.isnan(value), 0.0, whole))).astype(fmt.dtype)
    nan = fmt.is_nan(x)
    return np.where(nan, machine.propagate_nan(fmt, x), result) if nan.any() else result


def _broadcast(*arrays: np.ndarray) -> list[np.ndarray]:
    """Read-only views of one broadcast shape (np.broadcast_arrays' views make numba warn)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    return [np.broadcast_to(a, shape) for a in arrays]


def _modular_power_of_two(exponent: np.ndarray, modulus: np.ndarray) -> np.ndarray:
    """``2**exponent mod modulus`` (int64 arrays, ``0 <= exponent < 512``, ``modulus < 2**24``)."""
    result = np.ones_like(modulus) % modulus
    base = np.full_like(modulus, 2) % modulus
    exponent = exponent.copy()
    for _ in range(9):
        result = np.where(exponent & 1, (result * base) % modulus, result)
        base = (base * base) % modulus
        exponent >>= 1
    return result


def _significand(patterns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(integer significand, exponent) of finite FP32 magnitudes: value = significand * 2**exponent."""
    biased = (patterns >> 23).astype(np.int64)
    fraction = (patterns & 0x7FFFFF).astype(np.int64)
    significand = np.where(biased > 0, fraction | (1 << 23), fraction)
    return significand, np.maximum(biased, 1) - 150


def fmod32(machine: Machine, a, b) -> np.ndarray:
    """C's ``fmodf``: ``a - trunc(a / b) * b`` of FP32 patterns, computed exactly (the result is
    always an FP32 number) with integers: ``(ma * 2**(ea - eb)) mod mb`` for ``|a| = ma 2**ea``,
    ``|b| = mb 2**eb``; the sign of ``a``. ``fmod(x, 0)`` and ``fmod(inf, y)`` are the profile's
    invalid NaN, ``fmod(x, inf) = x``, NaN operands propagate as the profile says.

    >>> m = Machine()
    >>> [float(sf.fp32.to_float(fmod32(m, sf.fp32.from_float(a), sf.fp32.from_float(b))))
    ...  for a, b in [(7.5, 2.0), (-7.5, 2.0), (1e30, 7.0), (0.1, 0.03125)]]
    [1.5, -1.5, 1.0, 0.006250001490116119]
    """
    a, b = _broadcast(np.asarray(a, np.uint32), np.asarray(b, np.uint32))
    magnitude_a, magnitude_b = a & MAGNITUDE32, b & MAGNITUDE32
    infinity = np.uint32(FP32.inf)
    ordinary = (magnitude_a < infinity) & (magnitude_b < infinity) & (magnitude_b != 0) & (magnitude_a != 0)
    ma, ea = _significand(np.where(ordinary, magnitude_a, np.uint32(0x3F800000)))
    mb, eb = _significand(np.where(ordinary, magnitude_b, np.uint32(0x3F800000)))
    shift = np.maximum(ea - eb, 0)
    reduced = (ma % mb * _modular_power_of_two(shift, mb)) % mb
    remainder = np.where(ea < eb, ma, reduced)  # ea < eb: |a| < |b| (b is normal there)
    scale = np.where(ea < eb, ea, eb).astype(np.float64)
    exact = np.asarray(FP32.from_float(remainder.astype(np.float64) * np.exp2(scale))).astype(np.uint32)
    result = exact | (a & SIGN32)
    result = np.where((magnitude_b == infinity) | (magnitude_a == 0), a, result)  # fmod(x, inf) = x, fmod(0, y) = 0
    invalid = (magnitude_b == 0) | (magnitude_a == infinity)
    if invalid.any():
        result = np.where(invalid, machine.sub(np.uint32(FP32.inf), np.uint32(FP32.inf)), result)
    nan = FP32.is_nan(a) | FP32.is_nan(b)
    if nan.any():
        result = np.where(nan, machine.propagate_nan(FP32, a, b), result)
    return result


class _Steps:
    """+ - / and comparisons in one format with the machine's rounding: FP32 (the opmath steps) or
    FP16/BF16 where torch's kernel computes in ``Vectorized<Half>`` (each operation rounded)."""

    def __init__(self, machine: Machine, fmt: Format) -> None:
        self.machine, self.fmt = machine, fmt
        self.one = fmt.dtype(fmt.one)
        self.half = fmt.dtype(sf.convert(HALF32, src=FP32, dst=fmt)) if fmt is not FP32 else HALF32
        self.zero = fmt.dtype(0)

    def add(self, a, b):
        return self.fmt.add(a, b, **self.machine.step)

    def sub(self, a, b):
        return self.fmt.sub(a, b, **self.machine.step)

    def div(self, a, b):
        return self.fmt.div(a, b, **self.machine.step)

    def fmod(self, a, b):
        if self.fmt is FP32:
            return fmod32(self.machine, a, b)
        wide = fmod32(self.machine, self.machine.widen(a, self.fmt), self.machine.widen(b, self.fmt))
        return np.asarray(sf.convert(wide, src=FP32, dst=self.fmt, nan=self.machine.nan))  # exact

    def negative(self, a):
        return self.fmt.lt(a, self.zero)

    def is_zero(self, a):
        return self.fmt.eq(a, self.zero)


def _floor_divide_steps(steps: _Steps, a, b):
    """torch's ``div_floor_floating_vec``: the quotient of ``a - fmod(a, b)`` by ``b``, corrected by
    one where the remainder's sign differs from ``b``'s, then floored and rounded up when more than
    0.5 above its floor; ``copysign(0, a / b)`` for a zero quotient, ``a / b`` for ``b == 0``."""
    fmt, machine = steps.fmt, steps.machine
    a, b = _broadcast(np.asarray(a), np.asarray(b))
    basic = steps.div(a, b)
    mod = steps.fmod(a, b)
    overflowed = fmt.is_inf(basic) & ~fmt.is_inf(a)  # Sleef's fmod leaves a case to this fix-up
    quotient = steps.div(np.where(overflowed, a, steps.sub(a, mod)), b)
    # mod != 0 is an unordered compare in torch (true for NaN): a NaN stays NaN either way.
    adjust = ~steps.is_zero(mod) & (steps.negative(b) ^ steps.negative(mod))
    quotient = np.where(adjust, steps.sub(quotient, steps.one), quotient)
    floor = integral(machine, fmt, quotient, "floor")
    floor = np.where(fmt.lt(steps.half, steps.sub(quotient, floor)), steps.add(floor, steps.one), floor)
    signed_zero = basic & fmt.dtype(fmt.sign_mask)
    floor = np.where(steps.is_zero(quotient), signed_zero, floor)
    return np.where(steps.is_zero(b), basic, floor)


# -- sign ------------------------------------------------------------------------------------------------
@implements("sign", "sgn")
def sign(machine, func, args, kwargs):
    """``1`` for ``x > 0``, ``-1`` for ``x < 0``, ``+0`` otherwise (``-0`` and NaN included: torch's
    ``(0 < x) - (x < 0)``). Exact; ``sgn`` of a real tensor is ``sign``."""
    _no_out(func, kwargs)
    out = elementwise_result(func, args, kwargs)
    fmt = DTYPE_FORMATS.get(out.dtype)
    if fmt is None:
        return _native(func, args, kwargs)
    if not fmt.signed:
        raise NotEmulated(f"{func} of the unsigned {fmt.name}")
    x = np.asarray(bits(args[0]))
    zero, one = fmt.dtype(0), fmt.dtype(fmt.one)
    result = np.where(fmt.lt(zero, x), one, np.where(fmt.lt(x, zero), one | fmt.dtype(fmt.sign_mask), zero))
    return from_bits(result, out.dtype, out.shape)


# -- division with a rounding mode, remainder, fmod -----------------------------------------------
def _scalar_divisor(other) -> bool:
    """Whether torch's TensorIterator sees the divisor as a scalar (a number, or one element
    broadcast everywhere): its FP16/BF16 kernels then compute in FP32 with the divisor's value."""
    return is_scalar(other) or (isinstance(other, torch.Tensor) and other.numel() == 1)


def _rounded_division(machine: Machine, func, args, kwargs, mode: str):
    """(the quotient rounded as ``mode`` says, or None when the result's dtype is not emulated)."""
    self, other = args[0], aten_arg(args, kwargs, 1, "other")
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return None
    fmt = DTYPE_FORMATS[out.dtype]
    if fmt.width < 16 or fmt.encoding != "ieee":
        raise NotEmulated(f"{func} of {fmt.name}")
    if fmt is FP32 or _scalar_divisor(other):
        # FP32 steps on the values (a scalar divisor enters as an FP32 number), one rounding.
        a = np.asarray(operand32(machine, self, out.dtype))
        b = np.asarray(operand32(machine, other, out.dtype, scalar="opmath"))
        steps = _Steps(machine, FP32)
        if mode == "trunc":
            result = integral(machine, FP32, machine.div(a, b), "trunc")
        else:
            result = _floor_divide_steps(steps, a, b)
        return from_bits(machine.narrow(np.broadcast_to(result, out.shape), fmt), out.dtype, out.shape)
    # Two FP16/BF16 tensors: torch's Vectorized<Half> kernel rounds every step into the format.
    a, b = np.asarray(operand_bits(machine, self, out.dtype)), np.asarray(operand_bits(machine, other, out.dtype))
    steps = _Steps(machine, fmt)
    if mode == "trunc":
        result = integral(machine, fmt, steps.div(*_broadcast(a, b)), "trunc")
    else:
        result = _floor_divide_steps(steps, a, b)
    return from_bits(np.broadcast_to(result, out.shape), out.dtype, out.shape)


def _write_in_place(machine: Machine, func, target: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    if result.dtype != target.dtype:
        if not is_emulated(target.dtype):
            raise NotEmulated(f"{func}: a result of {result.dtype} written into {target.dtype}")
        result = machine.convert(result, target.dtype)
    return target.copy_(result)


@implements("div")
def div(machine, func, args, kwargs):
    """True division (the elementwise ``div``), or with ``rounding_mode``: ``"trunc"``:
    ``trunc(a / b)``; ``"floor"``: torch's ``div_floor_floating`` (:func:`_floor_divide_steps`).
    FP32 steps and one rounding, except for two FP16/BF16 tensors, where torch rounds ``a / b``
    (and each floor step) into the format first."""
    mode = aten_arg(args, kwargs, 2, "rounding_mode")
    if mode is None:
        return mul_div(machine, func, args, kwargs)
    if mode not in ("trunc", "floor"):
        raise ValueError(f"{func}: rounding_mode must be None, 'trunc' or 'floor', got {mode!r}")
    _no_out(func, kwargs)
    result = _rounded_division(machine, func, args, kwargs, mode)
    return _native(func, args, kwargs) if result is None else result


@implements("floor_divide", "floor_divide_", inplace=False)
def floor_divide(machine, func, args, kwargs):
    """``a // b``: ``div(a, b, rounding_mode="floor")``; the in-place form rounds into ``self``."""
    _no_out(func, kwargs)
    result = _rounded_division(machine, func, args, kwargs, "floor")
    if result is None:
        return _native(func, args, kwargs)
    if func.overloadpacket is aten.floor_divide_:
        return _write_in_place(machine, func, args[0], result)
    return result


@implements("remainder", "fmod")
def remainder(machine, func, args, kwargs):
    """``fmod(a, b)`` (exact, :func:`fmod32`); ``remainder`` adds ``b`` when that remainder is
    nonzero with a sign other than ``b``'s (torch CPU's kernel: one FP32 addition, one rounding).
    A scalar operand is converted to the tensor's dtype first, as torch converts it."""
    _no_out(func, kwargs)
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    fmt = DTYPE_FORMATS[out.dtype]
    if fmt.width < 16 or fmt.encoding != "ieee":
        raise NotEmulated(f"{func} of {fmt.name}")
    a = np.asarray(operand32(machine, args[0], out.dtype))
    b = np.asarray(operand32(machine, aten_arg(args, kwargs, 1, "other"), out.dtype))
    a, b = _broadcast(a, b)
    mod = fmod32(machine, a, b)
    if func.overloadpacket is aten.remainder:
        wrong_sign = ~FP32.eq(mod, ZERO32) & (FP32.lt(b, ZERO32) ^ FP32.lt(mod, ZERO32))
        mod = np.where(wrong_sign, machine.add(mod, b), mod)
    return from_bits(machine.narrow(mod, fmt), out.dtype, out.shape)


# -- log1p, softplus, mish, log-sigmoid ---------------------------------------------------------------
def log1p32(machine: Machine, x):
    """log(1 + x) of FP32 patterns: fp32math.log1p, NaN per the machine's profile.

    >>> [hex(b) for b in log1p32(Machine(), np.array([0x3A83126F, 0xBF800000], np.uint32))]  # 1e-3, -1
    ['0x3a8301ab', '0xff800000']
    """
    return _with_nan(machine, fp32math.log1p)(x)


@implements("log1p")
def log1p(machine, func, args, kwargs):
    """log(1 + x): the emulated FP32 log1p (fp32math.log1p, under 1 ulp), rounded once."""
    return _compute(machine, func, args, kwargs, [(0, "self")], lambda x: log1p32(machine, x))


def _beta_threshold(machine: Machine, func, args, kwargs, first: int) -> tuple[np.uint32, np.uint32]:
    beta = _scalar32(machine, aten_arg(args, kwargs, first, "beta", 1), f"{func}: beta")
    threshold = _scalar32(machine, aten_arg(args, kwargs, first + 1, "threshold", 20), f"{func}: threshold")
    return beta, threshold


@implements("softplus")
def softplus(machine, func, args, kwargs):
    """``x * beta > threshold ? x : log1p(exp(x * beta)) / beta`` (beta, threshold as FP32 numbers):
    FP32 steps, one rounding (torch CPU's kernel)."""
    beta, threshold = _beta_threshold(machine, func, args, kwargs, 1)

    def steps(x):
        scaled = machine.mul(x, beta)
        soft = machine.div(log1p32(machine, exp32(machine, scaled)), beta)
        return np.where(FP32.lt(threshold, scaled), x, soft)

    return _compute(machine, func, args, kwargs, [(0, "self")], steps)


@implements("softplus_backward", inplace=False)
def softplus_backward(machine, func, args, kwargs):
    """``x * beta > threshold ? g : g * z / (z + 1)`` with ``z = exp(x * beta)``: FP32 steps, one rounding."""
    beta, threshold = _beta_threshold(machine, func, args, kwargs, 2)

    def steps(g, x):
        scaled = machine.mul(x, beta)
        z = exp32(machine, scaled)
        return np.where(FP32.lt(threshold, scaled), g, machine.div(machine.mul(g, z), machine.add(z, ONE32)))

    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "self")], steps)


def _tanh_softplus(machine: Machine, x):
    return tanh32(machine, log1p32(machine, exp32(machine, x)))


@implements("mish")
def mish(machine, func, args, kwargs):
    """``x * tanh(log1p(exp(x)))``: FP32 steps, one rounding."""
    return _compute(machine, func, args, kwargs, [(0, "self")],
                    lambda x: machine.mul(x, _tanh_softplus(machine, x)))


@implements("mish_backward", inplace=False)
def mish_backward(machine, func, args, kwargs):
    """``g * (t + x * s * (1 - t * t))`` with ``s = 1 / (1 + exp(-x))``, ``t = tanh(log1p(exp(x)))``;
    ``1 - t * t`` and the outer ``t + ...`` are fmas (torch CPU, measured). FP32 steps, one rounding."""

    def steps(g, x):
        s = machine.div(ONE32, machine.add(ONE32, exp32(machine, machine.neg(x))))
        t = _tanh_softplus(machine, x)
        inner = machine.fma(machine.mul(x, s), machine.fma(machine.neg(t), t, ONE32), t)
        return machine.mul(g, inner)

    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "self")], steps)


@implements("log_sigmoid_forward", inplace=False)
def log_sigmoid_forward(machine, func, args, kwargs):
    """``(min(x, 0) - log1p(b), b)`` with the buffer ``b = exp(-|x|)``: FP32 steps; the output and the
    buffer each rounded once into the input's dtype (torch CPU keeps the buffer in that dtype)."""
    _no_out(func, kwargs)
    self = args[0]
    if not is_emulated(self.dtype):
        return _native(func, args, kwargs)
    fmt = DTYPE_FORMATS[self.dtype]
    x = machine.widen(bits(self), fmt)
    buffer = exp32(machine, machine.neg(np.asarray(x) & MAGNITUDE32))
    nan = FP32.is_nan(x)
    smaller = np.where(FP32.lt(x, ZERO32), x, ZERO32)
    if nan.any():  # torch's vectorised minimum returns a NaN
        smaller = np.where(nan, machine.propagate_nan(FP32, x), smaller)
    output = machine.sub(smaller, log1p32(machine, buffer))
    return (from_bits(machine.narrow(output, fmt), self.dtype, self.shape),
            from_bits(machine.narrow(buffer, fmt), self.dtype, self.shape))


@implements("log_sigmoid_backward", inplace=False)
def log_sigmoid_backward(machine, func, args, kwargs):
    """``(x < 0 ? 1 - b / (1 + b) : b / (1 + b)) * g`` from the saved buffer ``b`` (torch CPU's
    ``(max_deriv - sign * (b / (1 + b))) * g``): FP32 steps, one rounding."""

    def steps(g, x, b):
        share = machine.div(b, machine.add(ONE32, b))
        return machine.mul(np.where(FP32.lt(x, ZERO32), machine.sub(ONE32, share), share), g)

    return _compute(machine, func, args, kwargs, [(0, "grad_output"), (1, "self"), (2, "buffer")], steps)


# -- vector norms --------------------------------------------------------------------------------------
@implements("linalg_vector_norm", inplace=False)
def linalg_vector_norm(machine, func, args, kwargs):
    """``torch.linalg.vector_norm`` (and ``torch.norm``, ``_foreach_norm``, ``clip_grad_norm_``) as
    torch CPU's reduction kernels define it, over the reduced elements in row-major order:
    ord 2 ``sqrt(sum(x * x))`` (squares rounded to FP32, the FP32 sum of ``sum``'s order), 1
    ``sum(|x|)``, inf / -inf ``max |x|`` / ``min |x|`` (a NaN wins), 0 the count of nonzero
    elements (NaN counts), any other p ``pow(sum(pow(|x|, p)), 1 / p)`` (fp32math.pow, ``1 / p`` an FP32
    division); one rounding. ``dtype`` converts first; reducing only dimensions of size 1 gives ``|x|``
    (``x != 0`` for ord 0), as torch."""
    self = args[0]
    ord_ = aten_arg(args, kwargs, 1, "ord", 2)
    dim = aten_arg(args, kwargs, 2, "dim")
    dtype = kwargs.get("dtype")
    _no_out(func, kwargs)
    out = meta_call(func, args, kwargs)  # torch's checks, result dtype and shape
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    if not is_emulated(self.dtype):
        raise NotEmulated(f"{func} of a {self.dtype} tensor")
    if isinstance(ord_, torch.Tensor) or not is_scalar(ord_):
        raise NotEmulated(f"{func}: ord {ord_!r}")
    x = self if dtype is None or dtype == self.dtype else machine.convert(self, dtype)
    fmt = DTYPE_FORMATS[out.dtype]
    if fmt.precision > 24 or fmt.encoding != "ieee" or fmt.width < 16:
        raise NotEmulated(f"{func} of {fmt.name}")
    if x.numel() == 0:
        return _native(func, args, kwargs)  # torch's zeros, or its refusal
    p = float(ord_)
    dims = _dims(x, dim)
    rows = np.asarray(_rows(x, dims))
    magnitudes = rows & fmt.dtype(fmt.magnitude_mask)
    if rows.shape[1] == 1:  # torch: abs(x), or x != 0 for ord 0, in the result's dtype
        result = (~fmt.eq(rows, fmt.dtype(0))).astype(fmt.dtype) * fmt.dtype(fmt.one) if p == 0 else magnitudes
        return from_bits(result[:, 0], out.dtype, out.shape)
    if p in (math.inf, -math.inf):
        return from_bits(row_extreme(machine, magnitudes, fmt, largest=p > 0), out.dtype, out.shape)
    if p == 0:
        counted = np.where(fmt.eq(rows, fmt.dtype(0)), fmt.dtype(0), fmt.dtype(fmt.one))
        total = row_sums(machine, counted, fmt, FP32)
    elif p == 1:
        total = row_sums(machine, magnitudes, fmt, FP32)
    else:
        wide = np.asarray(machine.widen(magnitudes, fmt))
        if p == 2:
            terms = machine.mul(wide, wide)
        else:
            terms = pow32(machine, wide, scalar_bits(p, FP32, machine.nan))
        total = row_sums(machine, np.asarray(terms), FP32, FP32)
        if p == 2:
            total = machine.sqrt(total)
        else:
            reciprocal = machine.div(ONE32, scalar_bits(p, FP32, machine.nan))
            total = pow32(machine, total, reciprocal)
    return from_bits(machine.narrow(np.asarray(total), fmt), out.dtype, out.shape)


@implements("norm", inplace=False)
def norm(machine, func, args, kwargs):
    """The older ``aten.norm`` overloads (reached from C++ callers; ``torch.norm`` itself calls
    ``linalg_vector_norm``): ``linalg_vector_norm`` with ``p`` (None: 2), ``dim``, ``keepdim``, ``dtype``."""
    name = func._overloadname
    if name not in ("Scalar", "ScalarOpt_dim", "ScalarOpt_dtype", "ScalarOpt_dim_dtype"):
        raise NotEmulated(f"{func}")
    p = aten_arg(args, kwargs, 1, "p")
    dim = aten_arg(args, kwargs, 2, "dim") if "dim" in name else None
    keepdim = bool(aten_arg(args, kwargs, 3, "keepdim", False)) if "dim" in name else False
    call = {"dtype": kwargs["dtype"]} if kwargs.get("dtype") is not None else {}
    return linalg_vector_norm(machine, aten.linalg_vector_norm.default,
                              (args[0], 2 if p is None else p, dim, keepdim), call)


# -- arange, linspace, logspace ------------------------------------------------------------------------
_LANES = {4: 8, 2: 16}  # torch's AVX2 Vectorized<float> / Vectorized<Half, BFloat16> widths


def _scalar_value(value, what: str):
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise NotEmulated(f"{what}: a tensor of shape {tuple(value.shape)}")
        value = value.item()
    if not is_scalar(value):
        raise TypeError(f"{what}: expected a real number, got {value!r}")
    return value


def _fma64(a: float, b: int, c: float) -> float:
    """``a * b + c`` in double with one rounding (torch's contracted double expression): exact
    rational arithmetic, rounded to nearest even by Python's int division."""
    return float(Fraction(a) * b + Fraction(c))


def _to_fp32(machine: Machine, values: np.ndarray, final: bool) -> np.ndarray:
    """Doubles rounded into FP32 by the machine (RNE steps; the final rounding may be stochastic)."""
    return np.asarray(FP32.from_float(np.asarray(values, np.float64), **(machine.final() if final else machine.step)))


def _integers(machine: Machine, integers: np.ndarray, fmt: Format) -> np.ndarray:
    """int64 values converted as ``static_cast<float>`` (and then to ``fmt``) converts them."""
    wide = np.asarray(FP32.from_float(integers.astype(np.int64), **machine.step))
    return wide if fmt is FP32 else np.asarray(sf.convert(wide, src=FP32, dst=fmt, **machine.step))


def _write(result: torch.Tensor, patterns: np.ndarray) -> torch.Tensor:
    fmt = DTYPE_FORMATS[result.dtype]
    signed = np.asarray(patterns, dtype=fmt.dtype).view({1: np.uint8, 2: np.int16, 4: np.int32}[fmt.width // 8])
    result.view(INTEGER_VIEWS[result.element_size()]).copy_(torch.from_numpy(np.ascontiguousarray(signed))
                                                             .reshape(result.shape))
    return result


def _arange_values(machine: Machine, start, step, count: int, fmt: Format) -> np.ndarray:
    """torch CPU's ``arange`` kernel: its vectorised loop (two vectors of ``L`` lanes per iteration)
    fills each vector from ``base = start + step * i`` as ``base + j * step``; the last
    ``count % (2 L)`` elements are ``start + step * i`` one by one."""
    lanes = _LANES.get(fmt.width // 8, 8)
    index = np.arange(count, dtype=np.int64)
    vectorised = count - count % (2 * lanes)
    chunk, lane = index - index % lanes, index % lanes
    if fmt is FP32:  # in double (torch's accumulate type for float); the scalar expression is one fma
        start, step = float(start), float(step)
        bases = np.array([_fma64(step, c, start) for c in range(0, vectorised, lanes)], dtype=np.float64)
        base32 = _to_fp32(machine, bases, final=False)[index[:vectorised] // lanes]
        with np.errstate(over="ignore", invalid="ignore"):
            lanes_value = FP32.to_float(base32) + lane[:vectorised].astype(np.float64) * step
        tail = np.array([_fma64(step, int(i), start) for i in index[vectorised:]], dtype=np.float64)
        return _to_fp32(machine, np.concatenate([lanes_value, tail]), final=True)
    start32, step32 = scalar_bits(start, FP32, machine.nan), scalar_bits(step, FP32, machine.nan)
    base = machine.widen(machine.narrow(machine.fma(step32, _integers(machine, chunk, FP32), start32), fmt), fmt)
    in_vector = machine.add(base, machine.mul(_integers(machine, lane, FP32), step32))
    one_by_one = machine.fma(step32, _integers(machine, index, FP32), start32)
    return machine.narrow(np.where(index < vectorised, in_vector, one_by_one), fmt)


@implements("arange", inplace=False)
def arange(machine, func, args, kwargs):
    """``arange`` in a floating dtype: torch computes the size and checks the arguments, then the
    values are torch CPU's: FP16/BF16 ``start + step * i`` (start, step as FP32 numbers; one FP32
    fma, rounded into the format, for the first element of each vector of 16 and the elements after
    the last pair of vectors; the others ``base + j * step`` from that rounded first element, FP32
    steps, one rounding); FP32 the same with double steps (``fma(step, i, start)`` exactly rounded to
    double, vectors of 8) rounded into FP32."""
    result = func(*args, **kwargs)
    if not is_emulated(result.dtype) or result.numel() == 0:
        return result
    fmt = DTYPE_FORMATS[result.dtype]
    if fmt.precision > 24 or fmt.width < 16 or fmt.encoding != "ieee":
        raise NotEmulated(f"{func} of {fmt.name}")
    name = func._overloadname
    if name == "default":
        start, step = 0, 1
    elif name == "start":
        start, step = args[0], 1
    elif name == "start_step":
        start, step = args[0], aten_arg(args, kwargs, 2, "step", 1)
    else:
        raise NotEmulated(f"{func}")
    start, step = _scalar_value(start, f"{func}: start"), _scalar_value(step, f"{func}: step")
    return _write(result, _arange_values(machine, start, step, result.numel(), fmt))


def _range_arguments(func, args, kwargs):
    start = _scalar_value(aten_arg(args, kwargs, 0, "start"), f"{func}: start")
    end = _scalar_value(aten_arg(args, kwargs, 1, "end"), f"{func}: end")
    return start, end, int(aten_arg(args, kwargs, 2, "steps"))


@implements("linspace", inplace=False)
def linspace(machine, func, args, kwargs):
    """``linspace`` in a floating dtype, torch CPU's kernel: start and end converted to the dtype,
    ``step = (end - start) / (steps - 1)``, ``start + step * i`` for the first ``steps // 2``
    elements and ``end - step * (steps - 1 - i)`` for the rest. FP32: each half one fma; FP16/BF16:
    every operation in the format (the index too is converted to it), as torch's ``Half``
    arithmetic rounds. ``steps == 1`` gives ``start``."""
    result = func(*args, **kwargs)
    if not is_emulated(result.dtype) or result.numel() == 0:
        return result
    fmt = DTYPE_FORMATS[result.dtype]
    if fmt.precision > 24 or fmt.width < 16 or fmt.encoding != "ieee":
        raise NotEmulated(f"{func} of {fmt.name}")
    start, end, steps = _range_arguments(func, args, kwargs)
    first, last = scalar_bits(start, fmt, machine.nan), scalar_bits(end, fmt, machine.nan)
    if steps == 1:
        return fill_bits(result, first)
    index = np.arange(steps, dtype=np.int64)
    lower = index < steps // 2
    if fmt is FP32:
        step = machine.div(machine.sub(last, first), _integers(machine, np.int64(steps - 1), FP32))
        values = np.where(lower, machine.fma(step, _integers(machine, index, FP32), first),
                          machine.fma(machine.neg(step), _integers(machine, steps - 1 - index, FP32), last))
        return _write(result, values)
    arithmetic = _Steps(machine, fmt)
    step = arithmetic.div(arithmetic.sub(last, first), _integers(machine, np.int64(steps - 1), fmt))
    up = fmt.mul(step, _integers(machine, index, fmt), **machine.step)
    down = fmt.mul(step, _integers(machine, steps - 1 - index, fmt), **machine.step)
    return _write(result, np.where(lower, arithmetic.add(first, up), arithmetic.sub(last, down)))


@implements("logspace", inplace=False)
def logspace(machine, func, args, kwargs):
    """``logspace`` in a floating dtype, torch CPU's loop: start and end converted to the dtype, their
    difference in the dtype, then in double on the host ``step = difference / (steps - 1)``,
    ``base ** (start + step * i)`` (first half) or ``base ** (end - step * (steps - 1 - i))`` (libm's
    ``pow``, as torch), converted as a float64 tensor is (through FP32). ``steps == 1``:
    ``base ** start`` in double."""
    result = func(*args, **kwargs)
    if not is_emulated(result.dtype) or result.numel() == 0:
        return result
    fmt = DTYPE_FORMATS[result.dtype]
    if fmt.precision > 24 or fmt.width < 16 or fmt.encoding != "ieee":
        raise NotEmulated(f"{func} of {fmt.name}")
    start, end, steps = _range_arguments(func, args, kwargs)
    base = float(_scalar_value(aten_arg(args, kwargs, 3, "base", 10.0), f"{func}: base"))
    with np.errstate(all="ignore"):
        if steps == 1:
            return fill_bits(result, scalar_bits(float(np.power(base, float(start))), fmt, machine.nan))
        first, last = scalar_bits(start, fmt, machine.nan), scalar_bits(end, fmt, machine.nan)
        difference = float(fmt.to_float(fmt.sub(last, first, **machine.step)))
        step = difference / (steps - 1)
        index = np.arange(steps, dtype=np.float64)
        exponent = np.where(index < steps // 2, float(fmt.to_float(first)) + step * index,
                            float(fmt.to_float(last)) - step * (steps - 1 - index))
        values = np.power(base, exponent)
    wide = _to_fp32(machine, values, final=fmt is FP32)
    return _write(result, wide if fmt is FP32 else machine.narrow(wide, fmt))
