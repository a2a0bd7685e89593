"""Command line: explain a bit pattern, run one operation, verify the core.

    python -m softfloat16 explain 0x3c01 --format fp16
    python -m softfloat16 op add fp16 0x3c00 0x0001 --rounding rtz
    python -m softfloat16 verify --format fp16 --op add --rounding rne --sample 1000000

Bit patterns: ``0x3c01`` is hexadecimal, ``0b0011110000000001`` binary, a bare number such as
``15360`` decimal (a note on stderr shows the other reading when the digits could be hex too).
Usage errors (unknown format, rounding, op or profile, a bad bit pattern) print a message and
exit with status 2, like argparse; ``verify`` exits 1 when it finds a mismatch. A closed pipe
(``... | head -1``) ends the command quietly.
"""
from __future__ import annotations

import argparse
import sys
from fractions import Fraction

from .compare import describe, exact_decimal, short_value, to_hex
from .console import run_entry_point
from .formats import FORMATS, Format, format as parse_format
from .profiles import PROFILES
from .rounding import ROUNDING_NAMES, parse_rounding

OP_ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "sqrt": 1, "eq": 2, "lt": 2, "le": 2,
            "convert": 1}
VERIFY_OPS = ("add", "sub", "mul", "div", "fma", "sqrt", "convert")


def _format_arg(name: str) -> Format:
    try:
        return parse_format(name)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"unknown format {name!r}; accepted: {', '.join(FORMATS)} (or an alias such as half)") from None


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
    if d.kind.endswith("nan"):
        payload = d.fraction & (fmt.quiet_bit - 1)
        return f"{'-' if d.sign else '+'}{d.kind[0]}NaN (payload {payload:#x})"
    return short_value(d.value)


def _power_of_two(value: Fraction) -> str:
    exponent = value.numerator.bit_length() - 1 if value.denominator == 1 else -(value.denominator.bit_length() - 1)
    return f"2^{exponent}"


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
    """
    d = describe(bits, fmt)
    f = fmt.fraction_bits
    lines = [f"{fmt.name} {d.hex} = {d.fields} ({1} sign, {fmt.exponent_bits} exponent, {f} fraction bits; "
             f"bias {fmt.bias})",
             f"  sign      {d.sign} ({'-' if d.sign else '+'})"]
    if d.kind in ("zero", "subnormal"):
        lines.append(f"  exponent  {d.exponent:0{fmt.exponent_bits}b} = 0: zero/subnormal, scale 2^{fmt.emin}, "
                     "no implicit 1")
    elif d.kind == "normal":
        lines.append(f"  exponent  {d.exponent:0{fmt.exponent_bits}b} = {d.exponent}, unbiased {d.exponent - fmt.bias}")
    else:
        lines.append(f"  exponent  {d.exponent:0{fmt.exponent_bits}b} = all ones (inf/NaN)")
    lines.append(f"  fraction  {d.fraction:0{f}b} = {Fraction(d.fraction, 1 << f)}")
    lines.append(f"  class     {d.kind}")
    if d.kind.endswith("nan"):
        lines.append(f"  value     {_value_text(bits, fmt)}")
        return "\n".join(lines)
    if d.kind == "inf":
        lines.append(f"  value     {'-' if d.sign else '+'}inf")
        lines.append(f"  next {'up  ' if d.sign else 'down'} {_hex(bits - 1, fmt)} = {_value_text(bits - 1, fmt)}")
        return "\n".join(lines)
    value = d.value
    significand = d.fraction | ((1 << f) if d.exponent else 0)
    scale = max(d.exponent, 1) - fmt.bias - f
    lines.append(f"  value     {_value_text(bits, fmt) if d.kind == 'zero' else exact_decimal(value)} = "
                 f"{'-' if d.sign else ''}{abs(value)} = {'-' if d.sign else ''}{significand} * 2^{scale}")
    ulp = Fraction(2) ** scale
    lines.append(f"  ulp       {exact_decimal(ulp)} = {_power_of_two(ulp)}")
    # neighbours on the ordered line (keys: signed magnitudes); nextUp(-min subnormal) is -0
    key = -(bits & fmt.magnitude_mask) if d.sign else bits
    up = 1 if key == 0 else (key + 1 if key + 1 != 0 else fmt.sign_mask)
    down = fmt.sign_mask | 1 if key == 0 else key - 1
    for name, neighbour in (("next up  ", up), ("next down", down)):
        neighbour = neighbour if neighbour >= 0 else fmt.sign_mask | -neighbour
        lines.append(f"  {name} {_hex(neighbour, fmt)} = {_value_text(neighbour, fmt)}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m softfloat16", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="{explain,op,verify}")

    p = sub.add_parser("explain", help="decode a bit pattern: fields, exact value, class, neighbours")
    p.add_argument("bits", type=_bits_arg, help=f"the bit pattern: {BITS_HELP} (e.g. 0x3c01)")
    p.add_argument("--format", "-f", type=_format_arg, default=parse_format("fp16"), help="default fp16")

    p = sub.add_parser("op", help="run one operation on bit patterns and show result and flags")
    p.add_argument("op", choices=sorted(OP_ARITY), metavar="OP", help=", ".join(OP_ARITY))
    p.add_argument("format", type=_format_arg, metavar="FORMAT", help=", ".join(FORMATS))
    p.add_argument("operands", type=_bits_arg, nargs="+", metavar="BITS", help=f"operand bit patterns: {BITS_HELP}")
    p.add_argument("--rounding", "-r", type=_rounding_arg, default="rne", help=ROUNDING_HELP)
    p.add_argument("--nan", choices=sorted(PROFILES), default="ieee", help="NaN profile")
    p.add_argument("--ftz", action="store_true", help="flush tiny results to zero")
    p.add_argument("--daz", action="store_true", help="read subnormal inputs as zero")
    p.add_argument("--tininess", choices=("after", "before"), default="after")
    p.add_argument("--to", type=_format_arg, help="convert: the destination format")

    p = sub.add_parser("verify", help="check the core against an independent reference")
    p.add_argument("--format", "-f", type=_format_arg, required=True, help="fp16 or bf16 (fp32 for convert)")
    p.add_argument("--op", choices=VERIFY_OPS, required=True, metavar="OP", help=", ".join(VERIFY_OPS))
    p.add_argument("--rounding", "-r", type=_rounding_arg, default="rne", help=ROUNDING_HELP)
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--exhaustive", action="store_true", help="every operand (pair)")
    scope.add_argument("--sample", type=int, default=1 << 20, metavar="N", help="N random cases (default 2^20)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=None, metavar="K", help="processes (default: CPU count)")
    p.add_argument("--checkpoint", metavar="FILE", help="JSON file of finished chunks: resume from it")
    p.add_argument("--from", dest="source", type=_format_arg, help="convert: source format (default fp32)")
    p.add_argument("--fma-c", metavar="BITS,BITS",
                   help=f"exhaustive fma: the c values, each {BITS_HELP} (default: 8 edge values)")
    p.add_argument("--strict-nan", action="store_true", help="compare NaNs bit for bit (ieee profile)")
    p.add_argument("--reference", choices=("auto", "hardware", "exact"), default="auto",
                   help="auto: hardware floats for RNE where proven exact, else exact signs")
    progress = p.add_mutually_exclusive_group()
    progress.add_argument("--progress", action="store_true", default=None, help="show progress even if not a terminal")
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    return parser


def _run_op(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from . import ops
    fmt: Format = args.format
    if len(args.operands) != OP_ARITY[args.op]:
        parser.error(f"{args.op} takes {OP_ARITY[args.op]} operand(s), got {len(args.operands)}")
    if args.op == "convert" and args.to is None:
        parser.error("convert needs --to FORMAT")
    operands = [_check_width(parser, b, fmt) for b in args.operands]
    options = dict(rounding=args.rounding, nan=args.nan, ftz=args.ftz, daz=args.daz,
                   tininess=args.tininess, flags=True)
    compare = args.op in ("eq", "lt", "le")
    try:
        if args.op == "convert":
            result, flags = ops.convert(operands[0], src=fmt, dst=args.to, **options)
        elif compare:
            result, flags = getattr(fmt, args.op)(*operands, **options)
        else:
            result, flags = getattr(fmt, args.op)(*operands, **options)
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    out_fmt = args.to if args.op == "convert" else fmt
    names = "abc"
    print(f"{fmt.name} {args.op}({', '.join(_hex(b, fmt) for b in operands)})"
          + (f" -> {out_fmt.name}" if args.op == "convert" else "")
          + f"  rounding={args.rounding} nan={args.nan} tininess={args.tininess}"
          + (" ftz" if args.ftz else "") + (" daz" if args.daz else ""))
    for name, b in zip(names, operands):
        print(f"  {name}       {_hex(b, fmt)} = {_value_text(b, fmt)}")
    if compare:
        print(f"  result  {bool(result)}")
    else:
        print(f"  result  {_hex(result, out_fmt)} = {_value_text(int(result), out_fmt)} "
              f"({describe(int(result), out_fmt).kind})")
    exact = _exact_text(args.op, [describe(b, fmt).value for b in operands])
    if exact:
        print(f"  exact   {exact}")
    from .flags import Flag
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


def _run_verify(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .verify import format_summary, verify
    fma_c: tuple[int, ...] = ()
    if args.fma_c:
        try:
            fma_c = tuple(parse_bits(x) for x in args.fma_c.split(","))
        except argparse.ArgumentTypeError as error:
            parser.error(f"argument --fma-c: {error}")
    if args.workers is not None and args.workers < 1:
        parser.error("argument --workers: expected a positive number")
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    try:
        summary = verify(args.format.name, args.op, args.rounding, exhaustive=args.exhaustive,
                         sample=args.sample, workers=args.workers, checkpoint=args.checkpoint,
                         progress=progress, strict_nan=args.strict_nan, seed=args.seed,
                         source=args.source.name if args.source else None, fma_c=fma_c,
                         method=args.reference)
    except ValueError as error:
        parser.error(str(error))
    except KeyboardInterrupt:
        print("\ninterrupted" + (f"; finished chunks are in {args.checkpoint}: run the same command to resume"
                                 if args.checkpoint else ""), file=sys.stderr)
        return 130
    print(format_summary(summary))
    return 1 if summary.mismatches else 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "explain":
        print(explain(_check_width(parser, args.bits, args.format), args.format))
        return 0
    if args.command == "op":
        return _run_op(parser, args)
    return _run_verify(parser, args)


if __name__ == "__main__":
    sys.exit(run_entry_point(main))
