"""The outside references against each other and against us, on the formats we share.

docs/formats-spec.md ("Where the references disagree") states what ml_dtypes, torch and gfloat
return where they differ from each other and from us. This file measures it again with the
installed versions, so that the page stays true when a reference changes:

- the page's table is read row by row, and each cell is computed with its reference. A cell
  holds the code the reference returns (for a row "`fmt` 0xNN → float32", the float32 bits of
  the decoded value), ``error`` where the reference raises, ``—`` where it has no such
  conversion, and after ``; sat`` the result with saturation. In our column the flag names are
  the flags raised, exactly (none named: no flag).
- the statements below the table (decoding agrees but for NaN bits; each reference converts as
  we do except by its listed rules; gfloat's P3109 formats; ml_dtypes' other dtypes as Formats of
  our properties) are checked on every code point and on a set of conversion probes per format.

Each reference is imported with pytest.importorskip: a missing one skips its tests.
``bench/format_references.py`` runs the longer comparison (every rounding mode, all 120 P3109
formats) and prints each difference.
"""
from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16.formats import Format, p3109_formats

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "formats-spec.md"
# The bench's tables and helpers: the formats we share with the references (SHARED), gfloat's
# descriptions of ours (GFLOAT_INFOS, gfloat_info), ml_dtypes' other dtypes as Formats of our
# properties (ML_DTYPES_OTHERS) and the conversion probes.
_spec = importlib.util.spec_from_file_location("format_references", ROOT / "bench" / "format_references.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
SHARED, ML_DTYPES_OTHERS = bench.SHARED, bench.ML_DTYPES_OTHERS
REFERENCES = ("ml_dtypes", "torch", "gfloat", "softfloat16")
NONE, ERROR = "—", "error"  # no such conversion in this reference; the reference raises
FLAG_NAMES = ("INEXACT", "UNDERFLOW", "OVERFLOW", "DIVIDE_BY_ZERO", "INVALID")
F32_NAN_MASK, F32_SIGN = 0x7FFFFFFF, 0x80000000


# --- the references, one adapter each: float32 bits in, a code (or NONE / ERROR) out -----------------

def _ml_dtype(fmt: Format):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return getattr(ml_dtypes, fmt.float_dtype_name, None) if fmt.float_dtype_name else None


def _torch_dtype(fmt: Format):
    torch = pytest.importorskip("torch")
    return getattr(torch, fmt.float_dtype_name, None) if fmt.float_dtype_name else None


def _gfloat_info(fmt: Format):
    pytest.importorskip("gfloat.formats")  # the submodule gfloat_info reads
    return bench.gfloat_info(pytest.importorskip("gfloat"), fmt)


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def convert(reference: str, fmt: Format, bits: int, sat: bool):
    """(code, flags) of float32 ``bits`` rounded to nearest even into ``fmt`` by a reference (flags:
    ours only), or NONE / ERROR."""
    x = _f32([bits])
    if reference == "softfloat16":
        code, flags = sf.convert(np.uint32(bits), src=sf.fp32, dst=fmt, saturate=sat, flags=True)
        return int(code), int(flags)
    if reference == "ml_dtypes":
        assert not sat, "ml_dtypes' conversions have no saturation"
        dtype = _ml_dtype(fmt)
        return NONE if dtype is None else (int(x.astype(dtype).view(np.uint8)[0]), None)
    if reference == "torch":
        assert not sat, "torch's conversions have no saturation"
        torch, dtype = pytest.importorskip("torch"), _torch_dtype(fmt)
        if dtype is None:
            return NONE
        try:
            return int(torch.from_numpy(x).to(dtype).view(torch.uint8)[0]), None
        except (NotImplementedError, RuntimeError, TypeError):
            return NONE
    gfloat = pytest.importorskip("gfloat")
    from gfloat.types import RoundMode
    info = _gfloat_info(fmt)
    try:
        return int(gfloat.encode_float(info, gfloat.round_float(info, float(x[0]), RoundMode.TiesToEven, sat))), None
    except ValueError:
        return ERROR


def decode(reference: str, fmt: Format, code: int):
    """(float32 bits, flags) of the value of ``code`` as a reference widens it, or NONE."""
    if reference == "softfloat16":
        bits, flags = sf.convert(code, src=fmt, dst=sf.fp32, flags=True)
        return int(bits), int(flags)
    if reference == "ml_dtypes":
        dtype = _ml_dtype(fmt)
        if dtype is None:
            return NONE
        return int(np.array([code], np.uint8).view(dtype).astype(np.float32).view(np.uint32)[0]), None
    if reference == "torch":
        torch, dtype = pytest.importorskip("torch"), _torch_dtype(fmt)
        if dtype is None:
            return NONE
        value = torch.tensor([code], dtype=torch.uint8).view(dtype).float()
        return int(value.view(torch.int32)[0]) & 0xFFFFFFFF, None
    gfloat = pytest.importorskip("gfloat")
    value = gfloat.decode_float(_gfloat_info(fmt), code).fval
    return int(np.float32(value).view(np.uint32)), None


# --- the page's table ------------------------------------------------------------------------------

DECODE_CASE = re.compile(r"`(\w+)` (0x[0-9A-Fa-f]+) → float32(?: \([^)]*\))?")
CONVERT_CASE = re.compile(r"`(\w+)` ← (.+?)(?: \([^)]*\))?$")
CELL_CODE = re.compile(r"0x[0-9A-Fa-f]+|error|—")


def parse_value(text: str) -> int:
    """float32 bits of a value as the page writes it: ``480``, ``-inf``, ``-nan``, ``-0``,
    ``2^-128``, ``1.5 × 2^127``, ``float32 0x00400001``."""
    text = text.strip()
    if text.startswith("float32 "):
        return int(text.split()[1], 16)
    negative, body = text.startswith("-"), text.lstrip("-")
    if body in ("inf", "nan"):
        value = float(body)
    else:
        power = re.fullmatch(r"(?:([\d.]+) × )?2\^(-?\d+)", body)
        value = float(power[1] or 1) * 2.0 ** int(power[2]) if power else float(body)
        assert np.float32(value) == value, f"{text!r} is not a float32 value"
    return int(np.float32(value).view(np.uint32)) | (F32_SIGN if negative else 0)


def parse_cell(cell: str) -> dict[bool, tuple[str, set[str]]]:
    """{saturate: (code token, flag names)} of one cell."""
    found = {}
    for part in cell.split(";"):
        part = part.strip()
        sat = part.startswith("sat ")
        part = part[4:] if sat else part
        token = CELL_CODE.match(part)
        assert token, f"cell {cell!r}: no code, 'error' or '—' at the start of {part!r}"
        found[sat] = (token[0], set(re.findall(r"\b(?:" + "|".join(FLAG_NAMES) + r")\b", part)))
    return found


@functools.cache
def table() -> tuple[tuple[str, dict[str, str]], ...]:
    """(case, {reference: cell}) of each row of the page's table."""
    section = PAGE.read_text(encoding="utf-8").split("## Where the references disagree", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == ["case", *REFERENCES], header
    rows = []
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == len(header), line
        rows.append((cells[0], dict(zip(REFERENCES, cells[1:]))))
    return tuple(rows)


def _flag_names(flags: int) -> set[str]:
    return {name for name in FLAG_NAMES if flags & int(sf.Flag[name])}


def test_the_table_is_read():
    rows = table()
    assert len(rows) >= 30
    named = {(DECODE_CASE.match(case) or CONVERT_CASE.match(case))[1] for case, _ in rows}
    assert set(SHARED) - {"fp8_e5m2fnuz", "fp6_e3m2"} <= named, named
    assert parse_value("1.5 × 2^127") == 0x7F400000 and parse_value("-nan") == 0xFFC00000
    assert parse_value("-0") == F32_SIGN and parse_value("float32 0x00400001") == 0x00400001
    assert parse_cell("0x7F OVERFLOW INEXACT; sat 0x7E (448) INVALID") == {
        False: ("0x7F", {"OVERFLOW", "INEXACT"}), True: ("0x7E", {"INVALID"})}


@pytest.mark.parametrize("reference", REFERENCES)
def test_every_row_of_the_page_holds(reference):
    if reference == "torch":
        torch = pytest.importorskip("torch")
        missing = [n for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")
                   if not hasattr(torch, n)]
        if missing:
            pytest.skip(f"torch {torch.__version__} has no {', '.join(missing)}")
    wrong = []
    for case, cells in table():
        decoding = DECODE_CASE.fullmatch(case)
        conversion = CONVERT_CASE.fullmatch(case)
        assert decoding or conversion, f"row {case!r}: neither '`fmt` 0xNN → float32' nor '`fmt` ← value'"
        fmt = sf.format((decoding or conversion)[1])
        for sat, (token, flags) in parse_cell(cells[reference]).items():
            assert reference == "softfloat16" or not flags, f"{case}: only our column names flags"
            if decoding:
                assert not sat, case
                got = decode(reference, fmt, int(decoding[2], 16))
            else:
                got = convert(reference, fmt, parse_value(conversion[2]), sat)
            if got in (NONE, ERROR):
                ok, shown = token == got, got
            else:
                code, raised = got
                ok = token not in (NONE, ERROR) and int(token, 16) == code
                ok = ok and (raised is None or _flag_names(raised) == flags)
                shown = f"{code:#x}" + (f" {' '.join(sorted(_flag_names(raised)))}" if raised else "")
            if not ok:
                said = " ".join([token, *sorted(flags)])
                wrong.append(f"{case}{' (sat)' if sat else ''}: the page says {said}, {reference} gives {shown}")
    assert not wrong, "docs/formats-spec.md's table no longer holds:\n" + "\n".join(wrong)


# --- the statements below the table, on every code point and a set of probes --------------------------

@functools.cache
def probes(name: str, fmt: Format | None = None) -> np.ndarray:
    """The bench's probes of a format (by name, once): float32 bits of every positive value, every
    midpoint, each one float32 ulp up and down, beyond the largest, below the smallest, 0, inf and
    NaN; with both signs."""
    return bench.probes(fmt or sf.format(name))


def ours(fmt: Format, bits: np.ndarray, **options) -> np.ndarray:
    return sf.convert(bits, src=sf.fp32, dst=fmt, **options).astype(np.int64)


def _is_nan32(bits: np.ndarray) -> np.ndarray:
    return (bits & F32_NAN_MASK) > 0x7F800000


def _negative32(bits: np.ndarray) -> np.ndarray:
    return (bits & F32_SIGN) != 0


def _same_decoding(fmt: Format, theirs: np.ndarray) -> list[str]:
    """Codes whose float32 bits (theirs) differ from ours, NaN bits aside."""
    codes = np.arange(1 << fmt.width)
    mine = sf.convert(codes, src=fmt, dst=sf.fp32).astype(np.uint32)
    theirs = np.asarray(theirs, dtype=np.uint32)
    bad = (_is_nan32(mine) != _is_nan32(theirs)) | (~_is_nan32(mine) & (mine != theirs))
    return [f"{fmt.name} {c:#04x}: ours {m:#010x}, theirs {t:#010x}" for c, m, t in
            zip(codes[bad], mine[bad], theirs[bad])]


@pytest.mark.parametrize("reference", ["ml_dtypes", "torch", "gfloat"])
def test_every_code_decodes_alike_but_for_nan_bits(reference):
    wrong = []
    for name in SHARED:
        fmt = sf.format(name)
        codes = np.arange(1 << fmt.width)
        if reference == "ml_dtypes":
            theirs = codes.astype(np.uint8).view(_ml_dtype(fmt)).astype(np.float32).view(np.uint32)
        elif reference == "torch":
            torch, dtype = pytest.importorskip("torch"), _torch_dtype(fmt)
            if dtype is None:
                continue
            theirs = torch.from_numpy(codes.astype(np.uint8)).view(dtype).float().numpy().view(np.uint32)
        else:
            gfloat = pytest.importorskip("gfloat")
            theirs = gfloat.decode_ndarray(_gfloat_info(fmt), codes).astype(np.float32).view(np.uint32)
        wrong += _same_decoding(fmt, theirs)
    assert not wrong, "\n".join(wrong[:20])


def _compare(fmt: Format, bits: np.ndarray, theirs: np.ndarray, expected: np.ndarray) -> list[str]:
    bad = np.nonzero(np.asarray(theirs) != np.asarray(expected))[0]
    return [f"{fmt.name} <- float32 {bits[i]:#010x} ({_f32(bits[i])}): expected {int(expected[i]):#x}, "
            f"got {int(theirs[i]):#x}" for i in bad[:10]]


def test_ml_dtypes_converts_as_we_do_but_nan_into_formats_without_nan():
    """Its one difference: +NaN gives -0 and -NaN +0 in FP6/FP4 (we: +0 and INVALID)."""
    wrong = []
    for name in SHARED:
        fmt, bits = sf.format(name), probes(name)
        expected = ours(fmt, bits)
        if not fmt.has_nan:
            nan = _is_nan32(bits)
            expected[nan] = np.where(_negative32(bits[nan]), 0, fmt.sign_mask)
        wrong += _compare(fmt, bits, _f32(bits).astype(_ml_dtype(fmt)).view(np.uint8), expected)
    assert not wrong, "\n".join(wrong)


def test_torch_converts_as_we_do_but_by_its_rules():
    """E4M3FN saturates; an E5M2 NaN has the payload 0b11; E8M0 ignores the sign, gives 2^-127 for
    0 and 2^-126 strictly between 2^-127 and 1.5 * 2^-127; the FNUZ pair as ours."""
    torch = pytest.importorskip("torch")
    wrong = []
    for name in SHARED:
        fmt, bits = sf.format(name), probes(name)
        dtype = _torch_dtype(fmt)
        if dtype is None:
            continue
        expected = ours(fmt, bits)
        sign = np.where(_negative32(bits), fmt.sign_mask, 0)
        if name == "fp8_e4m3fn":
            overflow = fmt.is_nan(expected.astype(np.uint8)) & ~_is_nan32(bits)
            expected[overflow] = (sign | fmt.max_finite)[overflow]
        elif name == "fp8_e5m2":
            expected[_is_nan32(bits)] = (sign | 0x7F)[_is_nan32(bits)]
        elif name == "e8m0":
            magnitude = bits & np.uint32(F32_NAN_MASK)
            expected = ours(fmt, magnitude)
            expected[magnitude == 0] = 0x00
            expected[(magnitude > 0x00400000) & (magnitude < 0x00600000)] = 0x01
        theirs = torch.from_numpy(_f32(bits).copy()).to(dtype).view(torch.uint8).numpy()
        wrong += _compare(fmt, bits, theirs, expected)
    assert not wrong, "\n".join(wrong)


E8M0_TIES_TO_EVEN_CODE = Format("e8m0_even", 8, 0, np.uint8, signed=False, infinities=False, top_nans="one",
                                subnormals=False, tie_to_even_code=True)


def _gfloat_codes(info, bits: np.ndarray, mode, sat: bool) -> np.ndarray:
    gfloat = pytest.importorskip("gfloat")
    return gfloat.encode_ndarray(info, gfloat.round_ndarray(info, _f32(bits).astype(np.float64), mode, sat))


def _gfloat_raises(info, bits: np.ndarray, sat: bool) -> list[int]:
    """The inputs among ``bits`` for which gfloat's scalar conversion does not raise."""
    gfloat = pytest.importorskip("gfloat")
    from gfloat.types import RoundMode
    quiet = []
    for b in bits:
        try:
            gfloat.round_float(info, float(_f32(b)), RoundMode.TiesToEven, sat)
            quiet.append(int(b))
        except ValueError:
            pass
    return quiet


@pytest.mark.parametrize("sat", [False, True], ids=["plain", "sat"])
def test_gfloat_converts_as_we_do_but_by_its_rules(sat):
    """A NaN result of E4M3FN or E5M2 is 0xFF; FP6/FP4 raise for NaN (and, unless saturating, for
    an overflow or infinity); E8M0 is our e8m0 with tie_to_even_code, and NaN for what rounds below
    2^-127; FNUZ as
    ours. (The array functions stand for round_float/encode_float, except on E8M0 below 2^-127 and
    on negative values into unsigned formats, where only the scalar ones are meaningful.)"""
    pytest.importorskip("gfloat")
    from gfloat.types import RoundMode
    wrong = []
    for name in SHARED:
        fmt, bits = sf.format(name), probes(name)
        info = _gfloat_info(fmt)
        expected, flags = sf.convert(bits, src=sf.fp32, dst=fmt, saturate=sat, flags=True)
        expected = expected.astype(np.int64)
        keep = np.ones(len(bits), bool)
        if fmt.family in ("fn", "ieee"):
            expected[fmt.is_nan(expected.astype(np.uint8))] = 0xFF
        elif fmt.family == "finite":
            beyond = ((flags & int(sf.Flag.OVERFLOW)) != 0) | ((bits & np.uint32(F32_NAN_MASK)) == 0x7F800000)
            raising = _is_nan32(bits) if sat else _is_nan32(bits) | beyond
            assert not _gfloat_raises(info, bits[raising], sat), f"{name}: gfloat no longer raises"
            keep = ~raising
        elif fmt.family == "e8m0":
            expected = ours(E8M0_TIES_TO_EVEN_CODE, bits, saturate=sat)
            tiny = ~_negative32(bits) & (bits > 0) & (bits < 0x00400000)
            got = [convert("gfloat", fmt, int(b), sat)[0] for b in bits[tiny]]
            rounds_below = bits[tiny] < np.float32(0.75 * 2.0**-127).view(np.uint32)  # to 2^-128 or less
            assert got == np.where(rounds_below, 0xFF, 0x00).tolist(), f"e8m0 below 2^-127: {got}"
            keep = ~_negative32(bits) & ~tiny & (bits > 0)
        wrong += _compare(fmt, bits[keep], _gfloat_codes(info, bits[keep], RoundMode.TiesToEven, sat), expected[keep])
    assert not wrong, "\n".join(wrong)


def test_gfloat_e8m0_is_ours_with_ties_to_the_even_code_in_every_mode():
    pytest.importorskip("gfloat")
    from gfloat.types import RoundMode
    modes = {"rne": RoundMode.TiesToEven, "rna": RoundMode.TiesToAway, "rtz": RoundMode.TowardZero,
             "rup": RoundMode.TowardPositive, "rdn": RoundMode.TowardNegative}
    bits = probes("e8m0")
    bits = bits[~_negative32(bits) & (bits >= 0x00400000)]
    info, wrong = _gfloat_info(sf.e8m0), []
    for mode, gmode in modes.items():
        for sat in (False, True):
            wrong += _compare(sf.e8m0, bits, _gfloat_codes(info, bits, gmode, sat),
                              ours(E8M0_TIES_TO_EVEN_CODE, bits, rounding=mode, saturate=sat))
    assert not wrong, "\n".join(wrong)


def test_gfloat_decodes_every_8_bit_p3109_code_as_we_do():
    """The kernels' to_float of the 30 formats of 8 bits (tests/test_p3109.py holds Format.value
    of all 120 to an oracle of its own, and that oracle to gfloat)."""
    gfloat = pytest.importorskip("gfloat")
    wrong = []
    for fmt in p3109_formats(8):
        codes = np.arange(1 << fmt.width)
        mine, theirs = fmt.to_float(codes), gfloat.decode_ndarray(_gfloat_info(fmt), codes)
        bad = (np.isnan(mine) != np.isnan(theirs)) | (~np.isnan(mine) & ((mine != theirs)
                                                                         | (np.signbit(mine) != np.signbit(theirs))))
        wrong += [f"{fmt.name} {c:#x}: ours {m}, gfloat {t}" for c, m, t in zip(codes[bad], mine[bad], theirs[bad])]
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.parametrize("sat", [False, True], ids=["plain", "sat"])
def test_gfloat_converts_into_the_8_bit_p3109_formats_as_we_do(sat):
    """Negative values into unsigned formats aside (the page's table has them)."""
    pytest.importorskip("gfloat")
    from gfloat.types import RoundMode
    wrong = []
    for fmt in p3109_formats(8):
        bits = probes(fmt.name, fmt)
        if not fmt.signed:
            bits = bits[~_negative32(bits)]
        wrong += _compare(fmt, bits, _gfloat_codes(_gfloat_info(fmt), bits, RoundMode.TiesToEven, sat),
                          ours(fmt, bits, saturate=sat))
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.parametrize("dtype_name", sorted(ML_DTYPES_OTHERS))
def test_ml_dtypes_other_dtypes_are_formats_of_our_properties(dtype_name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = getattr(ml_dtypes, dtype_name, None)
    if dtype is None:
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {dtype_name}")
    fmt = Format(dtype_name, dtype=np.uint8, **ML_DTYPES_OTHERS[dtype_name])
    codes = np.arange(256, dtype=np.uint8)
    wrong = _same_decoding(fmt, codes.view(dtype).astype(np.float32).view(np.uint32))
    bits = probes(dtype_name, fmt)
    wrong += _compare(fmt, bits, _f32(bits).astype(dtype).view(np.uint8), ours(fmt, bits))
    assert not wrong, "\n".join(wrong)


def test_the_fnuz_pair_are_p3109_signed_finite_formats():
    for fnuz, p3109 in ((sf.fp8_e4m3fnuz, "p3109_k8p4sf"), (sf.fp8_e5m2fnuz, "p3109_k8p3sf")):
        other = sf.format(p3109)
        assert fnuz.encoding_code == other.encoding_code
        assert (fnuz.exponent_bits, fnuz.fraction_bits, fnuz.bias) == (other.exponent_bits, other.fraction_bits,
                                                                       other.bias)


def test_torch_float4_x2_is_a_storage_type():
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, "float4_e2m1fn_x2", None)
    if dtype is None:
        pytest.skip(f"torch {torch.__version__} has no float4_e2m1fn_x2")
    packed = torch.tensor([0x21], dtype=torch.uint8).view(dtype)
    for attempt in (lambda: packed.float(), lambda: torch.tensor([1.0]).to(dtype)):
        with pytest.raises((NotImplementedError, RuntimeError, TypeError)):
            attempt()
