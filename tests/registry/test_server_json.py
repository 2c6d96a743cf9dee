"""server.json (the MCP registry's description of fsnotes) against the registry's published
schema, vendored beside this file (README.md there: version, source, licence), and against
the project: its version, and the name the registry checks in the PyPI description (the
README's `mcp-name:` line) and in the image (the Dockerfile's label)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = Path(__file__).with_name("server.schema.json")
SCHEMA_VERSION = "2025-12-11"
# The vendored file's digest, as tests/registry/README.md records it: an edit by hand fails here.
SCHEMA_SHA256 = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"


def load(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = load(SCHEMA_PATH)
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(
        schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )


@pytest.fixture(scope="module")
def server() -> Any:
    return load(REPO / "server.json")


def project_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def test_vendored_schema_is_the_recorded_version() -> None:
    assert hashlib.sha256(SCHEMA_PATH.read_bytes()).hexdigest() == SCHEMA_SHA256
    schema_id = load(SCHEMA_PATH)["$id"]
    assert schema_id == (
        f"https://static.modelcontextprotocol.io/schemas/{SCHEMA_VERSION}/server.schema.json"
    )
    assert SCHEMA_SHA256 in (SCHEMA_PATH.parent / "README.md").read_text()


def test_server_json_validates(validator: jsonschema.Draft7Validator, server: Any) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(server)]
    assert errors == []
    assert server["$schema"] == load(SCHEMA_PATH)["$id"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda s: s.pop("description"), "description is required"),
        (lambda s: s.update(name="fsnotes"), "a name needs its namespace/"),
        (lambda s: s.update(description="x" * 101), "descriptions stop at 100 characters"),
        (lambda s: s["packages"][0].pop("transport"), "a package names its transport"),
        (lambda s: s["packages"][0].update(version="latest"), "'latest' is not a version"),
    ],
)
def test_schema_rejects_what_the_registry_would(
    validator: jsonschema.Draft7Validator, server: Any, change: Any, why: str
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
