"""The exact pieces and the arithmetic steps shared by the ops written as torch's CPU kernels
compute them (division with a rounding mode, remainder, the range factories, the norms): which
formats those kernels exist for, ``floor``/``trunc`` and ``fmod`` computed exactly, and + - / in one
format with the machine's rounding (:class:`Steps`).
"""
from __future__ import annotations

import numpy as np

import softfloat16 as sf
from softfloat16.formats import Format

from .activations import HALF32
from .machine import FP32, Machine
from .opmath import MAGNITUDE32, SIGN32
from .registry import NotEmulated

__all__ = ["Steps", "broadcast", "fmod32", "ieee_16_or_32", "integral"]


def ieee_16_or_32(func, fmt: Format) -> Format:
    """``fmt`` when it is FP16, BF16 or FP32, the formats torch's CPU kernels of these ops compute in;
    for any other (the FP8 formats, E8M0) the op is not emulated.

    >>> ieee_16_or_32("aten.fmod", sf.bf16).name
    'bf16'
    >>> ieee_16_or_32("aten.fmod", sf.fp8_e5m2)
    Traceback (most recent call last):
    softfloat16.torch.registry.NotEmulated: aten.fmod of fp8_e5m2
    """
    if not fmt.ieee_like or not 16 <= fmt.width <= 32:
        raise NotEmulated(f"{func} of {fmt.name}")
    return fmt


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


def broadcast(*arrays: np.ndarray) -> list[np.ndarray]:
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
    a, b = broadcast(np.asarray(a, np.uint32), np.asarray(b, np.uint32))
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


class Steps:
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


