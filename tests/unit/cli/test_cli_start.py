"""farmctl's start: what a command imports before it answers (issue 25).

Every command used to import scipy, alembic, numpy and the export code before
it parsed its arguments (2-4 s a call). The group imports a command's module
only when that command runs; these tests run farmctl in a fresh interpreter and
look at ``sys.modules``, which is what a user pays for, not a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

from farm.cli.main import COMMANDS, FarmGroup, cli

#: Modules no listing or ``--version``/``--help`` may load: each costs 0.1-1 s
#: (rich: tens of ms, for a terminal's tables and ``wait``'s bar only; structlog:
#: 0.15 s, loaded by a listing only when it logs, farm.logs.get_logger).
HEAVY = ("scipy", "numpy", "alembic", "matplotlib", "tvm", "onnx", "onnxruntime", "fastapi",
         "httpx", "adbutils", "paramiko", "rich", "structlog")

_PROBE = """
import json, sys
from farm.cli.main import main
loaded = {}
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
    loaded[" ".join(argv)] = sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)
sys.stderr.write("LOADED" + json.dumps(loaded) + "\\n")
"""


def _loaded_after(argvs: list[list[str]]) -> dict[str, list[str]]:
    """The heavy modules loaded after each farmctl command line, run in turn in one interpreter."""
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argvs), json.dumps(HEAVY)],
                          capture_output=True, text=True, timeout=60, check=True)
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED"))
    loaded: dict[str, list[str]] = json.loads(line.removeprefix("LOADED"))
    return loaded


class TestStart:
    def test_version_help_and_listings_load_no_heavy_module(self, tmp_path: Path) -> None:
        """--version, --help, jobs, devices and wait answer without scipy, numpy, TVM, ..."""
        config = tmp_path / "farm.toml"
        config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
        # The first open migrates the new database (alembic); a user's second call does not.
        subprocess.run([sys.executable, "-m", "farm.cli.main", "--config", str(config), "enqueue",
                        "gemm", "--n", "64"], capture_output=True, timeout=60, check=True)
        waiting = ["--config", str(config), "wait", "1", "--timeout", "0.01"]  # exits 124
        loaded = _loaded_after([["--version"], ["--help"],
                                ["--config", str(config), "jobs"],
                                ["--config", str(config), "devices"], waiting])
        assert loaded == {"--version": [], "--help": [], f"--config {config} jobs": [],
                          f"--config {config} devices": [], " ".join(waiting): []}

    def test_every_lazy_command_loads_under_its_name(self) -> None:
        """Each entry of COMMANDS names a click command of that name, with help of its own."""
        ctx = click.Context(cli)
        assert isinstance(cli, FarmGroup)
        for name in COMMANDS:
            command = cli.get_command(ctx, name)
            assert command is not None, name
            assert command.name == name, name
        assert cli.get_command(ctx, "nonsense") is None
