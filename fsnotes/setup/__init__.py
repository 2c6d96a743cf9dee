"""fsnotes.setup package."""
