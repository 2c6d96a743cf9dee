"""`fsnotes demo` / `make demo`: the scripted MCP session on the bundled example vault."""

from __future__ import annotations

import sys

from fsnotes.app.demo_session import main

if __name__ == "__main__":
    sys.exit(main())
