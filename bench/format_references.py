"""Where ml_dtypes, torch and gfloat disagree with us on the formats we share: the long comparison
behind docs/formats-spec.md ("Where the references disagree").

    python bench/format_references.py [--widths 8] [--modes rne]

For each shared format (FP8 E4M3FN, E5M2, the FNUZ pair, FP6, FP4, E8M0) it decodes every code
point with each reference and converts a set of float32 probes (every value of the format, every
midpoint between neighbours, each one float32 ulp up and down, beyond the largest, below the
smallest, ±0, ±inf, ±NaN): ml_dtypes and torch round to nearest even without saturation (they have
no other conversion); gfloat in each of its five modes, with and without saturation (its scalar
round_float then encode_float). Then every P3109 format of the given widths against gfloat,
decoding and converting (negative values into unsigned formats with the scalar functions). Each
difference is printed once per kind: the class of the input (NaN, inf, 0, beyond the largest,
below the smallest, in range, with its sign), of our result and of theirs, with a count and
examples. A missing reference is named and left out. tests/test_format_references.py checks the
page's statements on a subset, quickly.
"""
from __future__ import annotations

import argparse
import importlib
import time
from collections import defaultdict

import numpy as np

import softfloat16 as sf
from softfloat16.formats import P3109_WIDTHS, Format, p3109_formats

SHARED = ("fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "e8m0")
MODES = ("rne", "rna", "rtz", "rup", "rdn")
GFLOAT_MODES = {"rne": "TiesToEven", "rna": "TiesToAway", "rtz": "TowardZero", "rup": "TowardPositive",
                "rdn": "TowardNegative"}
GFLOAT_INFOS = {"fp8_e4m3fn": "format_info_ocp_e4m3", "fp8_e5m2": "format_info_ocp_e5m2",
                "fp6_e2m3": "format_info_ocp_e2m3", "fp6_e3m2": "format_info_ocp_e3m2",
                "fp4_e2m1": "format_info_ocp_e2m1", "e8m0": "format_info_ocp_e8m0"}
ML_DTYPES_OTHERS = {
    "float8_e4m3": {"exponent_bits": 4, "fraction_bits": 3},
    "float8_e3m4": {"exponent_bits": 3, "fraction_bits": 4},
    "float8_e4m3b11fnuz": {"exponent_bits": 4, "fraction_bits": 3, "infinities": False, "top_nans": "none",
                           "nan_at_negative_zero": True, "bias": 11},
    "float8_e5m3fnu": {"exponent_bits": 5, "fraction_bits": 3, "signed": False, "infinities": False,
                       "top_nans": "one", "bias": 15},
}
ERROR = -1  # the reference raised


def optional(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as error:
        print(f"{name}: not installed ({error}); left out")
        return None


def probes(fmt: Format) -> np.ndarray:
    """float32 bits: every positive value, every midpoint, each one ulp up and down, beyond the
    largest, below the smallest, 0, inf, NaN; both signs."""
    values = fmt.to_float(np.arange(1 << fmt.width))
    positive = np.unique(values[np.isfinite(values) & (values > 0)])
    top = positive[-1]
    step = top - positive[-2] if len(positive) > 1 else top
    x = np.concatenate([positive, (positive[1:] + positive[:-1]) / 2,
                        [top + step / 2, top + step, 4 * top, positive[0] / 2, positive[0] / 4]])
    bits = x[x < 2.0**128].astype(np.float32).view(np.uint32)
    bits = np.unique(np.concatenate([bits, bits + 1, bits - 1, [0, 0x7F800000, 0x7FC00000]]).astype(np.uint32))
    return np.concatenate([bits, bits | np.uint32(0x80000000)])


def input_kind(fmt: Format, bits: int) -> str:
    x = float(np.uint32(bits).view(np.float32))
    sign = "-" if bits >> 31 else "+"
    values = fmt.to_float(np.arange(1 << fmt.width))
    finite = np.abs(values[np.isfinite(values)])
    if np.isnan(x):
        return sign + "NaN"
    if np.isinf(x):
        return sign + "inf"
    if x == 0:
        return sign + "0"
    if abs(x) > finite.max():
        return sign + "beyond max"
    if abs(x) < finite[finite > 0].min():
        return sign + "below min"
    return sign + "in range"


def result_kind(fmt: Format, code: int) -> str:
    if code == ERROR:
        return "error"
    if bool(fmt.is_nan(code)):
        return f"NaN {code:#x}"
    if bool(fmt.is_inf(code)):
        return f"inf {code:#x}"
    if (code & fmt.magnitude_mask) == fmt.max_finite:
        return f"max {code:#x}"
    return "finite"


def report(title: str, fmt: Format, bits: np.ndarray, mine: np.ndarray, theirs: np.ndarray) -> int:
    groups: dict[tuple, list] = defaultdict(list)
    for b, m, t in zip(bits, mine, theirs):
        if int(m) != int(t):
            key = (input_kind(fmt, int(b)), result_kind(fmt, int(m)), result_kind(fmt, int(t)))
            groups[key].append((float(np.uint32(b).view(np.float32)), int(m), int(t)))
    if groups:
        print(f"{title}: {sum(map(len, groups.values()))} of {len(bits)} differ")
        for (kind, ours_kind, their_kind), cases in groups.items():
            examples = ", ".join(f"{x!r}: {m:#x} vs {'error' if t == ERROR else hex(t)}" for x, m, t in cases[:3])
            print(f"    {kind:13} ours {ours_kind:10} theirs {their_kind:10} x{len(cases):<5} e.g. {examples}")
    return sum(map(len, groups.values()))


def gfloat_info(gfloat, fmt: Format):
    from gfloat.types import Domain, Signedness
    if fmt.family in ("p3109", "fnuz"):
        return gfloat.formats.format_info_p3109(fmt.width, fmt.precision,
                                                Signedness.Signed if fmt.signed else Signedness.Unsigned,
                                                Domain.Extended if fmt.infinities else Domain.Finite)
    return getattr(gfloat.formats, GFLOAT_INFOS[fmt.name])


def gfloat_scalar(gfloat, info, bits: np.ndarray, mode: str, sat: bool) -> np.ndarray:
    from gfloat.types import RoundMode
    out = []
    for b in bits:
        try:
            value = gfloat.round_float(info, float(np.uint32(b).view(np.float32)), RoundMode[GFLOAT_MODES[mode]], sat)
            out.append(gfloat.encode_float(info, value))
        except ValueError:
            out.append(ERROR)
    return np.array(out)


def gfloat_array(gfloat, info, bits: np.ndarray, mode: str, sat: bool) -> np.ndarray:
    from gfloat.types import RoundMode
    x = np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)
    return gfloat.encode_ndarray(info, gfloat.round_ndarray(info, x, RoundMode[GFLOAT_MODES[mode]], sat))


def decoded_bits(fmt: Format, codes: np.ndarray) -> np.ndarray:
    return sf.convert(codes, src=fmt, dst=sf.fp32).astype(np.uint32)


def compare_decoding(name: str, fmt: Format, theirs: np.ndarray) -> None:
    codes = np.arange(1 << fmt.width)
    mine, theirs = decoded_bits(fmt, codes), np.asarray(theirs, np.uint32)
    differ = np.nonzero(mine != theirs)[0]
    nan = (mine & 0x7FFFFFFF) > 0x7F800000
    values = [c for c in differ if not nan[c]]
    nan_codes = [c for c in differ if nan[c]]
    nan_bits = ", ".join(f"{c:#04x} ours {mine[c]:#010x} theirs {theirs[c]:#010x}" for c in nan_codes[:4])
    nan_bits += f" ... ({len(nan_codes)} codes)" if len(nan_codes) > 4 else ""
    print(f"{fmt.name} decoded by {name}: " + ("every code alike" if not len(differ) else
                                               f"{len(values)} values differ; NaN bits: {nan_bits}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="*", default=list(P3109_WIDTHS),
                        help="the widths K of the P3109 formats to compare (default: all)")
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES, help="gfloat's rounding modes")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    ml_dtypes, torch, gfloat = optional("ml_dtypes"), optional("torch"), optional("gfloat")
    if gfloat is not None:
        import gfloat.formats  # noqa: F401  (gfloat.formats.format_info_...)
    for version in (ml_dtypes, torch, gfloat):
        if version is not None:
            print(f"{version.__name__} {getattr(version, '__version__', '(no version)')}")

    for name in SHARED:
        fmt = sf.format(name)
        codes, bits = np.arange(1 << fmt.width), probes(fmt)
        print(f"\n== {name} ({len(bits)} probes)")
        dtype = getattr(ml_dtypes, fmt.float_dtype_name, None) if ml_dtypes else None
        if dtype is not None:
            compare_decoding("ml_dtypes", fmt, codes.astype(np.uint8).view(dtype).astype(np.float32).view(np.uint32))
            theirs = bits.view(np.float32).astype(dtype).view(np.uint8)
            report(f"{name} ml_dtypes rne", fmt, bits, sf.convert(bits, src=sf.fp32, dst=fmt), theirs)
        dtype = getattr(torch, fmt.float_dtype_name, None) if torch else None
        if dtype is not None:
            decoded = torch.from_numpy(codes.astype(np.uint8)).view(dtype).float().numpy().view(np.uint32)
            compare_decoding("torch", fmt, decoded)
            theirs = torch.from_numpy(bits.view(np.float32).copy()).to(dtype).view(torch.uint8).numpy()
            report(f"{name} torch rne", fmt, bits, sf.convert(bits, src=sf.fp32, dst=fmt), theirs)
        if gfloat is not None:
            info = gfloat_info(gfloat, fmt)
            compare_decoding("gfloat", fmt, gfloat.decode_ndarray(info, codes).astype(np.float32).view(np.uint32))
            for mode in args.modes:
                for sat in (False, True):
                    mine = sf.convert(bits, src=sf.fp32, dst=fmt, rounding=mode, saturate=sat)
                    report(f"{name} gfloat {mode}{' sat' if sat else ''}", fmt, bits, mine,
                           gfloat_scalar(gfloat, info, bits, mode, sat))

    if gfloat is not None:
        formats = [f for k in args.widths for f in p3109_formats(k)]
        print(f"\n== {len(formats)} P3109 formats against gfloat")
        differing = 0
        for fmt in formats:
            info, codes = gfloat_info(gfloat, fmt), np.arange(1 << fmt.width)
            mine, theirs = fmt.to_float(codes), gfloat.decode_ndarray(info, codes)
            alike = (mine == theirs) & (np.signbit(mine) == np.signbit(theirs))
            same = np.where(np.isnan(mine), np.isnan(theirs), alike)
            if not same.all():
                print(f"{fmt.name} decoded by gfloat: codes {codes[~same].tolist()} differ")
            bits = probes(fmt)
            negative = (bits >> 31).astype(bool) & (not fmt.signed)
            for mode in args.modes:
                for sat in (False, True):
                    mine = sf.convert(bits, src=sf.fp32, dst=fmt, rounding=mode, saturate=sat)
                    theirs = np.empty(len(bits), np.int64)
                    theirs[~negative] = gfloat_array(gfloat, info, bits[~negative], mode, sat)
                    theirs[negative] = gfloat_scalar(gfloat, info, bits[negative], mode, sat)
                    differing += bool(report(f"{fmt.name} gfloat {mode}{' sat' if sat else ''}", fmt, bits, mine,
                                             theirs))
        print(f"{differing} (format, mode, saturation) runs differ")

    if ml_dtypes is not None:
        print("\n== ml_dtypes' other dtypes as Formats of our properties")
        for name, properties in ML_DTYPES_OTHERS.items():
            dtype = getattr(ml_dtypes, name, None)
            if dtype is None:
                print(f"{name}: not in ml_dtypes {ml_dtypes.__version__}")
                continue
            fmt = Format(name, dtype=np.uint8, **properties)
            codes, bits = np.arange(256), probes(fmt)
            compare_decoding("ml_dtypes", fmt, codes.astype(np.uint8).view(dtype).astype(np.float32).view(np.uint32))
            differ = report(f"{name} ml_dtypes rne", fmt, bits, sf.convert(bits, src=sf.fp32, dst=fmt),
                            bits.view(np.float32).astype(dtype).view(np.uint8))
            print(f"{name} = {fmt!r}: " + ("every probe converts alike" if not differ else "see above"))
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
