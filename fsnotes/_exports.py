"""The lazy loader every package ``__init__`` of fsnotes uses for its ``__all__``.

A package declares which of its modules defines each public name; a name is imported on
first use (PEP 562, as ``concurrent.futures`` does), so importing one module of a package
does not import the rest of it (the optional HTTP stack above all). ``sandbox`` keeps its
own copy: it imports nothing from ``fsnotes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``homes`` maps each public name to the
    module (relative to the package) that defines it; a name that is its module's own last
    component is that module."""

    def __getattr__(name: str) -> object:
        # PEP 562: called only for names not yet in the package's namespace.
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = import_module(f"{package}.{home}")
        value: Any = module if home.rsplit(".", 1)[-1] == name else getattr(module, name)
        setattr(import_module(package), name, value)  # found directly from now on
        return value

    return __getattr__
