"""farm's command-line conventions: help settings, and types that bound input.

The types bound what a user can give farmctl to what can be stored and run.
An unbounded ``type=int`` lets ``farmctl job 99999999999999999999999`` reach the
database driver, which raises ``OverflowError`` (a traceback); ``type=float``
lets ``nan`` and ``inf`` through. These types turn such values into click's
usage error (``Error: Invalid value for 'JOB_ID': ...``, exit code 2).
"""

from __future__ import annotations

import math

import click

from farm.queue.limits import DB_INT_MAX

__all__ = ["CONTEXT_SETTINGS", "DB_INT_MAX", "JOB_ID", "LIMIT", "TOKEN_ID", "Seconds"]

#: Click context settings for farm's commands (farmctl, farmd, apk_tools):
#: ``-h`` is ``--help``, and help shows every default (click marks required
#: options ``[required]`` itself). Subcommands inherit them.
CONTEXT_SETTINGS: dict[str, object] = {"help_option_names": ["-h", "--help"],
                                       "show_default": True}


#: A job id as the store numbers them: 1, 2, ... up to :data:`DB_INT_MAX`.
JOB_ID = click.IntRange(1, DB_INT_MAX)

#: An API token's id (``farmctl token list``), bounded as a job id is.
TOKEN_ID = click.IntRange(1, DB_INT_MAX)

#: How many rows a listing prints at most.
LIMIT = click.IntRange(1, DB_INT_MAX)


#: Seconds per unit a duration may end with (``90``, ``90s``, ``15m``, ``2h``, ``1d``).
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _shown(seconds: float) -> str:
    """``seconds`` in the largest unit that holds it whole: 604800 -> ``7d``, 90 -> ``90s``."""
    for unit, unit_s in sorted(_UNIT_S.items(), key=lambda item: -item[1]):
        if seconds >= unit_s and float(seconds / unit_s).is_integer():
            return f"{seconds / unit_s:g}{unit}"
    return f"{seconds:g}s"


class Seconds(click.ParamType[float]):
    """A finite duration in seconds within ``[min_s, max_s]``; refuses ``nan`` and ``inf``.

    A number may end with a unit: ``s``, ``m``, ``h`` or ``d`` (``--for 2h``).

    Args:
        min_s: the smallest value accepted.
        max_s: the largest value accepted.
        min_open: whether ``min_s`` itself is refused (a poll interval of 0 s is).
    """

    name = "seconds"

    def __init__(self, min_s: float, max_s: float, *, min_open: bool = False) -> None:
        self.min_s = min_s
        self.max_s = max_s
        self.min_open = min_open

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        """``value`` as float seconds; a usage error (exit 2) outside the range."""
        if isinstance(value, float) and math.isfinite(value):
            seconds = value
        else:
            text = str(value).strip().lower()
            scale = _UNIT_S.get(text[-1:], 1.0)
            if text[-1:] in _UNIT_S:
                text = text[:-1]
            try:
                seconds = float(text) * scale
            except ValueError:
                self.fail(f"{value!r} is not a number of seconds", param, ctx)
        low = "<" if self.min_open else "<="
        too_low = seconds <= self.min_s if self.min_open else seconds < self.min_s
        if not math.isfinite(seconds) or too_low or seconds > self.max_s:
            self.fail(f"{value} is not in the range {_shown(self.min_s)}{low}x<="
                      f"{_shown(self.max_s)}", param, ctx)
        return seconds
