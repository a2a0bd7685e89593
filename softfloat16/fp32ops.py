"""The FP32 arithmetic the algorithms of :mod:`softfloat16.fp32math` run on, the constants they
share, and their exact building blocks.

Each algorithm is written once against an :class:`Fp32Arithmetic`: :data:`EMULATED` does every
operation with ``softfloat16.fp32``; the torch reference of the cross-check
(``sim.crosscheck.torch_exact``) drives the same steps with correctly rounded torch operations.
The constants are public so that every side uses the same bits. The building blocks are exact
(powers of two built from their bits, the sign moved as a bit, TwoSum) or one fma per step (Horner's
rule).
"""
from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

import softfloat16 as sf

__all__ = [
    "EMULATED", "EXP_HIGH", "EXP_LOW", "EXP_TAYLOR", "FP32", "HALF", "INV_LN2", "LN2_HI", "LN2_LO", "LOG_SERIES", "NAN",
    "NEG_INF", "ONE", "POS_INF", "ROUNDER", "SQRT2_BITS", "TWO", "TWO_POW_24", "ZERO", "EmulatedFp32",
    "Fp32Arithmetic", "constant", "fast_two_sum", "horner", "power_of_two", "split_sign", "two_sum", "with_sign",
]

_F32 = sf.fp32


def constant(value: float) -> np.uint32:
    """The FP32 bits of a constant (rounded once from its float64 value).

    >>> hex(constant(0.1))
    '0x3dcccccd'
    """
    return _F32.from_float(np.float64(value))


# The constants, as FP32 bit patterns (np.uint32).
LN2_HI = constant(45426 * 2.0**-16)  # ln 2 to 16 bits: k * LN2_HI is exact for |k| < 256
LN2_LO = constant(math.log(2.0) - 45426 * 2.0**-16)
INV_LN2 = constant(1.0 / math.log(2.0))
ROUNDER = constant(1.5 * 2.0**23)  # t + ROUNDER - ROUNDER rounds t (|t| < 2**22) to an integer
EXP_LOW, EXP_HIGH = constant(-110.0), constant(100.0)
EXP_TAYLOR = tuple(constant(1.0 / math.factorial(n)) for n in range(7, -1, -1))  # 1/7! ... 1/0!
LOG_SERIES = tuple(constant(2.0 / n) for n in (11, 9, 7, 5, 3))
ONE, TWO, HALF = constant(1.0), constant(2.0), constant(0.5)
ZERO = constant(0.0)
TWO_POW_24 = constant(2.0**24)
SQRT2_BITS = 0x3FB504F3  # FP32 sqrt(2), rounded down: the split point of the significand
FP32 = sf.fp32
NAN = np.uint32(FP32.default_nan)
POS_INF, NEG_INF = np.uint32(FP32.inf), np.uint32(FP32.sign_mask | FP32.inf)


class Fp32Arithmetic(Protocol):
    """What the algorithm needs from a side. FP32 *values* are that side's arrays (bit arrays, or
    float32 tensors); *integers* are int64 arrays of that side, for which ``>> & | + - ==`` are
    used directly. Every arithmetic operation is correctly rounded to FP32 (RNE)."""

    def const(self, bits: Any) -> Any: ...  # the FP32 value with these bits (a 0-d value)
    def add(self, a: Any, b: Any) -> Any: ...
    def sub(self, a: Any, b: Any) -> Any: ...
    def mul(self, a: Any, b: Any) -> Any: ...
    def div(self, a: Any, b: Any) -> Any: ...
    def fma(self, a: Any, b: Any, c: Any) -> Any: ...  # a * b + c, one rounding
    def neg(self, a: Any) -> Any: ...
    def lt(self, a: Any, b: Any) -> Any: ...  # IEEE a < b (False with NaN)
    def isnan(self, a: Any) -> Any: ...
    def where(self, mask: Any, a: Any, b: Any) -> Any: ...  # values or integers, scalars broadcast
    def bits(self, a: Any) -> Any: ...  # the bit pattern, as a non-negative integer
    def from_bits(self, bits: Any) -> Any: ...  # integers in [0, 2**32) -> values
    def from_int(self, integers: Any) -> Any: ...  # exact for |n| <= 2**24


class EmulatedFp32:
    """:class:`Fp32Arithmetic` on FP32 bit arrays with ``softfloat16.fp32``: :func:`exp`, :func:`log`."""

    def const(self, bits: Any) -> np.uint32:
        return np.uint32(bits)

    add, sub, mul, div, fma, lt = _F32.add, _F32.sub, _F32.mul, _F32.div, _F32.fma, _F32.lt

    def neg(self, a: np.ndarray) -> np.ndarray:
        return a ^ np.uint32(0x80000000)

    def isnan(self, a: np.ndarray) -> np.ndarray:
        return ~_F32.eq(a, a)

    def where(self, mask: np.ndarray, a: Any, b: Any) -> np.ndarray:
        return np.where(mask, a, b)

    def bits(self, a: np.ndarray) -> np.ndarray:
        return np.asarray(a).astype(np.int64)

    def from_bits(self, bits: np.ndarray) -> np.ndarray:
        return np.asarray(bits).astype(np.uint32)

    def from_int(self, integers: np.ndarray) -> np.ndarray:
        return _F32.from_float(integers)


EMULATED = EmulatedFp32()


def power_of_two(k: Any, ops: Fp32Arithmetic) -> Any:
    """2**k for integers -126 <= k <= 127 (normal numbers only): built from its bits."""
    return ops.from_bits((k + FP32.bias) << FP32.fraction_bits)



def horner(coefficients: tuple, t: Any, ops: Fp32Arithmetic) -> Any:
    """sum c_i t**i by Horner's rule (coefficients from the highest power), one fma per step."""
    value = ops.const(coefficients[0])
    for coefficient in coefficients[1:]:
        value = ops.fma(value, t, ops.const(coefficient))
    return value


def split_sign(x: Any, ops: Fp32Arithmetic) -> tuple[Any, Any]:
    """(|x|, the sign bit of x as an integer)."""
    bits = ops.bits(x)
    return ops.from_bits(bits & FP32.magnitude_mask), bits & FP32.sign_mask


def with_sign(value: Any, sign: Any, ops: Fp32Arithmetic) -> Any:
    return ops.from_bits(ops.bits(value) | sign)



def two_sum(a: Any, b: Any, ops: Fp32Arithmetic) -> tuple[Any, Any]:
    """(a + b rounded, its rounding error), exactly (Knuth's TwoSum, six operations)."""
    total = ops.add(a, b)
    b_virtual = ops.sub(total, a)
    error = ops.add(ops.sub(a, ops.sub(total, b_virtual)), ops.sub(b, b_virtual))
    return total, error


def fast_two_sum(a: Any, b: Any, ops: Fp32Arithmetic) -> tuple[Any, Any]:
    """(a + b rounded, its rounding error) for |a| >= |b| (or a == 0) (Dekker's Fast2Sum)."""
    total = ops.add(a, b)
    return total, ops.sub(b, ops.sub(total, a))

