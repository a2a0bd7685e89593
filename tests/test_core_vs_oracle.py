"""The core against the exact-rational oracle (tests/oracle.py): every op x format x rounding mode,
bits and flags, on edge-biased operands, with the ftz/daz/tininess/NaN-profile options varied."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import softfloat16 as sf
from edge_cases import (
    bit_patterns, near_pair, options, plain_options, random_bit_patterns, random_near_pairs,
)
from oracle import FORMATS, ROUNDINGS, ref_convert, ref_from_float, ref_op

BATCH = 16


def check_batch(op, fmt_name, operand_lists, rounding, opts):
    fmt = sf.format(fmt_name)
    arrays = [np.array(ops, dtype=np.int64) for ops in operand_lists]
    got, flags = getattr(fmt, op)(*arrays, rounding=rounding, flags=True, **opts)
    for i in range(len(arrays[0])):
        args = [int(a[i]) for a in arrays]
        want_bits, want_flags = ref_op(op, fmt_name, *args, rounding=rounding, **opts)
        got_bits = bool(got[i]) if op in ("eq", "lt", "le") else int(got[i])
        assert (got_bits, int(flags[i])) == (want_bits, want_flags), (
            f"{fmt_name}.{op}({', '.join(hex(x) for x in args)}, rounding={rounding!r}, {opts}): "
            f"got {got_bits!r}/{sf.Flag(int(flags[i]))!r}, want {want_bits!r}/{sf.Flag(want_flags)!r}"
        )


def operands(fmt_name, arity, near):
    if arity == 1:
        return st.lists(bit_patterns(fmt_name), min_size=BATCH, max_size=BATCH).map(lambda a: [a])
    if arity == 2:
        pair = near_pair(fmt_name) if near else st.tuples(bit_patterns(fmt_name), bit_patterns(fmt_name))
        return st.lists(pair, min_size=BATCH, max_size=BATCH).map(lambda ps: [list(x) for x in zip(*ps)])
    triple = st.tuples(bit_patterns(fmt_name), bit_patterns(fmt_name), bit_patterns(fmt_name))
    return st.lists(triple, min_size=BATCH, max_size=BATCH).map(lambda ts: [list(x) for x in zip(*ts)])


ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "sqrt": 1, "eq": 2, "lt": 2, "le": 2}
FORMAT_NAMES = list(FORMATS)


OPTION_SETS = [
    {"ftz": False, "daz": False, "nan": "ieee", "tininess": "after"},
    {"ftz": True, "daz": False, "nan": "x86", "tininess": "after"},
    {"ftz": False, "daz": True, "nan": "riscv", "tininess": "before"},
    {"ftz": True, "daz": True, "nan": "cuda", "tininess": "before"},
]
BULK = 600


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("fmt_name", FORMAT_NAMES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "fma", "sqrt"])
def test_arithmetic_bulk_matches_oracle(op, fmt_name, rounding):
    """Deterministic numpy-drawn edge cases: many more per second than hypothesis draws."""
    rng = np.random.default_rng([ord(c) for c in op + fmt_name + rounding])
    for opts in OPTION_SETS:
        if ARITY[op] == 2 and op in ("add", "sub"):
            a, b = random_near_pairs(fmt_name, BULK // 2, rng)
            a2, b2 = (random_bit_patterns(fmt_name, BULK // 2, rng) for _ in range(2))
            lists = [np.concatenate([a, a2]), np.concatenate([b, b2])]
        else:
            lists = [random_bit_patterns(fmt_name, BULK, rng) for _ in range(ARITY[op])]
        check_batch(op, fmt_name, lists, rounding, opts)


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("fmt_name", FORMAT_NAMES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "fma", "sqrt"])
@settings(max_examples=8)
@given(data=st.data())
def test_arithmetic_matches_oracle(op, fmt_name, rounding, data):
    near = op in ("add", "sub") and data.draw(st.booleans())
    opts = data.draw(st.one_of(plain_options, options))
    check_batch(op, fmt_name, data.draw(operands(fmt_name, ARITY[op], near)), rounding, opts)


@pytest.mark.parametrize("fmt_name", FORMAT_NAMES)
@pytest.mark.parametrize("op", ["eq", "lt", "le"])
@settings(max_examples=8)
@given(data=st.data())
def test_comparisons_match_oracle(op, fmt_name, data):
    opts = data.draw(options)
    opts = {"daz": opts["daz"]}
    check_batch(op, fmt_name, data.draw(operands(fmt_name, 2, near=data.draw(st.booleans()))), "rne", opts)


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("src", FORMAT_NAMES)
@settings(max_examples=6)
@given(data=st.data())
def test_convert_matches_oracle(src, rounding, data):
    opts = data.draw(st.one_of(plain_options, options))
    values = data.draw(st.lists(bit_patterns(src), min_size=BATCH, max_size=BATCH))
    for dst in FORMAT_NAMES:
        got, flags = sf.convert(np.array(values, np.int64), src=src, dst=dst, rounding=rounding,
                                flags=True, **opts)
        for i, v in enumerate(values):
            want = ref_convert(v, src, dst, rounding=rounding, **opts)
            assert (int(got[i]), int(flags[i])) == want, (
                f"convert {hex(v)} {src}->{dst} {rounding} {opts}: got {hex(got[i])}/{flags[i]}, "
                f"want {hex(want[0])}/{want[1]}")


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("fmt_name", FORMAT_NAMES)
@settings(max_examples=6)
@given(values=st.lists(bit_patterns("fp32").map(lambda b: float(np.uint32(b).view(np.float32))) |
                       st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
                       min_size=BATCH, max_size=BATCH),
       ints=st.lists(st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-70000, 70000),
                     min_size=8, max_size=8),
       opts=options)
def test_from_float_and_int_match_oracle(fmt_name, rounding, values, ints, opts):
    opts = {k: v for k, v in opts.items() if k != "daz"}
    fmt = sf.format(fmt_name)
    got, flags = fmt.from_float(np.array(values, np.float64), rounding=rounding, flags=True, **opts)
    for i, x in enumerate(values):
        want = ref_from_float(x, fmt_name, rounding=rounding, **opts)
        assert (int(got[i]), int(flags[i])) == want, f"from_float({x!r}) {fmt_name} {rounding} {opts}"
    got, flags = fmt.from_float(np.array(ints, np.int64), rounding=rounding, flags=True, **opts)
    for i, x in enumerate(ints):
        assert (int(got[i]), int(flags[i])) == ref_from_float(x, fmt_name, rounding=rounding, **opts), \
            f"from_float(int {x}) {fmt_name} {rounding} {opts}"
