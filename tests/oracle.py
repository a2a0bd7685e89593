"""Exact-rational reference ("oracle") for the softfloat16 emulator.

Every operation is evaluated on exact rational values (``fractions.Fraction``)
and rounded once, so results are correct by construction rather than by
imitation of any particular implementation.  The one rounding is
``softfloat16.exact`` (plain integer arithmetic, shared with
``softfloat16.verify`` and sound apart from the Numba kernels); everything
else here (decoding, special cases, NaNs, signs of zeros) uses only the
standard library.

Bit patterns are plain non-negative Python ints of the format's width.
Functions return ``(bits, flags)`` where ``flags`` is an OR of the flag bits
below (comparisons return ``(bool, flags)``).

Project decisions implemented here (see the docstrings for details):

* rounding modes: rne, rna, rtz, rup, rdn, rod (round to odd);
* gradual underflow; tininess detected "after" (rounding to p bits with an
  unbounded exponent) or "before" (exact value) rounding;
* ``ftz``: tiny results flush to the signed zero with UNDERFLOW|INEXACT;
  ``daz``: subnormal inputs read as signed zero;
* NaN profiles: "ieee", "x86", "riscv" (alias "arm"), "cuda".
"""

from __future__ import annotations

import math
import numbers
import struct
from fractions import Fraction
from functools import cache
from typing import NamedTuple

from softfloat16 import exact

__all__ = [
    "INEXACT", "UNDERFLOW", "OVERFLOW", "DIVIDE_BY_ZERO", "INVALID",
    "FORMATS", "ROUNDINGS", "NAN_PROFILES",
    "decode", "encode_round", "ref_op", "ref_convert", "ref_from_float",
    "to_fraction",
]

INEXACT, UNDERFLOW, OVERFLOW, DIVIDE_BY_ZERO, INVALID = 1, 2, 4, 8, 16

# name -> (exponent_bits, fraction_bits); IEEE-style encodings.
FORMATS = {
    "fp16": (5, 10),
    "bf16": (8, 7),
    "fp32": (8, 23),
    "fp8_e5m2": (5, 2),
    "tf32": (8, 10),
}
# Formats understood internally but not part of the public format list
# (fp64 is the source format of ref_from_float).
_EXTRA_FORMATS = {"fp64": (11, 52)}

ROUNDINGS = ("rne", "rna", "rtz", "rup", "rdn", "rod")
NAN_PROFILES = ("ieee", "x86", "riscv", "arm", "cuda")
TININESS = ("after", "before")

_ARITY = {
    "add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "sqrt": 1,
    "eq": 2, "lt": 2, "le": 2,
}


# ---------------------------------------------------------------------------
# Format description
# ---------------------------------------------------------------------------

class _Spec(NamedTuple):
    name: str
    e: int            # exponent field width
    f: int            # fraction field width
    width: int        # total width = 1 + e + f
    bias: int
    emin: int         # exponent of the smallest normal
    emax: int         # exponent of the largest finite
    p: int            # precision (significand bits incl. the hidden bit)
    sign_bit: int     # 1 << (width - 1)
    exp_ones: int     # all-ones exponent field value (2**e - 1)
    frac_mask: int
    quiet_bit: int    # top fraction bit
    inf: int          # +inf bits
    max_finite: int   # +max finite bits
    default_nan: int  # +qNaN with only the quiet bit set


@cache
def _spec(fmt: str) -> _Spec:
    try:
        e, f = FORMATS[fmt] if fmt in FORMATS else _EXTRA_FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}") from None
    width = 1 + e + f
    bias = (1 << (e - 1)) - 1
    exp_ones = (1 << e) - 1
    inf = exp_ones << f
    return _Spec(
        name=fmt, e=e, f=f, width=width, bias=bias, emin=1 - bias, emax=bias,
        p=f + 1, sign_bit=1 << (width - 1), exp_ones=exp_ones,
        frac_mask=(1 << f) - 1, quiet_bit=1 << (f - 1), inf=inf,
        max_finite=inf - 1, default_nan=inf | (1 << (f - 1)),
    )


def _check_choice(name: str, value: str, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; expected one of {allowed}")


def _check_bits(bits, s: _Spec) -> int:
    bits = int(bits)
    if bits < 0 or bits >> s.width:
        raise ValueError(f"{bits:#x} is not a {s.width}-bit pattern for {s.name}")
    return bits


def _pow2(k: int) -> Fraction:
    return Fraction(1 << k) if k >= 0 else Fraction(1, 1 << -k)


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------

def decode(bits: int, fmt: str) -> tuple:
    """Classify a bit pattern.

    Returns ``(kind, sign, value)`` with kind one of "zero", "subnormal",
    "normal", "inf", "qnan", "snan"; sign 0/1; value the exact signed
    Fraction for finite kinds (``Fraction(0)`` for both zeros) and None for
    inf/NaN.
    """
    s = _spec(fmt)
    bits = _check_bits(bits, s)
    sign = bits >> (s.width - 1)
    exp = (bits >> s.f) & s.exp_ones
    frac = bits & s.frac_mask
    if exp == s.exp_ones:
        if frac == 0:
            return ("inf", sign, None)
        return ("qnan" if frac & s.quiet_bit else "snan", sign, None)
    if exp == 0:
        if frac == 0:
            return ("zero", sign, Fraction(0))
        kind, mag = "subnormal", frac * _pow2(s.emin - s.f)
    else:
        kind, mag = "normal", ((1 << s.f) | frac) * _pow2(exp - s.bias - s.f)
    return (kind, sign, -mag if sign else mag)


def to_fraction(bits: int, fmt: str) -> Fraction:
    """Exact value of a finite bit pattern (zeros give Fraction(0))."""
    kind, _, value = decode(bits, fmt)
    if value is None:
        raise ValueError(f"{bits:#x} is not finite in {fmt} ({kind})")
    return value


def _is_nan_kind(kind: str) -> bool:
    return kind in ("qnan", "snan")


# ---------------------------------------------------------------------------
# Rounding
# ---------------------------------------------------------------------------

def encode_round(value, sign: int, fmt: str, rounding: str = "rne",
                 ftz: bool = False, tininess: str = "after") -> tuple:
    """Round an exact finite value into ``fmt``; returns ``(bits, flags)``.

    ``value`` is any rational (Fraction, int, or anything Fraction accepts).
    A negative ``value`` always gives a negative result; for ``value >= 0``
    the sign is taken from ``sign`` (so a magnitude plus a sign also works).
    ``value == 0`` encodes the zero of that sign exactly, with no flags.
    The rounding itself is ``softfloat16.exact.round_fraction``.
    """
    _spec(fmt)  # the oracle's own names and checks, stricter than the library's parsers
    _check_choice("rounding", rounding, ROUNDINGS)
    _check_choice("tininess", tininess, TININESS)
    value = Fraction(value)
    if value > 0 and sign:
        value = -value
    return exact.round_fraction(value, fmt, rounding, negative_zero=bool(sign), ftz=ftz, tininess=tininess)


# ---------------------------------------------------------------------------
# NaN handling
# ---------------------------------------------------------------------------

def _canonical_nan(s: _Spec, nan: str) -> int:
    """NaN produced by an invalid operation under the given profile."""
    if nan == "cuda":
        return s.sign_bit - 1
    if nan == "x86":
        return s.sign_bit | s.default_nan
    return s.default_nan                         # ieee, riscv, arm


def _propagate_nan(bits: int, s: _Spec, nan: str) -> int:
    """Result for a NaN operand ``bits`` (already chosen as the first NaN)."""
    if nan in ("ieee", "x86"):
        return bits | s.quiet_bit
    if nan == "cuda":
        return s.sign_bit - 1
    return s.default_nan                         # riscv, arm


def _convert_nan(bits: int, src: _Spec, dst: _Spec, nan: str) -> int:
    if nan not in ("ieee", "x86"):
        return _propagate_nan(bits, dst, nan)
    sign = bits >> (src.width - 1)
    frac = bits & src.frac_mask
    if dst.f <= src.f:
        frac >>= src.f - dst.f                   # keep the top bits
    else:
        frac <<= dst.f - src.f                   # pad at the bottom
    return (sign << (dst.width - 1)) | dst.inf | frac | dst.quiet_bit


# ---------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------

def _daz(bits: int, s: _Spec) -> int:
    if (bits >> s.f) & s.exp_ones == 0:
        return bits & s.sign_bit                 # subnormal (or zero) -> zero
    return bits


def _zero(s: _Spec, sign: int) -> int:
    return sign << (s.width - 1)


def _inf(s: _Spec, sign: int) -> int:
    return (sign << (s.width - 1)) | s.inf


def _sum(x: tuple, y: tuple, s: _Spec, rounding: str, ftz: bool,
         tininess: str, nan: str) -> tuple:
    """x + y for non-NaN operands given as (kind, sign, value)."""
    kx, sx, vx = x
    ky, sy, vy = y
    if kx == "inf" and ky == "inf":
        if sx != sy:
            return _canonical_nan(s, nan), INVALID
        return _inf(s, sx), 0
    if kx == "inf":
        return _inf(s, sx), 0
    if ky == "inf":
        return _inf(s, sy), 0
    total = vx + vy
    if total == 0:
        if kx == "zero" and ky == "zero" and sx == sy:
            return _zero(s, sx), 0
        return _zero(s, 1 if rounding == "rdn" else 0), 0
    return encode_round(total, 0, s.name, rounding, ftz, tininess)


def _negate(x: tuple) -> tuple:
    kind, sign, value = x
    return (kind, sign ^ 1, None if value is None else -value)


def _product(x: tuple, y: tuple):
    """Exact product of non-NaN operands as an operand tuple, or None for
    the invalid 0 * inf."""
    kx, sx, vx = x
    ky, sy, vy = y
    sign = sx ^ sy
    if kx == "inf" or ky == "inf":
        if kx == "zero" or ky == "zero":
            return None
        return ("inf", sign, None)
    if kx == "zero" or ky == "zero":
        return ("zero", sign, Fraction(0))
    return ("normal", sign, vx * vy)              # "finite nonzero"


def _is_zero_times_inf(x: tuple, y: tuple) -> bool:
    kinds = {x[0], y[0]}
    return kinds == {"zero", "inf"}


def ref_op(op: str, fmt: str, *operands: int, rounding: str = "rne",
           ftz: bool = False, daz: bool = False, nan: str = "ieee",
           tininess: str = "after") -> tuple:
    """Reference result of ``op`` on bit patterns of format ``fmt``.

    op: add, sub, mul, div, fma (a*b + c), sqrt -> ``(bits, flags)``;
    eq, lt, le -> ``(bool, flags)`` (quiet comparisons).
    """
    s = _spec(fmt)
    if op not in _ARITY:
        raise ValueError(f"unknown op {op!r}")
    if len(operands) != _ARITY[op]:
        raise TypeError(f"{op} takes {_ARITY[op]} operands, got {len(operands)}")
    _check_choice("rounding", rounding, ROUNDINGS)
    _check_choice("nan profile", nan, NAN_PROFILES)
    _check_choice("tininess", tininess, TININESS)

    ops = [_check_bits(b, s) for b in operands]
    if daz:
        ops = [_daz(b, s) for b in ops]
    dec = [decode(b, fmt) for b in ops]

    flags = INVALID if any(k == "snan" for k, _, _ in dec) else 0
    nan_operands = [b for b, (k, _, _) in zip(ops, dec) if _is_nan_kind(k)]

    if op in ("eq", "lt", "le"):
        if nan_operands:
            return False, flags
        a, b = (math.inf * (-1 if sg else 1) if k == "inf" else v
                for k, sg, v in dec)
        result = {"eq": a == b, "lt": a < b, "le": a <= b}[op]
        return bool(result), flags

    if nan_operands:
        if op == "fma" and _is_zero_times_inf(dec[0], dec[1]):
            flags |= INVALID
        return _propagate_nan(nan_operands[0], s, nan), flags

    rnd = dict(rounding=rounding, ftz=ftz, tininess=tininess)

    if op in ("add", "sub"):
        x, y = dec
        if op == "sub":
            y = _negate(y)
        return _sum(x, y, s, nan=nan, **rnd)

    if op == "mul":
        prod = _product(*dec)
        if prod is None:
            return _canonical_nan(s, nan), INVALID
        kind, sign, value = prod
        if kind == "inf":
            return _inf(s, sign), 0
        if kind == "zero":
            return _zero(s, sign), 0
        return encode_round(value, sign, fmt, **rnd)

    if op == "fma":
        prod = _product(dec[0], dec[1])
        if prod is None:
            return _canonical_nan(s, nan), INVALID
        return _sum(prod, dec[2], s, nan=nan, **rnd)

    if op == "div":
        (ka, sa, va), (kb, sb, vb) = dec
        sign = sa ^ sb
        if ka == "inf":
            if kb == "inf":
                return _canonical_nan(s, nan), INVALID
            return _inf(s, sign), 0
        if kb == "inf":
            return _zero(s, sign), 0
        if kb == "zero":
            if ka == "zero":
                return _canonical_nan(s, nan), INVALID
            return _inf(s, sign), DIVIDE_BY_ZERO
        if ka == "zero":
            return _zero(s, sign), 0
        return encode_round(va / vb, sign, fmt, **rnd)

    if op == "sqrt":
        ((ka, sa, va),) = dec
        if ka == "zero":
            return _zero(s, sa), 0
        if sa == 1:                              # negative nonzero or -inf
            return _canonical_nan(s, nan), INVALID
        if ka == "inf":
            return _inf(s, 0), 0
        return exact.round_sqrt(va, fmt, **rnd)

    raise AssertionError(op)  # pragma: no cover


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------

def ref_convert(bits: int, src: str, dst: str, rounding: str = "rne",
                ftz: bool = False, daz: bool = False, nan: str = "ieee",
                tininess: str = "after") -> tuple:
    """Convert a ``src`` bit pattern to ``dst`` with a single rounding."""
    ss, ds = _spec(src), _spec(dst)
    _check_choice("rounding", rounding, ROUNDINGS)
    _check_choice("nan profile", nan, NAN_PROFILES)
    _check_choice("tininess", tininess, TININESS)
    bits = _check_bits(bits, ss)
    if daz:
        bits = _daz(bits, ss)
    kind, sign, value = decode(bits, src)
    if _is_nan_kind(kind):
        return _convert_nan(bits, ss, ds, nan), INVALID if kind == "snan" else 0
    if kind == "inf":
        return _inf(ds, sign), 0
    if kind == "zero":
        return _zero(ds, sign), 0
    return encode_round(value, sign, dst, rounding, ftz, tininess)


def ref_from_float(x, fmt: str, rounding: str = "rne", ftz: bool = False,
                   nan: str = "ieee", tininess: str = "after") -> tuple:
    """Convert a Python float (treated as fp64, subnormals exact, NaN payload
    kept) or an integer (exact; 0 gives +0) to ``fmt``."""
    if isinstance(x, numbers.Integral):
        _check_choice("nan profile", nan, NAN_PROFILES)
        return encode_round(Fraction(int(x)), 0, fmt, rounding, ftz, tininess)
    (bits,) = struct.unpack("<Q", struct.pack("<d", float(x)))
    return ref_convert(bits, "fp64", fmt, rounding=rounding, ftz=ftz,
                       daz=False, nan=nan, tininess=tininess)
