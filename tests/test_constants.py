"""Each constant has one definition; the deliberate copies agree with it.

The definitions: rounding modes in ``softfloat16.rounding`` (``Rounding``, whose lowercase member
names are the modes' names), the bits of a format's packed properties in ``softfloat16.formats``,
exception flags in ``softfloat16.flags.Flag``. The copies: the kernels' (softfloat16/_kernels/core.py,
whose cache is keyed on the kernel folder alone, and which ``softfloat16.exact`` must not reach)
and the test oracle's (tests/oracle.py, independent of the library by design).
"""
from __future__ import annotations

import numpy as np
import oracle
import pytest

import softfloat16 as sf
from softfloat16 import _verify_reference as verify_reference
from softfloat16._kernels import core
from softfloat16 import formats
from softfloat16.rounding import ALL_ROUNDING_NAMES, ROUNDING_NAMES, parse_rounding
from softfloat16.verify_table import _PAGE_MODES

ROUNDING_NAMES_UPPER = [name.upper() for name in ROUNDING_NAMES]
#: The kernels' name of each packed property bit, and of each layout it names.
KERNEL_BITS = {"SIGNED": "_K_SIGNED", "INFINITIES": "_K_INFINITIES", "NAN_AT_NEGATIVE_ZERO": "_K_NAN_AT_NEGATIVE_ZERO",
               "NO_SUBNORMALS": "_K_NO_SUBNORMALS", "TIES_TO_EVEN_CODE": "_K_TIES_TO_EVEN_CODE",
               "TOP_NAN_ONE": "_K_TOP_NAN_ONE", "TOP_NANS_BINADE": "_K_TOP_NANS_BINADE",
               "OVERFLOW_NAN": "_K_OVERFLOW_NAN", "OVERFLOW_SATURATE": "_K_OVERFLOW_SATURATE",
               "BIAS_SHIFT": "_K_BIAS_SHIFT"}
KERNEL_LAYOUT = {"ieee": "IEEE", "fn": "FN", "fnuz": "FNUZ", "finite": "FINITE_ONLY", "e8m0": "E8M0"}
ENCODINGS = tuple(KERNEL_LAYOUT)


def constants(module, names) -> dict[str, int]:
    return {name: getattr(module, name) for name in names}


def test_kernel_rounding_codes_are_the_rounding_enum():
    names = [mode.name for mode in sf.Rounding]
    assert constants(core, names) == {mode.name: int(mode) for mode in sf.Rounding}


def test_kernel_property_bits_are_the_formats_bits():
    assert constants(core, KERNEL_BITS) == {name: getattr(formats, copy) for name, copy in KERNEL_BITS.items()}


def test_the_kernels_named_layouts_are_the_formats_codes():
    # every format of a named layout packs to the kernels' constant of that name
    assert {fmt.name: fmt.encoding_code for fmt in map(sf.format, sf.FORMATS)} == \
        {fmt.name: getattr(core, KERNEL_LAYOUT[fmt.encoding]) for fmt in map(sf.format, sf.FORMATS)}
    assert {fmt.encoding for fmt in map(sf.format, sf.FORMATS)} == set(ENCODINGS)


def test_kernel_flags_are_the_flag_enum():
    assert constants(core, [flag.name for flag in sf.Flag]) == {flag.name: int(flag) for flag in sf.Flag}


def test_oracle_copies_agree_with_the_library():
    assert constants(oracle, [flag.name for flag in sf.Flag]) == {flag.name: int(flag) for flag in sf.Flag}
    assert oracle.ROUNDINGS == ROUNDING_NAMES
    assert oracle.ALL_ROUNDINGS == ALL_ROUNDING_NAMES
    assert {encoding for *_, encoding in oracle.ALL_FORMATS.values()} == set(ENCODINGS)


def test_rounding_names_come_from_the_enum():
    assert ALL_ROUNDING_NAMES == tuple(mode.name.lower() for mode in sf.Rounding)
    assert ROUNDING_NAMES == tuple(name for name in ALL_ROUNDING_NAMES if name != "sr")
    assert sf.ROUNDING_NAMES is ROUNDING_NAMES
    assert [parse_rounding(name) for name in ALL_ROUNDING_NAMES] == list(sf.Rounding)


def test_the_verify_reference_and_table_use_the_library_modes():
    # the reference's sign loop labels the modes with the library's codes
    assert constants(verify_reference, ROUNDING_NAMES_UPPER) == \
        {name: int(sf.Rounding[name]) for name in ROUNDING_NAMES_UPPER}
    assert sorted(_PAGE_MODES) == sorted(ROUNDING_NAMES)
    assert _PAGE_MODES == ("rne", "rtz", "rup", "rdn", "rna", "rod")   # the page's columns



@pytest.mark.parametrize("mode", ROUNDING_NAMES)
def test_the_verify_reference_refuses_no_library_mode(mode):
    bits, _ = verify_reference.reference(sf.fp16, "add", mode, [np.array([0x3C00]), np.array([0x3C00])])
    assert int(bits[0]) == 0x4000   # 1 + 1 = 2 in every mode
