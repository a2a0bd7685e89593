"""Assertions on arrays of bit patterns, like ``numpy.testing`` but at the bit level: failures list
the differing patterns in hex with their values, fields and ulp distance.
"""
from __future__ import annotations

import numpy as np

from ..compare import NAN_MODES, diff_report, to_bits
from ..formats import Format
from .patterns import as_format

__all__ = ["assert_bits_equal", "assert_within_ulp"]


def _check_shapes(actual, expected) -> None:
    a, e = np.shape(actual), np.shape(expected)
    try:
        np.broadcast_shapes(a, e)
    except ValueError:
        raise AssertionError(f"shapes {a} and {e} do not broadcast") from None


def assert_bits_equal(actual, expected, fmt: Format | str, nan: str = "class", max_rows: int = 10,
                      err_msg: str = "") -> None:
    """Assert two arrays of bit patterns are equal; NaNs compare by ``nan`` (``"class"``: both
    quiet or both signaling; ``"strict"``: bit for bit; ``"any"``). The message lists, for the
    first ``max_rows`` differences, the index, both patterns in hex, their values and fields,
    and the ulp distance.

    >>> import softfloat16 as sf
    >>> assert_bits_equal([0x3C00, 0x7E00], [0x3C00, 0x7E01], sf.fp16)
    >>> assert_bits_equal([0x3C01], [0x3C00], sf.fp16)
    Traceback (most recent call last):
    AssertionError: Bit patterns not equal (fp16)
    Mismatched elements: 1 / 1 (100%) [fp16, nan='class']
    Max ulp distance: 1
     index (0,): actual   0x3c01 = 1.0009765625 [0 01111 0000000001] normal
                 expected 0x3c00 = 1.0 [0 01111 0000000000] normal
                 ulp distance 1
    """
    fmt = as_format(fmt)
    if nan not in NAN_MODES:
        raise ValueError(f"nan: unknown NaN comparison {nan!r}; accepted: {', '.join(NAN_MODES)}")
    _check_shapes(actual, expected)
    header = f"Bit patterns not equal ({fmt.name})" + (f": {err_msg}" if err_msg else "")
    report = diff_report(to_bits(actual, fmt, "actual"), to_bits(expected, fmt, "expected"), fmt,
                         nan=nan, max_rows=max_rows, header=header)
    if report:
        raise AssertionError(report)


def assert_within_ulp(actual, expected, fmt: Format | str, ulp: int = 1, nan: str = "class",
                      max_rows: int = 10, err_msg: str = "") -> None:
    """Assert every element of ``actual`` is at most ``ulp`` representable steps from
    ``expected`` (see ``softfloat16.compare.ulp_distance``: +0 and -0 are 0 apart, max finite and
    inf 1 apart); NaNs must match NaNs, compared by ``nan``.

    >>> import softfloat16 as sf
    >>> assert_within_ulp([0x3C01, 0x8000], [0x3C00, 0x0000], sf.fp16, ulp=1)
    >>> assert_within_ulp([0x3C03], [0x3C00], sf.fp16, ulp=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: Not within 2 ulp (fp16)
    ...
                 ulp distance 3
    """
    fmt = as_format(fmt)
    if ulp < 0:
        raise ValueError(f"ulp: expected a non-negative number of ulps, got {ulp}")
    if nan not in NAN_MODES:
        raise ValueError(f"nan: unknown NaN comparison {nan!r}; accepted: {', '.join(NAN_MODES)}")
    _check_shapes(actual, expected)
    header = f"Not within {ulp} ulp ({fmt.name})" + (f": {err_msg}" if err_msg else "")
    report = diff_report(to_bits(actual, fmt, "actual"), to_bits(expected, fmt, "expected"), fmt,
                         nan=nan, max_rows=max_rows, ulp=ulp, header=header)
    if report:
        raise AssertionError(report)
