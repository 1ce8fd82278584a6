"""A headless chromium for tests of the dashboard, driven through selenium.

Debian's ``chromium`` and ``chromium-driver`` (``setup.sh`` installs them;
Playwright's own browser download cannot be reached from farm's machines).
chromedriver runs in its own process group under a small Python leader that
ends the group, chromium included, when this process dies, even by ``kill -9``
(:func:`farm.procs.end_group_with_parent`); :func:`headless_chromium` also ends
it on exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from farm.clock import wait_until
from farm.netaddr import free_port
from farm.procs import group_alive, signal_group, spawn

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

__all__ = ["DOWNLOADS", "DRIVER_START_TIMEOUT_S", "browser_missing", "headless_chromium"]

DRIVER_START_TIMEOUT_S = 30.0
#: The folder under :func:`headless_chromium`'s ``work_dir`` that downloads go to.
DOWNLOADS = "downloads"

#: The group leader: ends its process group when its parent dies, and runs chromedriver.
_LEADER = ("import subprocess, sys\n"
           "from farm.procs import end_group_with_parent\n"
           "end_group_with_parent(int(sys.argv[1]))\n"
           "sys.exit(subprocess.call(sys.argv[2:]))\n")


def browser_missing() -> str | None:
    """Why no headless chromium can run here, or None when one can."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    if missing:
        return (f"{' and '.join(missing)} not found: apt-get install chromium chromium-driver "
                "(setup.sh does)")
    return None


def _listening(port: int) -> bool:
    with contextlib.closing(socket.socket()) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def headless_chromium(work_dir: Path, *, width: int = 1280, height: int = 900,
                      log_path: Path | None = None) -> Iterator[WebDriver]:
    """A selenium WebDriver of a headless chromium with its profile in ``work_dir``.

    Downloads (a link's ``download``) are saved in ``work_dir/downloads``
    (:data:`DOWNLOADS`) without asking.

    Args:
        work_dir: folder for the browser's profile (created).
        width: the window's width in CSS pixels.
        height: the window's height in CSS pixels.
        log_path: chromedriver's log file; ``work_dir/chromedriver.log`` by default.

    Raises:
        RuntimeError: chromium or chromedriver is missing (:func:`browser_missing`).
        TimeoutError: chromedriver did not listen in time.
    """
    from selenium import webdriver

    reason = browser_missing()
    if reason is not None:
        raise RuntimeError(reason)
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = log_path or work_dir / "chromedriver.log"
    with log_path.open("ab") as log:
        leader = spawn([sys.executable, "-c", _LEADER, str(os.getpid()),
                        str(shutil.which("chromedriver")), f"--port={port}",
                        "--allowed-ips=127.0.0.1"],
                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    driver: WebDriver | None = None
    try:
        wait_until(lambda: leader.poll() is None and _listening(port), DRIVER_START_TIMEOUT_S,
                   f"chromedriver listening on {port}")
        options = webdriver.ChromeOptions()
        options.binary_location = str(shutil.which("chromium"))
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                         "--disable-gpu", "--no-first-run", "--disable-extensions",
                         "--disable-breakpad", "--disable-crash-reporter",
                         f"--window-size={width},{height}",
                         f"--user-data-dir={work_dir / 'profile'}"):
            options.add_argument(argument)
        options.add_experimental_option("prefs", {
            "download.default_directory": str(work_dir / DOWNLOADS),
            "download.prompt_for_download": False})
        driver = webdriver.Remote(command_executor=f"http://127.0.0.1:{port}", options=options)
        yield driver
    finally:
        if driver is not None:
            with contextlib.suppress(Exception):
                driver.quit()
        signal_group(leader.pid)
        leader.wait(timeout=30)
        wait_until(lambda: not group_alive(leader.pid), DRIVER_START_TIMEOUT_S,
                   "chromedriver's process group ended")
