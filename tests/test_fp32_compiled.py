"""softfloat16.fp32compiled: every step program of fp32math, compiled, against the same steps driven
by EMULATED (each operation a call of sf.fp32), bit for bit; the tracer's refusals; the programs
with machine steps (softmax's exp(x - max), sigmoid) against the machine's own operations."""
from __future__ import annotations

import numpy as np
import pytest

from softfloat16 import fp32math, fp32pow, fp32trig
from softfloat16 import threads as sf_threads
from softfloat16._kernels import programs
from softfloat16.fp32compiled import TracingError, compiled, step_options, trace
from softfloat16.fp32ops import EMULATED
from softfloat16.torch.machine import Machine
from softfloat16.torch.softmax import exp_shifted_steps, log_softmax_grad_steps, sigmoid_steps

STEPS = {"exp": fp32math.exp_steps, "log": fp32math.log_steps, "expm1": fp32math.expm1_steps,
         "tanh": fp32math.tanh_steps, "erf": fp32math.erf_steps, "log1p": fp32math.log1p_steps}


def _bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def specials() -> np.ndarray:
    """Zeros, infinities, NaNs with payloads (quiet and signaling, both signs), subnormals, extremes,
    and each program's seams (with their neighbours)."""
    patterns = [0, 1, 2, 0x7FFFFF, 0x800000, 0x800001, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FC00005,
                0x7FBFFFFF, 0x3F800000, 0x3F7FFFFF, 0x3F800001, 0x00400000]
    seams = [fp32math.EXP_LOW, fp32math.EXP_HIGH, fp32math.EXPM1_LOW, fp32math.EXPM1_TINY, fp32math.TANH_SPLIT,
             fp32math.TANH_HIGH, fp32math.HALF, fp32math.TWO, fp32math.FOUR, fp32math.ERF_CENTER, fp32math.SQRT2_BITS,
             fp32pow.LOG1P_TINY, fp32pow.LOG1P_SERIES_BELOW, fp32pow.MINUS_ONE_BITS, fp32math.LN2_HI]
    patterns += [int(s) + d for s in seams for d in (-1, 0, 1)]
    patterns = np.array(patterns, np.int64) & 0x7FFFFFFF
    return np.concatenate([patterns, patterns | 0x80000000]).astype(np.uint32)


def sample() -> np.ndarray:
    """Every 4099th FP32 pattern (1,047,808 of them), and the specials."""
    return np.concatenate([np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32), specials()])


def emulated(steps, *operands) -> np.ndarray:
    return np.asarray(steps(*operands, EMULATED)).astype(np.uint32)


@pytest.mark.parametrize("name", STEPS)
def test_compiled_equals_emulated(name):
    x = sample()
    got = compiled(STEPS[name])(x)
    expected = emulated(STEPS[name], x)
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, (name, [hex(v) for v in x[bad[:5]]], [hex(v) for v in got[bad[:5]]])
    assert np.array_equal(getattr(fp32math, name)(x), got)  # fp32math's function is the compiled program


def test_pow_compiled_equals_emulated():
    rng = np.random.default_rng(1)
    spread = np.arange(0, 1 << 32, 16411, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([spread, _bits(rng.uniform(0, 4, 20000)), _bits(rng.uniform(-3, 3, 5000))])
    y = np.concatenate([rng.permutation(spread), _bits(rng.uniform(-60, 60, 20000)),
                        _bits(rng.integers(-9, 10, 5000))])  # integers: negative bases
    s = specials()
    x, y = np.concatenate([x, np.repeat(s, s.size)]), np.concatenate([y, np.tile(s, s.size)])  # every pair of specials
    got = compiled(fp32math.pow_steps)(x, y)
    expected = emulated(fp32math.pow_steps, x, y)
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, [(hex(x[i]), hex(y[i]), hex(got[i]), hex(expected[i])) for i in bad[:5]]
    assert np.array_equal(fp32math.pow(x, y), got)


def test_shapes_and_broadcasting():
    x = _bits([[0.0, 1.0], [2.0, -1.0]])
    assert fp32math.exp(x).shape == (2, 2) and fp32math.exp(x).dtype == np.uint32
    assert fp32math.exp(np.uint32(0x3F800000)).shape == ()
    assert fp32math.exp(x[:, ::-1]).tolist() == fp32math.exp(x)[:, ::-1].tolist()  # strided operand
    column = _bits([[2.0], [3.0]])
    assert np.array_equal(fp32math.pow(x, column), emulated(fp32math.pow_steps, *np.broadcast_arrays(x, column)))
    assert fp32math.exp(np.zeros((0, 3), np.uint32)).shape == (0, 3)
    with pytest.raises(TypeError, match="operand 0 must be uint32"):
        compiled(fp32math.exp_steps)(np.zeros(2, np.int64))


def test_register_reuse():
    """Registers are reused: far fewer than the instructions (tanh runs expm1's steps too)."""
    program = compiled(fp32math.tanh_steps)
    assert program.registers < len(program.code) // 2
    destinations, operands = program.code[:, 1], program.code[:, 2:5]
    arithmetic = program.code[:, 0] <= programs.FMA  # which reread their operands where the fast kernel declined
    assert not np.any((operands == destinations[:, None])[arithmetic])


# -- the tracer refuses what a straight-line program cannot record ---------------------------------------
def _branching(x, ops):
    if ops.lt(x, ops.const(0)):  # data-dependent control flow
        return ops.neg(x)
    return x


def _indexing(x, ops):
    return ops.from_bits([1, 2, 3][ops.bits(x) & 1])


def _integer_op_on_value(x, ops):
    return ops.add(x, x) >> 1


def _value_where_integer(x, ops):
    return ops.where(ops.isnan(x), 5, x)


def _mask_not_truth(x, ops):
    return ops.where(ops.bits(x), x, x)


@pytest.mark.parametrize("program, message", [
    (_branching, "truth value"), (_indexing, "Python integer"), (_integer_op_on_value, "integer operator"),
    (_value_where_integer, "where an FP32 value is expected"), (_mask_not_truth, "truth value")])
def test_tracer_refuses(program, message):
    with pytest.raises(TracingError, match=message):
        trace(program, 1)
    with pytest.raises(TracingError):
        compiled(program)


def test_tracer_records_numpy_booleans():
    """~ of a truth value is logical (numpy's ~ on booleans), ~ of an integer bitwise."""
    def program(x, ops):
        b = ops.bits(x)
        flag = ~(b == 0) & (b != 1)
        return ops.from_bits(ops.where(flag, ~b & 0xFF, np.uint32(7) | (b >> 31)))

    x = np.array([0, 1, 2, 0x80000000, 0xFFFFFFFF], np.uint32)
    assert compiled(program)(x).tolist() == emulated(program, x).tolist() == [7, 7, 0xFD, 0xFF, 0]


# -- programs with machine steps --------------------------------------------------------------------------
MACHINES = [Machine(), Machine(nan="riscv"), Machine(rounding="rtz", nan="ieee"), Machine(rounding="rup", ftz=True)]


@pytest.mark.parametrize("machine", MACHINES, ids=repr)
def test_machine_steps(machine):
    rng = np.random.default_rng(2)
    x = np.concatenate([_bits(rng.uniform(-30, 30, 3000)), _bits(rng.uniform(-1e-37, 1e-37, 200)), specials()])
    options = step_options(**machine.step)
    one = np.uint32(0x3F800000)
    expected = machine.div(one, machine.add(one, fp32math.exp(machine.neg(x))))
    assert np.array_equal(compiled(sigmoid_steps)(x, step_options=options), expected)
    rows = x[: x.size // 8 * 8].reshape(-1, 8)
    top = rows[:, 3:4]  # any column: the steps need not see the maximum to agree
    expected = emulated(fp32math.exp_steps, machine.sub(rows, top))
    assert np.array_equal(compiled(exp_shifted_steps)(rows, top, step_options=options), expected)
    grad = np.roll(rows, 1)
    total = machine.add(rows[:, 1:2], top)
    expected = machine.sub(grad, machine.mul(fp32math.exp(rows), total))
    assert np.array_equal(compiled(log_softmax_grad_steps)(grad, rows, total, step_options=options), expected)
    with pytest.raises(TypeError, match="step_options"):
        compiled(sigmoid_steps)(x)
    with pytest.raises(ValueError, match="'sr'"):
        compiled(sigmoid_steps)(x, step_options=step_options(rounding="sr"))


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_compiled_equals_emulated(name):
    """sin, cos, tan: the exact reduction (integers), then the compiled steps, equal to the steps driven
    by EMULATED (a smaller sample: the reduction costs microseconds per distinct input)."""
    rng = np.random.default_rng(3)
    x = np.concatenate([np.arange(0, 1 << 32, 262147, dtype=np.uint64).astype(np.uint32), specials(),
                        _bits(rng.uniform(-10, 10, 4000)), _bits([np.pi / 4, np.pi / 2, np.pi, 1e30, 3.0])])
    steps = getattr(fp32trig, f"{name}_steps")
    reduced = [np.asarray(p).astype(np.uint32) for p in fp32trig.reduce_half_pi(x)]
    expected = emulated(steps, x, *reduced)
    assert np.array_equal(compiled(steps)(x, *reduced), expected)
    assert np.array_equal(getattr(fp32trig, name)(x), expected)


def test_threads_split_large_arrays():
    """Arrays from PARALLEL_MIN_ELEMENTS on run in one contiguous piece per thread: the same bits."""
    size = sf_threads.PARALLEL_MIN_ELEMENTS + 1000
    x = np.arange(0, 1 << 32, (1 << 32) // size, dtype=np.uint64)[:size].astype(np.uint32)
    y = x[::-1].copy()
    sf_threads.set_num_threads(3)
    try:
        got_exp, got_pow = fp32math.exp(x), fp32math.pow(x, y)
    finally:
        sf_threads.set_num_threads(None)
    assert np.array_equal(got_exp, emulated(fp32math.exp_steps, x))
    assert np.array_equal(got_pow, emulated(fp32math.pow_steps, x, y))
