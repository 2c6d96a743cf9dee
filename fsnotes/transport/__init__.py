"""fsnotes.transport package."""
