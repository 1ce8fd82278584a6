"""What TVM's tracker does with a second entry for one server (the pool key's design rests on it).

A registrar connection's entry is removed when it closes only if its matchkey
names the key it was put under (``split_random_key``); an entry that reuses
the app's matchkey under another key stays behind (:mod:`farm.fleet.pool`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from socket import socket

from farm.clock import wait_until
from farm.tvm.protocol import TrackerCode, call, open_tracker
from farm.tvm.tracker import TrackerProcess, summary

TIMEOUT_S = 5.0


@contextmanager
def registrar(tracker: TrackerProcess, info_key: str) -> Iterator[socket]:
    """A tracker connection that sent UPDATE_INFO with ``info_key``; closed after the block."""
    sock = open_tracker(tracker.host, tracker.port, time.monotonic() + TIMEOUT_S)
    with sock:
        info = {"key": info_key, "addr": ["127.0.0.1", 1234]}
        assert call(sock, [TrackerCode.UPDATE_INFO.value, info],
                    time.monotonic() + TIMEOUT_S) == TrackerCode.SUCCESS
        yield sock


def put(sock: socket, key: str, matchkey: str) -> None:
    """PUT one entry under ``key`` with ``matchkey``."""
    message = [TrackerCode.PUT.value, key, [1234, matchkey], "127.0.0.1"]
    assert call(sock, message, time.monotonic() + TIMEOUT_S) == TrackerCode.SUCCESS


def free(tracker: TrackerProcess, key: str) -> int:
    """How many entries ``key``'s queue offers now."""
    return summary(tracker.host, tracker.port).queue(key).free


class TestPoolEntries:
    def test_an_entry_named_by_its_key_leaves_with_its_connection(
        self, tracker: TrackerProcess, key: str
    ) -> None:
        """A pool entry whose matchkey starts with the pool key is removed when withdrawn."""
        with registrar(tracker, f"pool:{key}") as sock:
            put(sock, key, f"{key}:abc")
            assert free(tracker, key) == 1
        wait_until(lambda: free(tracker, key) == 0, 10.0, "the entry removed")

    def test_an_entry_reusing_the_apps_matchkey_stays(
        self, tracker: TrackerProcess, key: str
    ) -> None:
        """An entry reusing the app's matchkey outlives its connection: never put one."""
        with registrar(tracker, f"server:{key}-phone") as app:
            put(app, f"{key}-phone", f"{key}-phone:0.25")
            with registrar(tracker, f"pool:{key}") as sock:
                put(sock, key, f"{key}-phone:0.25")
                put(sock, f"{key}-probe", f"{key}-probe:1")  # to see the close land
            wait_until(lambda: free(tracker, f"{key}-probe") == 0, 10.0, "the close handled")
            assert free(tracker, key) == 1
            assert free(tracker, f"{key}-phone") == 1
