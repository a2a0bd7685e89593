"""The formats described in words, from their properties: the layout, the special values, the
overflow default, and the markdown table docs/softfloat16.md holds (a test keeps the two equal)."""
from __future__ import annotations

import numpy as np

from .formats import FORMATS, Format, format  # noqa: F401  (format: for the examples)


def layout(fmt: Format) -> str:
    """Sign-exponent-fraction widths as text (``1-5-10``; E8M0, unsigned: ``0-8-0``)."""
    return f"{int(fmt.signed)}-{fmt.exponent_bits}-{fmt.fraction_bits}"


def special_values(fmt: Format) -> str:
    """The special patterns of a format, in words (docs/softfloat16.md's table), from its properties.

    >>> [special_values(format(n)) for n in ("fp8_e4m3fn", "fp8_e4m3fnuz", "fp4_e2m1")]
    ['NaN 0x7f, 0xff; no inf', 'NaN 0x80 only; no inf, no -0', 'none: every pattern a number']
    >>> special_values(format("e8m0"))
    'NaN 0xff; unsigned, no zero'
    >>> special_values(format("p3109_k8p3se")), special_values(format("p3109_k8p1ue"))
    ('±inf 0x7f, 0xff; NaN 0x80 only; no -0', '+inf 0xfe; NaN 0xff; unsigned')
    """
    if fmt.top_nans == "binade":
        return "±inf, NaNs (quiet and signaling), ±0"
    if not fmt.has_nan and not fmt.infinities:
        return "none: every pattern a number"
    parts = []
    if fmt.infinities:
        parts.append(f"±inf {fmt.inf:#x}, {fmt.inf | fmt.sign_mask:#x}" if fmt.signed else f"+inf {fmt.inf:#x}")
    if fmt.top_nans == "one" and fmt.signed:
        parts.append(f"NaN {fmt.nan_of(False):#x}, {fmt.nan_of(True):#x}")
    elif fmt.has_nan:
        parts.append(f"NaN {fmt.default_nan:#x}" + (" only" if fmt.signed else ""))
    missing = [word for word, absent in (("inf", not fmt.infinities and fmt.family != "e8m0"),
                                         ("-0", fmt.signed and not fmt.has_negative_zero)) if absent]
    if missing:
        parts[-1] += "; no " + ", no ".join(missing)
    if not fmt.signed:
        parts.append("unsigned" + ("" if fmt.has_zero else ", no zero"))
    return "; ".join(parts)


def overflow_default(fmt: Format) -> str:
    """What a result beyond the largest finite value becomes by default (round to nearest)."""
    return {"inf": "inf", "nan": "NaN", "saturate": "saturates (max)"}[fmt.overflow]


def format_table() -> str:
    """The markdown table of every format, from the Format objects themselves: docs/softfloat16.md
    holds this text, and a test keeps the two equal.

    >>> print(format_table().splitlines()[2][:98])
    | `fp16` (`float16`, `half`, `binary16`) | 1-5-10 | ieee | 15 | `uint16` | 65504 | 2^-14 | 2^-24 |
    """
    def largest(fmt: Format) -> str:
        value = fmt.value(fmt.max_finite)
        if value < 10**6:
            return str(value.numerator) if value.denominator == 1 else str(float(value))
        return "~" + f"{float(value):.2e}".replace("e+", "e")

    def storage(fmt: Format) -> str:
        bits = np.dtype(fmt.dtype).itemsize * 8
        if fmt.storage_shift:
            return f"`{np.dtype(fmt.dtype).name}` (low {fmt.storage_shift} bits zero)"
        return f"`{np.dtype(fmt.dtype).name}`" + (f" (low {fmt.width} bits)" if fmt.width < bits else "")

    rows = ["| name (aliases) | layout (sign-exponent-fraction) | encoding | bias | storage | max finite | min normal "
            "| min subnormal | special values | overflow (default) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for fmt in FORMATS.values():
        aliases = f" ({', '.join(f'`{a}`' for a in fmt.aliases if a != fmt.name)})" if fmt.aliases else ""
        rows.append(f"| `{fmt.name}`{aliases} | {layout(fmt)} | {fmt.encoding} | {fmt.bias} | "
                    f"{storage(fmt)} | {largest(fmt)} | 2^{fmt.emin} | 2^{fmt.min_subnormal_exponent} | "
                    f"{special_values(fmt)} | {overflow_default(fmt)} |")
    return "\n".join(rows)
