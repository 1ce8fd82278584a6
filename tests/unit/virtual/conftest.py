"""Helpers for driving an AndroidPhone's shell directly, without a transport."""

from __future__ import annotations

import dataclasses
import time
from importlib import resources
from pathlib import Path

import pytest

from farm.clock import FakeClock
from farm.virtual.android import AndroidPhone, profiles
from farm.virtual.android.packages import Installed


class CollectIO:
    """A ShellIO that collects stdout and stderr and feeds fixed stdin."""

    def __init__(self, stdin: bytes = b"") -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()
        self._stdin = [stdin] if stdin else []

    async def read_stdin(self) -> bytes:
        return self._stdin.pop(0) if self._stdin else b""

    def write_stdout(self, data: bytes) -> None:
        self.stdout += data

    def write_stderr(self, data: bytes) -> None:
        self.stderr += data

    async def drain(self) -> None:
        return None


def fixture_text(name: str) -> str:
    """A fixture file shipped with farm.virtual.android."""
    return resources.files("farm.virtual.android").joinpath(f"fixtures/{name}").read_text()


async def run(phone: AndroidPhone, command: str, stdin: bytes = b"") -> tuple[int, str, str]:
    """Run one command line; returns (status, stdout, stderr)."""
    io = CollectIO(stdin)
    status = await phone.shell(command, io)
    return status, io.stdout.decode(), io.stderr.decode()


def sh(phone: AndroidPhone, command: str, stdin: bytes = b"") -> tuple[int, str, str]:
    """:func:`run` on a fresh event loop, for tests without app timers."""
    import asyncio

    return asyncio.run(run(phone, command, stdin))


def install_fake_tvmrpc(phone: AndroidPhone, *, debuggable: bool = True) -> None:
    """Register the TVM RPC app as installed without an APK (for app-logic tests)."""
    pkg = "org.apache.tvm.tvmrpc"
    phone.packages.installed[pkg] = Installed(
        pkg, 1, "1.0", 24, 33, ["ab" * 32], debuggable,
        [(f"{pkg}.MainActivity", True), (f"{pkg}.RPCActivity", False)],
        f"{pkg}.MainActivity", ["android.permission.INTERNET"], [],
        f"/data/app/~~AAAA==/{pkg}-BBBB==", 10150, time.time(), time.time(),
    )
    phone.storage.app_dir(pkg).mkdir(parents=True, exist_ok=True)


@pytest.fixture
def clock() -> FakeClock:
    """Monotonic time for the phone's physics; tests move it with ``advance``."""
    return FakeClock()


@pytest.fixture
def phone(tmp_path: Path, clock: FakeClock) -> AndroidPhone:
    """A Pixel 8 profile phone with a short RPC start delay."""
    spec = dataclasses.replace(profiles(1)[0], rpc_start_delay_s=0.01)
    return AndroidPhone(spec, tmp_path / "phone", net=None, clock=clock.monotonic)
