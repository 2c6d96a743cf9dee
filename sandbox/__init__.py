"""Containment for file operations: nothing here knows about MCP or notes.

Layer 1 (:mod:`sandbox.uri`) turns ``file://`` URIs and relative paths into checked lists
of plain names; layer 2 (:mod:`sandbox.root`) performs every file operation relative to a
directory descriptor without following symlinks; layer 3 (:mod:`sandbox.jail`) restricts
the whole process with the operating system.
"""
