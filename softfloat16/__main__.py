"""Command line: explain a bit pattern, run one operation, verify the core.

    python -m softfloat16 explain 0x3c01 --format fp16
    python -m softfloat16 explain 0x80 --format p3109_k8p3se
    python -m softfloat16 op add fp16 0x3c00 0x0001 --rounding rtz
    python -m softfloat16 op mul fp8_e4m3fn 0x7e 0x40 --saturate
    python -m softfloat16 verify --format fp16 --op add --rounding rne --sample 1000000
    python -m softfloat16 verify --format fp8_e4m3fn --op div --rounding rup --exhaustive --saturate
    python -m softfloat16 verify --table --only fp8_e4m3fn --scheduler tcp://scheduler:8786
    python -m softfloat16 verify-mma --only hopper --cases 10000 --checkpoint verify-mma.json

Bit patterns: ``0x3c01`` is hexadecimal, ``0b0011110000000001`` binary, a bare number such as
``15360`` decimal (a note on stderr shows the other reading when the digits could be hex too).
Usage errors (unknown format, rounding, op or profile, a bad bit pattern) print a message and
exit with status 2, like argparse; ``verify`` and ``verify-mma`` exit 1 when they find a mismatch
(``verify-mma`` exits 2 with one line when MMA-Sim, its reference, is not installed). A closed pipe
(``... | head -1``) ends the command quietly.
"""
from __future__ import annotations

import argparse
import sys
from fractions import Fraction

from .compare import describe, exact_decimal, max_key, ordered_key, short_value, to_hex
from .console import run_entry_point
from .format_docs import special_values
from .formats import FORMATS, Format, format as parse_format
from ._verify_reference import ARITHMETIC_FORMATS
from .profiles import PROFILES
from .rounding import ROUNDING_NAMES, parse_rounding

OP_ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "sqrt": 1, "eq": 2, "lt": 2, "le": 2,
            "convert": 1}
VERIFY_OPS = ("add", "sub", "mul", "div", "fma", "sqrt", "convert")


def _format_arg(name: str) -> Format:
    try:
        return parse_format(name)
    except ValueError as error:
        if name.strip().lower().startswith("p3109_k") and not str(error).startswith("format:"):
            raise argparse.ArgumentTypeError(str(error)) from None  # a P3109 name out of range: say which part
        raise argparse.ArgumentTypeError(
            f"unknown format {name!r}; accepted: {', '.join(FORMATS)} (or an alias such as half), "
            f"p3109_k<K>p<P><s|u><e|f> (IEEE P3109, e.g. p3109_k8p3se)") from None


def _rounding_arg(name: str) -> str:
    """The short name of a rounding mode, read by the same parser as the Python API's."""
    try:
        return parse_rounding(name).name.lower()
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("rounding: ")) from None


ROUNDING_HELP = f"{', '.join(ROUNDING_NAMES)} or an alias such as nearest, toward_zero, up, down (default rne)"
BITS_HELP = "0x... hexadecimal, 0b... binary, or a decimal integer"


def parse_bits(text: str) -> int:
    """A bit pattern from the command line: ``0x`` hexadecimal, ``0b`` binary, else decimal.

    >>> parse_bits("0x3c00"), parse_bits("0b11"), parse_bits("15360")
    (15360, 3, 15360)
    """
    cleaned = text.strip().lower()
    base = {"0x": 16, "0b": 2}.get(cleaned[:2], 10)
    digits = cleaned[2:] if base != 10 else cleaned
    try:
        if not digits or not digits[0].isalnum():  # no sign, no empty digits
            raise ValueError
        return int(digits, base)
    except ValueError:
        hint = f"; for hexadecimal write 0x{cleaned}" if base == 10 and _is_hex(cleaned) else ""
        raise argparse.ArgumentTypeError(f"not a bit pattern: {text!r} (expected {BITS_HELP}{hint})") from None


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def _bits_arg(text: str) -> int:
    """``parse_bits``, with a note on stderr when bare digits would read differently as hex."""
    bits = parse_bits(text)
    cleaned = text.strip().lower()
    if cleaned.isdigit() and bits > 9:
        print(f"note: {text} read as decimal = {bits:#x}; for the hex pattern write 0x{cleaned}", file=sys.stderr)
    return bits


def _check_width(parser: argparse.ArgumentParser, bits: int, fmt: Format) -> int:
    if bits >> fmt.width:
        parser.error(f"{bits:#x} does not fit in {fmt.width} bits ({fmt.name})")
    return bits


def _hex(bits: int, fmt: Format) -> str:
    return to_hex(int(bits), fmt)


def _value_text(bits: int, fmt: Format) -> str:
    d = describe(bits, fmt)
    if d.kind == "zero":
        return "-0.0" if d.sign else "0.0"
    if d.kind in ("qnan", "snan"):
        payload = d.fraction & ((fmt.quiet_bit >> fmt.storage_shift) - 1)
        return f"{'-' if d.sign else '+'}{d.kind[0]}NaN (payload {payload:#x})"
    if d.kind == "nan":  # the NaNs outside IEEE 754's binade: no quiet/signaling, no payload
        return f"{'-' if d.sign else '+'}NaN" if fmt.nan_of(True) != fmt.nan_of(False) else "NaN"
    return short_value(d.value)


def _power_of_two(value: Fraction) -> str:
    exponent = value.numerator.bit_length() - 1 if value.denominator == 1 else -(value.denominator.bit_length() - 1)
    return f"2^{exponent}"


def _nan_meaning(bits: int, fmt: Format) -> str:
    """What makes ``bits`` a NaN of ``fmt`` (docs/formats-spec.md), in words, from its properties."""
    if fmt.nan_at_negative_zero and bits == fmt.sign_mask:
        missing = "no -0" + ("" if fmt.infinities else ", no inf")
        return f"the pattern of -0, the only NaN ({missing})" if fmt.top_nans == "none" else \
            f"the pattern of -0 ({missing})"
    if fmt.top_nans == "binade":
        return "exponent all ones, fraction not 0"
    if not fmt.signed or fmt.nan_of(True) == fmt.nan_of(False):
        return f"{fmt.nan_of(False):#x}, the only NaN"
    only = f" (E{fmt.exponent_bits}M{fmt.fraction_bits}FN's only special patterns)" \
        if not fmt.infinities and not fmt.nan_at_negative_zero else ""
    return "exponent and fraction all ones, either sign" + only


def _pattern_of_key(key: int, fmt: Format, negative_zero: bool = False) -> int:
    """The bit pattern at ``key`` on the ordered line (``compare.ordered_key``'s inverse)."""
    if key == 0:
        return fmt.sign_mask if negative_zero and fmt.has_negative_zero else 0
    return (fmt.sign_mask if key < 0 else 0) | (abs(key) << fmt.storage_shift)


def _neighbours(bits: int, fmt: Format) -> list[tuple[str, int | None]]:
    """IEEE nextUp / nextDown on the ordered line (nextUp(-min subnormal) is -0; +-inf past max
    finite in IEEE formats); None past the ends of a format without infinities."""
    key, top = int(ordered_key(bits, fmt)), max_key(fmt)
    lowest = 0 if not fmt.signed else -top

    def at(k: int, negative_zero: bool = False) -> int | None:
        if abs(k) == top + 1 and fmt.has_inf:
            return (fmt.sign_mask if k < 0 else 0) | fmt.inf
        return _pattern_of_key(k, fmt, negative_zero) if lowest <= k <= top else None
    return [("next up  ", at(key + 1, negative_zero=key < 0)), ("next down", at(key - 1))]


def explain(bits: int, fmt: Format) -> str:
    """The multi-line explanation printed by ``python -m softfloat16 explain``.

    >>> import softfloat16 as sf
    >>> print(explain(0x3C01, sf.fp16))  # doctest: +NORMALIZE_WHITESPACE
    fp16 0x3c01 = 0 01111 0000000001 (1 sign, 5 exponent, 10 fraction bits; bias 15)
      sign      0 (+)
      exponent  01111 = 15, unbiased 0
      fraction  0000000001 = 1/1024
      class     normal
      value     1.0009765625 = 1025/1024 = 1025 * 2^-10
      ulp       0.0009765625 = 2^-10
      next up   0x3c02 = 1.001953125
      next down 0x3c00 = 1.0
    >>> print(explain(0x80, sf.fp8_e4m3fnuz))  # doctest: +NORMALIZE_WHITESPACE
    fp8_e4m3fnuz 0x80 = 1 0000 000 (1 sign, 4 exponent, 3 fraction bits; bias 8)
      encoding  fnuz: NaN 0x80 only; no inf, no -0
      sign      1 (-)
      exponent  0000 = 0
      fraction  000 = 0
      class     nan: the pattern of -0, the only NaN (no -0, no inf)
      value     NaN
    >>> print(explain(0xFE, sf.e8m0))  # doctest: +NORMALIZE_WHITESPACE
    e8m0 0xfe = 11111110 (0 sign, 8 exponent, 0 fraction bits; bias 127)
      encoding  e8m0: NaN 0xff; unsigned, no zero
      exponent  11111110 = 254, unbiased 127
      class     normal
      value     170141183460469231731687303715884105728.0 = 170141183460469231731687303715884105728 = 1 * 2^127
      ulp       170141183460469231731687303715884105728.0 = 2^127
      next up   none (+max finite: e8m0 has no infinity)
      next down 0xfd = ~8.507059173023462e+37
    """
    d = describe(bits, fmt)
    f = fmt.fraction_bits
    below = f"; {fmt.storage_shift} zero bits below (FP32 layout)" if fmt.storage_shift else ""
    lines = [f"{fmt.name} {d.hex} = {d.fields} ({int(fmt.signed)} sign, {fmt.exponent_bits} exponent, {f} fraction "
             f"bits{below}; bias {fmt.bias})"]
    if not (fmt.top_nans == "binade" and fmt.signed and fmt.subnormals):  # other than IEEE 754's specials
        lines.append(f"  encoding  {fmt.encoding}: {special_values(fmt)}")
    if fmt.signed:
        lines.append(f"  sign      {d.sign} ({'-' if d.sign else '+'})")
    exponent_bits = f"{d.exponent:0{fmt.exponent_bits}b}"
    if d.kind in ("zero", "subnormal"):
        what = "zero/subnormal" if f else "zero"  # precision 1: field 0 holds only zero
        lines.append(f"  exponent  {exponent_bits} = 0: {what}, scale 2^{fmt.emin}, no implicit 1")
    elif d.kind == "normal":
        lines.append(f"  exponent  {exponent_bits} = {d.exponent}, unbiased {d.exponent - fmt.bias}")
    elif fmt.top_nans == "binade" and d.exponent == (1 << fmt.exponent_bits) - 1:
        lines.append(f"  exponent  {exponent_bits} = all ones (inf/NaN)")
    else:
        lines.append(f"  exponent  {exponent_bits} = {d.exponent}")
    if f:
        lines.append(f"  fraction  {d.fraction:0{f}b} = {Fraction(d.fraction, 1 << f)}")
    if d.kind.endswith("nan"):
        meaning = _nan_meaning(d.bits, fmt) + {"qnan": ", top fraction bit 1: quiet",
                                               "snan": ", top fraction bit 0: signaling"}.get(d.kind, "")
        lines.append(f"  class     {d.kind}: {meaning}")
        lines.append(f"  value     {_value_text(bits, fmt)}")
        return "\n".join(lines)
    lines.append(f"  class     {d.kind}")
    if d.kind == "inf":
        lines.append(f"  value     {'-' if d.sign else '+'}inf")
        toward_zero = fmt.sign_mask * d.sign | fmt.max_finite
        name = "next up  " if d.sign else "next down"
        lines.append(f"  {name} {_hex(toward_zero, fmt)} = {_value_text(toward_zero, fmt)}")
        return "\n".join(lines)
    value = d.value
    implicit = d.exponent != 0 or not fmt.subnormals  # no subnormals (E8M0): 0x00 is 1 * 2^-127
    significand = d.fraction | ((1 << f) if implicit else 0)
    scale = (d.exponent if not fmt.subnormals else max(d.exponent, 1)) - fmt.bias - f
    lines.append(f"  value     {_value_text(bits, fmt) if d.kind == 'zero' else exact_decimal(value)} = "
                 f"{'-' if d.sign else ''}{abs(value)} = {'-' if d.sign else ''}{significand} * 2^{scale}")
    ulp = Fraction(2) ** scale
    lines.append(f"  ulp       {exact_decimal(ulp)} = {_power_of_two(ulp)}")
    for name, neighbour in _neighbours(bits, fmt):
        if neighbour is not None:
            lines.append(f"  {name} {_hex(neighbour, fmt)} = {_value_text(neighbour, fmt)}")
        elif name.startswith("next up") != bool(d.sign):  # past the largest magnitude
            lines.append(f"  {name} none ({'-' if d.sign else '+'}max finite: {fmt.name} has no infinity)")
        elif fmt.has_zero:  # below zero in an unsigned format
            lines.append(f"  {name} none (0 is the smallest value: {fmt.name} is unsigned)")
        else:
            lines.append(f"  {name} none (2^{fmt.emin} is the smallest value, there is no zero)")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m softfloat16", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="{explain,op,verify,verify-mma}")

    p = sub.add_parser("explain", help="decode a bit pattern: fields, exact value, class, neighbours")
    p.add_argument("bits", type=_bits_arg, help=f"the bit pattern: {BITS_HELP} (e.g. 0x3c01)")
    p.add_argument("--format", "-f", type=_format_arg, default=parse_format("fp16"),
                   help="a format name or alias, or p3109_k<K>p<P><s|u><e|f> (default fp16)")

    p = sub.add_parser("op", help="run one operation on bit patterns and show result and flags")
    p.add_argument("op", choices=sorted(OP_ARITY), metavar="OP", help=", ".join(OP_ARITY))
    p.add_argument("format", type=_format_arg, metavar="FORMAT", help=", ".join(FORMATS))
    p.add_argument("operands", type=_bits_arg, nargs="+", metavar="BITS", help=f"operand bit patterns: {BITS_HELP}")
    p.add_argument("--rounding", "-r", type=_rounding_arg, default="rne", help=ROUNDING_HELP)
    p.add_argument("--nan", choices=sorted(PROFILES), default="ieee", help="NaN profile")
    p.add_argument("--ftz", action="store_true", help="flush tiny results to zero")
    p.add_argument("--daz", action="store_true", help="read subnormal inputs as zero")
    p.add_argument("--tininess", choices=("after", "before"), default="after")
    p.add_argument("--saturate", action="store_true",
                   help="overflow (and inf results) give +-max finite instead of inf or NaN")
    p.add_argument("--seed", type=int, metavar="N", help="--rounding sr: the Philox seed of the random bits")
    p.add_argument("--random-bits", type=_bits_arg, metavar="WORD",
                   help="--rounding sr: the 32-bit random word itself (its top --sr-bits bits are r)")
    p.add_argument("--sr-bits", type=int, default=32, metavar="R", help="--rounding sr: R, 1 to 32 (default 32)")
    p.add_argument("--to", type=_format_arg, help="convert: the destination format")

    p = sub.add_parser("verify", help="check the core against an independent reference")
    # The job's options default to None so that --table can tell which were given.
    p.add_argument("--format", "-f", type=_format_arg,
                   help=f"{', '.join(ARITHMETIC_FORMATS)}, or an IEEE P3109 format (p3109_k8p3se ...); "
                        "for convert the destination (fp32 too)")
    p.add_argument("--op", choices=VERIFY_OPS, metavar="OP", help=", ".join(VERIFY_OPS))
    p.add_argument("--table", action="store_true",
                   help="instead of --format/--op: every row of docs/verification.md, as one run")
    p.add_argument("--only", action="append", metavar="WORD[,WORD]",
                   help="--table: only the jobs whose title has every WORD (fp8, add, rtz, saturate, sr, ...)")
    p.add_argument("--rounding", "-r", type=_rounding_arg,
                   help=ROUNDING_HELP + "; sr: stochastic, with a seeded random word per case")
    p.add_argument("--saturate", action="store_true", help="verify the core's saturate=True")
    p.add_argument("--sr-bits", type=int, metavar="R", help="--rounding sr: R, 1 to 32 (default 32)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--exhaustive", action="store_true", help="every operand (pair)")
    scope.add_argument("--sample", type=int, metavar="N",
                       help="N random cases (default 2^20; with --table: N a job instead of every input)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=None, metavar="K", help="processes (default: CPU count)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the chunks on a Dask cluster (tcp://host:8786; needs the dask extra)")
    p.add_argument("--checkpoint", metavar="FILE",
                   help="JSON file of finished chunks: resume from it (--table: a directory, a file per job)")
    p.add_argument("--from", dest="source", type=_format_arg, help="convert: source format (default fp32)")
    p.add_argument("--fma-c", metavar="BITS,BITS",
                   help=f"exhaustive fma: the c values, each {BITS_HELP} (default: 8 edge values)")
    p.add_argument("--strict-nan", action="store_true", help="compare NaNs bit for bit (ieee profile)")
    p.add_argument("--reference", choices=("auto", "hardware", "exact"),
                   help="auto: hardware floats for RNE where proven exact, else exact signs")
    progress = p.add_mutually_exclusive_group()
    progress.add_argument("--progress", action="store_true", default=None, help="show progress even if not a terminal")
    progress.add_argument("--no-progress", dest="progress", action="store_false")

    p = sub.add_parser("verify-mma", help="check softfloat16.mma's presets against MMA-Sim (the mmasim package)")
    p.add_argument("--all", action="store_true",
                   help="every preset name (default: one preset per distinct arithmetic configuration)")
    p.add_argument("--only", action="append", metavar="WORD[,WORD]",
                   help="only the presets whose name contains every WORD (hopper, wgmma, e4m3, block32, ...)")
    p.add_argument("--cases", type=int, default=100_000, metavar="N", help="dot products per preset (default 100000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=None, metavar="K", help="processes (default: CPU count)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the chunks on a Dask cluster (tcp://host:8786; needs the dask extra)")
    p.add_argument("--checkpoint", metavar="FILE", help="JSON file of finished chunks: resume from it")
    progress = p.add_mutually_exclusive_group()
    progress.add_argument("--progress", action="store_true", default=None, help="show progress even if not a terminal")
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    return parser


def _run_op(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from . import ops
    from .flags import Flag
    fmt: Format = args.format
    if len(args.operands) != OP_ARITY[args.op]:
        parser.error(f"{args.op} takes {OP_ARITY[args.op]} operand(s), got {len(args.operands)}")
    if args.op == "convert" and args.to is None:
        parser.error("convert needs --to FORMAT")
    operands = [_check_width(parser, b, fmt) for b in args.operands]
    options = dict(rounding=args.rounding, nan=args.nan, ftz=args.ftz, daz=args.daz,
                   tininess=args.tininess, flags=True)
    compare = args.op in ("eq", "lt", "le")
    stochastic = args.rounding == "sr"
    if stochastic and (args.seed is None) == (args.random_bits is None):
        parser.error("--rounding sr needs its randomness: exactly one of --seed N or --random-bits WORD")
    if not stochastic and (args.seed is not None or args.random_bits is not None):
        parser.error("--seed and --random-bits are for --rounding sr")
    if compare and args.saturate:
        parser.error("--saturate: a comparison rounds nothing")
    if not compare:  # the rounding options (comparisons take none)
        options["saturate"] = args.saturate
        if stochastic:
            options.update(sr_bits=args.sr_bits, seed=args.seed)
            if args.random_bits is not None:
                options.update(seed=None, random_bits=args.random_bits)
    try:
        if args.op == "convert":
            result, flags = ops.convert(operands[0], src=fmt, dst=args.to, **options)
        else:
            result, flags = getattr(fmt, args.op)(*operands, **options)
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    out_fmt = args.to if args.op == "convert" else fmt
    names = "abc"
    randomness = ""
    if stochastic:
        source = f"seed={args.seed}" if args.seed is not None else f"random-bits={args.random_bits:#010x}"
        randomness = f" sr-bits={args.sr_bits} {source}"
    print(f"{fmt.name} {args.op}({', '.join(_hex(b, fmt) for b in operands)})"
          + (f" -> {out_fmt.name}" if args.op == "convert" else "")
          + f"  rounding={args.rounding}{randomness} nan={args.nan} tininess={args.tininess}"
          + (" ftz" if args.ftz else "") + (" daz" if args.daz else "") + (" saturate" if args.saturate else ""))
    for name, b in zip(names, operands):
        print(f"  {name}       {_hex(b, fmt)} = {_value_text(b, fmt)}")
    if compare:
        print(f"  result  {bool(result)}")
    else:
        kind = describe(int(result), out_fmt).kind
        if kind == "zero" and not out_fmt.has_nan and int(flags) & Flag.INVALID:
            kind += f": the NaN stand-in, {out_fmt.name} has no NaN"
        print(f"  result  {_hex(result, out_fmt)} = {_value_text(int(result), out_fmt)} ({kind})")
    exact = _exact_text(args.op, [describe(b, fmt).value for b in operands])
    if exact:
        print(f"  exact   {exact}")
    set_flags = [f.name for f in sorted(Flag, key=lambda f: -f.value) if int(flags) & f.value]  # IEEE order
    print(f"  flags   {' '.join(set_flags) if set_flags else '(none)'}")
    return 0


def _exact_text(op: str, values: list) -> str:
    """The unrounded result of a rational op on finite operands ("" otherwise)."""
    if any(not isinstance(v, Fraction) for v in values) or op not in ("add", "sub", "mul", "div", "fma"):
        return ""
    a, b = values[0], values[1]
    if op == "div" and b == 0:
        return ""
    exact = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
             "fma": lambda: a * b + values[2]}[op]()
    if exact.denominator & (exact.denominator - 1):  # not dyadic: no finite decimal
        return f"{exact} ~ {float(exact)!r}"
    return short_value(exact, max_digits=40)


def _job_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """The ``verify.Job`` fields (``verify``'s keyword arguments) of a single-job command line."""
    missing = [flag for flag, value in (("--format", args.format), ("--op", args.op)) if value is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)} (or --table)")
    fma_c: tuple[int, ...] = ()
    if args.fma_c:
        try:
            fma_c = tuple(parse_bits(x) for x in args.fma_c.split(","))
        except argparse.ArgumentTypeError as error:
            parser.error(f"argument --fma-c: {error}")
    return dict(format=args.format.name, op=args.op, rounding=args.rounding or "rne", exhaustive=args.exhaustive,
                sample=1 << 20 if args.sample is None else args.sample, seed=args.seed,
                source=args.source.name if args.source else None, fma_c=fma_c, strict_nan=args.strict_nan,
                method=args.reference or "auto", saturate=args.saturate,
                sr_bits=32 if args.sr_bits is None else args.sr_bits)


def _run_verify(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .verify import SchedulerError, format_summary, verify
    if args.workers is not None and args.workers < 1:
        parser.error("argument --workers: expected a positive number")
    if args.workers is not None and args.scheduler is not None:
        parser.error("argument --workers: not allowed with --scheduler (the cluster's workers run the chunks)")
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    if args.table:
        return _run_table(parser, args, progress)
    if args.only:
        parser.error("argument --only: selects jobs of --table")
    options = _job_options(parser, args)
    try:
        summary = verify(**options, workers=args.workers, checkpoint=args.checkpoint, progress=progress,
                         scheduler=args.scheduler)
    except SchedulerError as error:
        return _scheduler_error(parser, error)
    except ValueError as error:
        parser.error(str(error))
    except KeyboardInterrupt:
        return _interrupted(args.checkpoint)
    print(format_summary(summary))
    return 1 if summary.mismatches else 0


def _interrupted(checkpoint: str | None) -> int:
    """Ctrl-C in a sweep: one line on stderr (where the finished chunks are, to resume), status 130."""
    print("\ninterrupted" + (f"; finished chunks are in {checkpoint}: run the same command to resume"
                             if checkpoint else ""), file=sys.stderr)
    return 130


def _scheduler_error(parser: argparse.ArgumentParser, error: Exception) -> int:
    """No Dask (or no scheduler at the address): one line, no usage text, status 2."""
    print(f"{parser.prog} verify: error: {error}", file=sys.stderr)
    return 2


def _run_table(parser: argparse.ArgumentParser, args: argparse.Namespace, progress: bool) -> int:
    from .verify import SchedulerError
    from .verify_table import format_table, run_table, sampled, select, table_rows
    given = [flag for flag, value in (("--format", args.format), ("--op", args.op), ("--rounding", args.rounding),
                                      ("--saturate", args.saturate), ("--sr-bits", args.sr_bits),
                                      ("--from", args.source), ("--fma-c", args.fma_c),
                                      ("--strict-nan", args.strict_nan), ("--reference", args.reference))
             if value not in (None, False)]
    if given:
        parser.error(f"argument --table: runs the table's own jobs; not allowed with {', '.join(given)}")
    rows = table_rows()
    if args.only:
        rows = select(rows, args.only)
        if not rows:
            parser.error(f"argument --only: no job of the table matches {' '.join(args.only)}")
    if args.sample is not None:
        if args.sample <= 0:
            parser.error(f"argument --sample: expected a positive number of cases, got {args.sample}")
        rows = sampled(rows, args.sample, args.seed)
    try:
        result = run_table(rows, workers=args.workers, scheduler=args.scheduler, checkpoint=args.checkpoint,
                           progress=progress)
    except SchedulerError as error:
        return _scheduler_error(parser, error)
    except ValueError as error:
        parser.error(str(error))
    except KeyboardInterrupt:
        return _interrupted(args.checkpoint and args.checkpoint + "/")
    print(format_table(result))
    return 1 if result.mismatches else 0


def _run_verify_mma(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .verify import SchedulerError
    from .verify_mma import MmasimMissing, format_mma_table, select_presets, verify_mma
    if args.cases <= 0:
        parser.error(f"argument --cases: expected a positive number of dot products, got {args.cases}")
    if args.workers is not None and args.workers < 1:
        parser.error("argument --workers: expected a positive number")
    if args.workers is not None and args.scheduler is not None:
        parser.error("argument --workers: not allowed with --scheduler (the cluster's workers run the chunks)")
    try:
        names = select_presets(args.only or (), every=args.all)
    except ValueError as error:
        print(f"{parser.prog} verify-mma: error: argument --only: {str(error).removeprefix('only: ')}",
              file=sys.stderr)
        return 2
    try:
        summary = verify_mma(names, cases=args.cases, seed=args.seed, workers=args.workers, scheduler=args.scheduler,
                             checkpoint=args.checkpoint,
                             progress=sys.stderr.isatty() if args.progress is None else args.progress)
    except (SchedulerError, ValueError, MmasimMissing) as error:  # one line, no usage text
        print(f"{parser.prog} verify-mma: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _interrupted(args.checkpoint)
    print(format_mma_table(summary))
    return 1 if summary.mismatches else 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "explain":
        bits = _check_width(parser, args.bits, args.format)
        try:
            text = explain(bits, args.format)
        except ValueError as error:  # e.g. TF32 in FP32 layout with low bits set
            parser.error(str(error))
        print(text)
        return 0
    if args.command == "op":
        return _run_op(parser, args)
    if args.command == "verify-mma":
        return _run_verify_mma(parser, args)
    return _run_verify(parser, args)


if __name__ == "__main__":
    sys.exit(run_entry_point(main))
