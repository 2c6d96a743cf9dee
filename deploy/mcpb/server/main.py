"""The bundle's entry point: fsnotes from this bundle's own packages, on the host's python3.

The manifest runs it as `python3 -I main.py serve ...`: isolated mode ignores PYTHONPATH,
PYTHONHOME and the user's site-packages, so what runs is exactly the packages in lib/ beside
this file (put first on sys.path here) and the standard library. lib/ is on sys.path, so
the Landlock jail `serve` applies keeps it readable (sandbox.jail.runtime_read_only_paths).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))

from fsnotes.app.cli import main

sys.exit(main())
