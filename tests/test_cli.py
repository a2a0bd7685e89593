"""python -m softfloat16: explain, op, verify, and usage errors (exit status 2, no traceback)."""
import os
import subprocess
import sys

import pytest

import softfloat16 as sf
from softfloat16.__main__ import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_normal(capsys):
    code, out, _ = run(capsys, "explain", "0x3c01", "--format", "fp16")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("fp16 0x3c01 = 0 01111 0000000001")
    assert "  sign      0 (+)" in lines
    assert "  exponent  01111 = 15, unbiased 0" in lines
    assert "  fraction  0000000001 = 1/1024" in lines
    assert "  class     normal" in lines
    assert "  value     1.0009765625 = 1025/1024 = 1025 * 2^-10" in lines
    assert "  ulp       0.0009765625 = 2^-10" in lines
    assert "  next up   0x3c02 = 1.001953125" in lines
    assert "  next down 0x3c00 = 1.0" in lines


@pytest.mark.parametrize("argv, expected", [
    (["0x0001"], ["class     subnormal", "value     0.000000059604644775390625 = 1/16777216",
                  "next down 0x0000 = 0.0", "next up   0x0002"]),
    (["0x8001"], ["next up   0x8000 = -0.0", "next down 0x8002"]),
    (["0x8000"], ["class     zero", "value     -0.0", "next up   0x0001", "next down 0x8001"]),
    (["0x7bff"], ["value     65504.0", "ulp       32.0 = 2^5", "next up   0x7c00 = inf"]),
    (["0xfc00"], ["class     inf", "value     -inf", "next up   0xfbff = -65504.0"]),
    (["0x7d01"], ["class     snan", "+sNaN (payload 0x101)"]),
    (["0x7f80", "-f", "bf16"], ["bf16 0x7f80 = 0 11111111 0000000", "class     inf"]),
    (["0x3f800001", "--format", "float32"], ["value     1.00000011920928955078125 = 8388609/8388608",
                                             "ulp       0.00000011920928955078125 = 2^-23"]),
])
def test_explain_cases(capsys, argv, expected):
    code, out, _ = run(capsys, "explain", *argv)
    assert code == 0
    for text in expected:
        assert text in out, (text, out)


def test_op_add_rtz(capsys):
    code, out, _ = run(capsys, "op", "add", "fp16", "0x3c00", "0x0001", "--rounding", "rtz")
    assert code == 0
    assert "  result  0x3c00 = 1.0 (normal)" in out
    assert "  exact   1.000000059604644775390625" in out
    assert "  flags   INEXACT" in out


@pytest.mark.parametrize("argv, result, flags", [
    (["add", "fp16", "0x3c00", "0x0001", "-r", "rup"], "0x3c01", "INEXACT"),
    (["sqrt", "fp16", "0xbc00", "--nan", "x86"], "0xfe00", "INVALID"),
    (["sqrt", "fp16", "0xbc00"], "0x7e00", "INVALID"),
    (["div", "fp16", "0x3c00", "0x0000"], "0x7c00", "DIVIDE_BY_ZERO"),
    (["mul", "fp16", "0x7bff", "0x4000", "-r", "rtz"], "0x7bff", "OVERFLOW INEXACT"),
    (["mul", "fp16", "0x0400", "0x3800", "--ftz"], "0x0000", "UNDERFLOW INEXACT"),  # 2^-15: tiny
    (["mul", "fp16", "0x0400", "0x3800"], "0x0200", "(none)"),                      # exact subnormal
    (["add", "fp16", "0x0001", "0x0000", "--daz"], "0x0000", "(none)"),
    (["add", "fp16", "0x3c00", "0xbc00", "-r", "rdn"], "0x8000", "(none)"),
    (["fma", "bf16", "0x3f80", "0x3f80", "0x3f80"], "0x4000", "(none)"),
    (["convert", "fp32", "0x3f800001", "--to", "bf16", "-r", "rup"], "0x3f81", "INEXACT"),
])
def test_op_results_and_flags(capsys, argv, result, flags):
    code, out, _ = run(capsys, "op", *argv)
    assert code == 0
    assert f"  result  {result} " in out
    assert f"  flags   {flags}" in out


def test_op_tininess_before_differs(capsys):
    # (1 - 2^-10) * (1 + 2^-10) * 2^-14 = 2^-14 (1 - 2^-20): below min normal (tiny before
    # rounding) but 1 - 2^-20 rounds to 1 at 11 bits (not tiny after); the result is min normal
    args = ["op", "mul", "fp16", "0x3bfe", "0x0401", "-r", "rup"]
    after = run(capsys, *args)[1]
    assert "result  0x0400" in after and "flags   INEXACT" in after
    assert "flags   UNDERFLOW INEXACT" in run(capsys, *args, "--tininess", "before")[1]


def test_op_comparison(capsys):
    code, out, _ = run(capsys, "op", "lt", "fp16", "0xbc00", "0x3c00")
    assert code == 0 and "  result  True" in out


@pytest.mark.parametrize("argv, message", [
    (["explain", "0x3c01", "--format", "fp12"], "unknown format 'fp12'"),
    (["explain", "0xzz"], "not a bit pattern"),
    (["explain", "0x10000"], "does not fit in 16 bits"),
    (["op", "add", "fp16", "0x3c00", "0x1", "--rounding", "up-ish"], "unknown rounding"),
    (["op", "pow", "fp16", "0x3c00", "0x1"], "invalid choice"),
    (["op", "add", "fp16", "0x3c00"], "add takes 2 operand(s), got 1"),
    (["op", "convert", "fp16", "0x3c00"], "needs --to"),
    (["op", "add", "fp16", "0x3c00", "0x1", "--nan", "vax"], "invalid choice"),
    (["verify", "--format", "fp16", "--op", "pow"], "invalid choice"),
    (["verify", "--format", "fp32", "--op", "add"], "verified for fp16, bf16"),
    (["verify", "--format", "fp16", "--op", "add", "--exhaustive", "--sample", "5"], "not allowed"),
    (["verify", "--format", "fp16", "--op", "fma", "--fma-c", "0x3c00,xyz", "--sample", "10"], "--fma-c"),
    ([], "required"),
])
def test_usage_errors_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_entry_point_error_has_no_traceback():
    root = os.path.dirname(os.path.dirname(os.path.abspath(sf.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    for argv in (["explain", "0x3c0g"], ["op", "add", "bf17", "0x1", "0x2"]):
        done = subprocess.run([sys.executable, "-m", "softfloat16", *argv], capture_output=True,
                              text=True, timeout=120, env=env)
        assert done.returncode == 2
        assert "error:" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "softfloat16", "explain", "0x3c00"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0 and "value     1.0" in done.stdout


def test_verify_command(capsys, tmp_path):
    checkpoint = tmp_path / "ck.json"
    code, out, err = run(capsys, "verify", "--format", "fp16", "--op", "add", "--rounding", "rtz",
                         "--sample", "200000", "--workers", "1", "--checkpoint", str(checkpoint))
    assert code == 0
    assert out.startswith("verify add fp16 rtz (sample of 200000, seed 0): 200000 cases, 0 mismatches")
    assert checkpoint.exists()
    code, out, err = run(capsys, "verify", "--format", "fp16", "--op", "add", "--rounding", "rtz",
                         "--sample", "200000", "--workers", "1", "--checkpoint", str(checkpoint), "--progress")
    assert code == 0 and "chunks resumed from a checkpoint: 1" in out and "100.0%" in err


# --- bit patterns and rounding names as a new user types them (issue: ambiguous input) ---------

@pytest.mark.parametrize("text, value", [("0x3c00", 0x3C00), ("0X3C00", 0x3C00), ("0b0011110000000000", 0x3C00),
                                         ("15360", 0x3C00), ("7", 7), ("0", 0)])
def test_bit_patterns_hex_binary_and_decimal(capsys, text, value):
    code, out, err = run(capsys, "explain", text)
    assert code == 0 and out.startswith(f"fp16 {value:#06x} = ")


def test_bare_digits_are_decimal_and_the_note_shows_the_hex_reading(capsys):
    code, out, err = run(capsys, "explain", "1000")
    assert code == 0 and out.startswith("fp16 0x03e8 = ")  # 1000 decimal, not 0x1000
    assert "1000 read as decimal = 0x3e8" in err and "0x1000" in err
    code, out, err = run(capsys, "explain", "15360")
    assert code == 0 and "does not fit" not in err and out.startswith("fp16 0x3c00")


@pytest.mark.parametrize("text", ["3c01", "0x", "-1", "0b102", "1e3", "+0x3c00"])
def test_unreadable_bit_patterns_are_refused_with_the_accepted_forms(capsys, text):
    code, out, err = run(capsys, "explain", text)
    assert code == 2 and "0x... hexadecimal, 0b... binary, or a decimal integer" in err and "Traceback" not in err
    if text == "3c01":
        assert "for hexadecimal write 0x3c01" in err


def test_explain_help_states_the_number_syntax(capsys):
    code, out, _ = run(capsys, "explain", "--help")
    assert code == 0 and "0b... binary" in out and "decimal" in out


@pytest.mark.parametrize("alias, name", [("nearest", "rne"), ("toward_zero", "rtz"), ("up", "rup"), ("Floor", "rdn")])
def test_the_cli_takes_the_rounding_aliases_of_the_python_api(capsys, alias, name):
    code, out, _ = run(capsys, "op", "add", "fp16", "0x3c00", "0x0001", "--rounding", alias)
    assert code == 0 and f"rounding={name}" in out
    assert out == run(capsys, "op", "add", "fp16", "0x3c00", "0x0001", "--rounding", name)[1]


def test_a_rounding_error_lists_names_and_aliases_in_both_interfaces(capsys):
    code, _, err = run(capsys, "op", "add", "fp16", "0x3c00", "0x1", "--rounding", "near")
    with pytest.raises(ValueError) as api_error:
        sf.fp16.add(0x3C00, 1, rounding="near")
    for text in (err, str(api_error.value)):
        assert "rne (nearest_even, nearest, ties_to_even)" in text and "rup (up, toward_positive, ceil)" in text


@pytest.mark.parametrize("argv", [["softfloat16", "explain", "0x3c00"], ["sim", "train", "--help"],
                                  ["sim.crosscheck", "--help"], ["softfloat16", "op", "add", "fp16", "0x1", "0x2"]])
def test_a_closed_pipe_ends_every_command_quietly(argv):
    """`... | head -1`: the reader is gone before the command writes (no traceback on stderr)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(sf.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=120, env=env)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode in (0, 141)
