"""The fp8 recipe (per-tensor scales, E4M3 forward, E5M2 gradients) against torch on CPU (torch needed)."""
import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crosscheck_cases import (  # noqa: E402
    FP8_CURRENT, FP8_DELAYED, FP8_DIVERGING, FP8_NONE, FP8_STEPS, FP8_STOCHASTIC, emulator_records, plan_for,
)

import softfloat16 as sf  # noqa: E402
from sim.crosscheck import cli, torch_exact  # noqa: E402
from sim.crosscheck.compare import compare_records, format_report  # noqa: E402
from sim.crosscheck.dump import load_dump, save_dump  # noqa: E402
from sim.crosscheck.loop import run_training  # noqa: E402
from sim.crosscheck.record import EmulatorBackend, OpRecord, Recorder, replay  # noqa: E402
from sim.crosscheck.reference import TorchBackend, torch_settings  # noqa: E402

SHORT = 8  # steps of the shorter runs (the diverging one needs 20: NaN from step 18)


@functools.cache
def torch_records(config, steps, mode="exact"):
    with torch_settings("cpu"):
        recorder = Recorder(TorchBackend("cpu", mode))
        run_training(recorder, plan_for(config, steps))
    return tuple(recorder.records)


def _replayed(config, steps, device):
    plan = plan_for(config, steps)
    return replay(list(device), EmulatorBackend(), lambda r: plan.source(r.name, r.step))


def _kinds(records):
    return {r.kind for r in records}


def test_delayed_scaling_is_bit_identical_for_twenty_steps_every_op():
    device, emulator = torch_records(FP8_DELAYED, FP8_STEPS), emulator_records(FP8_DELAYED, FP8_STEPS)
    report = compare_records(device, emulator)
    assert report.bit_identical, format_report(report)
    assert [r.key for r in device] == [r.key for r in emulator]
    assert {r.step for r in device} == set(range(-1, FP8_STEPS + 1))
    assert {"fp8_scale", "fp8_quantize", "scaled_matmul"} <= _kinds(device) and "matmul" not in _kinds(device)
    (final,) = [r for r in report.results if r.kind == "state"]
    assert final.elements == final.identical == 1210
    # the run exercises what the recipe is about: values beyond the delayed scale's range
    # saturate, small values underflow to zero, and the scales move
    saturated = underflow = 0
    for r in device:
        if r.kind == "fp8_quantize":
            (_, _, x), (_, _, scale), (_, fmt, q) = *r.inputs, *r.outputs
            scaled = sf.fp32.to_float(x) * float(sf.fp32.to_float(scale))
            saturated += int(np.count_nonzero(np.abs(scaled) > sf.format(fmt).value(sf.format(fmt).max_finite)))
            underflow += int(np.count_nonzero((scaled != 0) & sf.format(fmt).is_zero(q)))
    assert saturated > 0 and underflow > 0
    scales = {int(bits) for r in device if r.kind == "fp8_scale" for role, _, bits in r.outputs if role == "scale"}
    assert len(scales) > 5


@pytest.mark.parametrize("config", [FP8_CURRENT, FP8_NONE, FP8_STOCHASTIC, FP8_DIVERGING],
                         ids=["current", "none", "stochastic-gradients", "diverging"])
def test_current_none_stochastic_and_a_diverging_run_are_bit_identical(config):
    steps = FP8_STEPS if config is FP8_DIVERGING else SHORT
    device, emulator = torch_records(config, steps), emulator_records(config, steps)
    report = compare_records(device, emulator)
    assert report.bit_identical, format_report(report)
    assert [r.key for r in device] == [r.key for r in emulator]
    if config is FP8_STOCHASTIC:  # gradients rounded stochastically, a new seed for every tensor and step
        seeds = [(r.attrs["rounding"], r.attrs["seed"]) for r in device if r.name.endswith("grad_output.quantize")]
        assert {rounding for rounding, _ in seeds} == {"sr"} and len({seed for _, seed in seeds}) == len(seeds)
        assert {r.impl for r in device if r.name.endswith("grad_output.quantize")} == {"exact:sr"}
    if config is FP8_DIVERGING:  # NaN amaxes enter the history and keep the previous scale; steps are skipped
        history_nan = [r for r in device if r.kind == "fp8_scale" for role, _, b in r.inputs
                       if role == "history" and sf.fp32.is_nan(b).any()]
        assert history_nan
        skipped = [bool(b) for r in device if r.name == "grads.unscale" for role, _, b in r.outputs
                   if role == "found_inf"]
        assert any(skipped)


@pytest.mark.parametrize("config", [FP8_DELAYED, FP8_DIVERGING], ids=["delayed", "diverging"])
def test_replay_of_the_torch_records_is_bit_identical(config):
    device = torch_records(config, FP8_STEPS)
    report = compare_records(device, _replayed(config, FP8_STEPS, device), replay=True)
    assert report.bit_identical and len(report.results) == len(device) - 1


def _flip(records, step, name, role="out", index=0):
    """The records with one bit of one output element flipped (the lowest bit of element ``index``)."""
    changed = []
    for record in records:
        if record.key == (step, name):
            outputs = []
            for r, fmt, bits in record.outputs:
                if r == role:
                    bits = bits.copy()
                    bits.flat[index] ^= 1
                outputs.append((r, fmt, bits))
            record = OpRecord(record.step, record.name, record.kind, record.impl, record.attrs, record.inputs, outputs)
        changed.append(record)
    return changed


def test_a_flipped_bit_in_one_fp8_output_is_found_and_named():
    device, emulator = torch_records(FP8_DELAYED, FP8_STEPS), emulator_records(FP8_DELAYED, FP8_STEPS)
    report = compare_records(_flip(device, 3, "fc2.grad_output.quantize"), emulator)
    first = report.first_divergence
    assert (first.label, first.kind, first.status) == ("step 3 fc2.grad_output.quantize", "fp8_quantize", "unexpected")
    (out,) = first.outputs
    assert (out.fmt, out.elements - out.identical, out.max_ulp) == ("fp8_e5m2", 1, 1)
    text = format_report(report)
    assert "first divergence: step 3 fc2.grad_output.quantize (fp8_quantize" in text and "fp8_e5m2" in text
    assert report.unexpected == [first]  # every op reading it is judged from its (differing) inputs


class _CorruptScale(TorchBackend):
    """A torch side with a bug: at the 5th use of fc1.weight's scale it doubles it."""

    def __init__(self):
        super().__init__("cpu", "exact")
        self.uses = 0

    def _fp8_scale(self, x, fmts, attrs):
        out, impl = super()._fp8_scale(x, fmts, attrs)
        if attrs["format"] == "fp8_e4m3fn" and x["x"].shape == (64, 16):  # fc1.weight
            self.uses += 1
            if self.uses == 5:
                out["scale"].data = out["scale"].data * 2
        return out, impl


def test_a_wrong_scale_on_one_side_is_the_first_divergence_and_cascades():
    plan = plan_for(FP8_DELAYED, 8)
    with torch_settings("cpu"):
        recorder = Recorder(_CorruptScale())
        run_training(recorder, plan)
    report = compare_records(recorder.records, emulator_records(FP8_DELAYED, 8))
    first = report.first_divergence
    assert (first.label, first.status) == ("step 4 fc1.weight.scale", "unexpected"), format_report(report)
    assert [o.role for o in first.outputs if o.differs] == ["scale"]
    assert report.unexpected == [first] and report.count("cascade") > 10
    replayed = compare_records(recorder.records, _replayed(FP8_DELAYED, 8, recorder.records), replay=True)
    assert [r.label for r in replayed.unexpected] == ["step 4 fc1.weight.scale"]


def test_library_mode_divergences_are_named_and_expected():
    device = torch_records(FP8_DELAYED, FP8_STEPS, "library")
    report = compare_records(device, _replayed(FP8_DELAYED, FP8_STEPS, device), replay=True)
    assert not report.unexpected, format_report(report)
    assert all(r.impl.startswith("library:") for r in report.divergent)
    impls = {r.impl for r in device if r.kind in ("fp8_scale", "fp8_quantize", "scaled_matmul")}
    assert impls == {"library:torch.log2 (cpu)", "library:Tensor.to(torch.float8_e4m3fn) (cpu)",
                     "library:Tensor.to(torch.float8_e5m2) (cpu)", "library:torch._scaled_mm (cpu)"}
    divergent = {r.kind for r in report.divergent}
    assert "scaled_matmul" in divergent  # another summation order
    cascade = compare_records(device, emulator_records(FP8_DELAYED, FP8_STEPS))
    assert not cascade.unexpected, format_report(cascade)


def _run(backend, kind, inputs, **attrs):
    recorder = Recorder(backend)
    values = {role: recorder.constant(np.asarray(bits), fmt) for role, (bits, fmt) in inputs.items()}
    out = recorder.run(kind, kind, values, **attrs)
    return {role: recorder.backend.to_bits(v.data, v.fmt) for role, v in out.items()}


def _f32(*values):
    return sf.fp32.from_float(np.array(values, dtype=np.float64))


def _scalar(value):
    return np.asarray(sf.fp32.from_float(np.float64(value)))


def test_library_differences_on_constructed_inputs():
    """What the library calls do differently, on inputs built to show it: torch's E5M2 cast
    overflows to inf where the recipe saturates; a rounded log2 of a rounded quotient picks a
    scale twice too large when fmax / amax lies just below a power of two."""
    exact, library, sim = TorchBackend("cpu", "exact"), TorchBackend("cpu", "library"), EmulatorBackend()
    inputs = {"x": (_f32(62000.0, -1e6, 1.0), "fp32"), "scale": (_scalar(1.0), "fp32")}
    attrs = {"dst": "fp8_e5m2", "rounding": "rne", "seed": None}
    want = _run(sim, "fp8_quantize", inputs, **attrs)["out"]
    assert want.tolist() == [0x7B, 0xFB, 0x3C]  # +-57344, 1
    assert np.array_equal(_run(exact, "fp8_quantize", inputs, **attrs)["out"], want)
    assert _run(library, "fp8_quantize", inputs, **attrs)["out"].tolist() == [0x7C, 0xFC, 0x3C]  # +-inf
    amax = 14.0 + 2.0**-20  # one ulp above 448 / 2**5: the exact exponent is 4, but 448 / amax rounds to
    # 32 - 2**-19 in FP32 and its log2, 5 - 8.6e-8, to 5.0
    inputs = {"x": (_f32(amax, -1.0), "fp32"), "history": (np.zeros(0, np.uint32), "fp32"),
              "previous": (_scalar(1.0), "fp32")}
    attrs = {"format": "fp8_e4m3fn", "mode": "current", "margin": 0, "length": 1}
    want = _run(sim, "fp8_scale", inputs, **attrs)
    assert float(want["scale"].view(np.float32)) == 16.0
    assert all(np.array_equal(v, want[k]) for k, v in _run(exact, "fp8_scale", inputs, **attrs).items())
    assert float(_run(library, "fp8_scale", inputs, **attrs)["scale"].view(np.float32)) == 32.0


def test_exact_fp8_ops_match_the_emulator_on_random_and_special_inputs():
    """Each fp8 kind, torch's exact side against the emulator's, on inputs chosen to reach every
    branch: random FP32 bit patterns (NaN, inf, subnormals), values around the formats' largest
    and smallest values and ties, scales from 2**-127 to 2**127, empty and NaN histories."""
    rng = np.random.default_rng(8)
    exact, sim = TorchBackend("cpu", "exact"), EmulatorBackend()

    def same(kind, inputs, **attrs):
        got, want = _run(exact, kind, inputs, **attrs), _run(sim, kind, inputs, **attrs)
        assert got.keys() == want.keys()
        for role in want:
            fmt = kind == "fp8_quantize" and attrs["dst"] or "fp32"
            bad = (got[role] != want[role]) & ~(sf.format(fmt).is_nan(got[role]) & sf.format(fmt).is_nan(want[role]))
            assert not bad.any(), (kind, role, attrs, got[role][bad][:5], want[role][bad][:5])

    special = _f32(0.0, -0.0, np.inf, -np.inf, np.nan, 448.0, 464.0, 480.0, 57344.0, 61440.0, 2.0**-149,
                   2.0**-10, 2.0**-9 * 1.5, 2.0**-17, 3.0 * 2.0**-18, 3.4e38)
    values = np.concatenate([rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32), special,
                             _f32(*(rng.standard_normal(5000) * 2.0 ** rng.integers(-30, 20, 5000)))])
    for dst in ("fp8_e4m3fn", "fp8_e5m2"):
        for scale in (2.0**-127, 2.0**-20, 1.0, 2.0**7, 2.0**40, 2.0**127):
            same("fp8_quantize", {"x": (values, "fp32"), "scale": (_scalar(scale), "fp32")}, dst=dst, rounding="rne",
                 seed=None)
    amaxes = np.concatenate([special, values[:300], _f32(*(448.0 / 2.0 ** np.arange(-120, 150))),
                             _f32(*(57344.0 / 2.0 ** np.arange(-110, 160) * (1 + 2.0**-23))),
                             _f32(*(448.0 / 2.0 ** np.arange(-120, 150) * (1 - 2.0**-24)))])
    previous, empty = (_scalar(2.0**-3), "fp32"), (np.zeros(0, np.uint32), "fp32")
    for fmt in ("fp8_e4m3fn", "fp8_e5m2"):
        chosen = np.concatenate([special, rng.choice(amaxes, 150)])
        for amax, margin in zip(chosen, rng.choice([0, 3], chosen.size)):
            x = (np.array([0, amax], np.uint32), "fp32")
            same("fp8_scale", {"x": x, "history": empty, "previous": previous}, format=fmt, mode="current",
                 margin=int(margin), length=1)
        same("fp8_scale", {"x": (special, "fp32"), "history": empty, "previous": previous}, format=fmt, mode="none",
             margin=0, length=1)
        for margin in rng.choice([0, 3], 100):  # delayed: histories of up to 4 earlier amaxes, full or not
            history = rng.choice(amaxes, rng.integers(0, 5)).astype(np.uint32)
            x = (rng.choice(amaxes, 3).astype(np.uint32), "fp32")
            same("fp8_scale", {"x": x, "history": (history, "fp32"), "previous": previous},
                 format=fmt, mode="delayed", margin=int(margin), length=4)
    for trial in range(40):
        m, k, n = rng.integers(1, 12, 3)
        a_fmt, b_fmt = rng.choice(["fp8_e4m3fn", "fp8_e5m2"], 2)
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b = rng.integers(0, 256, (k, n)).astype(np.uint8)
        if trial % 2:  # exponent field below all ones: finite values only, so the sums are not all NaN
            a, b = a & 0x77, b & 0x77
        scales = _f32(*(2.0 ** rng.integers(-127, 128, 2)))
        same("scaled_matmul", {"a": (a, a_fmt), "b": (b, b_fmt), "a_scale_inv": (scales[0], "fp32"),
                               "b_scale_inv": (scales[1], "fp32")}, accumulate="fp32")


def test_stochastic_rounding_matches_the_emulator():
    """torch_exact.stochastic_round_fp8, fed softfloat16's Philox words, against sf.convert(...,
    rounding="sr", saturate=True) on random FP32 patterns, specials and values near ulp/2."""
    rng = np.random.default_rng(9)
    near_half = _f32(*((1 + 2.0**-4 * rng.integers(0, 8, 2000) + 2.0**-4 * 0.5 * rng.uniform(0.99, 1.01, 2000))
                       * 2.0 ** rng.integers(-20, 16, 2000)))
    values = np.concatenate([rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32), near_half,
                             _f32(0.0, -0.0, np.inf, -np.inf, np.nan, 448.0, 470.0, 500.0, 57344.0, 61440.0, 1e6,
                                  2.0**-149, 2.0**-12, 2.0**-17, 3.4e38)])
    x = torch.from_numpy(values.view(np.int32)).view(torch.float32)
    for fmt, dtype in ((sf.fp8_e4m3fn, torch.float8_e4m3fn), (sf.fp8_e5m2, torch.float8_e5m2)):
        for seed in (0, 2**64 - 1, 7345):
            words = torch.from_numpy(sf.stochastic.random_words(seed, values.shape).astype(np.int64))
            got = torch_exact.stochastic_round_fp8(x, dtype, words).view(torch.uint8).numpy()
            want = np.asarray(sf.convert(values, src=sf.fp32, dst=fmt, rounding="sr", seed=seed, saturate=True))
            bad = (got != want) & ~(fmt.is_nan(got) & fmt.is_nan(want))
            assert not bad.any(), (fmt.name, seed, values[bad][:5], got[bad][:5], want[bad][:5])


def test_fp8_dump_round_trip_and_cli(tmp_path, capsys):
    """FP8 operands are stored as uint8 bit patterns; a dump replays bit-identically."""
    device = list(torch_records(FP8_CURRENT, SHORT))
    path = tmp_path / "fp8.npz"
    save_dump(path, device, side="torch", mode="exact", config=FP8_CURRENT.to_dict(), steps=SHORT)
    loaded = load_dump(path).records
    assert [(r.key, r.kind, r.attrs) for r in loaded] == [(r.key, r.kind, r.attrs) for r in device]
    formats = {(fmt, bits.dtype.name) for r in loaded for _, fmt, bits in r.inputs + r.outputs}
    assert {("fp8_e4m3fn", "uint8"), ("fp8_e5m2", "uint8")} <= formats
    assert compare_records(device, loaded).bit_identical
    argv = ["--precision", "fp8", "--fp8-scaling", "none", "--steps", "3", "--data", "synthetic", "--hidden", "8",
            "--batch-size", "4", "--dump", str(tmp_path / "cli.npz")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "run: fp8 (E4M3 forward, E5M2 gradients, none scaling)" in out and "no divergence" in out
    assert cli.main(["--against", str(tmp_path / "cli.npz"), "--replay"]) == 0
