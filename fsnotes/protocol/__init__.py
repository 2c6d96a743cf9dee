"""fsnotes.protocol package."""
