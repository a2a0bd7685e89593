"""The torch reference on CPU: bit-identical to the emulator in exact mode, op by op (torch needed)."""
import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crosscheck_cases import BF16, FP16_DYNAMIC, STEPS, emulator_records, plan_for  # noqa: E402

import softfloat16 as sf  # noqa: E402
import softfloat16.linalg as linalg  # noqa: E402
from sim import fp32math  # noqa: E402
from sim.crosscheck import cli, torch_exact  # noqa: E402
from sim.crosscheck.compare import compare_records, format_report  # noqa: E402
from sim.crosscheck.dump import load_dump  # noqa: E402
from sim.crosscheck.loop import run_training  # noqa: E402
from sim.crosscheck.record import EmulatorBackend, Recorder, replay  # noqa: E402
from sim.crosscheck.reference import TorchBackend, torch_settings  # noqa: E402


@functools.cache
def torch_records(config, mode="exact", steps=STEPS):
    with torch_settings("cpu"):
        recorder = Recorder(TorchBackend("cpu", mode))
        run_training(recorder, plan_for(config, steps))
    return tuple(recorder.records)


def _nan_elements(report):
    return sum(o.nan_total for r in report.results for o in r.outputs)


@pytest.mark.parametrize("config", [FP16_DYNAMIC, BF16], ids=["fp16-dynamic", "bf16"])
def test_exact_mode_is_bit_identical_every_op_every_step(config):
    device, emulator = torch_records(config), emulator_records(config)
    report = compare_records(device, emulator)
    assert report.bit_identical, format_report(report)  # any difference fails, and says where
    assert [r.key for r in device] == [r.key for r in emulator]  # the same ops, in the same order
    assert {r.step for r in device} == set(range(-1, STEPS + 1))  # init, every step, final
    assert report.identical == report.elements > 100_000
    (final,) = [r for r in report.results if r.kind == "state"]
    n_parameters = sum(int(np.prod(p.shape)) for p in plan_for(config).init_params)
    assert final.elements == final.identical == n_parameters  # the final master weights
    nan_total = _nan_elements(report)
    if config is FP16_DYNAMIC:  # overflowing steps: NaN gradients, compared by class, all agree
        assert nan_total > 1000
        assert sum(o.nan_agree for r in report.results for o in r.outputs) == nan_total
        found = [bool(b) for r in device if r.name == "grads.unscale" for role, _, b in r.outputs
                 if role == "found_inf"]
        assert 0 < sum(found) < STEPS  # some steps skipped, most not


@pytest.mark.parametrize("config", [FP16_DYNAMIC, BF16], ids=["fp16-dynamic", "bf16"])
def test_replay_judges_every_op_on_the_devices_inputs(config):
    device = torch_records(config)
    plan = plan_for(config)
    replayed = replay(list(device), EmulatorBackend(), lambda r: plan.source(r.name, r.step))
    report = compare_records(device, replayed, replay=True)
    assert report.bit_identical and len(report.results) == len(device) - 1


def test_strict_nan_shows_only_the_nan_profile_difference():
    report = compare_records(torch_records(FP16_DYNAMIC), emulator_records(FP16_DYNAMIC), strict_nan=True)
    divergent_outputs = [o for r in report.divergent for o in r.outputs if o.differs]
    assert divergent_outputs and all(o.nan_bits_only for o in divergent_outputs)
    assert "only NaN bit patterns differ" in format_report(report)


def test_library_mode_diverges_only_where_a_library_kernel_ran():
    config, steps = FP16_DYNAMIC, 6
    device = torch_records(config, "library", steps)
    plan = plan_for(config, steps)
    replayed = replay(list(device), EmulatorBackend(), lambda r: plan.source(r.name, r.step))
    report = compare_records(device, replayed, replay=True)
    assert not report.unexpected, format_report(report)
    assert report.count("expected") > 0  # torch's cross_entropy (its own exp/log) at least
    assert all(r.impl.startswith("library:") for r in report.divergent)
    cascade = compare_records(device, emulator_records(config, steps))
    assert not cascade.unexpected, format_report(cascade)


def _tensor(bits, fmt):
    dtype, view = {"fp16": (torch.float16, np.int16), "bf16": (torch.bfloat16, np.int16),
                   "fp32": (torch.float32, np.int32)}[fmt.name]
    return torch.from_numpy(np.asarray(bits, fmt.dtype).view(view).copy()).view(dtype)


def _bits(t, fmt):
    return t.view({2: torch.int16, 4: torch.int32}[t.element_size()]).numpy().view(fmt.dtype)


def _assert_same(got, expected, fmt):
    nan = ~fmt.eq(got, got) & ~fmt.eq(expected, expected)
    bad = (got != expected) & ~nan
    assert not bad.any(), [(hex(g), hex(e)) for g, e in zip(got[bad][:5], expected[bad][:5])]
    assert np.array_equal(~fmt.eq(got, got), ~fmt.eq(expected, expected))


def _fp32_samples(rng, n):
    random = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    special = sf.fp32.from_float(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.0, 88.72, -103.9,
                                           -87.3, 1e-38, 3.4e38]))
    normal = sf.fp32.from_float(rng.standard_normal(n) * 10)
    return np.concatenate([random, special, normal]).astype(np.uint32)


def test_exact_primitives_match_the_emulator():
    rng = np.random.default_rng(2024)
    x = _fp32_samples(rng, 4000)
    t = _tensor(x, sf.fp32)
    _assert_same(_bits(torch_exact.exp32(t), sf.fp32), fp32math.exp(x), sf.fp32)
    _assert_same(_bits(torch_exact.log32(t), sf.fp32), fp32math.log(x), sf.fp32)
    _assert_same(_bits(torch_exact.sqrt(t), sf.fp32), sf.fp32.sqrt(x), sf.fp32)
    b, c = np.roll(x, 1), np.roll(x, 7)
    _assert_same(_bits(torch_exact.fma32(t, _tensor(b, sf.fp32), _tensor(c, sf.fp32)), sf.fp32),
                 sf.fp32.fma(x, b, c), sf.fp32)
    for fmt in (sf.fp16, sf.bf16):  # every 16-bit pattern
        every = np.arange(1 << 16, dtype=np.uint16)
        _assert_same(_bits(torch_exact.sqrt(_tensor(every, fmt)), fmt), fmt.sqrt(every), fmt)


def test_torch_arithmetic_of_the_shared_exp_log_matches_the_emulated_one():
    """exp32/log32 run fp32math's own steps; what differs is only the arithmetic object, so each of
    its operations is checked against fp32math.EMULATED's, bit for bit."""
    x = _fp32_samples(np.random.default_rng(5), 4000)
    y = np.roll(x, 3)
    t, u = _tensor(x, sf.fp32), _tensor(y, sf.fp32)
    ours, theirs = fp32math.EMULATED, torch_exact.TorchFp32(t.device)
    for name in ("add", "sub", "mul", "div"):
        _assert_same(_bits(getattr(theirs, name)(t, u), sf.fp32), getattr(ours, name)(x, y), sf.fp32)
    _assert_same(_bits(theirs.fma(t, u, t), sf.fp32), ours.fma(x, y, x), sf.fp32)
    _assert_same(_bits(theirs.neg(t), sf.fp32), ours.neg(x), sf.fp32)
    assert np.array_equal(theirs.lt(t, u).numpy(), ours.lt(x, y))
    assert np.array_equal(theirs.isnan(t).numpy(), ours.isnan(x))
    assert np.array_equal(theirs.bits(t).numpy(), ours.bits(x))  # every pattern, sign bit set or not
    assert np.array_equal(_bits(theirs.from_bits(theirs.bits(t)), sf.fp32), x)
    integers = np.arange(-150, 151, dtype=np.int64)
    assert np.array_equal(_bits(theirs.from_int(torch.from_numpy(integers)), sf.fp32), ours.from_int(integers))
    assert _bits(theirs.const(fp32math.NEG_INF), sf.fp32) == ours.const(fp32math.NEG_INF)


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16, sf.fp32], ids=lambda f: f.name)
def test_exact_matmul_is_the_sequential_kernel(fmt):
    rng = np.random.default_rng(7)
    for trial in range(30):
        m, k, n = rng.integers(1, 10, 3)
        scale = rng.choice([1.0, 1e-3, 1e3] if fmt is sf.fp16 else [1.0, 1e-20, 1e20, 1e-38])
        a, b = fmt.from_float(rng.standard_normal((m, k)) * scale), fmt.from_float(rng.standard_normal((k, n)))
        if trial % 5 == 0:  # raw bit patterns: infinities, NaNs, subnormals
            a = rng.integers(0, 1 << fmt.width, (m, k)).astype(fmt.dtype)
        for out in (fmt, sf.fp32):
            dtype = _tensor(np.zeros(1, out.dtype), out).dtype
            got = _bits(torch_exact.matmul(_tensor(a, fmt), _tensor(b, fmt), dtype), out)
            _assert_same(got, linalg.matmul(a, b, fmt, out_format=out), out)


def test_cli_on_cpu(tmp_path, capsys):
    path = tmp_path / "cpu.npz"
    argv = ["--device", "cpu", "--steps", "4", "--precision", "bf16", "--data", "synthetic", "--hidden", "8",
            "--batch-size", "4", "--dump", str(path)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "exact mode" in out and "no divergence: every op of every step is bit-identical" in out
    dump = load_dump(path)
    assert (dump.side, dump.mode, dump.steps) == ("torch", "exact", 4)
    assert dump.device["torch"] == torch.__version__ and dump.settings["nan_profile"] == "x86"
    assert dump.settings["deterministic_algorithms"] and not dump.settings["tf32"]
    assert cli.main(["--against", str(path), "--replay"]) == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_cuda_without_a_gpu_is_a_usage_error(capsys):
    assert cli.main(["--device", "cuda", "--steps", "1", "--data", "synthetic", "--hidden", "4"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_torch_settings_are_restored():
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cuda.matmul.allow_tf32)
    with torch_settings("cpu") as settings:
        assert torch.are_deterministic_algorithms_enabled() and settings["tf32"] is False
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cuda.matmul.allow_tf32) == before


@pytest.mark.parametrize("flags", [["--momentum", "0", "--weight-decay", "0.01"],
                                   ["--optimizer", "adam", "--weight-decay", "0.001", "--no-master-weights",
                                    "--precision", "bf16"]], ids=["sgd-no-momentum-decay", "adam-decay-bf16"])
def test_every_training_flag_of_sim_train_runs_bit_identical(flags, capsys):
    """The flags the cross-check shares with `sim train` reach both sides (here: momentum, weight
    decay, master weights), and the sides still agree bit for bit."""
    argv = ["--steps", "3", "--data", "synthetic", "--hidden", "4", "--batch-size", "4", *flags]
    assert cli.main(argv) == 0
    assert "no divergence" in capsys.readouterr().out
