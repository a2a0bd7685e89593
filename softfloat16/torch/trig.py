"""sin, cos and tan on the emulator: the FP32 functions of :mod:`softfloat16.fp32trig` (an exact
integer range reduction, then emulated FP32 steps, always rounded to nearest even, under 1 ulp),
rounded once into the result's format, as torch CPU widens a half or bfloat16 input to float,
computes in float and rounds once. A NaN input gives the machine's propagated NaN, an infinite
one its invalid NaN (x86: -qNaN, torch CPU's FP32 result)."""
from __future__ import annotations

import numpy as np

from .. import fp32trig
from .activations import _compute
from .machine import FP32, Machine
from .registry import implements

__all__ = ["trig32"]

_FUNCTIONS = {"sin": fp32trig.sin, "cos": fp32trig.cos, "tan": fp32trig.tan}


def trig32(machine: Machine, x, name: str) -> np.ndarray:
    """sin, cos or tan (``name``) of FP32 patterns, NaNs per the machine's profile.

    >>> [hex(b) for b in trig32(Machine(), np.array([0x3F800000, 0x7F800000, 0x7FC00005], np.uint32), "sin")]
    ['0x3f576aa4', '0xffc00000', '0x7fc00005']
    """
    x = np.asarray(x, np.uint32)
    result = _FUNCTIONS[name](x)
    magnitude = x & np.uint32(FP32.magnitude_mask)
    infinite = magnitude == np.uint32(FP32.inf)
    if infinite.any():
        result = np.where(infinite, machine.sub(np.uint32(FP32.inf), np.uint32(FP32.inf)), result)
    nan = magnitude > np.uint32(FP32.inf)
    if nan.any():
        result = np.where(nan, machine.propagate_nan(FP32, x), result)
    return result


@implements("sin", "cos", "tan")
def trig(machine, func, args, kwargs):
    """sin / cos / tan: the emulated FP32 function (softfloat16.fp32trig), rounded once into the format."""
    name = func.overloadpacket.__name__.rstrip("_")
    return _compute(machine, func, args, kwargs, [(0, "self")], lambda x: trig32(machine, x, name))
