"""The FP8 and block-scaled training recipes (sim.gemm), against oracles that do not use the core:
ml_dtypes casts, numpy float32 arithmetic for FP32 sums, fractions.Fraction for exact values."""
from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import softfloat16 as sf
import softfloat16.mx as mx
from sim import cli
from sim.arguments import UsageError, train_config
from sim.gemm import Accumulation, Fp8Products, TensorScaling, amax_bits, scale_exponent
from sim.tensor import Tensor, gradients, quantized_matmul
from sim.train import TrainConfig, Trainer

F32 = sf.fp32
FP8_MAX = {"fp8_e4m3fn": 448.0, "fp8_e5m2": 57344.0}
ML_DTYPES = {"fp8_e4m3fn": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}
TINY = dict(data="synthetic", hidden=(32,), batch_size=8, steps=4)


def random_fp32(rng: np.random.Generator, shape: tuple[int, ...], spread: int = 8) -> np.ndarray:
    """FP32 bits of values with magnitudes over 2**-spread .. 2**spread, some exact zeros."""
    values = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
    values[rng.random(shape) < 0.05] = 0.0
    return values.astype(np.float32).view(np.uint32)


# --- scales ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmax", [448.0, 57344.0, 6.0])
@pytest.mark.parametrize("margin", [0, 2])
def test_scale_exponent_is_the_largest_power_of_two_that_fits(fmax, margin):
    rng = np.random.default_rng(1)
    amaxes = np.abs(rng.standard_normal(300) * np.exp2(rng.integers(-60, 60, 300))).astype(np.float32)
    amaxes = np.concatenate([amaxes, np.float32([fmax, fmax / 2, fmax * 1.0000001, 2.0**-149])])
    for amax in amaxes.astype(np.float64):
        e = scale_exponent(fmax, amax, margin)
        exact = Fraction(fmax) / Fraction(amax)
        free = e + margin  # the exponent before the margin: 2**free <= fmax/amax < 2**(free+1)
        if abs(free) < 127 - margin:
            assert Fraction(2) ** free <= exact < Fraction(2) ** (free + 1), (fmax, amax, e)
        else:  # clamped to FP32's exact powers of two
            assert abs(e) == 127


def test_delayed_scaling_uses_the_largest_amax_of_the_last_uses():
    rng = np.random.default_rng(2)
    scaling = TensorScaling(sf.fp8_e4m3fn, "delayed", history=3, margin=1)
    amaxes = [0.0] + list(np.abs(rng.standard_normal(20)).astype(np.float32)) + [float("nan"), 1.0, 2.0, 3.0, 4.0]
    previous_scale, seen = 1.0, []
    for amax in amaxes:
        window = seen[-3:]
        expected = previous_scale
        if window and all(math.isfinite(v) for v in window) and max(window) > 0:
            expected = 2.0 ** (math.floor(math.log2(Fraction(448) / Fraction(max(window)))) - 1)
        assert float(scaling.scale_for(np.float32(amax))) == expected, (seen, amax)
        previous_scale = expected
        seen.append(float(np.float32(amax)))
    assert scaling.history == seen[-3:]


def test_current_and_no_scaling():
    current = TensorScaling(sf.fp8_e5m2, "current", margin=0)
    assert float(current.scale_for(np.float32(3.0))) == 2.0**14  # 57344 / 3 = 19114.7 -> 2**14
    assert float(current.scale_for(np.float32(0.0))) == 2.0**14  # a zero tensor keeps the scale
    assert current.history == []
    assert float(TensorScaling(sf.fp8_e5m2, "none").scale_for(np.float32(1e-30))) == 1.0


def test_evaluation_does_not_record():
    scaling = TensorScaling(sf.fp8_e4m3fn, "delayed", history=4)
    scaling.scale_for(np.float32(2.0))
    scaling.scale_for(np.float32(100.0), record=False)
    assert scaling.history == [2.0]


def test_amax_bits_reads_magnitudes_and_nan():
    bits = np.float32([-7.5, 3.0, -0.0]).view(np.uint32)
    assert np.uint32(amax_bits(bits)).view(np.float32) == 7.5
    assert np.isnan(np.uint32(amax_bits(np.float32([1.0, np.nan]).view(np.uint32))).view(np.float32))


# --- the fp8 products, against ml_dtypes and numpy float32 ------------------------------------------

def oracle_cast(bits: np.ndarray, scale: float, fmt: str) -> np.ndarray:
    """x * scale in float32 (exact: a power of two), clamped to the format's range, RNE via ml_dtypes."""
    scaled = bits.view(np.float32) * np.float32(scale)
    clamped = np.clip(scaled, -FP8_MAX[fmt], FP8_MAX[fmt])
    return clamped.astype(ML_DTYPES[fmt])


def oracle_product(a: np.ndarray, b: np.ndarray, a_inv: float, b_inv: float) -> np.ndarray:
    """Sequential float32 sums of exact products (ml_dtypes values), times the inverse scales."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        out = out + a32[:, k:k + 1] * b32[k:k + 1, :]  # each product exact in float32, each sum rounded once
    return (out * np.float32(a_inv)) * np.float32(b_inv)


@pytest.mark.parametrize("mode", ["current", "none"])
def test_fp8_forward_and_backward_match_ml_dtypes_and_float32(mode):
    rng = np.random.default_rng(3)
    x_bits, w_bits, g_bits = random_fp32(rng, (6, 40)), random_fp32(rng, (40, 5), 3), random_fp32(rng, (6, 5), 20)
    fp8 = Fp8Products(Accumulation(), ["fc1"], mode, None, 0 if mode == "current" else None, "rne", seed=0)
    fp8.begin_step(0)
    x = Tensor(x_bits, F32, requires_grad=True)
    w = Tensor(w_bits, F32, requires_grad=True)
    y = quantized_matmul(x, w, fp8, "fc1")
    dx, dw = gradients(y, [x, w], seed=g_bits)

    def scale_of(bits: np.ndarray, fmt: str) -> float:
        if mode == "none":
            return 1.0
        amax = float(np.max(np.abs(bits.view(np.float32))))
        return 2.0 ** math.floor(math.log2(Fraction(FP8_MAX[fmt]) / Fraction(amax)))

    sx, sw, sg = scale_of(x_bits, "fp8_e4m3fn"), scale_of(w_bits, "fp8_e4m3fn"), scale_of(g_bits, "fp8_e5m2")
    xq, wq, gq = (oracle_cast(x_bits, sx, "fp8_e4m3fn"), oracle_cast(w_bits, sw, "fp8_e4m3fn"),
                  oracle_cast(g_bits, sg, "fp8_e5m2"))
    np.testing.assert_array_equal(y.data, oracle_product(xq, wq, 1 / sx, 1 / sw).view(np.uint32))
    np.testing.assert_array_equal(dx, oracle_product(gq, wq.T, 1 / sg, 1 / sw).view(np.uint32))
    np.testing.assert_array_equal(dw, oracle_product(xq.T, gq, 1 / sx, 1 / sg).view(np.uint32))
    # the measurements: underflow and saturation of each quantisation, counted independently
    stats = {s.tensor: s for s in fp8.stats}
    for name, bits, q, scale, fmt in (("fc1.input", x_bits, xq, sx, "fp8_e4m3fn"),
                                      ("fc1.weight", w_bits, wq, sw, "fp8_e4m3fn"),
                                      ("fc1.grad_output", g_bits, gq, sg, "fp8_e5m2")):
        values = bits.view(np.float32).astype(np.float64)
        assert stats[name].scale == scale and stats[name].amax == np.max(np.abs(values))
        assert stats[name].nonzero == np.count_nonzero(values)
        assert stats[name].underflow == np.count_nonzero((values != 0) & (q.astype(np.float64) == 0))
        assert stats[name].saturated == np.count_nonzero(np.abs(values * scale) > FP8_MAX[fmt])
    if mode == "none":  # the spread of 2**+-20 does not fit E5M2 unscaled: both effects are there
        assert stats["fc1.grad_output"].underflow > 0 and stats["fc1.grad_output"].saturated > 0


def test_stochastic_gradient_rounding_is_unbiased_in_the_mean_and_seeded():
    g = (np.full((64, 64), 1.0 + 2.0**-4, np.float32) * np.float32(2.0**-3)).view(np.uint32)  # between E5M2 values
    fp8 = Fp8Products(Accumulation(), ["fc1"], "none", None, None, "sr", seed=7)
    fp8.begin_step(3)
    q1, _ = fp8.quantize("fc1.grad_output", g)
    q2, _ = fp8.quantize("fc1.grad_output", g)
    np.testing.assert_array_equal(q1, q2)  # same step, tensor and use: the same draws
    fp8.begin_step(4)
    q3, _ = fp8.quantize("fc1.grad_output", g)
    assert not np.array_equal(q1, q3)
    values = q1.view(ml_dtypes.float8_e5m2).astype(np.float64)
    assert set(np.unique(values)) == {0.125, 0.15625}
    # 1.0625 lies a quarter of the way from 1 to 1.25: P(up) = 1/4 (4096 draws, 5 standard errors)
    share = np.mean(values == 0.15625)
    assert abs(share - 0.25) < 5 * math.sqrt(0.25 * 0.75 / values.size)


# --- accumulation -----------------------------------------------------------------------------------

def truncating_block_sum(pairs: list[tuple[Fraction, Fraction]], c: Fraction, fraction_bits: int) -> Fraction:
    """The tensor-core adder on one block (Fraction arithmetic, normal nonzero factors): align on the
    largest sum of the factors' exponents (the accumulator's own exponent), truncate each term
    toward zero, add exactly, round toward zero to FP32 (normal range here)."""
    def exponent(x: Fraction) -> int:
        return math.floor(math.log2(abs(x)))

    terms = [(c, exponent(c) if c else -133)] + [(x * y, exponent(x) + exponent(y)) for x, y in pairs]
    quantum = Fraction(2) ** (max(e for _, e in terms) - fraction_bits)
    total = sum((abs(t) // quantum) * quantum * (1 if t > 0 else -1) for t, _ in terms)
    if total == 0:
        return Fraction(0)
    step = Fraction(2) ** (exponent(total) - 23)
    return (abs(total) // step) * step * (1 if total > 0 else -1)


@pytest.mark.parametrize("promote_every", [None, 32, 48])
def test_tensorcore_accumulation_with_promotion(promote_every):
    rng = np.random.default_rng(5)
    k, fraction_bits, block = 96, 13, 16
    a = sf.fp16.from_float(rng.uniform(0.5, 1.0, (3, k)) * np.exp2(rng.integers(-6, 3, (3, k))))
    b = sf.fp16.from_float(rng.uniform(0.5, 1.0, (k, 2)))
    core = sf.linalg.TensorCore(products_per_block=block, fraction_bits=fraction_bits)
    got = Accumulation("tensorcore", core, promote_every).matmul(a, b, sf.fp16, F32)
    av, bv = a.view(np.float16).astype(np.float64), b.view(np.float16).astype(np.float64)
    chunk = promote_every or k
    for i in range(3):
        for j in range(2):
            total = np.float32(0.0)
            for start in range(0, k, chunk):
                c = Fraction(0)
                for s in range(start, min(start + chunk, k), block):
                    pairs = [(Fraction(av[i, t]), Fraction(bv[t, j])) for t in range(s, min(s + block, start + chunk))]
                    c = truncating_block_sum(pairs, c, fraction_bits)
                total = np.float32(total + np.float32(float(c)))  # promotion: an FP32 addition
            assert got[i, j] == np.float32(total).view(np.uint32), (i, j)


# --- block-scaled products -------------------------------------------------------------------------

@pytest.mark.parametrize("precision", ["mxfp8", "nvfp4"])
def test_block_scaled_forward_is_the_blockwise_exact_sum(precision):
    """y = sum over blocks (in order, FP32) of the exact dot product of dequantised blocks,
    rounded once to FP32 (and times the tensor scales' FP32 product for nvfp4)."""
    trainer = Trainer(TrainConfig(precision=precision, **TINY))
    products = trainer.products
    rng = np.random.default_rng(6)
    x, w = random_fp32(rng, (4, 64), 4), trainer.params[0]
    products.begin_step(0)
    y, _ = products.forward("fc1", x, w)
    xq = mx.quantize(x, products.fmt, axis=1, src=F32)
    wq = mx.quantize(w, products.fmt, axis=0, src=F32)
    block = products.block_size
    # element values times block scales, without the per-tensor scale (applied at the end)
    xv = (dataclasses.replace(xq, tensor_scale=None) if xq.tensor_scale is not None else xq).dequantize(np.float64)
    wv = (dataclasses.replace(wq, tensor_scale=None) if wq.tensor_scale is not None else wq).dequantize(np.float64)
    for i in range(4):
        for j in range(0, 32, 7):
            total = np.float32(0.0)
            for s in range(0, 64, block):
                exact = sum(Fraction(xv[i, t]) * Fraction(wv[t, j]) for t in range(s, s + block))
                total = np.float32(total + np.float32(float(exact)))  # exact -> FP32 once (float() is exact here)
            if precision == "nvfp4":
                factor = np.float32(float(Fraction(float(np.uint32(xq.tensor_scale).view(np.float32)))
                                          * Fraction(float(np.uint32(wq.tensor_scale).view(np.float32)))))
                total = np.float32(total * factor)
            assert y[i, j] == np.float32(total).view(np.uint32), (i, j)


# --- training runs ----------------------------------------------------------------------------------

RECIPES = [dict(precision="fp8"), dict(precision="fp8", fp8_scaling="current", fp8_margin=1),
           dict(precision="fp8", fp8_scaling="none", loss_scale="static", scale=64.0),
           dict(precision="fp8", grad_rounding="sr", accumulate="tensorcore", tc_fraction_bits=13, promote_every=16),
           dict(precision="mxfp8"), dict(precision="nvfp4", grad_rounding="sr")]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: "-".join(str(v) for v in r.values()))
def test_resume_is_bit_identical_and_evaluation_changes_nothing(recipe, tmp_path):
    config = TrainConfig(**{**TINY, "steps": 6}, **recipe)
    whole = Trainer(config)
    for _ in range(6):
        whole.train_step()
        whole.evaluate(whole.data.x_test, whole.data.y_test)  # must not touch the amax history
    half = Trainer(dataclasses.replace(config, steps=3))
    half.run(checkpoint=str(tmp_path / "state.npz"))
    resumed = Trainer.resume(str(tmp_path / "state.npz"), config)
    resumed.run()
    assert resumed.weights_sha256() == whole.weights_sha256()
    assert resumed.products.state_dict() == whole.products.state_dict()
    assert resumed.summary()["per_step"] == whole.summary()["per_step"]
    plain = Trainer(config)
    plain.run()
    assert plain.weights_sha256() == whole.weights_sha256()


def test_the_json_reports_every_quantised_tensor(tmp_path):
    out = tmp_path / "run.json"
    assert cli.main(["train", "--precision", "fp8", "--fp8-scaling", "none", "--data", "synthetic", "--hidden", "16",
                     "--batch-size", "8", "--steps", "3", "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    names = ["fc1.input", "fc1.weight", "fc1.grad_output", "fc2.input", "fc2.weight", "fc2.grad_output"]
    assert list(summary["quantization"]) == names
    per_step = summary["per_step"]
    assert all(len(per_step[key][0]) == len(names) for key in ("tensor_amax", "tensor_scale", "quantized_underflow"))
    assert per_step["tensor_scale"][0] == [1.0] * len(names)  # no scaling
    assert summary["underflow_fraction"]["fc1"] >= 0.0


def test_an_fp8_step_differs_from_fp32_and_rne_from_sr():
    base = TrainConfig(precision="fp8", **TINY)
    hashes = set()
    for change in ({"precision": "fp32"}, {}, {"grad_rounding": "sr"}, {"grad_rounding": "sr", "seed": 1}):
        trainer = Trainer(dataclasses.replace(base, **change))
        trainer.run()
        hashes.add(trainer.weights_sha256())
    assert len(hashes) == 4


@pytest.mark.parametrize("given, flag", [
    ({"precision": "fp16", "fp8_scaling": "current"}, "--fp8-scaling"),
    ({"precision": "fp8", "fp8_scaling": "current", "amax_history": 4}, "--amax-history"),
    ({"precision": "fp8", "amax_history": 0}, "--amax-history"),
    ({"precision": "fp8", "amax_history": 5000}, "--amax-history"),
    ({"precision": "fp8", "fp8_margin": 99}, "--fp8-margin"),
    ({"precision": "fp8", "fp8_scaling": "none", "fp8_margin": 1}, "--fp8-margin"),
    ({"precision": "bf16", "grad_rounding": "sr"}, "--grad-rounding"),
    ({"promote_every": 128}, "--promote-every"),
    ({"tc_fraction_bits": 13}, "--tc-fraction-bits"),
    ({"precision": "nvfp4", "hidden": (24,)}, "--block-size"),
    ({"precision": "mxfp8", "block_size": 48}, "--block-size"),
    ({"precision": "fp8", "block_size": 16}, "--block-size"),
    ({"precision": "mxfp8", "accumulate": "tensorcore"}, "--accumulate"),
    ({"precision": "fp8", "master_weights": False}, "--no-master-weights"),
])
def test_flags_that_do_not_apply_or_are_out_of_range_name_the_flag(given, flag):
    with pytest.raises(UsageError, match=flag) as error:
        train_config(given)
    assert "\n" not in str(error.value)


def test_the_command_line_reports_a_bad_flag_in_one_line(capsys):
    assert cli.main(["train", "--precision", "fp16", "--promote-every", "128"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--promote-every" in err[0]
