"""Install the node test peers from their lockfiles (called by `make peers`).

Two package directories, each with its own package-lock.json: this one (the TypeScript SDK
client, the Inspector, oidc-provider for the OAuth tests, and node 22) and conformance/ (the
official MCP conformance suite in the two versions fsnotes is held to, side by side under npm
aliases; run with this directory's node 22). For each, runs `npm install --no-save` from the
lockfile when npm exists and the lockfile changed since the last install (a stamp file inside
node_modules records the lockfile's hash).
Not `npm ci`: vite (a dependency of the Inspector) names an optional Windows-only package that
the registry does not serve, so npm leaves it out of the lockfile and `npm ci` then refuses the
lockfile as out of sync. `--no-save` installs exactly the locked versions and never rewrites
the lockfile; `--ignore-scripts` because test peers need no install scripts. Without npm it
prints a loud reason and exits 0: the node interop tests then skip with the same reason.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Package directories, each installed from its own package-lock.json.
PACKAGE_DIRS = (HERE, HERE / "conformance")
STAMP_NAME = ".fsnotes-lock-sha256"


def main() -> int:
    npm = shutil.which("npm")
    if npm is None:
        print(
            "!!! npm not found: the TypeScript SDK interop tests will be SKIPPED. "
            "Install node >= 20 and npm to run them.",
            file=sys.stderr,
        )
        return 0
    for directory in PACKAGE_DIRS:
        install(npm, directory)
    return 0


def install(npm: str, directory: Path) -> None:
    name = directory.relative_to(HERE.parent).as_posix()
    digest = hashlib.sha256((directory / "package-lock.json").read_bytes()).hexdigest()
    stamp = directory / "node_modules" / STAMP_NAME
    if stamp.exists() and stamp.read_text().strip() == digest:
        print(f"node test peers in {name} up to date")
        return
    subprocess.run(
        [npm, "install", "--no-save", "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=directory,
        check=True,
    )
    stamp.write_text(digest + "\n")
    print(f"node test peers in {name} installed")


if __name__ == "__main__":
    sys.exit(main())
