"""The pool's check of an idle PostgreSQL connection works whatever its socket's descriptor
number: ``select.select`` refuses a descriptor of 1024 or more (``ValueError: filedescriptor
out of range``), which a server holding many sockets and files reaches, and every checkout
would then fail. A real PostgreSQL (tests/pgcluster.py), a real psycopg connection, its
socket numbered past 1023 (the ``many_descriptors`` fixture, tests/conftest.py)."""

from __future__ import annotations


def test_an_idle_connection_past_descriptor_1023_is_checked(
    pg_dsn: str, many_descriptors: None
) -> None:
    import psycopg

    from fsnotes.state.postgres import _check

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.fileno() >= 1024
        _check(conn)  # alive, nothing waiting: no exception, no round trip
        conn.execute("SELECT 1")
