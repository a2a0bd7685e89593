"""The loss scalers' state machines: hand-written traces of GradScaler's rules, and torch CPU."""

import dataclasses
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.scaler import DynamicLossScaler, DynamicScalerConfig, StaticLossScaler

FP32_MAX = float(np.finfo(np.float32).max)


def run(scaler, flags):
    """Feed found-inf flags to ``scaler``; return (skipped per step, scale after each step)."""
    skipped, scales = [], []
    for flag in flags:
        skipped.append(scaler.update(bool(flag)))
        scales.append(float(scaler.scale))
    return skipped, scales


def quiet_dynamic(**kwargs):
    """A DynamicLossScaler whose non-power-of-two arguments are intended (no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return DynamicLossScaler(**kwargs)


def quiet_static(scale):
    """A StaticLossScaler of any FP32 value, without the power-of-two warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return StaticLossScaler(float(scale))


def fp32_bits(values):
    return np.asarray(values, dtype=np.float64).astype(np.float32).view(np.uint32)


# --- GradScaler's rules, by hand -------------------------------------------------------------


def test_defaults_are_gradscalers():
    scaler = DynamicLossScaler()
    assert scaler.scale == np.float32(2.0**16) and scaler.scale.dtype == np.float32
    assert (scaler.growth_factor, scaler.backoff_factor, scaler.growth_interval) == (2.0, 0.5, 2000)
    assert (scaler.hysteresis, scaler.min_scale, scaler.growth_tracker) == (1, None, 0)


def test_growth_happens_exactly_at_growth_interval():
    scaler = DynamicLossScaler(init_scale=8.0, growth_interval=3)
    skipped, scales = run(scaler, [0, 0, 0, 0, 0, 0, 0])
    assert skipped == [False] * 7
    assert scales == [8.0, 8.0, 16.0, 16.0, 16.0, 32.0, 32.0]
    assert scaler.growth_tracker == 1
    assert scaler.history == [8.0, 8.0, 8.0, 16.0, 16.0, 16.0, 32.0]  # the scale each step used


def test_backoff_skips_and_resets_the_growth_tracker():
    scaler = DynamicLossScaler(init_scale=64.0, growth_interval=3)
    skipped, scales = run(scaler, [0, 0, 1, 0, 0, 1, 1, 0, 0, 0])
    assert skipped == [False, False, True, False, False, True, True, False, False, False]
    assert scales == [64.0, 64.0, 32.0, 32.0, 32.0, 16.0, 8.0, 8.0, 8.0, 16.0]
    assert scaler.skipped_steps == [2, 5, 6]
    assert scaler.history == [64.0, 64.0, 64.0, 32.0, 32.0, 32.0, 16.0, 8.0, 8.0, 8.0]


def test_growth_interval_one_grows_every_clean_step():
    scaler = DynamicLossScaler(init_scale=1.0, growth_interval=1)
    assert run(scaler, [0, 0, 1, 0])[1] == [2.0, 4.0, 2.0, 4.0]


def test_never_grows_past_fp32_range():
    scaler = DynamicLossScaler(init_scale=2.0**127, growth_interval=2)
    _, scales = run(scaler, [0] * 6)
    assert scales == [2.0**127] * 6
    assert scaler.growth_tracker == 0  # the growth was due; only the overflowing product is refused
    scaler = quiet_dynamic(init_scale=2.0**126, growth_factor=3.0, growth_interval=1)
    _, scales = run(scaler, [0, 0, 1, 0])
    assert scales == [3 * 2.0**126, 3 * 2.0**126, 1.5 * 2.0**126, 1.5 * 2.0**126]
    scaler = quiet_dynamic(init_scale=FP32_MAX, growth_factor=1.0 + 2.0**-30, growth_interval=1)
    assert run(scaler, [0, 0])[1] == [FP32_MAX, FP32_MAX]  # rounds back to max: finite, "grows"


def test_new_scale_is_the_double_product_rounded_once_to_fp32():
    scaler = quiet_dynamic(
        init_scale=1000.0, growth_factor=1.1, backoff_factor=0.3, growth_interval=1
    )
    scaler.update(False)
    assert scaler.scale == np.float32(1000.0 * 1.1)
    scaler.update(True)
    assert scaler.scale == np.float32(float(np.float32(1100.0)) * 0.3)


def test_hysteresis_cumulative_deepspeed_default():
    scaler = DynamicLossScaler(init_scale=2.0**10, growth_interval=4, hysteresis=3)
    # two overflows only spend budget; the third backs off; the budget stays at one until growth
    skipped, scales = run(scaler, [1, 0, 1, 1, 1, 0, 0, 1])
    assert skipped == [True, False, True, True, True, False, False, True]
    assert scales == [2.0**10, 2.0**10, 2.0**10, 2.0**9, 2.0**8, 2.0**8, 2.0**8, 2.0**7]
    assert scaler.hysteresis_tracker == 1
    run(scaler, [0, 0, 0, 0])  # a full growth interval refills the budget
    assert scaler.scale == 2.0**8 and scaler.hysteresis_tracker == 3
    assert run(scaler, [1, 1])[1] == [2.0**8, 2.0**8]


def test_hysteresis_consecutive_refills_on_every_clean_step():
    scaler = DynamicLossScaler(
        init_scale=2.0**10, growth_interval=100, hysteresis=2, consecutive_hysteresis=True
    )
    _, scales = run(scaler, [1, 0, 1, 0, 1, 1, 1])
    assert scales == [2.0**10] * 5 + [2.0**9, 2.0**8]


def test_hysteresis_one_is_gradscaler():
    flags = [1, 0, 0, 1, 1, 0, 0, 0, 1]
    plain = run(DynamicLossScaler(init_scale=256.0, growth_interval=2), flags)
    assert run(DynamicLossScaler(init_scale=256.0, growth_interval=2, hysteresis=1), flags) == plain
    assert plain[1] == [128.0, 128.0, 256.0, 128.0, 64.0, 64.0, 128.0, 128.0, 64.0]


def test_min_scale_clamps_then_raises_at_the_floor():
    scaler = DynamicLossScaler(init_scale=16.0, growth_interval=10, min_scale=3.0)
    assert run(scaler, [1, 1])[1] == [8.0, 4.0]
    assert run(scaler, [1])[1] == [3.0]  # 2.0 would be below the floor
    before = scaler.state_dict()
    with pytest.raises(RuntimeError, match="Minimum loss scale reached"):
        scaler.update(True)
    assert scaler.state_dict() == before  # nothing half-done


def test_min_scale_warn_keeps_skipping():
    scaler = DynamicLossScaler(
        init_scale=4.0, growth_interval=2, min_scale=2.0, on_min_scale="warn"
    )
    scaler.update(True)
    assert scaler.scale == 2.0
    with pytest.warns(UserWarning, match="Minimum loss scale reached"):
        assert scaler.update(True) is True
    assert scaler.scale == 2.0 and scaler.skipped_steps == [0, 1] and scaler.growth_tracker == 0
    assert run(scaler, [0, 0])[1] == [2.0, 4.0]


def test_overflow_at_the_floor_within_hysteresis_does_not_raise():
    scaler = DynamicLossScaler(init_scale=1.0, min_scale=1.0, hysteresis=2)
    assert scaler.update(True) is True  # spends budget, no backoff due
    with pytest.raises(RuntimeError, match="Minimum loss scale"):
        scaler.update(True)


def test_without_min_scale_the_floor_is_the_smallest_fp32_subnormal():
    scaler = DynamicLossScaler(init_scale=2.0**-148, growth_interval=5)
    assert run(scaler, [1])[1] == [2.0**-149]
    with pytest.raises(RuntimeError, match="Minimum loss scale reached"):
        scaler.update(True)


def test_unscale_once_per_step():
    scaler = DynamicLossScaler()
    scaler.mark_unscaled()
    message = "unscale_() has already been called on this optimizer since the last update()."
    with pytest.raises(RuntimeError) as caught:
        scaler.mark_unscaled()
    assert str(caught.value) == message
    scaler.update(False)
    scaler.mark_unscaled()  # a new step may unscale again


def test_inv_scale_is_torchs_double_reciprocal_rounded_to_fp32():
    for value in (1.0, 2.0**16, 3.0, 1000.0, 0.1, 2.0**-140):
        inverse = quiet_static(value).inv_scale()
        assert inverse.dtype == np.float32
        with np.errstate(over="ignore"):
            assert inverse == np.float32(1.0 / float(np.float32(value)))
    assert StaticLossScaler(2.0**-126).inv_scale() == np.float32(2.0**126)
    assert StaticLossScaler(2.0**-140).inv_scale() == np.inf  # beyond FP32's range, as in torch


def test_update_wants_a_bool():
    with pytest.raises(TypeError, match="found_inf"):
        DynamicLossScaler().update(1)
    assert DynamicLossScaler().update(np.bool_(True)) is True


# --- StaticLossScaler --------------------------------------------------------------------------


def test_static_never_changes_but_skips():
    scaler = StaticLossScaler(2.0**12)
    skipped, scales = run(scaler, [0, 1, 0, 1])
    assert skipped == [False, True, False, True]
    assert scales == [4096.0] * 4
    assert scaler.history == [4096.0] * 4 and scaler.skipped_steps == [1, 3]


def test_static_scale_validation():
    with pytest.warns(UserWarning, match="round trip is no longer exact"):
        StaticLossScaler(1000.0)
    for bad in (0.0, -2.0, math.inf, math.nan, 1e39, 1e-50):
        with pytest.raises(ValueError, match="scale"):
            StaticLossScaler(bad)
    with pytest.raises(TypeError):
        StaticLossScaler("1024")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StaticLossScaler(2.0**-149)  # a subnormal power of two is exact


def test_static_state_round_trip():
    scaler = StaticLossScaler(256.0)
    run(scaler, [0, 1])
    state = json.loads(json.dumps(scaler.state_dict()))
    other = StaticLossScaler(1.0)
    other.load_state_dict(state)
    assert other.state_dict() == scaler.state_dict()
    with pytest.raises(ValueError, match="missing keys"):
        other.load_state_dict({"scale": 2.0})


# --- construction and state dicts --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"init_scale": 0.0}, ValueError),
        ({"init_scale": math.inf}, ValueError),
        ({"growth_factor": 0.5}, ValueError),
        ({"backoff_factor": 0.0}, ValueError),
        ({"backoff_factor": 2.0}, ValueError),
        ({"growth_interval": 0}, ValueError),
        ({"growth_interval": 2.0}, TypeError),
        ({"growth_interval": True}, TypeError),
        ({"hysteresis": 0}, ValueError),
        ({"min_scale": -1.0}, ValueError),
        ({"min_scale": 2.0**20}, ValueError),
        ({"on_min_scale": "ignore"}, ValueError),
        ({"consecutive_hysteresis": 1}, TypeError),
    ],
)
def test_bad_configuration_is_refused(kwargs, error):
    with pytest.raises(error):
        DynamicLossScaler(**kwargs)


def test_non_power_of_two_arguments_warn():
    for kwargs in ({"init_scale": 1000.0}, {"growth_factor": 1.5}, {"backoff_factor": 0.3}):
        with pytest.warns(UserWarning, match="no longer exact"):
            DynamicLossScaler(**kwargs)


def test_state_dict_has_torchs_keys_and_resumes_exactly():
    flags = np.random.default_rng(7).random(200) < 0.3
    kwargs = {"init_scale": 2.0**20, "growth_interval": 3, "hysteresis": 2, "min_scale": 2.0**10}
    whole = DynamicLossScaler(**kwargs, on_min_scale="warn")
    first = DynamicLossScaler(**kwargs, on_min_scale="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        run(whole, flags)
        run(first, flags[:77])
        state = json.loads(json.dumps(first.state_dict()))  # it must survive a JSON checkpoint
        second = DynamicLossScaler()
        second.load_state_dict(state)
        run(second, flags[77:])
    torch_keys = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
    assert torch_keys <= set(state)
    assert second.state_dict() == whole.state_dict()
    assert second.history == whole.history and second.skipped_steps == whole.skipped_steps


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"scale": "big"}, "scale"),
        ({"scale": 0.1}, "not an FP32 value"),
        ({"scale": -1.0}, "scale"),
        ({"growth_interval": 2.5}, "growth_interval"),
        ({"_growth_tracker": 5}, "_growth_tracker"),
        ({"_growth_tracker": True}, "_growth_tracker"),
        ({"_hysteresis_tracker": 0}, "_hysteresis_tracker"),
        ({"min_scale": 2.0**30}, "below its min_scale"),
        ({"history": [1.0, "x"]}, "history"),
        ({"history": (1.0,)}, "lists"),
        ({"skipped_steps": [3]}, "skipped_steps"),
        ({"on_min_scale": "maybe"}, "on_min_scale"),
    ],
)
def test_load_state_dict_rejects_bad_values_and_changes_nothing(change, match):
    scaler = DynamicLossScaler(growth_interval=4)
    run(scaler, [0, 1])
    before = scaler.state_dict()
    with pytest.raises(ValueError, match=match):
        scaler.load_state_dict({**before, **change})
    assert scaler.state_dict() == before


def test_load_state_dict_rejects_missing_and_unknown_keys():
    scaler = DynamicLossScaler()
    state = scaler.state_dict()
    del state["_growth_tracker"]
    with pytest.raises(ValueError, match=r"missing keys \['_growth_tracker'\]"):
        scaler.load_state_dict(state)
    with pytest.raises(ValueError, match=r"unexpected keys \['extra'\]"):
        scaler.load_state_dict({**scaler.state_dict(), "extra": 1})
    with pytest.raises(ValueError, match="must be a dict"):
        scaler.load_state_dict([("scale", 1.0)])


# --- against torch CPU ---------------------------------------------------------------------------


def torch_update_scale_trace(flags, init_scale, growth_factor, backoff_factor, growth_interval):
    """The scale each step used, driving torch's own CPU kernel; and the final tracker."""
    torch = pytest.importorskip("torch")
    scale = torch.full((), init_scale, dtype=torch.float32)
    tracker = torch.zeros((), dtype=torch.int32)
    used = []
    for flag in flags:
        used.append(scale.item())
        found_inf = torch.full((), 1.0 if flag else 0.0, dtype=torch.float32)
        torch._amp_update_scale_(
            scale, tracker, found_inf, growth_factor, backoff_factor, growth_interval
        )
    return used + [scale.item()], int(tracker.item())


def ours_trace(flags, init_scale, growth_factor, backoff_factor, growth_interval):
    scaler = quiet_dynamic(
        init_scale=init_scale,
        growth_factor=growth_factor,
        backoff_factor=backoff_factor,
        growth_interval=growth_interval,
    )
    for flag in flags:
        scaler.update(bool(flag))
    return scaler.history + [float(scaler.scale)], scaler.growth_tracker


CASES = [
    # init_scale, growth_factor, backoff_factor, growth_interval, share of overflowing steps
    (2.0**16, 2.0, 0.5, 3, 0.25),
    (2.0**16, 2.0, 0.5, 1, 0.5),
    (2.0**127, 2.0, 0.5, 3, 0.1),  # pressed against FP32's ceiling
    (FP32_MAX, 2.0, 0.5, 3, 0.1),
    (3.0e38, 1.5, 0.5, 2, 0.1),
    (1000.1, 1.1, 0.3, 3, 0.2),  # inexact factors: the double product rounds once to FP32
    (2.0**-120, 2.0, 0.5, 2, 0.3),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_torch_amp_update_scale_bitwise(case, seed):
    pytest.importorskip("torch")
    *config, share = case
    flags = np.random.default_rng(seed).random(300) < share
    theirs, their_tracker = torch_update_scale_trace(flags, *config)
    assert min(theirs) > 0  # torch's scale stayed positive, so our floor never applied
    ours, our_tracker = ours_trace(flags, *config)
    np.testing.assert_array_equal(fp32_bits(ours), fp32_bits(theirs))
    assert our_tracker == their_tracker


@settings(max_examples=60, deadline=None)
@given(
    flags=st.lists(st.booleans(), max_size=80),
    init_exponent=st.integers(-100, 127),
    growth_factor=st.sampled_from([1.0, 1.5, 2.0, 3.0, 1.0009765625]),
    backoff_factor=st.sampled_from([0.5, 0.25, 0.3, 0.9, 1.0]),
    growth_interval=st.integers(1, 5),
)
def test_matches_torch_on_random_sequences(
    flags, init_exponent, growth_factor, backoff_factor, growth_interval
):
    pytest.importorskip("torch")
    config = (2.0**init_exponent, growth_factor, backoff_factor, growth_interval)
    theirs, their_tracker = torch_update_scale_trace(flags, *config)
    if min(theirs) == 0:
        return  # torch reached a zero scale; we stop at the smallest subnormal (documented)
    ours, our_tracker = ours_trace(flags, *config)
    np.testing.assert_array_equal(fp32_bits(ours), fp32_bits(theirs))
    assert our_tracker == their_tracker


def test_matches_torch_gradscaler_end_to_end():
    torch = pytest.importorskip("torch")
    flags = np.random.default_rng(3).random(300) < 0.2
    reference = torch.amp.GradScaler("cpu", init_scale=2.0**16, growth_interval=3)
    parameter = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.SGD([parameter], lr=0.0)
    ours = DynamicLossScaler(init_scale=2.0**16, growth_interval=3)
    for flag in flags:
        reference.scale(torch.ones(()))
        assert np.float32(reference.get_scale()) == ours.scale
        parameter.grad = torch.tensor([1.0, math.inf if flag else 2.0, 3.0])
        reference.unscale_(optimizer)
        with pytest.raises(RuntimeError) as theirs:
            reference.unscale_(optimizer)
        ours.mark_unscaled()
        with pytest.raises(RuntimeError) as mine:
            ours.mark_unscaled()
        assert str(mine.value) == str(theirs.value)
        inverse = reference._scale.double().reciprocal().float().item()
        assert np.float32(inverse) == ours.inv_scale()
        reference.step(optimizer)
        reference.update()
        ours.update(bool(flag))
    theirs = reference.state_dict()
    assert {key: value for key, value in ours.state_dict().items() if key in theirs} == theirs


def test_inv_scale_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    bits = rng.integers(1, 0x7F800000, size=2000, dtype=np.uint32)  # every positive finite FP32
    values = bits.view(np.float32)
    theirs = torch.from_numpy(values.copy()).double().reciprocal().float().numpy()
    for value, expected in zip(values, theirs, strict=True):
        assert quiet_static(value).inv_scale().view(np.uint32) == expected.view(np.uint32)


# --- the configuration, one frozen dataclass -----------------------------------------------------


def test_the_configuration_is_one_frozen_dataclass():
    scaler = DynamicLossScaler(init_scale=8.0, growth_interval=3, min_scale=1.0, hysteresis=2)
    assert scaler.config == DynamicScalerConfig(growth_interval=3, min_scale=1.0, hysteresis=2)
    assert scaler.min_scale == np.float32(1.0) and scaler.min_scale.dtype == np.float32
    with pytest.raises(dataclasses.FrozenInstanceError):
        scaler.config.growth_interval = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        DynamicLossScaler(growth_intervall=3)  # a misspelt setting is not silently ignored
    # load_state_dict checks with the same rules as the constructor, and restores the config
    other = DynamicLossScaler()
    other.load_state_dict(scaler.state_dict())
    assert other.config == scaler.config
    with pytest.raises(ValueError, match="state: growth_factor must be finite and >= 1"):
        other.load_state_dict({**scaler.state_dict(), "growth_factor": 0.5})
    assert DynamicScalerConfig(**DynamicScalerConfig(min_scale=4.0).state_dict()).min_scale == np.float32(4.0)
