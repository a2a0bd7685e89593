"""Optimizers and clipping against numpy float32, whose + - * / sqrt are correctly rounded IEEE
single precision: written one operation per statement, the documented formulas give the exact
bits the emulator must produce."""
from __future__ import annotations

import numpy as np
import pytest

import softfloat16 as sf
from sim.optim import SGD, Adam, clip_grad_norm, global_norm

F32 = sf.fp32
f = np.float32


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def test_sgd_momentum_weight_decay_matches_float32():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    opt = SGD(F32, lr=0.1, momentum=0.9, weight_decay=1e-2)
    lr, mu, wd = f(0.1), f(0.9), f(1e-2)
    params, buf = [bits(w)], None
    for _ in range(4):
        g = rng.standard_normal((3, 4)).astype(np.float32)
        d = g + wd * w
        buf = d if buf is None else mu * buf + d
        u = lr * buf
        w = w - u
        params, (update,) = opt.step(params, [bits(g)])
        np.testing.assert_array_equal(params[0], bits(w))
        np.testing.assert_array_equal(update, bits(u))


def test_adam_weight_decay_step_matches_float32():
    rng = np.random.default_rng(1)
    w0, g0 = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    b1, b2, eps, wd, lr, one = f(0.9), f(0.999), f(1e-8), f(1e-3), f(1e-2), f(1.0)
    opt = Adam(F32, lr=1e-2, weight_decay=1e-3)
    (new,), (update,) = opt.step([bits(w0)], [bits(g0)])
    g = g0 + wd * w0
    m = np.zeros(5, np.float32) + (one - b1) * (g - np.zeros(5, np.float32))
    v = b2 * np.zeros(5, np.float32) + ((one - b2) * g) * g
    u = (lr / (one - b1)) * (m / (np.sqrt(v) / np.sqrt(one - b2) + eps))
    np.testing.assert_array_equal(update, bits(u))
    np.testing.assert_array_equal(new, bits(w0 - u))


def test_adam_several_steps_match_float32():
    rng = np.random.default_rng(2)
    w = rng.standard_normal(6).astype(np.float32)
    opt = Adam(F32, lr=3e-3)
    b1, b2, eps, lr, one = f(0.9), f(0.999), f(1e-8), f(3e-3), f(1.0)
    m = v = np.zeros(6, np.float32)
    p1 = p2 = one
    params = [bits(w)]
    for _ in range(6):
        g = rng.standard_normal(6).astype(np.float32)
        m = m + (one - b1) * (g - m)
        v = b2 * v + ((one - b2) * g) * g
        p1, p2 = p1 * b1, p2 * b2
        u = (lr / (one - p1)) * (m / (np.sqrt(v) / np.sqrt(one - p2) + eps))
        w = w - u
        params, _ = opt.step(params, [bits(g)])
        np.testing.assert_array_equal(params[0], bits(w))


def test_fp16_optimizer_swallows_small_updates():
    """Without master weights the update happens in FP16: 1 - 1e-4 rounds back to 1."""
    opt = SGD(sf.fp16, lr=1e-4)
    one = sf.fp16.from_float(np.ones(2))
    (w,), (u,) = opt.step([one], [sf.fp16.from_float(np.ones(2))])
    assert (w == one).all() and (u != 0).all()


def test_global_norm_and_clipping():
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal((4, 3)), rng.standard_normal(3)]
    grad_bits = [bits(g) for g in grads]
    expected = np.sqrt(sum(np.sum(np.float64(g.astype(np.float32)) ** 2) for g in grads))
    norm = float(F32.to_float(global_norm(grad_bits)))
    assert norm == pytest.approx(expected, rel=1e-6)
    clipped, norm_bits, fired = clip_grad_norm(grad_bits, max_norm=norm / 2)
    assert fired and float(F32.to_float(norm_bits)) == norm
    assert float(F32.to_float(global_norm(clipped))) == pytest.approx(norm / 2, rel=1e-5)
    unclipped, _, fired = clip_grad_norm(grad_bits, max_norm=norm * 2)
    assert not fired and all((a == b).all() for a, b in zip(unclipped, grad_bits))


def test_state_dict_round_trip_and_mismatch():
    rng = np.random.default_rng(4)
    params = [bits(rng.standard_normal(3))]
    grads = [bits(rng.standard_normal(3))]
    for make in (lambda: SGD(F32, lr=0.1, momentum=0.9), lambda: Adam(F32, lr=1e-3)):
        a, b = make(), make()
        params_a, _ = a.step(params, grads)
        b.load_state_dict(*a.state_dict())
        np.testing.assert_array_equal(a.step(params_a, grads)[0][0], b.step(params_a, grads)[0][0])
    with pytest.raises(ValueError, match="lr"):
        SGD(F32, lr=0.2).load_state_dict(*SGD(F32, lr=0.1).state_dict())
    with pytest.raises(ValueError, match="kind"):
        SGD(F32, lr=0.1).load_state_dict(*Adam(F32, lr=0.1).state_dict())


@pytest.mark.parametrize("kwargs", [{"lr": 0.0}, {"lr": -1.0}, {"lr": float("nan")}, {"lr": 0.1, "momentum": 1.0}])
def test_bad_hyperparameters(kwargs):
    with pytest.raises(ValueError):
        SGD(F32, **kwargs)
