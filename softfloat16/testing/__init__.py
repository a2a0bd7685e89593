"""Tools for property tests of floating-point code: hypothesis strategies that draw *bit
patterns* (plain ints, never Python floats, so nothing is rounded on the way in) aimed at the
edge cases rounding code gets wrong, and assertion helpers with bit-level failure messages.

>>> import softfloat16 as sf
>>> from hypothesis import given, settings
>>> @given(near_midpoint(sf.fp16, "add"))
... @settings(deadline=None, max_examples=20)
... def test_add_is_symmetric(pair):
...     a, b = pair
...     assert_bits_equal(sf.fp16.add(a, b), sf.fp16.add(b, a), sf.fp16)
>>> test_add_is_symmetric()

- :mod:`~softfloat16.testing.patterns`: ``bits`` (patterns of each kind), ``kinds_of``,
  ``testfloat_bits``;
- :mod:`~softfloat16.testing.midpoints`: ``near_midpoint`` (operands whose exact result is on or
  next to a rounding midpoint: add, sub, mul, div, sqrt, and conversions from a wider format);
- :mod:`~softfloat16.testing.limits`: ``near_overflow``, ``near_underflow``;
- :mod:`~softfloat16.testing.assertions`: ``assert_bits_equal``, ``assert_within_ulp``.

Every strategy and helper takes any format of ``softfloat16`` (FP8, FP6, FP4, E8M0, TF32 in FP32
layout, the IEEE P3109 formats ``sf.format("p3109_k8p3se")`` included), reads what it can draw from
the format's properties and draws only that format's patterns; a kind the format lacks (``inf`` in
E4M3FN, ``zero`` in E8M0, ``-0`` in the FNUZ and signed P3109 formats, ``subnormal`` at precision 1)
is a ValueError, and so is a case no operands of the format reach (a product of two values of
precision 1 is never next to a midpoint without being on it; a format of few exponents has no sum
near one). docs/verification.md lists what each format offers.

Optional pytest plugin: ``pytest -p softfloat16.testing`` (or ``pytest_plugins =
["softfloat16.testing"]`` in a conftest.py) adds the fixtures ``sf_format`` (fp16, bf16, fp32)
and ``sf_rounding`` (every rounding mode). Importing this module never imports pytest; the
fixtures exist only when pytest is already running.
"""
from __future__ import annotations

import sys

from ..formats import Format, format as parse_format
from ..rounding import ROUNDING_NAMES
from .assertions import assert_bits_equal, assert_within_ulp
from .limits import near_overflow, near_underflow
from .midpoints import MIDPOINT_OPS, near_midpoint
from .patterns import KINDS, bits, kinds_of, testfloat_bits

__all__ = [
    "KINDS", "MIDPOINT_OPS", "assert_bits_equal", "assert_within_ulp", "bits", "kinds_of", "near_midpoint",
    "near_overflow", "near_underflow", "testfloat_bits",
]


# --- optional pytest plugin -------------------------------------------------------------------------

def _define_fixtures(pytest) -> None:
    @pytest.fixture(params=("fp16", "bf16", "fp32"))
    def sf_format(request) -> Format:
        """Each of the 16- and 32-bit formats in turn."""
        return parse_format(request.param)

    @pytest.fixture(params=ROUNDING_NAMES)
    def sf_rounding(request) -> str:
        """Each rounding mode name in turn."""
        return request.param

    globals().update(sf_format=sf_format, sf_rounding=sf_rounding)


if "pytest" in sys.modules:  # loaded by `pytest -p softfloat16.testing` or from a test run
    _define_fixtures(sys.modules["pytest"])
