"""Division with a rounding mode (``div(..., rounding_mode="trunc" | "floor")``, ``floor_divide``),
``remainder`` and ``fmod``, and ``sign``: the ops whose results are integers, exact remainders or
exact signs.

Each op is written as torch 2.13's CPU kernel computes it (x86-64: the AVX2 kernels, which torch
also runs on AVX-512 machines), with the mode's conventions: operands widened exactly to FP32, each
step an emulated FP32 operation with the machine's rounding, NaN profile and FTZ, one final rounding
into the result's format. Where torch's kernel itself rounds into FP16/BF16 between steps (division
with ``rounding_mode="floor"`` of two half tensors) the mode rounds there too. docs/torch.md lists
what is computed and the measured differences.
"""
from __future__ import annotations

import numpy as np
import torch

from .activations import _no_out
from .elementwise import _native, mul_div
from .machine import FP32, Machine
from .operands import elementwise_result, is_scalar, operand32, operand_bits
from .opmath import ZERO32
from .registry import NotEmulated, aten, aten_arg, implements
from .steps import Steps, broadcast, fmod32, ieee_16_or_32, integral
from .tensors import DTYPE_FORMATS, bits, from_bits, is_emulated

__all__ = ["div", "floor_divide", "remainder", "sign"]


def _floor_divide_steps(steps: Steps, a, b):
    """torch's ``div_floor_floating_vec``: the quotient of ``a - fmod(a, b)`` by ``b``, corrected by
    one where the remainder's sign differs from ``b``'s, then floored and rounded up when more than
    0.5 above its floor; ``copysign(0, a / b)`` for a zero quotient, ``a / b`` for ``b == 0``."""
    fmt, machine = steps.fmt, steps.machine
    a, b = broadcast(np.asarray(a), np.asarray(b))
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


# -- sign ---------------------------------------------------------------------------------------------------
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
    fmt = ieee_16_or_32(func, DTYPE_FORMATS[out.dtype])
    if fmt is FP32 or _scalar_divisor(other):
        # FP32 steps on the values (a scalar divisor enters as an FP32 number), one rounding.
        a = np.asarray(operand32(machine, self, out.dtype))
        b = np.asarray(operand32(machine, other, out.dtype, scalar="opmath"))
        steps = Steps(machine, FP32)
        if mode == "trunc":
            result = integral(machine, FP32, machine.div(a, b), "trunc")
        else:
            result = _floor_divide_steps(steps, a, b)
        return from_bits(machine.narrow(np.broadcast_to(result, out.shape), fmt), out.dtype, out.shape)
    # Two FP16/BF16 tensors: torch's Vectorized<Half> kernel rounds every step into the format.
    a, b = np.asarray(operand_bits(machine, self, out.dtype)), np.asarray(operand_bits(machine, other, out.dtype))
    steps = Steps(machine, fmt)
    if mode == "trunc":
        result = integral(machine, fmt, steps.div(*broadcast(a, b)), "trunc")
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
    fmt = ieee_16_or_32(func, DTYPE_FORMATS[out.dtype])
    a = np.asarray(operand32(machine, args[0], out.dtype))
    b = np.asarray(operand32(machine, aten_arg(args, kwargs, 1, "other"), out.dtype))
    a, b = broadcast(a, b)
    mod = fmod32(machine, a, b)
    if func.overloadpacket is aten.remainder:
        wrong_sign = ~FP32.eq(mod, ZERO32) & (FP32.lt(b, ZERO32) ^ FP32.lt(mod, ZERO32))
        mod = np.where(wrong_sign, machine.add(mod, b), mod)
    return from_bits(machine.narrow(mod, fmt), out.dtype, out.shape)
