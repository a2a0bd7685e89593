"""The IEEE P3109 formats (``sf.formats.p3109``, ``sf.format("p3109_k8p3se")``) against two
references: the test suite's exact-rational oracle (tests/oracle.py, which describes each format
from (K, P, signed, domain) by itself) and gfloat, an independent implementation of the P3109
formats (the ``dev`` extra; the tests that need it are skipped, with the reason, without it).

- every code point of all 120 formats: the library's value (``Format.value``, the kernels'
  ``to_float``) and classification against the oracle's decoding and gfloat's ``decode_float``;
- conversions from float64 (``from_float``) and from FP32 bits (``convert``): random values
  (log-uniform magnitudes from below the smallest subnormal to beyond max, both signs) and the
  edge values (every midpoint, +-max, beyond max, tiny, +-0, +-inf, NaN) in rne, rna, rtz, rup
  and rdn, with and without saturate: bits against gfloat's ``round_ndarray`` and
  ``encode_ndarray`` (the cases gfloat does not define, negative values into an unsigned format,
  against their rule), bits and flags against the oracle; stochastic rounding against gfloat's
  ``StochasticFastest`` with the same random bits, and the oracle; conversions between P3109
  formats and out of them into IEEE and FP8 formats against the oracle;
- add, sub, mul, div, fma and sqrt against the oracle, in every rounding mode (round to odd
  included) with and without saturate, flags included: every operand pair of four 3- and 4-bit
  formats, every pair of special operands and random pairs of eight 8-bit formats, stochastic
  rounding with explicit random bits;
- ``sf.linalg.matmul`` with P3109 operands (accumulating and writing IEEE formats) against exact
  rational sums;
- what the constructors refuse.

Each kernel loop is compiled per format and configuration, so the formats a test covers are
chosen: all 120 where a test compiles nothing (Format.value, the classification), the 8-bit
formats and a set that covers every combination of the properties (signed, domain, precision 1,
precision K-1 or K) across widths where a test needs one or two loops per format (FULL; for
conversions in every mode that set and a third of the 8-bit formats), that set where it needs
more. ``python bench/verify_p3109.py --k K`` checks every input of every format of K bits, every
op, mode and saturation, against the exact reference.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest

import oracle
import softfloat16 as sf
from softfloat16.formats import p3109, p3109_formats

NAMES = tuple(f.name for f in p3109_formats())
MODES = ("rne", "rna", "rtz", "rup", "rdn")          # the modes gfloat has (and stochastic rounding)
ARITH_MODES = oracle.ROUNDINGS                        # and round to odd
GFLOAT_MODES = {"rne": "TiesToEven", "rna": "TiesToAway", "rtz": "TowardZero", "rup": "TowardPositive",
                "rdn": "TowardNegative"}
SR_BITS = (1, 4, 13, 32)
# Formats of the tests that compile several loops per format: every combination of signed or not,
# extended or finite, precision 1 (ties to the even code), precision K-1 or K (one exponent bit),
# across widths.
COVER = ("p3109_k8p1se", "p3109_k8p1uf", "p3109_k8p3se", "p3109_k8p4uf", "p3109_k8p3sf", "p3109_k8p4ue",
         "p3109_k8p7sf", "p3109_k8p8ue", "p3109_k6p1ue", "p3109_k5p2sf", "p3109_k7p6se", "p3109_k6p6uf")
# The 8-bit ones but p3109_k8p3sf (p3109_k8p7sf is signed and finite), for the arithmetic (two
# loops per format and op).
ARITH_COVER = tuple(name for name in COVER if name.startswith("p3109_k8") and name != "p3109_k8p3sf")
# The formats of the tests that compile one or two loops per format where the others take all 120:
# the 8-bit formats and COVER.
FULL = {f.name for f in p3109_formats(8)} | set(COVER)
P3109_8_SAMPLE = {f.name for f in p3109_formats(8)[::3]}
# Formats small enough to test every operand pair in every mode: the same combinations.
EXHAUSTIVE = ("p3109_k3p1se", "p3109_k3p3ue", "p3109_k4p2sf", "p3109_k4p1uf")
SEED = 20260309

INVALID = oracle.INVALID


@pytest.fixture(scope="module")
def gfloat():
    return pytest.importorskip("gfloat", reason="gfloat is not installed (the dev extra): P3109 checks against it "
                                                "skipped")


def gfloat_info(name: str):
    from gfloat import Domain, Signedness
    from gfloat.formats import format_info_p3109
    k, p, signed, domain = oracle.P3109_FORMATS[name]
    return format_info_p3109(k, p, Signedness.Signed if signed else Signedness.Unsigned,
                             Domain.Extended if domain == "extended" else Domain.Finite)


def mismatch_report(rows: list[str], total: int) -> str:
    return f"{len(rows)} of {total} differ, first ones:\n" + "\n".join(rows[:12])


# --- the format lists and descriptions ---------------------------------------------------------

def test_the_library_and_the_oracle_list_the_same_120_formats():
    assert NAMES == tuple(oracle.P3109_FORMATS)
    assert len(NAMES) == 120 and len(p3109_formats(8)) == 30
    assert not set(NAMES) & set(sf.FORMATS)


@pytest.mark.parametrize("name", NAMES)
def test_the_library_describes_each_format_as_the_oracle(name):
    k, p, signed, domain = oracle.P3109_FORMATS[name]
    fmt, s = sf.format(name), oracle.spec(name)
    assert fmt is p3109(k, p, signed, domain) and fmt.name == s.name == name
    assert (fmt.width, fmt.precision, fmt.exponent_bits, fmt.fraction_bits, fmt.bias, fmt.emin, fmt.emax) == (
        s.width, s.p, s.e, s.f, s.bias, s.emin, s.emax)
    assert (fmt.signed, fmt.max_finite, fmt.default_nan, fmt.has_inf, fmt.has_negative_zero) == (
        s.signed, s.max_finite, s.default_nan, s.inf is not None, False)
    if s.inf is not None:
        assert fmt.inf == s.inf
    assert fmt.sign_mask == (s.sign_bit or 1 << k) and fmt.tie_to_even_code == (p == 1)


@pytest.mark.parametrize("name", NAMES)
def test_gfloat_describes_each_format_as_the_oracle(name, gfloat):
    fi, s = gfloat_info(name), oracle.spec(name)
    assert (fi.name, fi.k, fi.precision, fi.bias, fi.is_signed, fi.has_nz) == (name, s.width, s.p, s.bias, s.signed,
                                                                              False)
    assert (fi.code_of_nan, Fraction(fi.max)) == (s.default_nan, oracle.to_fraction(s.max_finite, name))
    assert (fi.domain.name == "Extended") == (s.inf is not None)


@pytest.mark.parametrize(("fnuz", "name"), [("fp8_e4m3fnuz", "p3109_k8p4sf"), ("fp8_e5m2fnuz", "p3109_k8p3sf")])
def test_the_fnuz_formats_are_p3109_signed_finite_formats(fnuz, name):
    """Two descriptions of the oracle's, from different rules, give the same codes; the library
    packs them alike."""
    assert [oracle.decode(code, fnuz) for code in range(256)] == decoded(name)
    a, b = oracle.spec(fnuz), oracle.spec(name)
    assert (a.bias, a.max_finite, a.default_nan, a.inf) == (b.bias, b.max_finite, b.default_nan, b.inf)
    assert sf.format(fnuz).encoding_code == sf.format(name).encoding_code


# --- 1. every code point ----------------------------------------------------------------------

@functools.cache
def decoded(name: str) -> list[tuple]:
    return [oracle.decode(code, name) for code in range(1 << oracle.spec(name).width)]


@pytest.mark.parametrize("name", NAMES)
def test_every_code_point_decodes_as_the_oracle(name):
    """Format.value and the classification of every format; the kernels' to_float of FULL."""
    fmt = sf.format(name)
    codes = np.arange(1 << fmt.width, dtype=np.uint8)
    values = [fmt.value(code) for code in codes.tolist()]
    floats = fmt.to_float(codes).tolist() if name in FULL else [float(v) for v in values]   # exact
    classes = {"nan": fmt.is_nan(codes), "inf": fmt.is_inf(codes), "zero": fmt.is_zero(codes),
               "subnormal": fmt.is_subnormal(codes), "normal": fmt.is_normal(codes), "finite": fmt.is_finite(codes)}
    for code, (kind, sign, value) in enumerate(decoded(name)):
        got = {c: bool(v[code]) for c, v in classes.items()}
        want = {"nan": kind == "qnan", "inf": kind == "inf", "zero": kind == "zero", "subnormal": kind == "subnormal",
                "normal": kind == "normal", "finite": value is not None}
        assert got == want, (name, hex(code), kind)
        x, py = floats[code], values[code]
        if kind == "qnan":
            assert math.isnan(x) and math.isnan(py), (name, hex(code))
        elif kind == "inf":
            assert x == py == (-math.inf if sign else math.inf), (name, hex(code))
        else:
            assert Fraction(x) == py == value and math.copysign(1, x) == 1 - 2 * sign, (name, hex(code), x, value)


@pytest.mark.parametrize("name", NAMES)
def test_every_code_point_decodes_as_gfloat(name, gfloat):
    fi = gfloat_info(name)
    kinds = {"ZERO": "zero", "SUBNORMAL": "subnormal", "NORMAL": "normal", "INFINITE": "inf", "NAN": "qnan"}
    for code, (kind, sign, value) in enumerate(decoded(name)):
        g = gfloat.decode_float(fi, code)
        assert kinds[g.fclass.name] == kind, (name, hex(code))
        if kind == "qnan":
            assert math.isnan(g.fval)
        elif kind == "inf":
            assert g.fval == (-math.inf if sign else math.inf), (name, hex(code))
        else:   # zeros with their sign: P3109 has +0 only
            assert Fraction(g.fval) == value and math.copysign(1, g.fval) == 1 - 2 * sign, (name, hex(code), g.fval)


# --- 2. conversions ---------------------------------------------------------------------------

def finite_magnitudes(name: str) -> list[Fraction]:
    """The format's finite values >= 0, ascending."""
    return sorted({abs(v) for _, _, v in decoded(name) if v is not None})


@functools.cache
def edge_values(name: str) -> np.ndarray:
    """float64 values where the modes differ or the rules change: every midpoint between
    neighbours (zero and the smallest subnormal included), +-max, just and far beyond max, tiny
    values, +-0, +-inf, NaN; both signs of each."""
    mags = finite_magnitudes(name)
    top, ulp = mags[-1], mags[-1] - mags[-2]
    smallest = mags[1]
    points = set(mags[:2] + mags[-2:]) | {(a + b) / 2 for a, b in zip(mags, mags[1:])}
    points |= {top + ulp / 4, top + ulp / 2, top + 3 * ulp / 4, top + ulp, 2 * top, smallest / 4, 3 * smallest / 4}
    magnitudes = [float(x) for x in sorted(points)] + [1e300, 5e-324, math.inf]
    assert all(Fraction(x) in points for x in magnitudes[:len(points)])   # exact in float64
    return np.array(magnitudes + [-x for x in magnitudes] + [0.0, -0.0, math.nan])


@functools.cache
def random_values(name: str, count: int = 192) -> np.ndarray:
    """Log-uniform magnitudes from 1/8 of the smallest subnormal to 8 times max, both signs."""
    s = oracle.spec(name)
    low = math.log2(oracle.to_fraction(1, name)) - 3
    high = math.log2(oracle.to_fraction(s.max_finite, name)) + 3
    rng = np.random.default_rng([SEED, NAMES.index(name)])
    return np.exp2(rng.uniform(low, high, count)) * rng.choice([-1.0, 1.0], count)


def fp32_inputs(name: str) -> np.ndarray:
    """FP32 bit patterns: the edge and random values exact in FP32, random FP32 values, FP32's
    extremes and a signaling NaN."""
    x = np.concatenate([edge_values(name), random_values(name)])
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)
    exact = (x32.astype(np.float64) == x) | np.isnan(x)
    rng = np.random.default_rng([SEED, NAMES.index(name), 32])
    s = oracle.spec(name)
    low = math.log2(oracle.to_fraction(1, name)) - 3
    high = math.log2(oracle.to_fraction(s.max_finite, name)) + 3
    more = (np.exp2(rng.uniform(low, high, 64)) * rng.choice([-1.0, 1.0], 64)).astype(np.float32)
    special = np.array([0x7F800001, 0xFFC00000, 0x00000001, 0x80000001, 0x7F7FFFFF, 0xFF7FFFFF], np.uint32)
    return np.concatenate([x32[exact].view(np.uint32), more.view(np.uint32), special])


def library_convert(name: str, source: str, inputs: np.ndarray, **options):
    fmt = sf.format(name)
    if source == "fp64":
        bits, flags = sf.ops.from_float(fmt, inputs, flags=True, **options)
    else:
        bits, flags = sf.convert(inputs, src="fp32", dst=fmt, flags=True, **options)
    return bits.astype(np.int64), flags.astype(np.int64)


def oracle_convert(name: str, source: str, x, **options) -> tuple[int, int]:
    if source == "fp64":
        return oracle.ref_from_float(float(x), name, **options)
    return oracle.ref_convert(int(x), "fp32", name, **options)


def as_float64(source: str, inputs: np.ndarray) -> np.ndarray:
    if source == "fp64":
        return inputs
    with np.errstate(invalid="ignore"):   # FP32's signaling NaN
        return inputs.view(np.float32).astype(np.float64)


def conversion_inputs(name: str, source: str) -> np.ndarray:
    if source == "fp64":
        return np.concatenate([edge_values(name), random_values(name)])
    return fp32_inputs(name)


def near_the_ends(name: str, x: np.ndarray) -> np.ndarray:
    """Where the flags are decided by more than inexactness: specials, zeros, the subnormal range
    and the smallest normal binade, and the top binade and beyond."""
    s = oracle.spec(name)
    low = 2 * float(oracle.to_fraction(1 << s.f, name))
    high = float(oracle.to_fraction(s.max_finite, name)) / 2
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(x) | (np.abs(x) < low) | (np.abs(x) > high)


def in_turn(key: np.ndarray, count: int) -> list[np.ndarray]:
    """For each of ``count`` configs, the indices it checks: every key element, and each other
    element in one config, in turn."""
    others = np.flatnonzero(~key)
    return [np.sort(np.concatenate([np.flatnonzero(key), others[c::count]])) for c in range(count)]


# Conversions from float64 into every format, in every mode with and without saturate; each
# configuration but the default (rne, no saturate) shares one compiled loop per format, and the
# default has its own: it is tested for the 8-bit formats and COVER (one loop fewer to compile for
# each of the other 86, whose other nine configurations are tested). From FP32 bits: COVER.
CONFIGS5 = [(mode, saturate) for mode in MODES for saturate in (False, True)]
# fp64 sources: COVER and every third 8-bit format (the others: tests/test_format_references.py
# against gfloat, and bench/verify_p3109.py); fp32 sources: COVER.
CONVERSIONS = ([(name, "fp64") for name in NAMES if name in COVER or name in P3109_8_SAMPLE]
               + [(name, "fp32") for name in COVER])


def conversion_configs(name: str) -> list[tuple[str, bool]]:
    return CONFIGS5 if name in FULL else CONFIGS5[1:]


@pytest.mark.parametrize(("name", "source"), CONVERSIONS)
def test_conversions_match_the_oracle(name, source):
    """Bits and flags: the values near the ends of the range in every configuration, the others
    each in one, in turn."""
    inputs, rows = conversion_inputs(name, source), []
    x = as_float64(source, inputs)
    configs = conversion_configs(name)
    for (mode, saturate), checked in zip(configs, in_turn(near_the_ends(name, x), len(configs))):
        bits, flags = library_convert(name, source, inputs, rounding=mode, saturate=saturate)
        for i in checked:
            want = oracle_convert(name, source, inputs[i], rounding=mode, saturate=saturate)
            if (bits[i], flags[i]) != want:
                rows.append(f"{name} {mode} saturate={saturate} {x[i]!r} ({inputs[i]:#x}): got {bits[i]:#x} "
                            f"flags {flags[i]}, want {want[0]:#x} flags {want[1]}")
    assert not rows, mismatch_report(rows, len(inputs) * len(configs))


def gfloat_round(gfloat, name: str, x: np.ndarray, mode: str, saturate: bool, random=None, sr_bits=0):
    """gfloat's bits for float64 values (rounded, then encoded), and where gfloat defines them (not
    for negative values into an unsigned format)."""
    fi = gfloat_info(name)
    defined = np.ones(x.shape, bool) if fi.is_signed else ~(x < 0)
    if mode == "sr":
        rounded = gfloat.round_ndarray(fi, x[defined], gfloat.RoundMode.StochasticFastest, saturate,
                                       random[defined].astype(np.int64), sr_bits)
    else:
        rounded = gfloat.round_ndarray(fi, x[defined], getattr(gfloat.RoundMode, GFLOAT_MODES[mode]), saturate)
    bits = np.full(x.shape, -1, np.int64)
    bits[defined] = gfloat.encode_ndarray(fi, rounded).astype(np.int64)
    return bits, defined


def check_against_gfloat(gfloat, name, source, inputs, mode, saturate, **options) -> list[str]:
    got, flags = library_convert(name, source, inputs, rounding=mode, saturate=saturate, **options)
    x = as_float64(source, inputs)
    random = options.get("random_bits")
    r = None if random is None else random >> (32 - options["sr_bits"])
    want, defined = gfloat_round(gfloat, name, x, mode, saturate, r, options.get("sr_bits", 0))
    # Negative values (and -inf) into an unsigned format: the NaN with INVALID, also saturating.
    want[~defined] = oracle.spec(name).default_nan
    bad = (got != want) | (~defined & (flags != INVALID))
    label = f"{mode} saturate={saturate}" + (f" sr_bits={options['sr_bits']}" if mode == "sr" else "")
    return [f"{name} {label} {x[i]!r}" + (f" r={r[i]}" if r is not None else "") +
            f": got {got[i]:#x} flags {flags[i]}, want {want[i]:#x}" + ("" if defined[i] else " flags INVALID")
            for i in np.flatnonzero(bad)]


@pytest.mark.parametrize(("name", "source"), CONVERSIONS)
def test_conversions_match_gfloat(name, source, gfloat):
    """Bits of every value in every configuration (negative values into an unsigned format: the
    NaN with INVALID, by the rule)."""
    inputs, rows = conversion_inputs(name, source), []
    configs = conversion_configs(name)
    for mode, saturate in configs:
        rows += check_against_gfloat(gfloat, name, source, inputs, mode, saturate)
    assert not rows, mismatch_report(rows, len(configs) * len(inputs))


SR_CONFIGS = [(saturate, sr_bits) for saturate in (False, True) for sr_bits in SR_BITS]


SR_CONVERSIONS = [(n, "fp64") for n in COVER] + [(n, "fp32") for n in COVER[::2]]


def sr_inputs(name: str, source: str) -> tuple[np.ndarray, np.ndarray]:
    """The conversion inputs and a random 32-bit word for each."""
    inputs = conversion_inputs(name, source)
    return inputs, np.random.default_rng([SEED, NAMES.index(name), 7]).integers(0, 1 << 32, inputs.shape,
                                                                                 dtype=np.uint32)


@pytest.mark.parametrize(("name", "source"), SR_CONVERSIONS)
def test_stochastic_conversions_match_the_oracle(name, source):
    """rounding="sr" with explicit random bits, R = sr_bits of them (their top R bits), saturate or
    not: bits and flags; the values near the ends in every configuration, the others in one each."""
    inputs, words = sr_inputs(name, source)
    x = as_float64(source, inputs)
    rows = []
    for (saturate, sr_bits), checked in zip(SR_CONFIGS, in_turn(near_the_ends(name, x), len(SR_CONFIGS))):
        bits, flags = library_convert(name, source, inputs, rounding="sr", saturate=saturate, random_bits=words,
                                      sr_bits=sr_bits)
        for i in checked:
            r = int(words[i]) >> (32 - sr_bits)
            want = oracle_convert(name, source, inputs[i], rounding="sr", saturate=saturate, random=r,
                                  sr_bits=sr_bits)
            if (bits[i], flags[i]) != want:
                rows.append(f"{name} sr saturate={saturate} sr_bits={sr_bits} r={r} {x[i]!r}: got {bits[i]:#x} "
                            f"flags {flags[i]}, want {want[0]:#x} flags {want[1]}")
    assert not rows, mismatch_report(rows, len(SR_CONFIGS) * len(inputs))


@pytest.mark.parametrize(("name", "source"), SR_CONVERSIONS)
def test_stochastic_conversions_match_gfloat(name, source, gfloat):
    """The bits of every value, every R, saturate or not: gfloat's StochasticFastest with the same
    R-bit integers (round up iff the discarded fraction plus r / 2**R reaches 1)."""
    inputs, words = sr_inputs(name, source)
    rows = []
    for saturate, sr_bits in SR_CONFIGS:
        rows += check_against_gfloat(gfloat, name, source, inputs, "sr", saturate, random_bits=words, sr_bits=sr_bits)
    assert not rows, mismatch_report(rows, len(SR_CONFIGS) * len(inputs))


# Conversions between P3109 formats (the oracle decodes the source by itself).
BETWEEN = [("p3109_k8p3se", "p3109_k8p4ue"), ("p3109_k8p4ue", "p3109_k8p3sf"), ("p3109_k8p1uf", "p3109_k8p1se"),
           ("p3109_k8p7sf", "p3109_k8p8ue"), ("p3109_k6p1ue", "p3109_k8p3se")]


@pytest.mark.parametrize(("src", "dst"), BETWEEN)
def test_conversions_between_p3109_formats_match_the_oracle(src, dst):
    check_every_code_converts(src, dst, CONFIGS)


def check_every_code_converts(src: str, dst: str, configs: list[tuple[str, bool]]) -> None:
    """Every code of ``src`` converted into ``dst`` in each (mode, saturate) against the oracle."""
    codes = np.arange(1 << oracle.spec(src).width, dtype=np.uint8)
    rows = []
    for mode, saturate in configs:
        got, flags = sf.convert(codes, src=src, dst=dst, rounding=mode, saturate=saturate, flags=True)
        for code in codes.tolist():
            want = oracle.ref_convert(code, src, dst, mode, saturate=saturate)
            if (int(got[code]), int(flags[code])) != want:
                rows.append(f"{src} {code:#x} -> {dst} {mode} saturate={saturate}: got {int(got[code]):#x} "
                            f"flags {int(flags[code])}, want {want[0]:#x} flags {want[1]}")
    assert not rows, mismatch_report(rows, len(configs) * len(codes))


# --- 3. arithmetic ----------------------------------------------------------------------------

ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "sqrt": 1}
CONFIGS = [(mode, saturate) for mode in ARITH_MODES for saturate in (False, True)]


def special_codes(name: str) -> list[int]:
    """Zero, NaN, +-inf, +-max, +-the smallest subnormal and normal, +-1: every operand class."""
    s = oracle.spec(name)
    one = s.bias << s.f
    codes = {0, s.default_nan, s.max_finite, 1, 1 << s.f, one}
    if s.inf is not None:
        codes.add(s.inf)
    if s.signed:
        codes |= {c | s.sign_bit for c in codes if c not in (0, s.default_nan)}
    return sorted(codes)


def check_op(name: str, op: str, operands: list[np.ndarray], config: np.ndarray) -> list[str]:
    """The library on each operand tuple in its config (an index into CONFIGS) against the oracle."""
    fmt, rows = sf.format(name), []
    for c, (mode, saturate) in enumerate(CONFIGS):
        idx = np.flatnonzero(config == c)
        if not idx.size:
            continue
        args = [x[idx].astype(np.uint8) for x in operands]
        got, flags = getattr(fmt, op)(*args, rounding=mode, saturate=saturate, flags=True)
        for j, i in enumerate(idx):
            ints = [int(x[i]) for x in operands]
            want = oracle.ref_op(op, name, *ints, rounding=mode, saturate=saturate)
            if (int(got[j]), int(flags[j])) != want:
                rows.append(f"{name}.{op}({', '.join(hex(v) for v in ints)}) {mode} saturate={saturate}: "
                            f"got {int(got[j]):#x} flags {int(flags[j])}, want {want[0]:#x} flags {want[1]}")
    return rows


def every_config(operands: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """Each operand tuple once in each config."""
    n = operands[0].size
    return [np.tile(x, len(CONFIGS)) for x in operands], np.repeat(np.arange(len(CONFIGS)), n)


@pytest.mark.parametrize("op", ARITY)
@pytest.mark.parametrize("name", EXHAUSTIVE)
def test_arithmetic_on_every_operand_matches_the_oracle(name, op):
    """Every operand pair (sqrt: operand; fma: triple) in every rounding mode, with and without
    saturate (fma of 4 bits: each triple in one configuration, in turn)."""
    count = 1 << oracle.spec(name).width
    grids = np.meshgrid(*[np.arange(count)] * ARITY[op], indexing="ij")
    operands = [g.ravel() for g in grids]
    if operands[0].size > 1024:
        config = np.arange(operands[0].size) % len(CONFIGS)
    else:
        operands, config = every_config(operands)
    rows = check_op(name, op, operands, config)
    assert not rows, mismatch_report(rows, config.size)


@pytest.mark.parametrize("op", ARITY)
@pytest.mark.parametrize("name", ARITH_COVER)
def test_arithmetic_on_special_and_random_operands_matches_the_oracle(name, op):
    """Every pair of special operands (zero, NaN, inf, max, the smallest subnormal and normal, one,
    both signs) in every config, and random pairs in a random config each; every triple of special
    operands (fma) in one config each, in turn, and random ones; sqrt of every operand in every
    config."""
    arity, count = ARITY[op], 1 << oracle.spec(name).width
    specials = np.array(special_codes(name)) if arity > 1 else np.arange(count)
    grids = np.meshgrid(*[specials] * arity, indexing="ij")
    if arity == 3:   # fma: each triple of specials in one config, in turn
        operands = [g.ravel() for g in grids]
        config = np.arange(operands[0].size) % len(CONFIGS)
    else:
        operands, config = every_config([g.ravel() for g in grids])
    rng = np.random.default_rng([SEED, NAMES.index(name), list(ARITY).index(op)])
    n = 0 if arity == 1 else 1536
    random = [rng.integers(0, count, n) for _ in range(arity)]
    operands = [np.concatenate([a, b]) for a, b in zip(operands, random)]
    config = np.concatenate([config, rng.integers(0, len(CONFIGS), n)])
    rows = check_op(name, op, operands, config)
    assert not rows, mismatch_report(rows, config.size)


@pytest.mark.parametrize("name", ["p3109_k8p3se", "p3109_k8p4uf", "p3109_k8p1se", "p3109_k8p8ue"])
def test_binary_ops_on_large_arrays_read_the_same_results(name):
    """Two 8-bit operand arrays of 32768 or more are answered from a table of every pair: the same
    results as the loop gives element by element (which the tests above compare with the oracle)."""
    fmt = sf.format(name)
    count = 1 << fmt.width
    a, b = (g.ravel().astype(np.uint8) for g in np.meshgrid(np.arange(256) % count, np.arange(256) % count))
    rng = np.random.default_rng(SEED)
    sample = rng.integers(0, a.size, 2000)
    for op in ("add", "sub", "mul", "div"):
        for mode, saturate in (("rne", False), ("rup", True)):
            table = getattr(fmt, op)(a, b, rounding=mode, saturate=saturate, flags=True)
            loop = getattr(fmt, op)(a[sample], b[sample], rounding=mode, saturate=saturate, flags=True)
            assert np.array_equal(table[0][sample], loop[0]) and np.array_equal(table[1][sample], loop[1]), op


@pytest.mark.parametrize("op", ARITY)
@pytest.mark.parametrize("name", ["p3109_k8p3se", "p3109_k8p4uf", "p3109_k8p1se", "p3109_k8p4ue"])
def test_stochastic_arithmetic_matches_the_oracle(name, op):
    """rounding="sr" with explicit random bits: the oracle with the same random integer."""
    fmt, arity, count = sf.format(name), ARITY[op], 1 << oracle.spec(name).width
    rng = np.random.default_rng([SEED, NAMES.index(name), list(ARITY).index(op), 99])
    n = 64 if arity == 1 else 384
    operands = [rng.integers(0, count, n).astype(np.uint8) for _ in range(arity)]
    words = rng.integers(0, 1 << 32, n, dtype=np.uint32)
    rows = []
    for sr_bits in (5, 32):
        got, flags = getattr(fmt, op)(*operands, rounding="sr", random_bits=words, sr_bits=sr_bits, flags=True)
        for i in range(n):
            ints = [int(x[i]) for x in operands]
            r = int(words[i]) >> (32 - sr_bits)
            want = oracle.ref_op(op, name, *ints, rounding="sr", random=r, sr_bits=sr_bits)
            if (int(got[i]), int(flags[i])) != want:
                rows.append(f"{name}.{op}({', '.join(hex(v) for v in ints)}) sr r={r} sr_bits={sr_bits}: "
                            f"got {int(got[i]):#x} flags {int(flags[i])}, want {want[0]:#x} flags {want[1]}")
    assert not rows, mismatch_report(rows, 2 * n)


@pytest.mark.parametrize("name", ["p3109_k8p4ue", "p3109_k3p3ue", "p3109_k8p1ue"])
def test_unsigned_finite_minus_inf_is_the_nan_with_invalid(name):
    s, fmt = oracle.spec(name), sf.format(name)
    finite = np.array([c for c in range(1 << s.width) if oracle.decode(c, name)[2] is not None], np.uint8)
    for mode, saturate in CONFIGS:
        got, flags = fmt.sub(finite, np.uint8(s.inf), rounding=mode, saturate=saturate, flags=True)
        assert oracle.ref_op("sub", name, int(finite[0]), s.inf, rounding=mode, saturate=saturate) == (
            s.default_nan, INVALID)
        assert set(got.tolist()) == {s.default_nan} and set(flags.tolist()) == {INVALID}, (mode, saturate)


# Conversions out of P3109 into the IEEE formats (FP32: every value is exact) and an FP8 format.
OUTBOUND = [(name, "fp32") for name in COVER] + [(name, dst) for name in ("p3109_k8p1se", "p3109_k8p4ue")
                                                  for dst in ("fp16", "fp8_e4m3fn")]


@pytest.mark.parametrize(("src", "dst"), OUTBOUND)
def test_conversions_out_of_p3109_match_the_oracle(src, dst):
    check_every_code_converts(src, dst, [("rne", False)] if dst == "fp32" else CONFIGS)


# --- 4. matmul --------------------------------------------------------------------------------

def exact_sequential(a, b, name_a, name_b, mode):
    """((0 + a[i,0]*b[0,j]) + a[i,1]*b[1,j]) + ... with each sum rounded to FP32 (the oracle),
    as FP32 bits; products exact."""
    m, k = a.shape
    n = b.shape[1]
    out = np.zeros((m, n), np.int64)
    for i in range(m):
        for j in range(n):
            acc = 0   # FP32 bits of +0
            for t in range(k):
                x = oracle.to_fraction(int(a[i, t]), name_a) * oracle.to_fraction(int(b[t, j]), name_b)
                if x == 0:
                    continue   # +0 + (+-0) is +0 in rne and rtz: the sum starts from +0
                acc, _ = oracle.encode_round(oracle.to_fraction(acc, "fp32") + x, 0, "fp32", mode)
            out[i, j] = acc
    return out


def finite_codes(name: str) -> np.ndarray:
    return np.array([c for c, (kind, _, _) in enumerate(decoded(name)) if kind not in ("qnan", "inf")])


# (Each format, rounding mode and output format is a kernel compiled of its own: a few cases.)
@pytest.mark.parametrize(("name", "b_name", "mode"), [
    ("p3109_k8p3se", None, "rtz"), ("p3109_k8p1se", None, "rne"), ("p3109_k8p3sf", "p3109_k8p4ue", "rne")])
def test_matmul_sequential_in_fp32_matches_exact_sums_rounded_in_turn(name, b_name, mode):
    """Values of the whole range (p3109_k8p1se: 2**-63 .. 2**63): the sums round in FP32."""
    b_name = b_name or name
    rng = np.random.default_rng([SEED, NAMES.index(name), NAMES.index(b_name)])
    a = rng.choice(finite_codes(name), (3, 16)).astype(np.uint8)
    b = rng.choice(finite_codes(b_name), (16, 5)).astype(np.uint8)
    options = dict(accumulate="fp32", out_format="fp32", rounding=mode)
    if b_name != name:
        options["b_format"] = b_name
    got = sf.linalg.matmul(a, b, name, **options).astype(np.int64)
    want = exact_sequential(a, b, name, b_name, mode)
    assert np.array_equal(got, want), (got, want)


@pytest.mark.parametrize(("name", "order", "out_format"), [
    ("p3109_k8p3se", "sequential", "fp16"), ("p3109_k8p4uf", "pairwise", "bf16"),
    ("p3109_k8p3se", "tensorcore", "fp32")])
def test_matmul_in_every_order_is_exact_where_every_sum_is(name, order, out_format):
    """Operands from 1/4 to 4: every partial sum of 8 products is exact in FP32 in any order, so
    every order gives the exact sum, then rounded once to the output format (the oracle)."""
    codes = [c for c in finite_codes(name) if Fraction(1, 4) <= abs(oracle.to_fraction(int(c), name)) <= 4]
    rng = np.random.default_rng([SEED, NAMES.index(name), 5])
    a, b = rng.choice(codes, (4, 8)).astype(np.uint8), rng.choice(codes, (8, 6)).astype(np.uint8)
    exact = [[sum(oracle.to_fraction(int(a[i, t]), name) * oracle.to_fraction(int(b[t, j]), name)
                  for t in range(8)) for j in range(6)] for i in range(4)]
    core = {"tensor_core": sf.linalg.TensorCore(8, 25)} if order == "tensorcore" else {}  # any format
    got = sf.linalg.matmul(a, b, name, accumulate="fp32", out_format=out_format, order=order, **core)
    want = [[oracle.encode_round(x, 0, out_format)[0] for x in row] for row in exact]
    assert got.astype(np.int64).tolist() == want, (got, want)


def test_matmul_special_operands():
    """NaN operands and inf * 0 give FP32's default NaN; inf operands inf (extended domain)."""
    name = "p3109_k8p3se"
    s = oracle.spec(name)
    one = s.bias << s.f
    a = np.array([[s.default_nan, one], [s.inf, one], [s.inf, one], [s.inf | s.sign_bit, one]], np.uint8)
    b = np.array([[one], [one]], np.uint8)
    b0 = np.array([[0], [one]], np.uint8)
    got = sf.linalg.matmul(a, b, name, out_format="fp32")
    assert [hex(x) for x in got.ravel()] == ["0x7fc00000", "0x7f800000", "0x7f800000", "0xff800000"]
    assert hex(int(sf.linalg.matmul(a[1:2], b0, name, out_format="fp32")[0, 0])) == "0x7fc00000"


def test_matmul_refuses_p3109_results_and_accumulators_in_one_line():
    a = np.zeros((2, 2), np.uint8)
    for options in ({}, {"accumulate": "p3109_k8p3se", "out_format": "fp32"}):
        with pytest.raises(ValueError, match="p3109_k8p3se is not an IEEE-encoded format") as info:
            sf.linalg.matmul(a, a, "p3109_k8p3se", **options)
        assert "\n" not in str(info.value)


# --- 5. what the constructors refuse -----------------------------------------------------------

@pytest.mark.parametrize(("make", "says"), [
    (lambda: sf.format("p3109_k9p3se"), r"no format of K=9 bits; K is 3\.\.8"),
    (lambda: sf.format("p3109_k8p8se"), r"no signed K=8 format of precision P=8; P is 1\.\.7"),
    (lambda: p3109(8, 8), r"no signed K=8 format of precision P=8; P is 1\.\.7"),
    (lambda: p3109(8, 0), r"no signed K=8 format of precision P=0; P is 1\.\.7"),
    (lambda: p3109(8, 9, signed=False), r"no unsigned K=8 format of precision P=9; P is 1\.\.8"),
    (lambda: p3109(2, 1), r"no format of K=2 bits; K is 3\.\.8"),
    (lambda: p3109(8, 3, domain="wide"), r"unknown domain 'wide'; accepted: extended, finite"),
])
def test_the_constructors_refuse_formats_that_do_not_exist_in_one_line(make, says):
    with pytest.raises(ValueError, match=says) as info:
        make()
    assert "\n" not in str(info.value)
