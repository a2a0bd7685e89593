"""The core against the exact reference, exhaustively, for every format of at most 8 bits.

FP8 (E5M2, E4M3FN, E4M3FNUZ, E5M2FNUZ), FP6 (E2M3, E3M2) and FP4 (E2M1) have at most 256 patterns:
every pair of operands of add/sub/mul/div in every rounding mode, with and without ``saturate``,
bits and flags; every input of sqrt; fma on a sample; every fp16 and bf16 input, and over 10**6
float32 inputs for each format, converted into each of them and into E8M0; E8M0 to and from fp32, fp16, bf16 and
the small formats;
stochastic rounding with explicit random words; the NaN profiles and ftz/daz/tininess options.

The reference is tests/exact_vectors.py, a vectorised exact reference (numpy int64: sums, products
and quotients of m * 2**k as integers with a sticky bit), itself checked here against the scalar
Fraction oracle (tests/oracle.py) on thousands of random cases per format, operation and mode, and
against ml_dtypes' float32-computed arithmetic and conversions on every pair (RNE).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import exact_vectors as ev
import oracle
import softfloat16 as sf
from oracle import INVALID, ROUNDINGS, SMALL_FORMATS, ref_convert, ref_op

CONVERSION_TARGETS = SMALL_FORMATS + ("e8m0",)
ARITHMETIC = ("add", "sub", "mul", "div")
ML_DTYPES = {
    "fp8_e5m2": ml_dtypes.float8_e5m2, "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "fp8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "fp8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "fp6_e2m3": ml_dtypes.float6_e2m3fn, "fp6_e3m2": ml_dtypes.float6_e3m2fn,
    "fp4_e2m1": ml_dtypes.float4_e2m1fn, "e8m0": ml_dtypes.float8_e8m0fnu,
}
# The option sets besides the plain ones: flush/denormals-are-zero with tininess before rounding
# (ARM-like), and the NaN profiles.
OPTION_SETS = (
    {"ftz": True, "daz": True, "tininess": "before"},
    {"ftz": True, "tininess": "after"},
    {"nan": "x86"}, {"nan": "riscv"}, {"nan": "cuda"},
)
SR_BITS = (32, 3)


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------

def width(fmt: str) -> int:
    return oracle.spec(fmt).width


@functools.cache
def every_pair(fmt: str) -> tuple[np.ndarray, np.ndarray]:
    every = np.arange(1 << width(fmt), dtype=np.int64)
    a, b = np.meshgrid(every, every, indexing="ij")
    return a.ravel(), b.ravel()


def random_words(shape, seed) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)


def reference_options(rounding="rne", words=None, sr_bits=32, **options) -> ev.Options:
    """The reference's options; for "sr", r is the top sr_bits bits of each random word (the spec)."""
    random = None if words is None else words.astype(np.int64) >> (32 - sr_bits)
    return ev.Options(rounding=rounding, random=random, sr_bits=sr_bits, **options)


def core_options(rounding="rne", words=None, sr_bits=32, **options) -> dict:
    keywords = dict(rounding=rounding, flags=True, **options)
    if rounding == "sr":
        keywords.update(random_bits=words, sr_bits=sr_bits)
    return keywords


def as_ints(result) -> tuple[np.ndarray, np.ndarray]:
    bits, flags = result
    return np.asarray(bits).astype(np.int64), np.asarray(flags).astype(np.int64)


def mismatches(what: str, operands, want, got) -> str | None:
    """None for equal bits and flags, else a readable list of the first mismatches."""
    (want_bits, want_flags), (got_bits, got_flags) = want, got
    bad = np.flatnonzero((want_bits != got_bits) | (want_flags != got_flags))
    if bad.size == 0:
        return None
    lines = [f"{what}: {bad.size} of {want_bits.size} differ"]
    for i in bad[:8]:
        args = ", ".join(hex(int(x[i])) for x in operands)
        lines.append(f"  ({args}): want {int(want_bits[i]):#x} {sf.Flag(int(want_flags[i]))!r}, "
                     f"got {int(got_bits[i]):#x} {sf.Flag(int(got_flags[i]))!r}")
    return "\n".join(lines)


class Comparisons:
    """Every comparison of one test, reported together at its end (one mismatch does not hide the
    others)."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def __call__(self, what: str, operands, want, got) -> None:
        message = mismatches(what, operands, want, got)
        if message is not None:
            self.failures.append(message)

    def done(self) -> None:
        assert not self.failures, f"{len(self.failures)} comparisons failed:\n" + "\n".join(self.failures)


def mode_variants(seed):
    """(rounding, seed of the random words or None, sr_bits): the six deterministic modes, then
    stochastic rounding with 32 and with 3 random bits (the words' top bits)."""
    for mode in ROUNDINGS:
        yield mode, None, 32
    for sr_bits in SR_BITS:
        yield "sr", seed, sr_bits


# --------------------------------------------------------------------------------------------------
# The vectorised reference against the scalar oracle and ml_dtypes
# --------------------------------------------------------------------------------------------------

def special_patterns(fmt: str) -> list[int]:
    """Zeros, the smallest subnormals and normals, one, the largest values, NaN/inf patterns."""
    s = oracle.spec(fmt)
    one = s.bias << s.f
    magnitudes = {0, 1, 2, (1 << s.f) - 1, 1 << s.f, (1 << s.f) + 1, one - 1, one, one + 1,
                  s.max_finite - 1, s.max_finite, s.max_finite + 1, (s.sign_bit or 256) - 1}
    return sorted({m | sign for m in magnitudes if m < (s.sign_bit or 256) for sign in (0, s.sign_bit)})


@pytest.mark.parametrize("fmt", SMALL_FORMATS)
def test_vector_reference_matches_scalar_oracle_arithmetic(fmt):
    check = Comparisons()
    rng = np.random.default_rng(list(fmt.encode()))
    specials = np.array(special_patterns(fmt))
    count = 0
    for op in ARITHMETIC + ("fma",):
        arity = 3 if op == "fma" else 2
        for m, (mode, _, sr_bits) in enumerate(mode_variants(0)):
            for variant, options in enumerate(({},) + OPTION_SETS):
                saturate = bool((m + variant) % 2)
                n = 110
                operands = [rng.integers(0, 1 << width(fmt), n) for _ in range(arity)]
                if variant == 0:   # special operands against each other
                    grid = np.meshgrid(*([specials] * 2), indexing="ij")
                    operands[:2] = [np.concatenate([o, g.ravel()]) for o, g in zip(operands[:2], grid)]
                    if arity == 3:
                        operands[2] = np.resize(specials, operands[0].size)
                words = random_words(operands[0].shape, (m, variant, count)) if mode == "sr" else None
                reference = reference_options(mode, words, sr_bits, saturate=saturate, **options)
                got = ev.arithmetic(op, fmt, operands, reference)
                want_bits, want_flags = [], []
                for i in range(operands[0].size):
                    extra = {} if mode != "sr" else dict(random=int(reference.random[i]), sr_bits=sr_bits)
                    bits, flags = ref_op(op, fmt, *(int(x[i]) for x in operands), rounding=mode,
                                         saturate=saturate, **options, **extra)
                    want_bits.append(bits)
                    want_flags.append(flags)
                count += operands[0].size
                check(f"reference {fmt}.{op} {mode} sr_bits={sr_bits} saturate={saturate} {options}",
                      operands, (np.array(want_bits), np.array(want_flags)), got)
    assert count > 5000
    check.done()


@pytest.mark.parametrize("src", ("fp16", "bf16", "fp32", "tf32") + SMALL_FORMATS + ("e8m0",))
def test_vector_reference_matches_scalar_oracle_conversions(src):
    check = Comparisons()
    rng = np.random.default_rng(list(src.encode()))
    for dst in oracle.ALL_FORMATS:
        for m, (mode, _, sr_bits) in enumerate(mode_variants(0)):
            options = ({},) + OPTION_SETS
            options = options[m % len(options)]
            saturate = bool(m % 2)
            bits = rng.integers(0, 1 << width(src), 40)
            words = random_words(bits.shape, m) if mode == "sr" else None
            reference = reference_options(mode, words, sr_bits, saturate=saturate, **options)
            got = ev.convert(bits, src, dst, reference)
            want = []
            for i, x in enumerate(bits.tolist()):
                extra = {} if mode != "sr" else dict(random=int(reference.random[i]), sr_bits=sr_bits)
                want.append(ref_convert(x, src, dst, mode, saturate=saturate, **options, **extra))
            want = tuple(np.array(column) for column in zip(*want))
            check(f"reference {src}->{dst} {mode} saturate={saturate} {options}", [bits], want, got)
    check.done()


def is_nan(fmt, bits):
    return ev.decode(bits, fmt).nan


@pytest.mark.parametrize("fmt", SMALL_FORMATS)
def test_vector_reference_matches_ml_dtypes_on_every_pair(fmt):
    """ml_dtypes computes in float32 and rounds once (RNE): correct for + - * / (24 >= 2p + 2
    bits). NaN results are compared as NaN only (ml_dtypes' NaN sign and payload follow its code
    generation; tests/test_oracle.py documents the cases)."""
    dtype = ML_DTYPES[fmt]
    a, b = every_pair(fmt)
    x, y = a.astype(np.uint8).view(dtype), b.astype(np.uint8).view(dtype)
    for op, function in zip(ARITHMETIC, (np.add, np.subtract, np.multiply, np.divide)):
        with np.errstate(all="ignore"):
            library = function(x, y).view(np.uint8).astype(np.int64)
        want, _ = ev.arithmetic(op, fmt, [a, b], ev.Options(nan="x86"))
        nan = is_nan(fmt, want)
        assert np.array_equal(is_nan(fmt, library[nan]), np.ones(nan.sum(), bool)), (fmt, op)
        bad = np.flatnonzero(~nan & (library != want))
        assert bad.size == 0, [(op, hex(a[i]), hex(b[i]), hex(want[i]), hex(library[i])) for i in bad[:10]]


@pytest.mark.parametrize("dst", CONVERSION_TARGETS)
def test_vector_reference_matches_ml_dtypes_on_float32_inputs(dst):
    """ml_dtypes (RNE, non-saturating) equals the reference on the inputs of
    test_core_converts_float32_inputs but for the cases tests/test_oracle.py documents: NaN into
    FP6/FP4 and E5M2; E8M0 from float32 subnormals in (2**-127, 1.5 * 2**-127)."""
    bits = float32_inputs(dst, np.random.default_rng(list(b"f32" + dst.encode())))
    x = bits.astype(np.uint32).view(np.float32)
    want, _ = ev.convert(bits, "fp32", dst)
    with np.errstate(all="ignore"):
        library = x.astype(ML_DTYPES[dst]).view(np.uint8).astype(np.int64)
    if dst in ("fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "fp8_e5m2"):
        documented = np.isnan(x)
    elif dst == "e8m0":
        documented = (x > 2.0 ** -127) & (x < 1.5 * 2.0 ** -127)
    else:
        documented = np.zeros(x.shape, bool)
    bad = np.flatnonzero(~documented & (library != want))
    assert bad.size == 0, [(hex(bits[i]), hex(want[i]), hex(library[i])) for i in bad[:10]]


# --------------------------------------------------------------------------------------------------
# The core: arithmetic on every pair
# --------------------------------------------------------------------------------------------------

def core_arithmetic(op, fmt, operands, **keywords):
    format_ = sf.format(fmt)
    arrays = [np.asarray(x).astype(format_.dtype) for x in operands]
    return as_ints(getattr(format_, op)(*arrays, **keywords))


# The core compiles one loop per (operation, format, source format, default options or not, random
# words or not), and loading each from Numba's cache costs ~0.3 s: the tests below take each
# loop where it matters (the six modes, saturate and the options share the general loop) and
# stochastic rounding on the sum, quotient and root paths of every format, the others on one.
SR_EVERYWHERE = ("add", "div")
SR_FORMAT = "fp8_e4m3fn"


def sr_tested(op: str, fmt: str) -> bool:
    return op in SR_EVERYWHERE or fmt == SR_FORMAT


@pytest.mark.parametrize("op", ARITHMETIC)
@pytest.mark.parametrize("fmt", SMALL_FORMATS)
def test_core_arithmetic_on_every_pair(fmt, op):
    check = Comparisons()
    a, b = every_pair(fmt)
    for mode, seed, sr_bits in mode_variants(1):
        if mode == "sr" and not sr_tested(op, fmt):
            continue
        words = random_words(a.shape, seed) if mode == "sr" else None
        for saturate in (False, True):
            want = ev.arithmetic(op, fmt, [a, b], reference_options(mode, words, sr_bits, saturate=saturate))
            got = core_arithmetic(op, fmt, [a, b], **core_options(mode, words, sr_bits, saturate=saturate))
            check(f"{fmt}.{op} rounding={mode} sr_bits={sr_bits} saturate={saturate}", [a, b], want, got)
    check.done()


@pytest.mark.parametrize("fmt", SMALL_FORMATS)
def test_core_options_and_nan_profiles_on_every_pair(fmt):
    check = Comparisons()
    a, b = every_pair(fmt)
    for op in ARITHMETIC:
        for options in OPTION_SETS:
            for mode in ("rne", "rtz") if "nan" not in options else ("rne",):
                want = ev.arithmetic(op, fmt, [a, b], reference_options(mode, **options))
                got = core_arithmetic(op, fmt, [a, b], **core_options(mode, **options))
                check(f"{fmt}.{op} rounding={mode} {options}", [a, b], want, got)
    check.done()


@pytest.mark.parametrize("fmt", ("fp8_e5m2", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp6_e3m2", "e8m0"))
def test_core_comparisons_on_every_pair(fmt):
    """eq, lt, le on every pair of a format of each encoding (ieee, fn, fnuz, finite, e8m0)."""
    check = Comparisons()
    a, b = every_pair(fmt)
    for op in ("eq", "lt", "le"):
        want_bits, want_flags = ev.compare(op, fmt, a, b)
        got = core_arithmetic(op, fmt, [a, b], flags=True)
        check(f"{fmt}.{op}", [a, b], (want_bits.astype(np.int64), want_flags), got)
    check.done()


@pytest.mark.parametrize("fmt", SMALL_FORMATS)
def test_core_sqrt_on_every_input(fmt):
    check = Comparisons()
    every = np.arange(1 << width(fmt), dtype=np.int64)
    for mode, seed, sr_bits in mode_variants(2):
        if mode == "sr" and fmt not in (SR_FORMAT, "fp4_e2m1", "fp8_e5m2fnuz"):
            continue
        words = random_words(every.shape, seed) if mode == "sr" else None
        r = None if words is None else words.astype(np.int64) >> (32 - sr_bits)
        for saturate, options in ((False, {}), (True, {}), (False, {"nan": "x86", "ftz": True, "daz": True})):
            want = []
            for i, x in enumerate(every.tolist()):
                extra = {} if mode != "sr" else dict(random=int(r[i]), sr_bits=sr_bits)
                want.append(ref_op("sqrt", fmt, x, rounding=mode, saturate=saturate, **options, **extra))
            want = tuple(np.array(column) for column in zip(*want))
            got = as_ints(sf.format(fmt).sqrt(every.astype(sf.format(fmt).dtype),
                                              **core_options(mode, words, sr_bits, saturate=saturate, **options)))
            check(f"{fmt}.sqrt rounding={mode} saturate={saturate} {options}", [every], want, got)
    check.done()


@pytest.mark.parametrize("fmt", SMALL_FORMATS)
def test_core_fma_on_a_sample(fmt):
    check = Comparisons()
    rng = np.random.default_rng(list(b"fma" + fmt.encode()))
    specials = np.array(special_patterns(fmt))
    grid = [g.ravel() for g in np.meshgrid(specials, specials, specials[::3], indexing="ij")]
    operands = [np.concatenate([g, rng.integers(0, 1 << width(fmt), 12000)]) for g in grid]
    for mode, seed, sr_bits in mode_variants(3):
        if mode == "sr" and fmt != SR_FORMAT:
            continue
        words = random_words(operands[0].shape, seed) if mode == "sr" else None
        for saturate in (False, True):
            want = ev.arithmetic("fma", fmt, operands, reference_options(mode, words, sr_bits, saturate=saturate))
            got = core_arithmetic("fma", fmt, operands, **core_options(mode, words, sr_bits, saturate=saturate))
            check(f"{fmt}.fma rounding={mode} sr_bits={sr_bits} saturate={saturate}", operands, want, got)
    check.done()


@pytest.mark.parametrize("op", SR_EVERYWHERE)
def test_core_stochastic_rounding_rounds_up_for_exactly_d_of_the_draws(op):
    """The spec's rule read directly on the core: with R = 4 and random words r << 28 for
    r = 0..15, an inexact result rounds up (its magnitude grows past the truncated one) for exactly
    the d largest r, d the first 4 bits of the exact magnitude below the truncated result's last
    place, computed here from the Fraction value and the format's fields (ml_dtypes.finfo)."""
    fmt = SR_FORMAT
    info = ml_dtypes.finfo(ML_DTYPES[fmt])
    rng = np.random.default_rng(17)
    a, b = every_pair(fmt)
    pick = rng.choice(a.size, 400, replace=False)
    a, b = a[pick], b[pick]
    draws = np.broadcast_to(np.arange(16, dtype=np.uint32)[:, None] << np.uint32(28), (16, a.size))
    # random_bits broadcasts to the result's shape (it never widens it): operands of shape (16, n)
    operands = [np.broadcast_to(v, (16, a.size)) for v in (a, b)]
    results = core_arithmetic(op, fmt, operands, rounding="sr", random_bits=draws, sr_bits=4, saturate=True,
                              flags=True)[0]
    truncated = core_arithmetic(op, fmt, [a, b], rounding="rtz", saturate=True, flags=True)[0]
    checked = 0
    for i in range(a.size):
        x, y = (oracle.decode(int(v), fmt) for v in (a[i], b[i]))
        if x[2] is None or y[2] is None or (op == "div" and y[2] == 0):
            continue
        exact = x[2] + y[2] if op == "add" else x[2] / y[2]
        if exact == 0 or abs(exact) >= 448:
            continue
        magnitude = abs(exact)
        exponent = math.floor(math.log2(magnitude))
        exponent += (Fraction(2) ** (exponent + 1) <= magnitude) - (Fraction(2) ** exponent > magnitude)
        last_place = max(exponent, info.minexp) - info.nmant
        d = math.floor(magnitude / Fraction(2) ** (last_place - 4)) % 16
        up = results[:, i] != truncated[i]
        assert up.tolist() == [r >= 16 - d for r in range(16)], (hex(a[i]), hex(b[i]), d, results[:, i])
        checked += 1
    assert checked > 300


def test_e8m0_has_no_arithmetic():
    for op in ARITHMETIC:
        with pytest.raises(ValueError):
            getattr(sf.format("e8m0"), op)(np.uint8(0x7F), np.uint8(0x7F))
    with pytest.raises(ValueError):
        sf.format("e8m0").sqrt(np.uint8(0x7F))


# --------------------------------------------------------------------------------------------------
# The core: conversions
# --------------------------------------------------------------------------------------------------

def core_convert(bits, src, dst, **keywords):
    source = sf.format(src)
    return as_ints(sf.convert(np.asarray(bits).astype(source.dtype), src=source, dst=sf.format(dst), **keywords))


def conversion_variants(seed, with_sr: bool):
    """(rounding, words seed, sr_bits, options): the six modes, each with and without saturate,
    stochastic rounding, and the option sets (in RNE and RNA)."""
    for mode, words, sr_bits in mode_variants(seed):
        if mode == "sr" and not with_sr:
            continue
        for saturate in (False, True):
            yield mode, words, sr_bits, {"saturate": saturate}
    for options in OPTION_SETS:
        yield "rna", None, 32, options


@pytest.mark.parametrize("dst", CONVERSION_TARGETS)
@pytest.mark.parametrize("src", ("fp16", "bf16"))
def test_core_converts_every_16_bit_input(src, dst):
    check = Comparisons()
    every = np.arange(1 << 16, dtype=np.int64)
    for mode, _, _, options in conversion_variants(0, with_sr=False):
        want = ev.convert(every, src, dst, reference_options(mode, **options))
        got = core_convert(every, src, dst, **core_options(mode, **options))
        check(f"{src}->{dst} rounding={mode} {options}", [every], want, got)
    check.done()


def float32_inputs(dst: str, rng) -> np.ndarray:
    """About 1,040,000 float32 bit patterns: half at and next to the midpoints between ``dst``'s
    neighbours (ties and near-ties, also past the largest value) and its range limits; half random
    (values within and beyond the range, and any bits); both signs."""
    decoded = ev.decode(np.arange(1 << width(dst)), dst)
    values = np.unique(np.abs(decoded.mantissa * np.ldexp(1.0, decoded.scale)))
    top = values[-1]
    values = np.concatenate([values, [2 * top if dst == "e8m0" else top + (top - values[-2])]])
    midpoints = np.concatenate([values, (values[:-1] + values[1:]) / 2, values[1:2] / 4, values[-1:] * 2])
    midpoints = midpoints[(midpoints > 0) & (midpoints < 3e38)].astype(np.float32).view(np.uint32).astype(np.int64)
    near = np.resize((midpoints[:, None] + np.arange(-40, 41)[None, :]).ravel(), 272000)
    low, high = (-140, 20) if dst != "e8m0" else (-149, 127)
    inside = np.ldexp(rng.random(152000) + 0.5, rng.integers(low, high, 152000)).astype(np.float32)
    anything = rng.integers(0, 1 << 31, 96000)
    specials = np.array([0, 1, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7F7FFFFF, 0x00400000, 0x00600000])
    positive = np.concatenate([near, inside.view(np.uint32).astype(np.int64), anything, specials])
    positive = positive[(positive >= 0) & (positive <= 0x7FFFFFFF)]
    return np.concatenate([positive, positive | 0x80000000])


@pytest.mark.parametrize("dst", CONVERSION_TARGETS)
def test_core_converts_float32_inputs(dst):
    check = Comparisons()
    bits = float32_inputs(dst, np.random.default_rng(list(b"f32" + dst.encode())))
    assert bits.size > 10**6
    for mode, seed, sr_bits, options in conversion_variants(4, with_sr=True):
        words = random_words(bits.shape, seed) if mode == "sr" else None
        want = ev.convert(bits, "fp32", dst, reference_options(mode, words, sr_bits, **options))
        got = core_convert(bits, "fp32", dst, **core_options(mode, words, sr_bits, **options))
        check(f"fp32->{dst} rounding={mode} sr_bits={sr_bits} {options}", [bits], want, got)
    # from_float reads float32 arrays as the same bits
    x = bits.astype(np.uint32).view(np.float32)
    want = ev.convert(bits, "fp32", dst, reference_options("rne"))
    check(f"{dst}.from_float(float32)", [bits], want, as_ints(sf.format(dst).from_float(x, flags=True)))
    check.done()


@pytest.mark.parametrize("dst", CONVERSION_TARGETS)
def test_core_from_float64(dst):
    """float64 rounds once, directly (ml_dtypes goes through float32: not a reference here)."""
    check = Comparisons()
    rng = np.random.default_rng(list(b"f64" + dst.encode()))
    low, high = (-150, 20) if dst != "e8m0" else (-160, 140)
    x = np.ldexp(rng.random(30000) + 0.5, rng.integers(low, high, 30000)) * rng.choice([-1.0, 1.0], 30000)
    decoded = ev.decode(np.arange(1 << width(dst)), dst)
    values = np.unique(np.abs(decoded.mantissa * np.ldexp(1.0, decoded.scale)))
    middles = (values[:-1] + values[1:]) / 2
    ties = np.concatenate([middles, np.nextafter(middles, 0), np.nextafter(middles, np.inf)])
    x = np.concatenate([x, ties, -ties, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, 1e-300, 5e-324]])
    bits = x.view(np.int64)
    want = ev.convert(bits, "fp64", dst)
    check(f"{dst}.from_float(float64)", [bits], want, as_ints(sf.format(dst).from_float(x, flags=True)))
    check.done()


@pytest.mark.parametrize("src", SMALL_FORMATS)
def test_core_converts_small_formats_out(src):
    """Every pattern into fp32 (exact: values, NaN payloads and signs, profiles), into the next
    small format (a rounding, every mode) and into E8M0."""
    check = Comparisons()
    every = np.arange(1 << width(src), dtype=np.int64)
    ring = list(SMALL_FORMATS)
    for options in ({"nan": "x86"}, {"nan": "riscv"}, {"nan": "cuda"}, {"daz": True}):
        check(f"{src}->fp32 {options}", [every], ev.convert(every, src, "fp32", reference_options(**options)),
              core_convert(every, src, "fp32", **core_options(**options)))
    for dst in (ring[(ring.index(src) + 1) % len(ring)], "e8m0"):
        for mode, _, _, options in conversion_variants(5, with_sr=False):
            want = ev.convert(every, src, dst, reference_options(mode, **options))
            got = core_convert(every, src, dst, **core_options(mode, **options))
            check(f"{src}->{dst} rounding={mode} {options}", [every], want, got)
    check.done()


@pytest.mark.parametrize("dst", ("fp32", "fp16", "bf16") + SMALL_FORMATS)
def test_core_converts_e8m0_out(dst):
    check = Comparisons()
    every = np.arange(256, dtype=np.int64)
    for mode, _, _, options in conversion_variants(6, with_sr=False):
        if mode == "rne" and not options["saturate"] and dst not in ("fp32", SR_FORMAT):
            continue   # the default-options loop: on two destinations
        want = ev.convert(every, "e8m0", dst, reference_options(mode, **options))
        got = core_convert(every, "e8m0", dst, **core_options(mode, **options))
        check(f"e8m0->{dst} rounding={mode} {options}", [every], want, got)
    check.done()


@pytest.mark.parametrize("fmt", CONVERSION_TARGETS)
def test_to_float_is_exact(fmt):
    every = np.arange(1 << width(fmt), dtype=np.int64)
    values = sf.format(fmt).to_float(every.astype(sf.format(fmt).dtype))
    for bits, value in zip(every.tolist(), values.tolist()):
        kind, sign, exact = oracle.decode(bits, fmt)
        if exact is None:
            assert math.isnan(value) or (kind == "inf" and value == (-math.inf if sign else math.inf)), hex(bits)
        else:
            assert value == exact and math.copysign(1, value) == (-1 if sign else 1), hex(bits)


def test_nan_rules_hold_on_every_nan_operand():
    """A spot check of the spec's NaN table against the core, independent of the references:
    every NaN operand and every invalid operation, in each profile (INVALID only for sNaN)."""
    for fmt in ("fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2"):
        s = oracle.spec(fmt)
        nans = [b for b in range(256) if oracle.decode(b, fmt)[0] in ("qnan", "snan")]
        for nan in ("ieee", "x86", "riscv", "cuda"):
            for x in nans:
                bits, flags = sf.format(fmt).add(np.uint8(x), np.uint8(s.bias << s.f), nan=nan, flags=True)
                assert (int(bits), int(flags)) == ref_op("add", fmt, x, s.bias << s.f, nan=nan), (fmt, nan, hex(x))
            bits, flags = sf.format(fmt).div(np.uint8(0), np.uint8(0), nan=nan, flags=True)
            assert (int(bits), int(flags)) == ref_op("div", fmt, 0, 0, nan=nan)
            assert int(flags) == INVALID
