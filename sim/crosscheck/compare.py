"""Op-by-op comparison of two sides' records, and the report the CLI prints.

Ops are matched by (step, name). For every output: elements compared, bit-identical count, the
largest ulp distance among differing non-NaN pairs, and NaN agreement (by class, quiet or
signaling, unless ``strict_nan``: then bit for bit). An op that differs is classified:

- ``expected``: the device computed it with a library kernel (``impl`` ``library:...``) from the
  same inputs the emulator saw, so a difference is the library's own rounding;
- ``cascade``: its inputs already differed (only in cascade mode, where each side feeds its own
  results forward), or it exists on one side only after an earlier divergence;
- ``unexpected``: same inputs, an op with defined semantics, different bits: a bug on one side.

In replay mode the emulator ran each op on the device's own inputs, so nothing cascades (and the
final weights, a state rather than an op, are not compared: every optimizer step that made them
is).

>>> import numpy as np
>>> from sim.crosscheck.record import OpRecord
>>> x = [("x", "fp16", np.array([1, 2], np.uint16))]
>>> device = [OpRecord(0, "relu", "relu", "exact", {}, x, [("out", "fp16", np.array([1, 2], np.uint16))])]
>>> emulator = [OpRecord(0, "relu", "relu", "sim", {}, x, [("out", "fp16", np.array([1, 3], np.uint16))])]
>>> report = compare_records(device, emulator)
>>> report.first_divergence.label, report.first_divergence.status, report.elements, report.identical
('step 0 relu', 'unexpected', 2, 1)
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from sim.crosscheck.record import FLOAT_FORMATS, OpRecord
from softfloat16.compare import diff_report, mismatch_mask, ulp_distance

__all__ = ["OpResult", "OutputDiff", "Report", "compare_records", "format_report"]

STATUSES = ("identical", "expected", "cascade", "unexpected")


@dataclasses.dataclass
class OutputDiff:
    """One output (or input) of one op, compared element by element."""

    role: str
    fmt: str
    elements: int
    identical: int
    max_ulp: int | None  # None: no differing pair of non-NaN values
    nan_total: int  # elements where either side is NaN
    nan_agree: int  # ... of which both are NaN and match (by class, or bit for bit)
    shape_mismatch: bool = False
    nan_both: int = 0  # elements where both sides are NaN

    @property
    def differs(self) -> bool:
        return self.shape_mismatch or self.identical != self.elements

    @property
    def nan_bits_only(self) -> bool:
        """Every difference is between two NaNs (their sign or payload: a NaN-profile matter)."""
        nan_pairs_differing = self.nan_both - self.nan_agree
        return self.differs and not self.shape_mismatch and self.elements - self.identical == nan_pairs_differing


def _compare(role: str, fmt: str, device: np.ndarray, emulator: np.ndarray, nan: str) -> OutputDiff:
    if device.shape != emulator.shape:
        size = max(device.size, emulator.size)
        return OutputDiff(role, fmt, size, 0, None, 0, 0, shape_mismatch=True)
    if fmt not in FLOAT_FORMATS:
        same = int(np.count_nonzero(device == emulator))
        return OutputDiff(role, fmt, device.size, same, None, 0, 0)
    bad = mismatch_mask(emulator, device, fmt, nan=nan)
    device_nan, emulator_nan = FLOAT_FORMATS[fmt].is_nan(device), FLOAT_FORMATS[fmt].is_nan(emulator)
    either_nan, both_nan = device_nan | emulator_nan, device_nan & emulator_nan
    distances = np.asarray(ulp_distance(emulator, device, fmt))[bad & ~either_nan]
    return OutputDiff(
        role, fmt, device.size, int(device.size - np.count_nonzero(bad)),
        int(distances.max()) if distances.size else None,
        int(np.count_nonzero(either_nan)), int(np.count_nonzero(both_nan & ~bad)),
        nan_both=int(np.count_nonzero(both_nan)),
    )


@dataclasses.dataclass
class OpResult:
    """The comparison of one op: its outputs, whether its inputs agreed, and its status."""

    key: tuple[int, str]
    label: str
    kind: str
    impl: str
    status: str
    outputs: list[OutputDiff]
    inputs: list[OutputDiff]
    device: OpRecord | None
    emulator: OpRecord | None

    @property
    def elements(self) -> int:
        return sum(o.elements for o in self.outputs)

    @property
    def identical(self) -> int:
        return sum(o.identical for o in self.outputs)


@dataclasses.dataclass
class Report:
    """Every op's result (device order, then ops the device lacks) and the totals."""

    results: list[OpResult]
    replay: bool
    nan: str

    @property
    def elements(self) -> int:
        return sum(r.elements for r in self.results)

    @property
    def identical(self) -> int:
        return sum(r.identical for r in self.results)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def divergent(self) -> list[OpResult]:
        return [r for r in self.results if r.status != "identical"]

    @property
    def first_divergence(self) -> OpResult | None:
        divergent = self.divergent
        return divergent[0] if divergent else None

    @property
    def unexpected(self) -> list[OpResult]:
        return [r for r in self.results if r.status == "unexpected"]

    @property
    def bit_identical(self) -> bool:
        """True when every op exists on both sides and every element agrees."""
        return not self.divergent


def _side_diffs(device: Sequence, emulator: Sequence, nan: str) -> list[OutputDiff]:
    theirs = {role: (fmt, bits) for role, fmt, bits in emulator}
    diffs = []
    for role, fmt, bits in device:
        if role not in theirs:
            diffs.append(OutputDiff(role, fmt, bits.size, 0, None, 0, 0, shape_mismatch=True))
        else:
            diffs.append(_compare(role, fmt, bits, theirs[role][1], nan))
    mine = {role for role, _, _ in device}
    diffs += [OutputDiff(role, fmt, bits.size, 0, None, 0, 0, shape_mismatch=True)
              for role, fmt, bits in emulator if role not in mine]
    return diffs


def compare_records(
    device: Sequence[OpRecord], emulator: Sequence[OpRecord], *, replay: bool = False, strict_nan: bool = False
) -> Report:
    """Compare the device's records with the emulator's (see the module docstring)."""
    nan = "strict" if strict_nan else "class"
    if replay:  # a state (the final weights) is no op: replay has nothing to recompute it from
        device = [r for r in device if r.kind != "state"]
    by_key = {r.key: r for r in emulator}
    device_keys = {r.key for r in device}
    results: list[OpResult] = []
    diverged = False
    pairs = [(d, by_key.get(d.key)) for d in device] + [(None, e) for e in emulator if e.key not in device_keys]
    for dev, emu in pairs:
        record = dev if dev is not None else emu
        if dev is None or emu is None:
            status = "cascade" if diverged else "unexpected"
            outputs = [OutputDiff(role, fmt, bits.size, 0, None, 0, 0, shape_mismatch=True)
                       for role, fmt, bits in record.outputs]
            inputs: list[OutputDiff] = []
        else:
            outputs = _side_diffs(dev.outputs, emu.outputs, nan)
            inputs = _side_diffs(dev.inputs, emu.inputs, nan)
            if not any(o.differs for o in outputs):
                status = "identical"
            elif not replay and (any(i.differs for i in inputs) or (record.kind == "state" and diverged)):
                status = "cascade"
            elif dev.impl.startswith("library"):
                status = "expected"
            else:
                status = "unexpected"
        diverged = diverged or status != "identical"
        where = ("missing on the emulator side: " if emu is None else
                 "missing on the device side: " if dev is None else "")
        results.append(OpResult(record.key, where + record.label(), record.kind,
                                dev.impl if dev is not None else "", status, outputs, inputs, dev, emu))
    return Report(results, replay, nan)


# --- the printed report -------------------------------------------------------------------------


def _ulp(value: int | None) -> str:
    return "-" if value is None else str(value)


def _table(report: Report) -> list[str]:
    groups: dict[str, list[OpResult]] = {}
    for result in report.results:
        groups.setdefault(result.key[1], []).append(result)
    header = (f"{'op':<34} {'kind':<31} {'runs':>5} {'elements':>10} {'identical':>10} {'max ulp':>7} "
              f"{'NaN agree':>11}  status")
    lines = [header, "-" * len(header)]
    for name, results in groups.items():
        outputs = [o for r in results for o in r.outputs]
        ulps = [o.max_ulp for o in outputs if o.max_ulp is not None]
        nan_total, nan_agree = sum(o.nan_total for o in outputs), sum(o.nan_agree for o in outputs)
        counts = {s: sum(r.status == s for r in results) for s in STATUSES}
        status = "ok" if counts["identical"] == len(results) else \
            ", ".join(f"{counts[s]} {s}" for s in STATUSES[1:] if counts[s])
        lines.append(
            f"{name:<34} {results[0].kind:<31} {len(results):>5} {sum(o.elements for o in outputs):>10} "
            f"{sum(o.identical for o in outputs):>10} {_ulp(max(ulps) if ulps else None):>7} "
            f"{(f'{nan_agree}/{nan_total}' if nan_total else '-'):>11}  {status}"
        )
    return lines


def _values(bits: np.ndarray, fmt: str, limit: int = 8) -> str:
    flat = bits.ravel()[:limit]
    if fmt in FLOAT_FORMATS:
        values = FLOAT_FORMATS[fmt].to_float(flat)
        shown = ", ".join(f"{int(b):#x}={v:.6g}" for b, v in zip(flat, np.atleast_1d(values)))
    else:
        shown = ", ".join(str(v) for v in flat.tolist())
    return shown + (", ..." if bits.size > limit else "")


def _detail(result: OpResult, report: Report, max_rows: int) -> list[str]:
    lines = [f"first divergence: {result.label} ({result.kind}; device impl {result.impl or '-'}): "
             f"{result.status.upper()}"]
    record = result.device or result.emulator
    inputs = {d.role: d for d in result.inputs}
    source = "the device's own inputs, replayed" if report.replay else "each side's own inputs"
    lines.append(f"  inputs ({source}):")
    for role, fmt, bits in record.inputs:
        agreement = "" if report.replay or role not in inputs else (
            " [differ between the sides]" if inputs[role].differs else " [identical on both sides]")
        lines.append(f"    {role}: {fmt} {tuple(bits.shape)}{agreement}: {_values(bits, fmt)}")
    if result.device is None or result.emulator is None:
        lines.append("  the op ran on one side only")
        return lines
    emulator_outputs = {role: bits for role, _, bits in result.emulator.outputs}
    for diff, (role, fmt, bits) in zip(result.outputs, result.device.outputs):
        if not diff.differs:
            continue
        lines.append(f"  output {role}: {diff.elements - diff.identical} of {diff.elements} elements differ"
                     f", max ulp {_ulp(diff.max_ulp)} (actual = emulator, expected = device)")
        if diff.nan_bits_only:
            lines.append("    only NaN bit patterns differ: sim's ops follow the ieee NaN profile (its matmul "
                         "returns the default NaN, +qNaN) while the device follows its own (x86: -qNaN for "
                         "invalid operations); compare by class (without --strict-nan) to ignore this")
        if diff.shape_mismatch or role not in emulator_outputs:
            lines.append(f"    shapes differ: device {tuple(bits.shape)}, emulator "
                         f"{tuple(emulator_outputs[role].shape) if role in emulator_outputs else 'none'}")
        elif fmt in FLOAT_FORMATS:
            text = diff_report(emulator_outputs[role], bits, fmt, nan=report.nan, max_rows=max_rows)
            lines.extend("    " + line for line in text.splitlines())
        else:
            lines.append(f"    device {_values(bits, fmt)}; emulator {_values(emulator_outputs[role], fmt)}")
    return lines


def format_report(report: Report, title: Sequence[str] = (), max_rows: int = 5) -> str:
    """The report as text: a title, one table row per op name (all steps together), totals,
    and the first divergent op with its inputs and differing elements."""
    lines = list(title)
    mode = ("replay: every emulator op fed the device's own inputs" if report.replay
            else "cascade: each side feeds its own results forward")
    lines.append(f"comparison: {mode}; NaN compared {'bit for bit' if report.nan == 'strict' else 'by class'}")
    lines.append("")
    lines.extend(_table(report))
    lines.append("")
    total = len(report.results)
    share = "100%" if report.identical == report.elements else \
        f"{min(100.0 * report.identical / report.elements, 99.9999):.4f}%"  # never rounds up to 100%
    lines.append(f"ops compared: {total}; elements: {report.elements}; bit-identical: {report.identical} ({share})")
    final = [r for r in report.results if r.kind == "state"]
    for result in final:
        lines.append(f"final master weights: {result.elements} elements, {result.identical} bit-identical")
    counts = ", ".join(f"{report.count(s)} {s}" for s in STATUSES)
    lines.append(f"ops by status: {counts}")
    first = report.first_divergence
    lines.append("")
    if first is None:
        lines.append("no divergence: every op of every step is bit-identical")
    else:
        lines.extend(_detail(first, report, max_rows))
        if report.unexpected and report.unexpected[0] is not first:
            lines.append(f"first unexpected divergence: {report.unexpected[0].label}")
    return "\n".join(lines)
