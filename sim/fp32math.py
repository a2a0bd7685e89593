"""The simulator's exp and log: the emulated FP32 algorithms of :mod:`softfloat16.fp32math`,
re-exported, so that the simulator, its cross-check and ``softfloat16.torch`` share one definition.

>>> import numpy as np
>>> [hex(v) for v in exp(np.array([0x3F800000], np.uint32))]
['0x402df854']
"""
from softfloat16.fp32math import *  # noqa: F403
from softfloat16.fp32math import FP32, __all__  # noqa: F401
