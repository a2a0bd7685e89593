"""Numba kernels: scalar bit-level operations and the loops that map them over arrays.

Every kernel takes an options record (``core.Options``, fields read by name) so that one compiled
kernel serves every format, rounding mode and machine profile.
"""

from . import cache  # noqa: E402,F401  (before any kernel module is compiled)
