"""server.json (the MCP registry's description of fsnotes) against the registry's rules, and
against the project: its version, and the name the registry checks in the PyPI description
(the README's `mcp-name:` line) and in the image (the Dockerfile's label).

Limit, honestly: the registry's own schema file (static.modelcontextprotocol.io) cannot be
downloaded on the test machine (no network but PyPI, npm and Debian) and no package there
ships it, so ``server_json_rules.json`` beside this file is our own statement of the rules
the registry documents for the 2025-12-11 format. Before publishing, check the file with the
registry's publisher (``mcp-publisher validate``) where the network allows."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = Path(__file__).with_name("server_json_rules.json")
SCHEMA_VERSION = "2025-12-11"


def load(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = load(SCHEMA_PATH)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


@pytest.fixture(scope="module")
def server() -> Any:
    return load(REPO / "server.json")


def project_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def test_the_rules_name_the_format_server_json_declares(server: Any) -> None:
    assert server["$schema"] == (
        f"https://static.modelcontextprotocol.io/schemas/{SCHEMA_VERSION}/server.schema.json"
    )


def test_server_json_validates(validator: jsonschema.Draft202012Validator, server: Any) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(server)]
    assert errors == []


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda s: s.pop("description"), "description is required"),
        (lambda s: s.update(name="fsnotes"), "a name needs its namespace/"),
        (lambda s: s.update(description="x" * 101), "descriptions stop at 100 characters"),
        (lambda s: s["packages"][0].pop("transport"), "a package names its transport"),
        (lambda s: s["packages"][0].update(version="latest"), "'latest' is not a version"),
        (lambda s: s["packages"][0]["packageArguments"][1].pop("name"), "named needs a name"),
        (lambda s: s["packages"][0]["transport"].update(type="pipe"), "no such transport"),
        (lambda s: s["packages"][1]["runtimeArguments"][6].update(format="path"), "no such format"),
    ],
)
def test_schema_rejects_what_the_registry_would(
    validator: jsonschema.Draft202012Validator, server: Any, change: Any, why: str
) -> None:
    """The check above can fail: the same validator refuses broken copies."""
    broken = copy.deepcopy(server)
    change(broken)
    assert not validator.is_valid(broken), why


def test_versions_follow_the_project(server: Any) -> None:
    version = project_version()
    assert server["version"] == version
    pypi, oci = server["packages"]
    assert (pypi["registryType"], pypi["identifier"], pypi["version"]) == (
        "pypi",
        "fsnotes",
        version,
    )
    assert oci["registryType"] == "oci"
    assert oci["identifier"].endswith(f":{version}")


def test_name_is_where_the_registry_verifies_it(server: Any) -> None:
    name = server["name"]
    assert f"mcp-name: {name}" in (REPO / "README.md").read_text()
    label = re.search(
        r'^LABEL io\.modelcontextprotocol\.server\.name="([^"]+)"$',
        (REPO / "Dockerfile").read_text(),
        re.MULTILINE,
    )
    assert label is not None and label.group(1) == name


def test_docker_arguments_match_the_readme(server: Any) -> None:
    """The OCI package runs the image with the README's hardening flags."""
    oci = server["packages"][1]
    flags = {arg["name"] for arg in oci["runtimeArguments"]}
    readme = (REPO / "README.md").read_text()
    for flag in ("--read-only", "--network", "--cap-drop", "--security-opt"):
        assert flag in flags and flag in readme
    mounts = [arg["value"] for arg in oci["runtimeArguments"] if arg["name"] == "-v"]
    assert mounts == ["{notes_folder}:/notes", "{state_folder}:/state"]
