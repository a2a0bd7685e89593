"""Rounding modes and the parsing of their names."""
from __future__ import annotations

import enum


class Rounding(enum.IntEnum):
    """IEEE 754 rounding-direction attributes, plus round-to-odd and stochastic rounding: the one
    list of rounding modes. Values are the kernel codes (the kernels keep a copy, held equal by
    tests/test_constants.py); the lowercase member names are the modes' names."""

    RNE = 0  # roundTiesToEven
    RNA = 1  # roundTiesToAway
    RTZ = 2  # roundTowardZero
    RUP = 3  # roundTowardPositive
    RDN = 4  # roundTowardNegative
    ROD = 5  # round to odd (sticky lsb): lets a later, narrower rounding be correct
    SR = 6   # stochastic rounding (docs/formats-spec.md): needs seed= or random_bits=


#: Every mode's name, in the order of the codes: ``("rne", "rna", "rtz", "rup", "rdn", "rod", "sr")``.
ALL_ROUNDING_NAMES = tuple(mode.name.lower() for mode in Rounding)
#: The deterministic modes (all but "sr", which needs randomness; it is parsed too, and listed in
#: every error message).
ROUNDING_NAMES = tuple(name for name in ALL_ROUNDING_NAMES if name != "sr")

_ALIASES = {
    "nearest_even": "rne", "nearest": "rne", "ties_to_even": "rne",
    "nearest_away": "rna", "ties_to_away": "rna",
    "toward_zero": "rtz", "truncate": "rtz",
    "up": "rup", "toward_positive": "rup", "ceil": "rup",
    "down": "rdn", "toward_negative": "rdn", "floor": "rdn",
    "odd": "rod",
    "stochastic": "sr",
}


def accepted_rounding_names() -> str:
    """The six names and, for each, its aliases: the text every rounding error shows.

    >>> accepted_rounding_names().split("; ")[0]
    'rne (nearest_even, nearest, ties_to_even)'
    """
    return "; ".join(
        f"{name} ({', '.join(alias for alias, target in _ALIASES.items() if target == name)})"
        for name in ALL_ROUNDING_NAMES
    )


def parse_rounding(rounding: str | Rounding) -> Rounding:
    """Rounding mode from a name such as ``"rne"`` (aliases like ``"toward_zero"`` work too).
    The one parser of rounding names: the Python API and the command line both call it.

    >>> parse_rounding("rtz")
    <Rounding.RTZ: 2>
    >>> parse_rounding("Nearest")
    <Rounding.RNE: 0>
    """
    if isinstance(rounding, Rounding):
        return rounding
    if isinstance(rounding, str):
        key = rounding.strip().lower()
        key = _ALIASES.get(key, key)
        if key in ALL_ROUNDING_NAMES:
            return Rounding[key.upper()]
    raise ValueError(f"rounding: unknown rounding mode {rounding!r}; accepted: {accepted_rounding_names()}")
