"""``python -m sim crosscheck``: run the torch reference and the emulator, compare every op.

    python -m sim crosscheck --device cpu|cuda --steps N [--mode exact|library] [--dump PATH]
                             [--against PATH] [--replay] [--strict-nan] [training flags]

Without ``--against`` the torch side runs here (``--dump PATH`` saves its records); with
``--against PATH`` the torch side is read from a dump made earlier (on another machine, say),
whose run settings then apply (flags given as well must agree with it), and torch is not needed.
The training flags are ``python -m sim train``'s own (:func:`sim.arguments.add_train_arguments`);
one the cross-check does not reproduce (``--clip``) is refused with a message naming it.
``--replay`` feeds each emulator op the device's own inputs. Exit status: 0 when no op diverges
unexpectedly (``library`` ops may diverge: that is expected and reported), 1 when one does,
2 for a bad command line, a missing torch/CUDA, or an unreadable dump.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from sim.crosscheck.compare import compare_records, format_report
from sim.crosscheck.dump import DumpError, load_dump, save_dump
from sim.crosscheck.loop import run_training
from sim.crosscheck.program import Plan, UnsupportedConfig, check_supported, record_trainer
from sim.crosscheck.record import EmulatorBackend, Recorder, replay
from sim.arguments import (  # the same flags, rules and exit status as `python -m sim train`
    UsageError, add_train_arguments, check_writable, given_train_fields, positive_int, train_config,
)
from sim.config import TrainConfig
from softfloat16.tensor_cores import TENSOR_CORES

__all__ = ["main"]

PROG = "python -m sim crosscheck"
_NAN_PROFILES = {"cpu": "x86", "cuda": "cuda"}
_DEFAULT_STEPS = 50


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Compare a PyTorch training run with the emulator, op by op and bit by bit.",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), help="where torch runs (default cpu)")
    parser.add_argument("--mode", choices=("exact", "library"),
                        help="exact: every torch op bit-defined (default); library: torch's own kernels")
    parser.add_argument("--dump", metavar="PATH", help="save the records this command computed (.npz)")
    parser.add_argument("--against", metavar="PATH", help="compare with a saved torch dump instead of running torch")
    parser.add_argument("--replay", action="store_true", help="feed each emulator op the device's own inputs")
    parser.add_argument("--strict-nan", action="store_true", help="compare NaNs bit for bit, not by class")
    parser.add_argument("--tensor-core", metavar="GPU",
                        help="run the emulator's GEMMs on this GPU's matrix unit (h100, a100, ..., an "
                             "architecture, an instruction preset, or none); default: h100 for --mode library on "
                             "cuda, none otherwise")
    parser.add_argument("--max-rows", type=positive_int, default=5, metavar="N",
                        help="differing elements shown for the first divergent op (default 5)")
    training = parser.add_argument_group("training run (as python -m sim train; defaults likewise)")
    add_train_arguments(training, steps_default=_DEFAULT_STEPS)
    return parser


def _config(given: dict[str, Any], base: TrainConfig | None = None) -> TrainConfig:
    """The run's config (UsageError for an impossible one, or one the cross-check cannot run)."""
    config = train_config(given, base)
    try:
        check_supported(config)
    except UnsupportedConfig as error:
        raise UsageError(str(error)) from None
    return config


def _from_dump(args: argparse.Namespace) -> tuple[Any, TrainConfig, str, str, int]:
    try:
        dump = load_dump(args.against)
    except FileNotFoundError:
        raise UsageError(f"--against: no such file: {args.against}") from None
    except DumpError as error:
        raise UsageError(f"--against: {error}") from None
    if dump.side != "torch":
        print(f"note: {args.against} holds the {dump.side}'s records, not torch's", file=sys.stderr)
    try:
        saved = TrainConfig.from_dict(dump.config)
    except (TypeError, ValueError) as error:
        raise UsageError(f"--against: the dump's config is not a training config ({error})") from None
    device = dump.device.get("device", "cpu")
    conflicts = [f"--{name.replace('_', '-')} {given!r} (the dump has {saved_value!r})"
                 for name, given, saved_value in (
                     ("device", args.device, device), ("mode", args.mode, dump.mode), ("steps", args.steps, dump.steps),
                     *((field, value, getattr(saved, field)) for field, value in given_train_fields(args).items()
                       if field != "steps"))
                 if given is not None and given != saved_value]
    if conflicts:
        raise UsageError("--against: flags disagree with the dump: " + "; ".join(conflicts))
    return dump, _config({"steps": dump.steps}, saved), device, dump.mode, dump.steps


def _title(device: str, mode: str, info: dict[str, Any], config: TrainConfig, plan: Plan,
           backend: EmulatorBackend, timings: dict[str, float]) -> list[str]:
    torch_version = info.get("torch", "?")
    hardware = info.get("gpu") or info.get("processor") or info.get("machine") or ""
    scaling = config.loss_scale
    if config.loss_scale == "dynamic":
        scaling += f" (init {config.scale:g}, growth every {config.growth_interval})"
    elif config.loss_scale == "static":
        scaling += f" ({config.scale:g})"
    sizes = "-".join(str(n) for n in (plan.x_train.shape[1], *config.hidden, int(plan.y_train.max()) + 1))
    precision = config.precision
    if precision == "fp8":
        gradients = "E5M2 gradients" + (" rounded stochastically" if config.grad_rounding == "sr" else "")
        precision += f" (E4M3 forward, {gradients}, {config.fp8_scaling} scaling"
        if config.fp8_scaling == "delayed":
            precision += f", amax history {config.amax_history}"
        precision += f", margin {config.fp8_margin})" if config.fp8_scaling != "none" else ")"
    return [
        f"crosscheck: torch {torch_version} on {device} {hardware} ({mode} mode) vs the softfloat16 emulator "
        f"({backend.impl})",
        f"run: {precision}, master weights {'on' if config.master_weights else 'off'}, loss scale {scaling}, "
        f"{config.optimizer} lr {config.lr:g}, MLP {sizes}, batch {config.batch_size}, {plan.steps} steps, "
        f"data {config.data}, seed {config.seed}",
        "time: " + ", ".join(f"{side} {seconds:.1f} s" for side, seconds in timings.items()),
        f"NaN profiles: device {_NAN_PROFILES.get(device, '?')}, emulator ieee (sim's ops; matmul NaNs are the "
        "default NaN)",
    ]


def _tensor_core(args: argparse.Namespace, device: str, mode: str) -> str | None:
    if args.tensor_core is None:
        return "h100" if (device == "cuda" and mode == "library") else None
    if args.tensor_core.lower() == "none":
        return None
    return args.tensor_core.lower()


def _run(args: argparse.Namespace) -> int:
    check_writable("--dump", args.dump)
    if args.against is not None:
        dump, config, device, mode, steps = _from_dump(args)
        device_records, info, settings = dump.records, dump.device, dump.settings
    else:
        device, mode = args.device or "cpu", args.mode or "exact"
        steps = _DEFAULT_STEPS if args.steps is None else args.steps
        config = _config({**given_train_fields(args), "steps": steps})
    plan = Plan.from_config(config, steps)
    try:
        backend = EmulatorBackend(_tensor_core(args, device, mode))
    except ValueError:
        raise UsageError(f"--tensor-core: unknown GPU {args.tensor_core!r}; accepted: none, a GPU "
                         f"({', '.join(TENSOR_CORES)}), an architecture or an instruction preset") from None
    timings: dict[str, float] = {}
    if args.against is None:
        device_records, info, settings = _run_torch(device, mode, plan, timings)
        if args.dump is not None:
            save_dump(args.dump, device_records, side="torch", mode=mode, config=config.to_dict(), steps=steps,
                      device=info, settings=settings)
    start = time.perf_counter()
    if args.replay:
        emulator_records = replay(device_records, backend, sources=lambda record: plan.source(record.name, record.step))
    elif backend.tensor_core is None:
        emulator_records = record_trainer(plan)  # the trainer's own step
    else:  # the trainer has no tensor-core GEMMs: the reference's loop on the emulator's kinds
        recorder = Recorder(backend)
        run_training(recorder, plan)
        emulator_records = recorder.records
    timings["emulator"] = time.perf_counter() - start
    if args.against is not None and args.dump is not None:
        save_dump(args.dump, emulator_records, side="emulator", mode=mode, config=config.to_dict(), steps=steps,
                  settings={"nan_profile": "ieee", "ftz": False, "tensor_core": backend.impl})
    report = compare_records(device_records, emulator_records, replay=args.replay, strict_nan=args.strict_nan)
    print(format_report(report, _title(device, mode, info, config, plan, backend, timings), max_rows=args.max_rows))
    return 1 if report.unexpected else 0


def _run_torch(device: str, mode: str, plan: Plan, timings: dict[str, float]) -> tuple[list, dict, dict]:
    try:
        from sim.crosscheck.reference import TorchBackend, device_info, torch_settings
        with torch_settings(device) as switches:
            backend = TorchBackend(device, mode)
            start = time.perf_counter()
            recorder = Recorder(backend)
            run_training(recorder, plan)
            timings["torch"] = time.perf_counter() - start
            info = device_info(device)
    except (ImportError, RuntimeError) as error:
        raise UsageError(str(error)) from None
    settings = {"nan_profile": _NAN_PROFILES[device], "ftz": False, "mode": mode, **switches}
    return recorder.records, info, settings


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``argv`` without the ``crosscheck`` word); returns the exit status.

    >>> main(["--against", "/nonexistent/dump.npz"])
    2
    """
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
