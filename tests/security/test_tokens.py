"""Bearer tokens (fsnotes/security/tokens.py): stored as digests, matched in constant time,
the tokens file re-read when it changes, concurrent adds all kept, bad input refused."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import anyio
import pytest

from fsnotes.security import tokens
from fsnotes.security.tokens import (
    BearerTokens,
    TokenEntry,
    Unauthenticated,
    add_token,
    bearer_token,
    digest_of,
    entry_from,
    read_tokens,
    revoke_tokens,
)


def test_new_tokens_are_256_random_bits_and_stored_only_as_digests(tmp_path: Path) -> None:
    token, entry = add_token(tmp_path, "ada")
    assert token.startswith("fsn_") and len(token) == 4 + 43
    assert entry.digest == digest_of(token) and len(entry.digest) == 32
    text = (tmp_path / tokens.TOKENS_FILE).read_text()
    assert token not in text and entry.digest.hex() in text
    assert (tmp_path / tokens.TOKENS_FILE).stat().st_mode & 0o777 == 0o600
    assert {add_token(tmp_path, "ada")[0] for _ in range(20)}.isdisjoint({token})


@pytest.mark.parametrize(
    ("header", "token"),
    [("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc", "abc"),
     ("Bearer a.b-c~d+/=", "a.b-c~d+/="), ("Bearer", None), ("Bearer ", None),
     ("Basic abc", None), ("Bearer a b", None),
     ("Bearer abc\x00", None), ("abc", None), (None, None), ("Bearer " + "a" * 300, None)],
)  # fmt: skip
def test_only_a_well_formed_bearer_value_yields_a_token(
    header: str | None, token: str | None
) -> None:
    assert bearer_token(header) == token


def test_a_principal_is_matched_by_its_tokens_digest_only(tmp_path: Path) -> None:
    auth = BearerTokens([TokenEntry("ada", digest_of("fsn_one")), TokenEntry("bob", digest_of(
        "fsn_two"))], None)  # fmt: skip

    async def principal(header: str) -> str:
        identity = await auth.authenticate({"authorization": header})
        assert identity.ceiling is None  # a static token sets no ceiling
        return identity.principal

    assert anyio.run(principal, "Bearer fsn_one") == "ada"
    assert anyio.run(principal, "Bearer fsn_two") == "bob"
    for wrong in ("Bearer fsn_on", "Bearer fsn_one1", "Bearer FSN_ONE", "fsn_one"):
        with pytest.raises(Unauthenticated) as info:
            anyio.run(principal, wrong)
        assert str(info.value) == "Unauthorized"  # one message, whatever the reason


def test_the_tokens_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    auth = BearerTokens([], tmp_path)
    assert auth.entries == ()
    first, _ = add_token(tmp_path, "ada")
    assert auth.match(first) == "ada"
    second, _ = add_token(tmp_path, "bob")
    assert auth.match(second) == "bob" and auth.match(first) == "ada"
    assert revoke_tokens(tmp_path, principal="ada") == 1
    assert auth.match(first) is None and auth.match(second) == "bob"
    (tmp_path / tokens.TOKENS_FILE).unlink()
    assert auth.match(second) is None


def test_a_damaged_tokens_file_keeps_the_last_good_tokens_and_says_why(tmp_path: Path) -> None:
    token, _ = add_token(tmp_path, "ada")
    auth = BearerTokens([], tmp_path)
    assert auth.match(token) == "ada" and auth.problem is None
    path = tmp_path / tokens.TOKENS_FILE
    tmp = tmp_path / "damaged"
    tmp.write_text("{not json")
    os.replace(tmp, path)
    assert auth.match(token) == "ada"
    assert auth.problem == f"{tokens.TOKENS_FILE} is not valid JSON"
    with pytest.raises(tokens.TokenFileError):
        read_tokens(tmp_path)


def test_a_symlink_in_place_of_the_tokens_file_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"tokens": [{"principal": "eve", "sha256": "0" * 64}]}))
    state = tmp_path / "state"
    state.mkdir()
    (state / tokens.TOKENS_FILE).symlink_to(elsewhere)
    with pytest.raises(tokens.TokenFileError, match="symbolic link"):
        read_tokens(state)
    assert BearerTokens([], state).problem is not None


@pytest.mark.parametrize(
    "raw",
    [{"principal": "ada"}, {"principal": "ada", "sha256": "xyz"},
     {"principal": "ada", "sha256": "A" * 64}, {"principal": "", "sha256": "0" * 64},
     {"principal": " ada", "sha256": "0" * 64}, {"principal": "a\u202eb", "sha256": "0" * 64},
     {"principal": "a" * 200, "sha256": "0" * 64}, ["ada"]],
)  # fmt: skip
def test_malformed_entries_are_refused_with_a_reason(raw: object) -> None:
    with pytest.raises(ValueError, match="#1"):
        entry_from(raw, "#1")


def _add_many(state: str, who: str, count: int) -> None:
    for _ in range(count):
        add_token(Path(state), who)


def test_concurrent_adds_from_several_processes_all_survive(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_add_many, args=(str(tmp_path), f"p{i}", 10)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    entries = read_tokens(tmp_path)
    assert len(entries) == 40 and len({e.digest for e in entries}) == 40


def test_revoke_by_id_needs_eight_hex_digits(tmp_path: Path) -> None:
    _token, entry = add_token(tmp_path, "ada")
    with pytest.raises(ValueError):
        revoke_tokens(tmp_path, token_id=entry.id[:4])
    assert revoke_tokens(tmp_path, token_id=entry.id) == 1
    assert read_tokens(tmp_path) == []
