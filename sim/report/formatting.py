"""How the report writes numbers: shares as percentages, and the scales and thresholds of its runs.

Two percent styles, for two places. Prose (and the columns whose values span many binades) use
:func:`percent`, two significant digits; the results table's fixed columns use
:func:`fixed_percent`, one decimal, so the column reads at a glance.
"""
from __future__ import annotations

import math

__all__ = ["binary_exponent", "fixed_percent", "mean_range", "number", "percent", "scientific"]


def percent(value: float | None) -> str:
    """A share as a percentage with two significant digits (one decimal from 10% up); exactly 0
    and 1 are written ``0%`` and ``100%``, a missing value ``n/a``.

    >>> percent(0.0), percent(0.000123), percent(0.0456), percent(0.9823), percent(1.0), percent(None)
    ('0%', '0.012%', '4.6%', '98.2%', '100%', 'n/a')
    """
    if value is None:
        return "n/a"
    shown = 100.0 * value
    if shown == 0.0 or shown == 100.0:
        return f"{shown:.0f}%"
    if shown >= 10.0:
        return f"{shown:.1f}%"
    return f"{float(f'{shown:.2g}'):g}%"


def fixed_percent(value: float | None) -> str:
    """A share as a percentage with one decimal; a nonzero share that would show as 0.0% is
    written ``<0.1%``, so that "never" and "rarely" stay apart.

    >>> fixed_percent(0.0), fixed_percent(0.0004), fixed_percent(0.1234), fixed_percent(None)
    ('0.0%', '<0.1%', '12.3%', 'n/a')
    """
    if value is None:
        return "n/a"
    text = f"{100.0 * value:.1f}"
    if value != 0.0 and float(text) == 0.0:
        return "<0.1%"
    return text + "%"


def mean_range(value: tuple[float, float, float] | None) -> str:
    """A (mean, min, max) of shares, as the accuracy columns write it; ``n/a`` for None.

    >>> mean_range((0.192, 0.184, 0.22)), mean_range(None)
    ('19.2% (18.4%-22.0%)', 'n/a')
    """
    return "n/a" if value is None else f"{percent(value[0])} ({percent(value[1])}-{percent(value[2])})"


def number(value: float) -> str:
    """A scale or threshold as a command line takes it: integers without a decimal point.

    >>> number(1024.0), number(0.5), number(5)
    ('1024', '0.5', '5')
    """
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def binary_exponent(value: float) -> int:
    """The exponent k of a power of two 2^k (the report writes its scales that way).

    >>> binary_exponent(2.0**24), binary_exponent(8.0)
    (24, 3)
    """
    return int(math.log2(value))


def scientific(value: float) -> str:
    """A small measured quantity (an error, say) with two significant digits; exactly 0 is ``0``.

    >>> scientific(0.0), scientific(0.000123456), scientific(0.5)
    ('0', '0.00012', '0.5')
    """
    return "0" if value == 0 else f"{value:.2g}"
