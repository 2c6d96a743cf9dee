"""The [http.oauth] table: what it accepts and what it refuses (with a message saying why)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fsnotes.app.config import ConfigError, load
from fsnotes.security.oauth_settings import OAuthSettings


def _load(tmp_path: Path, oauth: str) -> OAuthSettings:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    config = tmp_path / "fsnotes.toml"
    config.write_text(f"[http.oauth]\n{oauth}\n")
    cfg = load(workspaces=[str(notes)], state_dir=str(tmp_path / "state"), config_file=str(config),
               http="127.0.0.1:0", env={})  # fmt: skip
    assert cfg.http is not None and cfg.http.oauth is not None
    return cfg.http.oauth


def test_an_oauth_table_is_read_with_its_defaults(tmp_path: Path) -> None:
    oauth = _load(tmp_path, 'issuer = "https://id.example.com"\n'
                            'audience = "https://notes.example.com/mcp"')  # fmt: skip
    assert oauth.principal_claim == "sub"
    assert oauth.jwks_max_age_s == 600
    assert oauth.metadata_url == (
        "https://notes.example.com/.well-known/oauth-protected-resource/mcp"
    )
    assert oauth.tcp_ports() == [443]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('audience = "https://notes.example.com/mcp"', "needs issuer"),
        ('issuer = "https://id.example.com"', "needs audience"),
        ('issuer = "http://id.example.com"\naudience = "https://n.example/mcp"', "https://"),
        ('issuer = "https://id.example.com"\naudience = "https://n.example/mcp"\n'
         'scopes_supported = ["admin"]', "scopes_supported"),
        ('issuer = "https://id.example.com"\naudience = "https://n.example/mcp"\n'
         'jwks = "x"', "unknown keys"),
        ('issuer = "https://id.example.com"\naudience = "https://n.example/mcp?x=1"', "query"),
        ('issuer = "https://id.example.com"\naudience = "https://n.example/mcp"\n'
         'jwks_max_age = 1', "jwks_max_age is seconds from 5 to 86400"),
        ('issuer = "https://id.example.com"\naudience = "https://n.example/mcp"\n'
         'jwks_max_age = "10m"', "jwks_max_age must be a number"),
    ],
)  # fmt: skip
def test_a_bad_oauth_table_is_refused_with_the_reason(
    tmp_path: Path, table: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, table)


def test_plain_http_is_allowed_only_for_a_loopback_issuer(tmp_path: Path) -> None:
    oauth = _load(tmp_path, 'issuer = "http://127.0.0.1:9000"\n'
                            'audience = "http://127.0.0.1:8000/mcp"')  # fmt: skip
    assert oauth.tcp_ports() == [9000]


def test_doctor_names_the_issuer_and_the_ports_the_jail_allows(tmp_path: Path) -> None:
    config = tmp_path / "fsnotes.toml"
    config.write_text('[http.oauth]\nissuer = "https://id.example.com:8443"\n'
                      'audience = "https://notes.example.com/mcp"\n')  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "fsnotes", "doctor", "--config", str(config), "--state-dir",
         str(tmp_path / "state"), "--http", "127.0.0.1:8080", "--json"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    http = json.loads(out.stdout)["http"]
    assert http["oauth"]["issuer"] == "https://id.example.com:8443"
    assert http["oauth"]["connect_ports"] == [8443]
    assert "every request would be refused" not in http["exposes"]
