"""log1p and the activations built on it: softplus, mish and log-sigmoid (with their backwards).

Each op is written as torch 2.13's CPU kernel computes it (x86-64: the AVX2 kernels, which torch
also runs on AVX-512 machines), with the mode's conventions: operands widened exactly to FP32, each
step an emulated FP32 operation with the machine's rounding, NaN profile and FTZ, one final rounding
into the result's format. exp, log1p and tanh are the emulated FP32 algorithms of
:mod:`softfloat16.fp32math`, not Sleef's. docs/torch.md lists what is computed and the measured
differences.
"""
from __future__ import annotations

import numpy as np

from .. import fp32math
from .activations import _compute, _no_out, _scalar32, _with_nan, exp32, tanh32
from .elementwise import ONE32, _native
from .machine import FP32, Machine
from .opmath import MAGNITUDE32, ZERO32
from .registry import aten_arg, implements
from .tensors import DTYPE_FORMATS, bits, from_bits, is_emulated

__all__ = ["log1p32"]


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
