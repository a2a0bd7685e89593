"""Each constant has one definition; the deliberate copies agree with it.

The definitions: rounding modes in ``softfloat16.rounding`` (``Rounding``, whose lowercase member
names are the modes' names), encodings in ``softfloat16.formats.ENCODINGS`` (a code is an index),
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
from softfloat16.formats import ENCODINGS
from softfloat16.rounding import ALL_ROUNDING_NAMES, ROUNDING_NAMES, parse_rounding
from softfloat16.verify_table import _PAGE_MODES

ROUNDING_NAMES_UPPER = [name.upper() for name in ROUNDING_NAMES]
#: The kernels' name of each encoding.
KERNEL_ENCODING = {"ieee": "IEEE", "fn": "FN", "fnuz": "FNUZ", "finite": "FINITE_ONLY", "e8m0": "E8M0"}


def constants(module, names) -> dict[str, int]:
    return {name: getattr(module, name) for name in names}


def test_kernel_rounding_codes_are_the_rounding_enum():
    names = [mode.name for mode in sf.Rounding]
    assert constants(core, names) == {mode.name: int(mode) for mode in sf.Rounding}


def test_kernel_encoding_codes_are_the_indices_of_encodings():
    assert set(KERNEL_ENCODING) == set(ENCODINGS)
    assert {name: getattr(core, KERNEL_ENCODING[name]) for name in ENCODINGS} == \
        {name: code for code, name in enumerate(ENCODINGS)}
    assert {fmt.name: fmt.encoding_code for fmt in map(sf.format, sf.FORMATS)} == \
        {fmt.name: getattr(core, KERNEL_ENCODING[fmt.encoding]) for fmt in map(sf.format, sf.FORMATS)}


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
