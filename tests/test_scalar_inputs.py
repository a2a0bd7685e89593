"""Every public function that takes bit arrays takes 0-d arrays and numpy scalars too, and gives
the answer it gives for a one-element array (diff_report once crashed on numpy scalars)."""
from __future__ import annotations

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16 import compare, testing

A, B, C = 0x3C00, 0x3C01, 0x4000  # 1, 1 + 2**-10, 2


def forms(bits: int, dtype=np.uint16) -> dict:
    """The same operand as a Python int, a numpy scalar, a 0-d array, a float16 scalar and 0-d array."""
    return {"int": bits, "numpy scalar": dtype(bits), "0-d array": np.array(bits, dtype=dtype),
            "float16 scalar": np.uint16(bits).view(np.float16),
            "float16 0-d": np.array(bits, np.uint16).view(np.float16)}


SCALAR_ONLY = {"describe", "classify", "value"}  # one bit pattern in: compared with a Python int's answer
FUNCTIONS = {  # name -> f(a, b, c) on fp16 bit patterns
    "add": lambda a, b, c: sf.fp16.add(a, b),
    "sub": lambda a, b, c: sf.fp16.sub(a, b, flags=True),
    "mul": lambda a, b, c: sf.fp16.mul(a, b, rounding="rup"),
    "div": lambda a, b, c: sf.fp16.div(a, b),
    "fma": lambda a, b, c: sf.fp16.fma(a, b, c),
    "sqrt": lambda a, b, c: sf.fp16.sqrt(b, flags=True),
    "eq": lambda a, b, c: sf.fp16.eq(a, b),
    "lt": lambda a, b, c: sf.fp16.lt(a, b),
    "le": lambda a, b, c: sf.fp16.le(b, a),
    "to_float": lambda a, b, c: sf.fp16.to_float(b),
    "convert": lambda a, b, c: sf.convert(b, src=sf.fp16, dst=sf.bf16),
    "as_bits": lambda a, b, c: sf.as_bits(b, sf.fp16),
    "hex": lambda a, b, c: sf.hex(b, sf.fp16),
    "ulp_distance": lambda a, b, c: compare.ulp_distance(a, b, sf.fp16),
    "mismatch_mask": lambda a, b, c: compare.mismatch_mask(a, b, sf.fp16),
    "ordered_key": lambda a, b, c: compare.ordered_key(b, sf.fp16),
    "diff_report": lambda a, b, c: compare.diff_report(a, b, sf.fp16),
    "describe": lambda a, b, c: str(compare.describe(b, sf.fp16)),
    "classify": lambda a, b, c: compare.classify(b, sf.fp16),
    "value": lambda a, b, c: sf.fp16.value(b),
    "assert_within_ulp": lambda a, b, c: testing.assert_within_ulp(a, b, sf.fp16, ulp=1),
    "assert_bits_equal": lambda a, b, c: _assertion_text(lambda: testing.assert_bits_equal(a, b, sf.fp16)),
}


def _assertion_text(call) -> str:
    try:
        call()
    except AssertionError as error:
        return str(error)
    raise AssertionError("assert_bits_equal accepted different bits")


def _plain(result):
    """Results compared across input forms: arrays flattened to lists, one-element lists unwrapped;
    report texts without their index column."""
    if isinstance(result, tuple):
        return tuple(_plain(r) for r in result)
    if isinstance(result, str):
        return " ".join(result.replace(" index (0,): ", " value: ").replace("[", "").replace("]", "").split())
    if isinstance(result, (np.ndarray, np.generic)):
        flat = np.asarray(result).ravel().tolist()
        return flat[0] if len(flat) == 1 else flat
    return result


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("form", sorted(forms(0)))
def test_scalars_and_0d_arrays_give_the_one_element_answer(name, form):
    function = FUNCTIONS[name]
    if name in SCALAR_ONLY:
        expected = function(A, B, C)
    else:
        expected = function(np.array([A], np.uint16), np.array([B], np.uint16), np.array([C], np.uint16))
    got = function(forms(A)[form], forms(B)[form], forms(C)[form])
    assert _plain(got) == _plain(expected)


def test_diff_report_of_numpy_scalars_names_the_value():
    text = compare.diff_report(np.uint16(0x3C00), np.uint16(0x3C01), sf.fp16)
    assert text.splitlines()[0] == "Mismatched elements: 1 / 1 (100%) [fp16, nan='class']"
    assert " value: actual   0x3c00 = 1.0" in text and "ulp distance 1" in text


def test_from_float_takes_scalars_and_0d_arrays():
    expected = sf.fp16.from_float(np.array([0.1]))[0]
    for x in (0.1, np.float64(0.1), np.array(0.1), np.float32(0.1), np.array(np.float32(0.1))):
        assert sf.fp16.from_float(x) == expected


# --- sf.hex: a readable view of bit arrays (the tour's comments show hex, the shell decimals)

def test_hex_of_scalars_pads_to_the_format_width():
    assert sf.hex(np.uint16(0x3C00)) == "0x3c00" and sf.hex(np.uint8(5)) == "0x05"
    assert sf.hex(0x0001, sf.fp16) == "0x0001" and sf.hex(0x7FC00000, "fp32") == "0x7fc00000"
    assert sf.hex(np.float32(1.0)) == "0x3f800000" and sf.hex(np.int16(-1)) == "0xffff"
    assert sf.hex(255) == "0xff"  # a Python int has no width of its own


def test_hex_of_arrays_keeps_their_shape():
    bits = np.array([[0x3C00, 0x7C00], [0x0001, 0xFE00]], dtype=np.uint16)
    text = sf.hex(bits)
    assert text == "[[0x3c00, 0x7c00],\n [0x0001, 0xfe00]]"
    numbers = text.replace("[", "").replace("]", "").replace(",", " ").split()
    assert [int(t, 16) for t in numbers] == bits.ravel().tolist()


def test_hex_refuses_what_is_not_bits():
    with pytest.raises(ValueError, match="bits"):
        sf.hex(0x1FFFF, sf.fp16)
    with pytest.raises(TypeError, match="dtype"):
        sf.hex(np.array(["a"]))
    with pytest.raises(ValueError, match="pass fmt"):
        sf.hex(-1)
