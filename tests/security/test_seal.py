"""Sealed request state: integrity, expiry, key ids, shared keyrings."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fsnotes.security.seal import (
    KEYRING_NAME,
    Keyring,
    Sealer,
    StateExpired,
    StateInvalid,
    StateUnknownKey,
    digest_arguments,
)


def test_keyring_created_0600_and_reused(tmp_path: Path) -> None:
    ring = Keyring.load_or_create(tmp_path)
    mode = stat.S_IMODE(os.stat(tmp_path / KEYRING_NAME).st_mode)
    assert mode == 0o600
    again = Keyring.load_or_create(tmp_path)
    assert again.active == ring.active and again.keys == ring.keys


def test_keyring_readable_by_others_is_refused(tmp_path: Path) -> None:
    Keyring.load_or_create(tmp_path)
    os.chmod(tmp_path / KEYRING_NAME, 0o644)
    with pytest.raises(ValueError, match="0600"):
        Keyring.load_or_create(tmp_path)


def test_seal_roundtrip_and_expiry(tmp_path: Path) -> None:
    sealer = Sealer(Keyring.load_or_create(tmp_path))
    state = sealer.seal({"p": "ada", "exp": 1000})
    assert sealer.open(state, now=999)["p"] == "ada"
    with pytest.raises(StateExpired):
        sealer.open(state, now=1000)


@pytest.mark.parametrize("mutate", ["payload", "mac", "kid", "format", "truncate", "type"])
def test_tampered_state_is_refused(tmp_path: Path, mutate: str) -> None:
    sealer = Sealer(Keyring.load_or_create(tmp_path))
    state = sealer.seal({"p": "ada", "exp": 10**12})
    fmt, kid, body, mac = state.split(".")
    forged: object
    if mutate == "payload":
        # another principal's body under the original MAC
        other = sealer.seal({"p": "eve", "exp": 10**12})
        forged = ".".join([fmt, kid, other.split(".")[2], mac])
    elif mutate == "mac":
        forged = ".".join([fmt, kid, body, mac[:-2] + ("AA" if mac[-2:] != "AA" else "BB")])
    elif mutate == "kid":
        forged = ".".join([fmt, "zzzzzzzz", body, mac])
    elif mutate == "format":
        forged = ".".join(["v2", kid, body, mac])
    elif mutate == "truncate":
        forged = state[: len(state) // 2]
    else:
        forged = {"not": "a string"}
    with pytest.raises(StateInvalid):
        sealer.open(forged, now=0)


def test_unknown_key_is_distinguishable(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = Sealer(Keyring.load_or_create(tmp_path / "a"))
    b = Sealer(Keyring.load_or_create(tmp_path / "b"))
    with pytest.raises(StateUnknownKey):
        b.open(a.seal({"exp": 10**12}), now=0)


def test_rotation_keeps_old_states_valid(tmp_path: Path) -> None:
    ring = Keyring.load_or_create(tmp_path)
    old_state = Sealer(ring).seal({"n": 1, "exp": 10**12})
    rotated = ring.rotated()
    rotated.save(tmp_path)
    reloaded = Keyring.load_or_create(tmp_path)
    assert reloaded.active == rotated.active != ring.active
    sealer = Sealer(reloaded)
    assert sealer.open(old_state, now=0)["n"] == 1
    assert sealer.open(sealer.seal({"n": 2, "exp": 10**12}), now=0)["n"] == 2


def test_processes_sharing_a_state_dir_verify_each_other(tmp_path: Path) -> None:
    # Two independent loads (as two processes would do) agree on the key.
    first = Sealer(Keyring.load_or_create(tmp_path))
    second = Sealer(Keyring.load_or_create(tmp_path))
    assert second.open(first.seal({"exp": 10**12, "x": 1}), now=0)["x"] == 1


def test_argument_digest_is_canonical() -> None:
    assert digest_arguments({"a": 1, "b": "x"}) == digest_arguments({"b": "x", "a": 1})
    assert digest_arguments({"title": "a"}) != digest_arguments({"title": "b"})


def test_a_key_rotated_by_another_process_is_picked_up(tmp_path: Path) -> None:
    running = Sealer(
        Keyring.load_or_create(tmp_path), reload=lambda: Keyring.load_or_create(tmp_path)
    )
    # another process rotates the key and seals with the new one
    rotated = Keyring.load_or_create(tmp_path).rotated()
    rotated.save(tmp_path)
    state = Sealer(rotated).seal({"exp": 10**12, "x": 2})
    assert running.open(state, now=0)["x"] == 2
    # without reload the same state is an unknown key
    with pytest.raises(StateUnknownKey):
        Sealer(Keyring(active="k", keys={"k": b"k" * 32})).open(state, now=0)


def test_a_sealer_following_its_file_seals_with_a_rotated_key_and_drops_a_retired_one(
    tmp_path: Path,
) -> None:
    ring = Keyring.load_or_create(tmp_path)
    sealer = Sealer(
        ring, reload=lambda: Keyring.load(tmp_path), version=lambda: Keyring.version(tmp_path)
    )
    old_state = sealer.seal({"exp": 2e9})
    new = ring.rotated()
    new.save(tmp_path)
    assert sealer.active == new.active and sealer.seal({"exp": 2e9}).split(".")[1] == new.active
    assert sealer.open(old_state, now=1e9) == {"exp": 2e9}  # older keys still verify
    # A copy that cannot be used (readable by others) keeps the keys read before...
    Keyring(active=new.active, keys={new.active: new.keys[new.active]}).save(tmp_path)
    os.chmod(tmp_path / KEYRING_NAME, 0o644)
    assert sealer.open(old_state, now=1e9) == {"exp": 2e9}
    # ...and once private, the retired key verifies nothing more.
    os.chmod(tmp_path / KEYRING_NAME, 0o600)
    with pytest.raises(StateUnknownKey):
        sealer.open(old_state, now=1e9)
