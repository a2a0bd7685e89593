"""The FP32 "opmath" pieces shared by the ops that compute in FP32 steps and round once
(normalization, variance, dropout, scatter-adds, attention): operands widened exactly to FP32,
Python numbers as FP32 constants, FP32 sums in the machine's order, the two-pass moments of rows,
and the one rounding into the result's dtype.

Sums run in FP32 in the machine's ``order`` over the elements in index order, from +0
(:func:`sum32`): they are the FP32 accumulators inside these ops, whatever the machine's
``accumulate`` (which governs the matmuls, ``sum`` and ``mean``).
"""
from __future__ import annotations

import numpy as np
import torch

from .machine import FP32, Machine, scalar_bits
from .reductions import row_sums
from .registry import NotEmulated
from .tensors import DTYPE_FORMATS, bits, from_bits

__all__ = ["ARITHMETIC", "MAGNITUDE32", "SIGN32", "ZERO32", "centered32", "constant32", "moments32", "result32",
           "sum32", "widen32"]

#: The dtypes these ops compute in (the float8 formats have no normalization or dropout in torch).
ARITHMETIC = (torch.float16, torch.bfloat16, torch.float32)
ZERO32 = np.uint32(0)
MAGNITUDE32 = np.uint32(0x7FFFFFFF)
SIGN32 = np.uint32(0x80000000)


def widen32(machine: Machine, tensor: torch.Tensor, op: str = "", name: str = "") -> np.ndarray:
    """FP32 patterns of a float16/bfloat16/float32 tensor, in its shape (row-major order).

    >>> hex(int(widen32(Machine(), torch.tensor([1.5], dtype=torch.float16))[0]))
    '0x3fc00000'
    """
    if tensor.dtype not in ARITHMETIC:
        raise NotEmulated(f"{op}: {name or 'a tensor'} of dtype {tensor.dtype} (emulated: float16, bfloat16, "
                          "float32)")
    return np.asarray(machine.widen(bits(tensor), DTYPE_FORMATS[tensor.dtype])).reshape(tuple(tensor.shape))


def constant32(value) -> np.uint32:
    """A Python number as an FP32 pattern, as torch's CPU kernels turn a double argument into a
    float (nearest even; integers up to 2**24 are exact).

    >>> hex(int(constant32(0.1)))
    '0x3dcccccd'
    """
    return np.uint32(scalar_bits(value, FP32))


def sum32(machine: Machine, rows32: np.ndarray) -> np.ndarray:
    """FP32 sums of the rows of an (m, k) array of FP32 patterns: FP32 accumulation in the
    machine's order, elements in index order, from +0 (an empty row sums to +0).

    >>> m = Machine()
    >>> rows = np.array([[0x3F800000, 0x33800000, 0x33800000]], np.uint32)   # 1, 2**-24, 2**-24
    >>> hex(int(sum32(m, rows)[0]))      # each 2**-24 is half an ulp of 1: a tie, to even, twice
    '0x3f800000'
    """
    rows32 = np.asarray(rows32, dtype=np.uint32)
    if rows32.shape[0] == 0:
        return np.zeros(0, np.uint32)
    return np.asarray(row_sums(machine, rows32, FP32, accumulate=FP32), dtype=np.uint32)



def result32(machine: Machine, patterns32, dtype: torch.dtype, shape) -> torch.Tensor:
    """FP32 patterns rounded once (by the machine) into a tensor of ``dtype`` and ``shape``."""
    return from_bits(machine.narrow(np.asarray(patterns32, np.uint32), DTYPE_FORMATS[dtype]), dtype, shape)


def moments32(machine: Machine, rows32: np.ndarray, correction=0):
    """(mean, variance, deviations) of each row of an (m, n) FP32 array, in FP32 steps:
    ``mean = sum(x) / n``; ``var = sum((x - mean)**2) / max(n - correction, 0)`` (two passes,
    squares rounded to FP32, sums by :func:`sum32`).

    >>> m = Machine()
    >>> x = np.array([[0x3F800000, 0x40000000, 0x40400000]], np.uint32)   # 1, 2, 3
    >>> mean, var, _ = moments32(m, x, correction=1)
    >>> [hex(int(mean[0])), hex(int(var[0]))]                             # 2 and 1
    ['0x40000000', '0x3f800000']
    """
    mean, deviations, squares = centered32(machine, rows32)
    divisor = max(rows32.shape[1] - correction, 0)
    return mean, np.asarray(machine.div(squares, constant32(divisor))), deviations


def centered32(machine: Machine, rows32: np.ndarray):
    """(mean, x - mean, sum of (x - mean)**2) of each row, the first two passes of :func:`moments32`."""
    mean = np.asarray(machine.div(sum32(machine, rows32), constant32(rows32.shape[1])))
    deviations = np.asarray(machine.sub(rows32, mean[:, None]))
    return mean, deviations, sum32(machine, machine.mul(deviations, deviations))
