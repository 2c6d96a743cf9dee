"""Package ``__init__`` modules: each declares the names other packages import from it.

The declared names (``__all__``) are read against the source: every ``from <package>...
import <name>`` in another package of ``fsnotes`` or ``sandbox`` must be declared, nothing
else may be, and the package's name must be the very object the importer gets from the
defining module. The names are imported on first use, so importing one module of a package
must not import the rest of it (the HTTP stack above all, an optional extra).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = [
    "sandbox",
    "fsnotes.notes",
    "fsnotes.security",
    "fsnotes.state",
    "fsnotes.runtime",
    "fsnotes.setup",
    "fsnotes.transport",
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports_from_other_packages() -> dict[str, dict[str, str]]:
    """For each package: name -> the module it is imported from, by code outside it."""
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for top in ("fsnotes", "sandbox"):
        for path in sorted((REPO / top).rglob("*.py")):
            importer = _module_name(path)
            here = importer.split(".") if path.name == "__init__.py" else importer.split(".")[:-1]
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ImportFrom):
                    continue
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    source = ".".join([*base, node.module] if node.module else base)
                else:
                    source = node.module or ""
                for package in PACKAGES:
                    inside = importer == package or importer.startswith(package + ".")
                    if inside or not (source == package or source.startswith(package + ".")):
                        continue
                    for alias in node.names:
                        # "from package import module" names the module itself.
                        home = source if source != package else f"{package}.{alias.name}"
                        found[package][alias.name] = home
    return found


IMPORTED = _imports_from_other_packages()


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_declares_exactly_the_names_other_packages_import_from_it(
    package: str,
) -> None:
    assert set(importlib.import_module(package).__all__) == set(IMPORTED[package])


@pytest.mark.parametrize("package", PACKAGES)
def test_a_declared_name_is_the_object_its_defining_module_holds(package: str) -> None:
    for name, home in sorted(IMPORTED[package].items()):
        module = importlib.import_module(home)
        # A name that is also a module of the package is that module (the import system
        # binds a submodule on its package), whatever the module defines under that name.
        expected = module if home == f"{package}.{name}" else getattr(module, name)
        assert getattr(importlib.import_module(package), name) is expected, name


def _modules_loaded_by(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return list(json.loads(out))


@pytest.mark.parametrize("package", PACKAGES)
def test_a_star_import_of_a_package_binds_every_declared_name(package: str) -> None:
    code = (
        f"import json\nimport {package} as pkg\nfrom {package} import *\n"
        "print(json.dumps([n for n in pkg.__all__ if n not in globals()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_importing_the_setup_store_imports_neither_the_flow_nor_the_page_nor_the_tools() -> None:
    loaded = _modules_loaded_by("import fsnotes.setup.store")
    for absent in (
        "fsnotes.setup.flow",
        "fsnotes.setup.page",
        "fsnotes.notes.tools",
        "starlette",
    ):
        assert absent not in loaded


def test_importing_the_configuration_imports_neither_the_tools_nor_the_http_stack() -> None:
    loaded = _modules_loaded_by("import fsnotes.app.config")
    for absent in ("fsnotes.notes.tools", "fsnotes.protocol", "starlette", "uvicorn"):
        assert absent not in loaded
