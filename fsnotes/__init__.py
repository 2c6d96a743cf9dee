"""fsnotes: a sandboxed Model Context Protocol server for Markdown notes."""

__version__ = "0.1.0"
