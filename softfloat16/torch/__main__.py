"""``python -m softfloat16.torch``: look at and compare op traces written by ``softfloat16.torch.record``.

    python -m softfloat16.torch compare A.npz B.npz [--strict-nan] [--max-rows N]
    python -m softfloat16.torch compare A.npz [B.npz] --replay [--rounding R] [--accumulate F] [--order O]
                                        [--nan P] [--ftz] [--seed S] [--tensor-core GPU]
    python -m softfloat16.torch show TRACE.npz [--limit N]

``compare`` names the first op whose outputs differ (module path, op, output, element index,
both values in hex and decimal, ulp distance, differing elements in that op) and whether its
inputs already differed. ``--replay`` recomputes each op of A on the emulator from A's recorded
inputs and compares with B's outputs (B defaults to A); the machine is the one stored in A (or
B) when recorded under ``emulate()``, the defaults otherwise, with the flags given taking
precedence. Exit status: 0 no divergence, 1 a divergence, 2 bad input (a missing, corrupt or
foreign file, op lists that differ, a bad flag), with a one-line message.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from softfloat16.console import run_entry_point
from softfloat16 import tensor_cores
from softfloat16.linalg import ORDERS, TENSOR_CORES, TensorCore
from softfloat16.profiles import PROFILES
from softfloat16.rounding import ROUNDING_NAMES

from . import coverage
from .recording import Trace, TraceError, load_trace
from .trace_compare import TraceMismatch, compare_traces, format_comparison, machine_from_settings, replay_traces

__all__ = ["main"]

PROG = "python -m softfloat16.torch"


class UsageError(Exception):
    """A bad command line or input file: printed as one line, exit status 2."""


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _tensor_core(text: str) -> TensorCore | str:
    if "," in text:
        try:
            return TensorCore(*(int(part) for part in text.split(",")))
        except (ValueError, TypeError):
            pass
    else:
        try:
            return tensor_cores.checked(text)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(
        f"expected a GPU ({', '.join(TENSOR_CORES)}), an architecture, PRODUCTS,FRACTION_BITS[,ZERO_EXPONENT] "
        f"(16,25) or a GPU instruction of softfloat16.mma.presets(), got {text!r}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Op traces of softfloat16.torch.record.")
    commands = parser.add_subparsers(dest="command", required=True)
    coverage.add_command(commands)  # ops: the table of emulated and native ops (coverage.py)
    compare = commands.add_parser("compare", help="the first op where two traces differ",
                                  description="Compare two traces op by op; name the first divergent op.")
    compare.add_argument("a", metavar="A.npz", help="the first trace (with --replay: the one recomputed)")
    compare.add_argument("b", metavar="B.npz", nargs="?", help="the second trace (with --replay, default: A)")
    compare.add_argument("--replay", action="store_true",
                         help="recompute each op of A on the emulator from A's inputs; compare with B's outputs")
    compare.add_argument("--strict-nan", action="store_true", help="compare NaNs bit for bit, not by class")
    compare.add_argument("--max-rows", type=_positive, default=3, metavar="N",
                         help="differing elements shown for the first divergent op (default 3)")
    machine = compare.add_argument_group("the replay's machine (default: the settings stored in the trace)")
    machine.add_argument("--rounding", choices=ROUNDING_NAMES)
    machine.add_argument("--accumulate", metavar="FORMAT", help="fp32, bf16, fp16, tf32 or fp8_e5m2")
    machine.add_argument("--order", choices=ORDERS)
    machine.add_argument("--nan", choices=sorted(PROFILES), help="NaN profile")
    machine.add_argument("--ftz", action="store_const", const=True, help="flush tiny results to zero")
    machine.add_argument("--seed", type=int, help="seed of --rounding sr")
    machine.add_argument("--threads", type=_positive, metavar="N",
                         help="torch CPU's thread count to reproduce where a kernel's sums depend on it (default 1)")
    machine.add_argument("--tensor-core", type=_tensor_core, metavar="GPU",
                         help=f"matrix unit of --order tensorcore (needed with it, unless the trace stores one; "
                         f"an error without it): a GPU ({', '.join(TENSOR_CORES)}), an architecture (hopper, ...), "
                         "an instruction preset (softfloat16.mma) or B,F[,Z] (a TensorCore)")
    show = commands.add_parser("show", help="list the ops of a trace", description="List the ops of a trace.")
    show.add_argument("trace", metavar="TRACE.npz")
    show.add_argument("--limit", type=_positive, default=50, metavar="N", help="ops listed (default 50)")
    return parser


def _load(path: str) -> Trace:
    try:
        return load_trace(path)
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a trace") from None
    except (TraceError, OSError) as error:
        raise UsageError(str(error)) from None


_MACHINE_FLAGS = ("rounding", "accumulate", "order", "nan", "ftz", "seed", "tensor_core", "threads")


def _compare(args: argparse.Namespace) -> int:
    given = {name: getattr(args, name) for name in _MACHINE_FLAGS if getattr(args, name) is not None}
    if not args.replay:
        if args.b is None:
            raise UsageError("compare needs two traces (one is enough only with --replay)")
        if given:
            raise UsageError(f"--{next(iter(given)).replace('_', '-')} sets the replay's machine: use it with --replay")
    a = _load(args.a)
    b = a if args.b is None else _load(args.b)
    try:
        if args.replay:
            source = a if "machine" in a.settings else b
            settings = dict(source.settings)
            stored = dict(settings.get("machine") or {})
            if given.get("order", "tensorcore") != "tensorcore" and "gemm" not in stored:
                stored.pop("tensor_core", None)  # --order other than tensorcore: the stored unit is unused
            settings["machine"] = stored
            try:
                machine = machine_from_settings(settings, **given)
            except (TypeError, ValueError) as error:
                raise UsageError(f"the replay's machine: {error}") from None
            result = replay_traces(a, b, machine, strict_nan=args.strict_nan, max_rows=args.max_rows)
        else:
            result = compare_traces(a, b, strict_nan=args.strict_nan, max_rows=args.max_rows)
    except TraceMismatch as error:
        raise UsageError(f"{args.a} and {args.b or args.a}: {error}") from None
    print(format_comparison(result, (args.a, args.b or args.a)))
    return 0 if result.identical else 1


def _show(args: argparse.Namespace) -> int:
    trace = _load(args.trace)
    print(f"{args.trace}: {trace.describe()}")
    for op in trace.ops[:args.limit]:
        values = ", ".join(f"{role} {fmt}{list(array.shape)}" for role, fmt, array in op.inputs)
        results = ", ".join(f"{role} {fmt}{list(array.shape)}" for role, fmt, array in op.outputs)
        print(f"{op.label()} {op.impl}: ({values}) -> ({results})")
    if len(trace.ops) > args.limit:
        print(f"... and {len(trace.ops) - args.limit} more ops (--limit)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    >>> main(["compare", "/nonexistent/a.npz", "/nonexistent/b.npz"])
    2
    """
    args = _parser().parse_args(argv)
    if args.command == "ops":
        return coverage.run(args)
    try:
        return _compare(args) if args.command == "compare" else _show(args)
    except UsageError as error:
        print(f"{PROG} {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run_entry_point(main))
