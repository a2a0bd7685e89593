"""softfloat16.torch's fused optimizer steps (torch.optim.Adam / AdamW / SGD / Adagrad with ``fused=True``)
against native torch 2.13 CPU, bit for bit: two copies of a small model receive the same gradients
every step (computed natively), one optimizer steps natively, the other under
``emulate(strict=True)``; parameters, gradients (unscaled in place by GradScaler's ``grad_scale``)
and every optimizer state tensor must hold the same bits after each step. Shapes leave torch's
scalar tail (``n mod 8`` FP32 / ``n mod 16`` 16-bit elements) and its vectorised loop both in use."""
from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import softfloat16.torch as sft  # noqa: E402
from softfloat16.torch.registry import NotEmulatedError  # noqa: E402

STEPS = 4


def _model(dtype):
    torch.manual_seed(0)
    # 37 x 29 weights: 1073 elements (a vectorised part and a tail); 29 biases: tail only for 16-bit
    model = torch.nn.Sequential(torch.nn.Linear(37, 29), torch.nn.Tanh(), torch.nn.Linear(29, 7))
    return model.to(dtype)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(width), b.view(width))


def _states(optimizer):
    for state in optimizer.state.values():
        yield from (value for _, value in sorted(state.items()) if isinstance(value, torch.Tensor))


def _train(make_optimizer, dtype, scaled: bool, inf_at: int | None = None):
    """(native model, emulated model, native optimizer, emulated optimizer) after STEPS steps."""
    native = _model(dtype)
    emulated = copy.deepcopy(native)
    opt_native, opt_emulated = make_optimizer(native.parameters()), make_optimizer(emulated.parameters())
    scalers = [torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=3) for _ in range(2)] if scaled \
        else [None, None]
    generator = torch.Generator().manual_seed(1)
    for step in range(STEPS):
        x = torch.randn(16, 37, generator=generator).to(dtype)
        loss = native(x).float().square().mean()
        if scaled:
            loss = scalers[0].scale(loss)
            scalers[1].scale(torch.zeros(()))  # creates the emulated side's scale tensor (scale() does, lazily)
        opt_native.zero_grad()
        loss.backward()
        if step == inf_at:
            native[0].weight.grad[3, 5] = float("inf")
        for p_native, p_emulated in zip(native.parameters(), emulated.parameters()):
            p_emulated.grad = p_native.grad.clone()
        for optimizer, scaler, emulation in ((opt_native, scalers[0], False), (opt_emulated, scalers[1], True)):
            with sft.emulate(strict=True) if emulation else torch.no_grad():
                if scaler is None:
                    optimizer.step()
                else:
                    scaler.step(optimizer)
                    scaler.update()
        for p_native, p_emulated in zip(native.parameters(), emulated.parameters()):
            assert _same(p_native.grad, p_emulated.grad), f"step {step}: gradients differ"
            assert _same(p_native.detach(), p_emulated.detach()), f"step {step}: parameters differ"
    if scaled:
        assert _same(scalers[0]._scale, scalers[1]._scale)
        assert scalers[0]._scale.item() == (2.0 ** 9 if inf_at is not None else 2.0 ** 11)  # the inf step backed off
    return native, emulated, opt_native, opt_emulated


def _check_states(opt_native, opt_emulated) -> int:
    native, emulated = list(_states(opt_native)), list(_states(opt_emulated))
    assert len(native) == len(emulated) > 0
    for a, b in zip(native, emulated):
        assert _same(a, b)
    return sum(t.numel() for t in native)


ADAMS = {
    "adam": lambda params: torch.optim.Adam(params, lr=3e-2, fused=True),
    "adam-amsgrad-wd-maximize": lambda params: torch.optim.Adam(params, lr=1e-2, betas=(0.6, 0.7), weight_decay=0.1,
                                                                amsgrad=True, maximize=True, fused=True),
    "adamw": lambda params: torch.optim.AdamW(params, lr=3e-2, weight_decay=0.05, fused=True),
    "adamw-amsgrad-tensor-lr": lambda params: torch.optim.AdamW(params, lr=torch.tensor(1e-2), betas=(0.3, 0.95),
                                                                amsgrad=True, fused=True),
}
SGDS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1, fused=True),
    "sgd-momentum-wd": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01,
                                                      fused=True),
    "sgd-nesterov-maximize": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.8, nesterov=True,
                                                            maximize=True, fused=True),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(ADAMS))
def test_fused_adam_matches_torch(name, dtype):
    _, _, opt_native, opt_emulated = _train(ADAMS[name], dtype, scaled=False)
    assert _check_states(opt_native, opt_emulated) > 2 * 1073


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["adam-amsgrad-wd-maximize", "adamw"])
def test_fused_adam_with_grad_scaler_matches_torch(name, dtype):
    """GradScaler passes grad_scale (the gradients are divided by it and written back) and found_inf
    (an inf gradient at step 1 skips that step and halves the scale)."""
    _, _, opt_native, opt_emulated = _train(ADAMS[name], dtype, scaled=True, inf_at=1)
    _check_states(opt_native, opt_emulated)


@pytest.mark.parametrize("name", list(SGDS))
@pytest.mark.parametrize("scaled", [False, True], ids=["unscaled", "grad-scaler"])
def test_fused_sgd_matches_torch(name, scaled):
    _, _, opt_native, opt_emulated = _train(SGDS[name], torch.float32, scaled=scaled, inf_at=2 if scaled else None)
    if "momentum" in name or "nesterov" in name:
        _check_states(opt_native, opt_emulated)


ADAGRADS = {
    "adagrad": lambda params: torch.optim.Adagrad(params, lr=0.1, fused=True),
    "adagrad-decays-maximize": lambda params: torch.optim.Adagrad(params, lr=0.05, lr_decay=0.1, weight_decay=0.02,
                                                                  eps=1e-3, maximize=True, fused=True),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(ADAGRADS))
def test_fused_adagrad_matches_torch(name, dtype):
    """The 16-bit vectorised loop rounds its constants (weight decay, eps, the step size) into the
    format: without that, 23% of 31,110 BF16 parameters differed (measured)."""
    _, _, opt_native, opt_emulated = _train(ADAGRADS[name], dtype, scaled=False)
    _check_states(opt_native, opt_emulated)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_fused_adagrad_with_grad_scaler_matches_torch(dtype):
    _, _, opt_native, opt_emulated = _train(ADAGRADS["adagrad-decays-maximize"], dtype, scaled=True, inf_at=1)
    _check_states(opt_native, opt_emulated)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_fused_sgd_16_bit_is_refused(dtype):
    params = [torch.ones(40, dtype=dtype)]
    params[0].grad = torch.ones(40, dtype=dtype)
    optimizer = torch.optim.SGD(params, lr=0.1, fused=True)
    with pytest.raises(NotEmulatedError, match="16-bit fused SGD"), sft.emulate(strict=True):
        optimizer.step()
    assert torch.equal(params[0], torch.ones(40, dtype=dtype))


def test_fused_adam_rejects_mismatched_states():
    param, grad = torch.ones(5), torch.ones(5)
    with pytest.raises(NotEmulatedError, match="_fused_adam_"), sft.emulate(strict=True):
        torch._fused_adam_([param], [grad], [torch.zeros(5, dtype=torch.bfloat16)], [torch.zeros(5)], [],
                           [torch.tensor(1.0)], lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8,
                           amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError, match="exp_avg_sqs"), sft.emulate(strict=True):
        torch._fused_adam_([param], [grad], [torch.zeros(5)], [], [], [torch.tensor(1.0)], lr=0.1, beta1=0.9,
                           beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
