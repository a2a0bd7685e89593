"""The pinned versions of what the test command installs (constraints.txt), against this environment.

    python .ci/pins.py diff      # each package whose installed version is not its pin (exit 0)
    python .ci/pins.py write     # write the installed versions as the pins (after a green run)
    python .ci/pins.py lowest    # the declared lower bounds of pyproject.toml, as name==version lines

The packages are softfloat16's requirements with the test command's extras, and theirs, as the
installed distributions declare them (pip itself and the build tools are not pinned). A local
version label is dropped from a pin (torch 2.13.0+cpu is pinned as 2.13.0, which both the CPU and
the default build satisfy).
"""
from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"
EXTRAS = ("dev", "crosscheck", "dask")
HEADER = """\
# The exact versions a green CI run used for `pip install -e ".[dev,crosscheck,dask]"` (.ci/run and the
# README install with `-c constraints.txt`). Written by `python .ci/pins.py write` after a green run;
# `bash .ci/newest` runs the suite on the newest releases and lists what differs from these pins.
"""


def requirement_closure(root: str = "softfloat16", extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    """{canonical name: installed version} of ``root``'s requirements under ``extras``, recursively."""
    found: dict[str, str] = {}
    todo = [(root, set(extras))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        key = (canonicalize_name(name), frozenset(wanted))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            sys.exit(f"pins: {name} is not installed here; run the test command's install first")
        if canonicalize_name(name) != canonicalize_name(root):
            found[canonicalize_name(name)] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({**default_environment(), "extra": e})
                                         for e in (wanted or {""})):
                todo.append((req.name, set(req.extras)))
    return found


def read_pins(path: Path = CONSTRAINTS) -> dict[str, str]:
    pins = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)", line)
        if not match:
            sys.exit(f"pins: {path.name} line {number}: expected name==version, got {line!r}")
        pins[canonicalize_name(match[1])] = match[2]
    return pins


def public(version: str) -> str:
    return version.split("+", 1)[0]


def diff(path: Path) -> list[str]:
    """One line per package whose installed version differs from its pin, is unpinned or missing."""
    pins, installed = read_pins(path), requirement_closure()
    lines = []
    for name in sorted(set(pins) | set(installed)):
        pin, have = pins.get(name), installed.get(name)
        if pin is None:
            lines.append(f"{name}: {have} installed, not pinned")
        elif have is None:
            lines.append(f"{name}: pinned {pin}, not required here")
        elif public(have) != pin:
            lines.append(f"{name}: pinned {pin}, installed {have}")
    return lines


def write(path: Path) -> None:
    installed = requirement_closure()
    path.write_text(HEADER + "".join(f"{name}=={public(v)}\n" for name, v in sorted(installed.items())))
    print(f"pins: wrote {len(installed)} pins to {path}")


def lowest() -> list[str]:
    """name==version for each declared lower bound (>=) of the core and the test command's extras."""
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in EXTRAS:
        declared += project["optional-dependencies"][extra]
    out = []
    for line in declared:
        req = Requirement(line)
        bound = [s.version for s in req.specifier if s.operator == ">="]
        out.append(f"{req.name}=={bound[0]}" if bound else req.name)
    return sorted(set(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python .ci/pins.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("diff", "write", "lowest"))
    parser.add_argument("--constraints", type=Path, default=CONSTRAINTS, help="the pins file (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.command == "diff":
        lines = diff(args.constraints)
        print("\n".join(lines) if lines else f"pins: every package is at its pin in {args.constraints.name}")
    elif args.command == "write":
        write(args.constraints)
    else:
        print("\n".join(lowest()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
