"""``farm-boards``: run virtual Linux boards for a demo, and print their ``[[boards]]`` config.

``farm-boards serve --count N --data-dir DIR [--arch aarch64]`` starts N
virtual boards (real ``sshd``s on loopback ports, :mod:`farm.virtual.board`;
``aarch64`` ones run their TVM RPC server as AArch64 code under QEMU), writes the
``[[boards]]`` tables that reach them to ``DIR/boards.toml`` (and stdout), and
runs until SIGINT/SIGTERM, then ends every board and everything run on it.
Append the file to farmd's config (or ``include`` its tables) to add the boards.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import click

from farm.config import BoardSettings
from farm.errors import ToolMissing
from farm.virtual.board import ARCHES
from farm.virtual.board_testing import virtual_boards

DEFAULT_DATA_DIR = Path.home() / ".local" / "state" / "farm" / "boards"
CONFIG_FILE = "boards.toml"


def boards_toml(boards: list[BoardSettings]) -> str:
    """``[[boards]]`` tables for ``boards`` (TOML; strings as JSON strings, which TOML reads)."""
    lines: list[str] = []
    for board in boards:
        lines.append("[[boards]]")
        for name, value in board.model_dump(exclude_defaults=True).items():
            text = json.dumps(value if isinstance(value, int | float | bool) else str(value))
            lines.append(f"{name} = {text}")
        lines.append("")
    return "\n".join(lines)


@click.group()
def main() -> None:
    """Virtual Linux boards reached over a real sshd."""


@main.command()
@click.option("--count", type=click.IntRange(min=1), default=2, show_default=True,
              help="How many boards.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              default=DEFAULT_DATA_DIR, show_default=True,
              help="Folder for the boards' sandboxes, keys and boards.toml.")
@click.option("--arch", type=click.Choice(ARCHES), default="host", show_default=True,
              help="host: the boards run host code; aarch64: AArch64 code under QEMU.")
def serve(count: int, data_dir: Path, arch: str) -> None:
    """Run COUNT boards until SIGINT/SIGTERM; print their [[boards]] config."""
    data_dir.mkdir(parents=True, exist_ok=True)
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    try:
        prefix = "va" if arch == "aarch64" else "vb"
        with virtual_boards(count, data_dir, prefix=prefix, arch=arch) as boards:
            text = boards_toml([board.settings() for board in boards])
            (data_dir / CONFIG_FILE).write_text(text)
            click.echo(text, nl=False)
            done.wait()
    except (RuntimeError, ToolMissing) as exc:  # sshd, QEMU or the cross build missing
        raise click.ClickException(str(exc)) from exc
