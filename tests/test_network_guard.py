"""The guard in conftest stops a test that tries to leave this machine."""

from __future__ import annotations

import socket

import pytest


def test_outside_address_is_refused() -> None:
    with socket.socket() as s, pytest.raises(RuntimeError, match="may not reach the network"):
        s.connect(("192.0.2.1", 443))


def test_loopback_is_allowed() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket() as client:
            client.connect(server.getsockname())
