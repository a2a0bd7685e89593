"""IEEE 754 exception flags: a module of its own so that the kernels' entry points (``ops``) and
the exact reference (``exact``) share the values without one importing the other. The kernels
keep a copy of the bit values (softfloat16/_kernels/core.py), held equal by tests/test_constants.py."""
from __future__ import annotations

import enum

import numpy as np


class Flag(enum.IntFlag):
    """IEEE 754 exception flags, one bit each (the values Berkeley SoftFloat uses).

    >>> Flag(np.uint8(8))   # the numpy integers of a flag array are read too
    <Flag.DIVIDE_BY_ZERO: 8>
    """

    INEXACT = 1
    UNDERFLOW = 2
    OVERFLOW = 4
    DIVIDE_BY_ZERO = 8
    INVALID = 16

    @classmethod
    def _missing_(cls, value):
        # Accept the numpy integers our flag arrays hold: sf.Flag(fl[i]) should just work.
        if isinstance(value, np.integer):
            return cls(int(value))
        return super()._missing_(value)
