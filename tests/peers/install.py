"""Install the node test peers from package-lock.json (called by `make peers`).

Runs `npm install --no-save` from the lockfile when npm exists and the lockfile changed since
the last install (a stamp file inside node_modules records the lockfile's hash). Not `npm ci`:
vite (a dependency of the Inspector) names an optional Windows-only package that the registry
does not serve, so npm leaves it out of the lockfile and `npm ci` then refuses the lockfile as
out of sync. `--no-save` installs exactly the locked versions and never rewrites the lockfile;
`--ignore-scripts` because test peers need no install scripts. Without npm it prints a loud
reason and exits 0: the node interop tests then skip with the same reason.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK = HERE / "package-lock.json"
STAMP = HERE / "node_modules" / ".fsnotes-lock-sha256"


def main() -> int:
    npm = shutil.which("npm")
    if npm is None:
        print(
            "!!! npm not found: the TypeScript SDK interop tests will be SKIPPED. "
            "Install node >= 20 and npm to run them.",
            file=sys.stderr,
        )
        return 0
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == digest:
        print("node test peers up to date")
        return 0
    subprocess.run(
        [npm, "install", "--no-save", "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=HERE,
        check=True,
    )
    STAMP.write_text(digest + "\n")
    print("node test peers installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
