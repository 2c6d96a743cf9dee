"""fsnotes.security package."""
