"""fsnotes.notes package."""
