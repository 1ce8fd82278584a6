"""The farmd command: read the settings, run :class:`~farm.daemon.farmd.Farmd` until a signal."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import click

from farm import logs, privacy
from farm.click_types import CONTEXT_SETTINGS
from farm.config import load_config
from farm.daemon.farmd import Farmd
from farm.errors import FarmError, StopAsked

__all__ = ["main"]


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML settings file (default: $FARM_CONFIG, then /etc/farm/farm.toml).")
@click.option("--virtual-phones", type=click.IntRange(min=0), default=None,
              help="Also start N virtual phones (a demo fleet).")
@click.option("--same-model", is_flag=True, default=None,
              help="Make every virtual phone one model (tune --phones 2 needs two of one model; "
                   "by default they cycle through four models). Default: virtual.same_model.")
@click.option("--json-logs/--console-logs", default=None,
              help="Log format (default: JSON off a TTY).")
def main(config_path: Path | None, virtual_phones: int | None, same_model: bool | None,
         json_logs: bool | None) -> None:
    """farmd: keep a fleet of Android phones ready for TVM benchmarks and tuning."""
    privacy.restrict_umask()  # its files, and its children's, are its user's only
    try:
        settings = load_config(config_path)
    except FarmError as exc:
        raise click.ClickException(str(exc)) from exc
    logs.configure(json=json_logs, level=settings.log_level)
    if same_model:
        settings = settings.model_copy(update={
            "virtual": settings.virtual.model_copy(update={"same_model": True})})
    count = settings.virtual.count if virtual_phones is None else virtual_phones
    daemon = Farmd(settings, virtual_phones=count)
    done = threading.Event()

    def on_signal(*_: object) -> None:
        done.set()
        daemon.ask_stop()  # a start under way ends at its next step

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    try:
        daemon.start()
    except StopAsked:
        pass  # stopped below, as after a whole start
    except FarmError as exc:
        daemon.stop()
        raise click.ClickException(str(exc)) from exc
    except BaseException:
        daemon.stop()  # a bug, but what started must still end
        raise
    done.wait()
    daemon.stop()
    # Everything farmd owns is stopped and its database closed. What is left are
    # worker threads of APScheduler's pool, which the interpreter joins at exit:
    # a health sweep in flight kept a stopped farmd alive for seconds more.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
