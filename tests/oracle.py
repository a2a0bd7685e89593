"""Exact-rational reference ("oracle") for the softfloat16 emulator.

Every operation is evaluated on exact rational values (``fractions.Fraction``)
and rounded once, so results are correct by construction rather than by
imitation of any particular implementation.  The one rounding is
``softfloat16.exact`` (plain integer arithmetic, shared with
``softfloat16.verify`` and sound apart from the Numba kernels); everything
else here (decoding, special cases, NaNs, signs of zeros, infinities in
formats without them) uses only the standard library and this module's own
table of formats, written from docs/formats-spec.md.

Bit patterns are plain non-negative Python ints of the format's width.
Functions return ``(bits, flags)`` where ``flags`` is an OR of the flag bits
below (comparisons return ``(bool, flags)``).

Project decisions implemented here (see the docstrings for details):

* rounding modes: rne, rna, rtz, rup, rdn, rod (round to odd), and sr
  (stochastic, with the random integer given: ``random=r, sr_bits=R``);
* gradual underflow; tininess detected "after" (rounding to p bits with an
  unbounded exponent) or "before" (exact value) rounding;
* ``ftz``: tiny results flush to the signed zero with UNDERFLOW|INEXACT;
  ``daz``: subnormal inputs read as signed zero;
* NaN profiles: "ieee", "x86", "riscv" (alias "arm"), "cuda";
* encodings (docs/formats-spec.md): ``ieee``; ``fn`` (no inf, NaN S.1111.111,
  always quiet); ``fnuz`` (no inf, no -0, NaN 0x80, bias 2**(e-1));
  ``finite`` (no inf, no NaN: a NaN result is +0 with INVALID); ``e8m0``
  (unsigned powers of two 2**-127..2**127, 0xFF NaN; no arithmetic);
  ``p3109`` (the IEEE P3109 formats, named ``p3109_k<K>p<P><s|u><e|f>``, described from
  (K, P, signed, domain) by ``p3109_spec``: no -0; signed: the NaN at the -0 code 2**(K-1),
  bias 2**(K-P-1); unsigned: the NaN at the top code 2**K - 1, bias 2**(K-P), a negative
  value or -inf gives the NaN with INVALID; extended domain: ±inf at the largest codes below
  the NaN; finite domain: no inf, overflow gives the NaN; subnormals; converted into another
  format, the signed NaN is negative without payload, the unsigned one positive with its
  all-ones fraction as payload, as E4M3FN's);
* ``saturate``: no result is inf or (by overflow) NaN; ±max finite instead.
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
    "FORMATS", "ENCODED_FORMATS", "ALL_FORMATS", "SMALL_FORMATS",
    "ROUNDINGS", "ALL_ROUNDINGS", "NAN_PROFILES",
    "decode", "encode_round", "ref_op", "ref_convert", "ref_from_float",
    "to_fraction", "spec", "p3109_spec", "P3109_FORMATS",
]

# The flag bits, the rounding names and the encodings below are this module's own copies, on
# purpose (it shares nothing with the library but softfloat16.exact); tests/test_constants.py
# holds them equal to the library's.
INEXACT, UNDERFLOW, OVERFLOW, DIVIDE_BY_ZERO, INVALID = 1, 2, 4, 8, 16

# name -> (exponent_bits, fraction_bits); IEEE-style encodings.  Other test
# modules iterate over this dict as "the IEEE formats": it keeps its contents.
FORMATS = {
    "fp16": (5, 10),
    "bf16": (8, 7),
    "fp32": (8, 23),
    "fp8_e5m2": (5, 2),
    "tf32": (8, 10),
}
# The formats whose special values differ from IEEE 754:
# name -> (exponent_bits, fraction_bits, encoding).
ENCODED_FORMATS = {
    "fp8_e4m3fn": (4, 3, "fn"),
    "fp8_e4m3fnuz": (4, 3, "fnuz"),
    "fp8_e5m2fnuz": (5, 2, "fnuz"),
    "fp6_e2m3": (2, 3, "finite"),
    "fp6_e3m2": (3, 2, "finite"),
    "fp4_e2m1": (2, 1, "finite"),
    "e8m0": (8, 0, "e8m0"),
}
ALL_FORMATS = {**{name: (e, f, "ieee") for name, (e, f) in FORMATS.items()}, **ENCODED_FORMATS}
# The IEEE P3109 formats: name -> (K, P, signed, domain), K bits (3..8), precision P (1..K-1
# signed, 1..K unsigned), extended (with ±inf) or finite domain. Not in ALL_FORMATS (whose
# iterations stay as they are); ``spec`` takes their names. Enumerated here, from the rules.
P3109_FORMATS = {
    f"p3109_k{k}p{p}{'s' if signed else 'u'}{domain[0]}": (k, p, signed, domain)
    for k in range(3, 9) for signed in (True, False) for p in range(1, k + (not signed))
    for domain in ("extended", "finite")
}
# The formats with arithmetic and at most 8 bits: small enough to test exhaustively.
SMALL_FORMATS = ("fp8_e5m2", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1")
# Formats understood internally but not part of the public format list
# (fp64 is the source format of ref_from_float).
_EXTRA_FORMATS = {"fp64": (11, 52, "ieee")}

ROUNDINGS = ("rne", "rna", "rtz", "rup", "rdn", "rod")
ALL_ROUNDINGS = ROUNDINGS + ("sr",)
NAN_PROFILES = ("ieee", "x86", "riscv", "arm", "cuda")
TININESS = ("after", "before")
_PROPAGATING = ("ieee", "x86")

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
    encoding: str     # ieee, fn, fnuz, finite, e8m0
    width: int        # total width = sign + e + f
    bias: int
    emin: int         # exponent of the smallest normal (E8M0: of its smallest value)
    emax: int         # exponent of the largest finite
    p: int            # precision (significand bits incl. the hidden bit)
    sign_bit: int     # 1 << (width - 1); 0 in the unsigned E8M0
    exp_ones: int     # all-ones exponent field value (2**e - 1)
    frac_mask: int
    quiet_bit: int    # top fraction bit (IEEE formats)
    inf: int          # +inf bits (None without infinities)
    max_finite: int   # +max finite bits
    default_nan: int  # +qNaN with only the quiet bit set; the positive (or only) NaN; None in finite
    signed: bool = True  # False in E8M0 and the unsigned P3109 formats


@cache
def p3109_spec(k: int, p: int, signed: bool = True, domain: str = "extended") -> _Spec:
    """The oracle's description of the P3109 format of K bits and precision P, from the rules:
    e = K - P exponent bits (one more unsigned, which has no sign bit), f = P - 1 fraction bits,
    bias 2**(K-P-1) signed, 2**(K-P) unsigned, subnormals, no -0; the NaN is the -0 code
    2**(K-1) (signed) or the top code 2**K - 1 (unsigned); the extended domain has +inf at the
    largest code below the NaN (and -inf at its negative), the finite domain numbers there."""
    if not (3 <= k <= 8 and 1 <= p <= (k - 1 if signed else k) and domain in ("extended", "finite")):
        raise ValueError(f"no P3109 format K={k}, P={p}, signed={signed}, domain={domain!r}")
    e, f = k - p + (0 if signed else 1), p - 1
    sign_bit = 1 << (k - 1) if signed else 0
    top = (1 << (k - 1)) - 1 if signed else (1 << k) - 2   # the largest magnitude code below the NaN
    inf = top if domain == "extended" else None
    max_finite = top - (domain == "extended")
    bias = 1 << (k - p - (1 if signed else 0))
    return _Spec(
        name=f"p3109_k{k}p{p}{'s' if signed else 'u'}{domain[0]}", e=e, f=f, encoding="p3109", width=k,
        bias=bias, emin=1 - bias, emax=(max_finite >> f) - bias, p=p, sign_bit=sign_bit, exp_ones=(1 << e) - 1,
        frac_mask=(1 << f) - 1, quiet_bit=0, inf=inf, max_finite=max_finite,
        default_nan=sign_bit if signed else (1 << k) - 1, signed=signed,
    )


@cache
def spec(fmt: str) -> _Spec:
    """The oracle's own description of ``fmt``, from (e, f, encoding) and the spec's rules (the
    P3109 formats from (K, P, signed, domain): ``p3109_spec``)."""
    if isinstance(fmt, str) and fmt in P3109_FORMATS:
        return p3109_spec(*P3109_FORMATS[fmt])
    try:
        e, f, encoding = ALL_FORMATS[fmt] if fmt in ALL_FORMATS else _EXTRA_FORMATS[fmt]
    except (KeyError, TypeError):
        raise ValueError(f"unknown format {fmt!r}") from None
    signed = encoding != "e8m0"
    width = int(signed) + e + f
    sign_bit = (1 << (width - 1)) if signed else 0
    exp_ones = (1 << e) - 1
    magnitude_ones = (1 << (e + f)) - 1
    bias = {"fnuz": 1 << (e - 1), "e8m0": 127}.get(encoding, (1 << (e - 1)) - 1)
    inf = exp_ones << f if encoding == "ieee" else None
    max_finite = {"ieee": (exp_ones << f) - 1, "fn": magnitude_ones - 1, "e8m0": magnitude_ones - 1}.get(
        encoding, magnitude_ones)
    default_nan = {"ieee": (exp_ones << f) | (1 << (f - 1)) if f else None, "fn": magnitude_ones,
                   "fnuz": sign_bit, "finite": None, "e8m0": magnitude_ones}[encoding]
    emin = -bias if encoding == "e8m0" else 1 - bias
    return _Spec(
        name=fmt, e=e, f=f, encoding=encoding, width=width, bias=bias, emin=emin,
        emax=(max_finite >> f) - bias, p=f + 1, sign_bit=sign_bit, exp_ones=exp_ones,
        frac_mask=(1 << f) - 1, quiet_bit=(1 << (f - 1)) if encoding == "ieee" else 0, inf=inf,
        max_finite=max_finite, default_nan=default_nan, signed=signed,
    )


_spec = spec  # the name the rest of this module (and older callers) use


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
    inf/NaN.  The NaN of a FNUZ format (0x80) has sign 1, E8M0's sign 0; a
    signed P3109 format's NaN (the -0 code) sign 1, an unsigned one's sign 0.
    """
    s = _spec(fmt)
    bits = _check_bits(bits, s)
    sign = 1 if bits & s.sign_bit else 0
    magnitude = bits & ~s.sign_bit
    exp = (magnitude >> s.f) & s.exp_ones
    frac = magnitude & s.frac_mask
    if s.encoding == "e8m0":
        if bits == s.default_nan:
            return ("qnan", 0, None)
        return ("normal", 0, _pow2(bits - s.bias))
    if s.encoding == "fnuz" and bits == s.default_nan:
        return ("qnan", 1, None)
    if s.encoding == "p3109":
        if bits == s.default_nan:
            return ("qnan", sign, None)
        if magnitude == s.inf:
            return ("inf", sign, None)
    if s.encoding == "fn" and magnitude == s.default_nan:
        return ("qnan", sign, None)
    if s.encoding == "ieee" and exp == s.exp_ones:
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
                 ftz: bool = False, tininess: str = "after", *,
                 saturate: bool = False, random: int | None = None,
                 sr_bits: int = 32) -> tuple:
    """Round an exact finite value into ``fmt``; returns ``(bits, flags)``.

    ``value`` is any rational (Fraction, int, or anything Fraction accepts).
    A negative ``value`` always gives a negative result; for ``value >= 0``
    the sign is taken from ``sign`` (so a magnitude plus a sign also works).
    ``value == 0`` encodes the zero of that sign exactly, with no flags
    (+0 in the FNUZ formats; E8M0's NaN with INVALID, it has no zero).
    The rounding itself is ``softfloat16.exact.round_fraction``; ``random``
    and ``sr_bits`` are the random integer and its width of ``rounding="sr"``.
    """
    _spec(fmt)  # the oracle's own names and checks, stricter than the library's parsers
    _check_choice("rounding", rounding, ALL_ROUNDINGS)
    _check_choice("tininess", tininess, TININESS)
    value = Fraction(value)
    if value > 0 and sign:
        value = -value
    return exact.round_fraction(value, fmt, rounding, negative_zero=bool(sign), ftz=ftz, tininess=tininess,
                                saturate=saturate, random=random, sr_bits=sr_bits)


# ---------------------------------------------------------------------------
# NaN handling and infinite results
# ---------------------------------------------------------------------------

def _canonical_nan(s: _Spec, nan: str) -> int:
    """NaN produced by an invalid operation under the given profile (+0, the
    stand-in, in a format without NaN; the caller raises INVALID)."""
    if s.encoding == "finite":
        return 0
    if s.encoding != "ieee":
        # fn: 0x7F, and x86's negative "indefinite" 0xFF; fnuz and e8m0 have one NaN
        negative = nan == "x86" and s.encoding == "fn"
        return s.default_nan | (s.sign_bit if negative else 0)
    if nan == "cuda":
        return s.sign_bit - 1
    if nan == "x86":
        return s.sign_bit | s.default_nan
    return s.default_nan                         # ieee, riscv, arm


def _propagate_nan(bits: int, s: _Spec, nan: str) -> int:
    """Result for a NaN operand ``bits`` (already chosen as the first NaN)."""
    if s.encoding != "ieee":
        if s.encoding == "fn" and nan in _PROPAGATING:
            return bits                          # the NaN of its sign, already quiet
        return s.default_nan                     # fnuz/e8m0: the one NaN; fn: 0x7F in riscv and cuda
    if nan in _PROPAGATING:
        return bits | s.quiet_bit
    if nan == "cuda":
        return s.sign_bit - 1
    return s.default_nan                         # riscv, arm


def _nan_payload(bits: int, s: _Spec) -> tuple[int, int, int]:
    """(sign, payload, payload width) of a NaN pattern: the fraction field in
    ieee, fn (E4M3FN's 0b111) and unsigned p3109 (the top code: all ones);
    none in fnuz (sign 1), e8m0 (sign 0) and signed p3109 (sign 1: the code
    of -0)."""
    _, sign, _ = decode(bits, s.name)
    if s.encoding in ("ieee", "fn") or (s.encoding == "p3109" and not s.signed):
        return sign, bits & s.frac_mask, s.f
    return sign, 0, 0


def _convert_nan(bits: int, src: _Spec, dst: _Spec, nan: str) -> tuple[int, int]:
    """A NaN converted between formats: (bits, flags beyond a signaling source's INVALID)."""
    if dst.encoding == "finite":
        return 0, INVALID
    if dst.encoding in ("fnuz", "e8m0", "p3109"):
        return dst.default_nan, 0
    sign, payload, payload_bits = _nan_payload(bits, src)
    if nan not in _PROPAGATING:
        return _propagate_nan(dst.default_nan, dst, nan), 0
    if dst.encoding == "fn":
        return (sign and dst.sign_bit) | dst.default_nan, 0
    if dst.f <= payload_bits:
        payload >>= payload_bits - dst.f         # keep the top bits
    else:
        payload <<= dst.f - payload_bits         # pad at the bottom
    return (sign and dst.sign_bit) | dst.inf | payload | dst.quiet_bit, 0


def _infinite(s: _Spec, sign: int, saturate: bool) -> int:
    """The bits of an infinite result (inf operands, x/0): inf in ieee and
    the extended P3109 formats, else the overflow value of the encoding (fn:
    NaN of the sign; fnuz and finite P3109: the NaN; finite: ±max finite);
    ±max finite with ``saturate``. (-inf in an unsigned format: the NaN, and
    INVALID, which the callers add: ``_infinite_result``.)"""
    sign_bits = s.sign_bit if sign else 0
    if sign and not s.signed:
        return s.default_nan
    if saturate or s.encoding == "finite":
        return sign_bits | s.max_finite
    if s.encoding == "ieee" or s.inf is not None:
        return sign_bits | s.inf
    if s.encoding == "fn":
        return sign_bits | s.default_nan
    return s.default_nan                         # fnuz, e8m0, finite P3109


def _infinite_result(s: _Spec, sign: int, saturate: bool, flags: int = 0) -> tuple:
    """(bits, flags) of an infinite result: ``_infinite``, with INVALID for -inf in an unsigned
    format (it has no negative values: the NaN), also under ``saturate``."""
    if sign and not s.signed:
        return s.default_nan, flags | INVALID
    return _infinite(s, sign, saturate), flags


# ---------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------

def _daz(operand: tuple) -> tuple:
    """A decoded operand with a subnormal read as the zero of its sign (IEEE/x86 DAZ). In a FNUZ
    format that zero may be -0, which the format cannot hold but the arithmetic can: the spec
    makes every FNUZ *result* +0, and is silent on inputs; a conversion of 0x81 with daz into
    fp32 is -0 here (the sign survives, as DAZ keeps it)."""
    kind, sign, _ = operand
    return ("zero", sign, Fraction(0)) if kind == "subnormal" else operand


def _zero(s: _Spec, sign: int) -> int:
    return sign << (s.width - 1) if s.encoding not in ("fnuz", "p3109") else 0  # no -0 in FNUZ and P3109


def _inf(s: _Spec, sign: int) -> int:
    return (sign << (s.width - 1)) | s.inf


class _Rounding(NamedTuple):
    """The options of the one rounding, passed through to ``encode_round``."""
    rounding: str
    ftz: bool
    tininess: str
    saturate: bool
    random: int | None
    sr_bits: int

    def encode(self, value, sign: int, fmt: str) -> tuple:
        return encode_round(value, sign, fmt, self.rounding, self.ftz, self.tininess,
                            saturate=self.saturate, random=self.random, sr_bits=self.sr_bits)


def _sum(x: tuple, y: tuple, s: _Spec, rnd: _Rounding, nan: str) -> tuple:
    """x + y for non-NaN operands given as (kind, sign, value)."""
    kx, sx, vx = x
    ky, sy, vy = y
    if kx == "inf" and ky == "inf":
        if sx != sy:
            return _canonical_nan(s, nan), INVALID
        return _infinite_result(s, sx, rnd.saturate)
    if kx == "inf":
        return _infinite_result(s, sx, rnd.saturate)
    if ky == "inf":
        return _infinite_result(s, sy, rnd.saturate)
    total = vx + vy
    if total == 0:
        if kx == "zero" and ky == "zero" and sx == sy:
            return _zero(s, sx), 0
        return _zero(s, 1 if rnd.rounding == "rdn" else 0), 0
    return rnd.encode(total, 0, s.name)


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


def _invalid(s: _Spec, nan: str) -> tuple:
    return _canonical_nan(s, nan), INVALID


def ref_op(op: str, fmt: str, *operands: int, rounding: str = "rne",
           ftz: bool = False, daz: bool = False, nan: str = "ieee",
           tininess: str = "after", saturate: bool = False,
           random: int | None = None, sr_bits: int = 32) -> tuple:
    """Reference result of ``op`` on bit patterns of format ``fmt``.

    op: add, sub, mul, div, fma (a*b + c), sqrt -> ``(bits, flags)``;
    eq, lt, le -> ``(bool, flags)`` (quiet comparisons).  ``rounding="sr"``
    takes the random integer ``random`` of ``sr_bits`` bits.  E8M0 has
    comparisons but no arithmetic (ValueError).
    """
    s = _spec(fmt)
    if op not in _ARITY:
        raise ValueError(f"unknown op {op!r}")
    if len(operands) != _ARITY[op]:
        raise TypeError(f"{op} takes {_ARITY[op]} operands, got {len(operands)}")
    _check_choice("rounding", rounding, ALL_ROUNDINGS)
    _check_choice("nan profile", nan, NAN_PROFILES)
    _check_choice("tininess", tininess, TININESS)
    if s.encoding == "e8m0" and op not in ("eq", "lt", "le"):
        raise ValueError(f"{fmt} has no arithmetic ({op}): it holds block scales")

    ops = [_check_bits(b, s) for b in operands]
    dec = [decode(b, fmt) for b in ops]
    if daz:
        dec = [_daz(x) for x in dec]

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

    rnd = _Rounding(rounding, ftz, tininess, saturate, random, sr_bits)

    if op in ("add", "sub"):
        x, y = dec
        if op == "sub":
            y = _negate(y)
        return _sum(x, y, s, rnd, nan)

    if op == "mul":
        prod = _product(*dec)
        if prod is None:
            return _invalid(s, nan)
        kind, sign, value = prod
        if kind == "inf":
            return _infinite_result(s, sign, saturate)
        if kind == "zero":
            return _zero(s, sign), 0
        return rnd.encode(value, sign, fmt)

    if op == "fma":
        prod = _product(dec[0], dec[1])
        if prod is None:
            return _invalid(s, nan)
        return _sum(prod, dec[2], s, rnd, nan)

    if op == "div":
        (ka, sa, va), (kb, sb, vb) = dec
        sign = sa ^ sb
        if ka == "inf":
            if kb == "inf":
                return _invalid(s, nan)
            return _infinite_result(s, sign, saturate)
        if kb == "inf":
            return _zero(s, sign), 0
        if kb == "zero":
            if ka == "zero":
                return _invalid(s, nan)
            return _infinite_result(s, sign, saturate, DIVIDE_BY_ZERO)
        if ka == "zero":
            return _zero(s, sign), 0
        return rnd.encode(va / vb, sign, fmt)

    if op == "sqrt":
        ((ka, sa, va),) = dec
        if ka == "zero":
            return _zero(s, sa), 0
        if sa == 1:                              # negative nonzero or -inf
            return _invalid(s, nan)
        if ka == "inf":
            return _infinite_result(s, 0, saturate)
        return exact.round_sqrt(va, fmt, rounding, ftz=ftz, tininess=tininess, saturate=saturate,
                                random=random, sr_bits=sr_bits)

    raise AssertionError(op)  # pragma: no cover


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------

def ref_convert(bits: int, src: str, dst: str, rounding: str = "rne",
                ftz: bool = False, daz: bool = False, nan: str = "ieee",
                tininess: str = "after", *, saturate: bool = False,
                random: int | None = None, sr_bits: int = 32) -> tuple:
    """Convert a ``src`` bit pattern to ``dst`` with a single rounding.

    Infinities into a format without them give its overflow value (±max
    finite with ``saturate``) and INVALID; with ``saturate`` into a format
    with infinities (IEEE, extended P3109), ±max finite without a flag.  NaNs
    keep sign and payload between IEEE-like formats (profiles "ieee", "x86"),
    become the one NaN of a FNUZ format, E8M0 or P3109, and +0 with INVALID
    in a format without NaN. A negative value or -inf into an unsigned P3109
    format is its NaN with INVALID (also with ``saturate``); -0 is +0.
    """
    ss, ds = _spec(src), _spec(dst)
    _check_choice("rounding", rounding, ALL_ROUNDINGS)
    _check_choice("nan profile", nan, NAN_PROFILES)
    _check_choice("tininess", tininess, TININESS)
    bits = _check_bits(bits, ss)
    kind, sign, value = _daz(decode(bits, src)) if daz else decode(bits, src)
    if _is_nan_kind(kind):
        result, flags = _convert_nan(bits, ss, ds, nan)
        return result, flags | (INVALID if kind == "snan" else 0)
    if ds.encoding == "e8m0" and (sign or kind == "zero"):
        return ds.default_nan, INVALID           # no zero and no negative values
    if not ds.signed and sign and kind != "zero":
        return ds.default_nan, INVALID           # unsigned P3109: no negative values (-0 is +0)
    if kind == "inf":
        if ds.inf is not None:                   # ieee, extended P3109
            return (ds.max_finite | (sign and ds.sign_bit) if saturate else _inf(ds, sign)), 0
        return _infinite(ds, sign, saturate), INVALID
    if kind == "zero":
        return _zero(ds, sign), 0
    return encode_round(value, sign, dst, rounding, ftz, tininess, saturate=saturate, random=random,
                        sr_bits=sr_bits)


def ref_from_float(x, fmt: str, rounding: str = "rne", ftz: bool = False,
                   nan: str = "ieee", tininess: str = "after", *,
                   saturate: bool = False, random: int | None = None,
                   sr_bits: int = 32) -> tuple:
    """Convert a Python float (treated as fp64, subnormals exact, NaN payload
    kept) or an integer (exact; 0 gives +0) to ``fmt``."""
    rnd = dict(saturate=saturate, random=random, sr_bits=sr_bits)
    if isinstance(x, numbers.Integral):
        _check_choice("nan profile", nan, NAN_PROFILES)
        return encode_round(Fraction(int(x)), 0, fmt, rounding, ftz, tininess, **rnd)
    (bits,) = struct.unpack("<Q", struct.pack("<d", float(x)))
    return ref_convert(bits, "fp64", fmt, rounding=rounding, ftz=ftz,
                       daz=False, nan=nan, tininess=tininess, **rnd)
