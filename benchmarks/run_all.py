"""Run every benchmark in turn (`make bench`); each prints its table and writes JSON."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# bench_vault.py runs its default sizes here (1k, 10k); `make bench-vault SIZES=...` for more.
SCRIPTS = [
    "bench_sandbox.py",
    "bench_protocol.py",
    "bench_notes.py",
    "bench_parse.py",
    "bench_state.py",
    "bench_history.py",
    "bench_outage.py",
    "bench_http.py",
    "bench_deploy.py",
    "bench_vault.py",
]


def main() -> int:
    status = 0
    for script in SCRIPTS:
        print(f"\n=== {script}", flush=True)
        status |= subprocess.run([sys.executable, str(HERE / script)], check=False).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
