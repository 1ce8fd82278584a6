"""Rendering for farmctl: JSON for programs, CSV for spreadsheets, rich tables for people.

Every listing takes ``--json``; JSON output is one document on stdout (a list
for listings) with datetimes as ISO 8601 strings and enums as their values, so
``farmctl jobs --json | jq`` works. Messages for people go to stderr, never
into the data on stdout.

Tables are drawn with rich on a terminal only. Off a terminal (a pipe, a file,
a test) :func:`print_table` writes tab-separated lines, a header first, and
never shortens a cell: rich folded or cut columns to fit its width, so a piped
``farmctl devices`` printed serials as ``127.0.0....`` that could not be
pasted into ``drain`` or ``reserve`` (issue 25).
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

import click

from farm.jsonable import plain  # kept here for farmctl's commands, which import it from here

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["Column", "amount", "echo_json", "note", "plain", "print_table", "to_csv", "to_json"]

#: Width for tables when stdout is not a terminal (pipes, tests): wide enough
#: that columns are not folded into unreadable slivers.
PIPE_WIDTH = 160
#: The widest a ``wide`` table is drawn on a terminal (characters).
_WIDE_MAX = 10_000


def to_json(data: Any) -> str:
    """Indented JSON of ``data`` (see :func:`plain`)."""
    return json.dumps(plain(data), indent=2, sort_keys=True)


def echo_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout."""
    click.echo(to_json(data))


def to_csv(rows: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> str:
    """CSV text with a header line; values rendered by :func:`plain`."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(fields), extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(plain(row.get(k))) for k in fields})
    return buffer.getvalue()


def amount(value: float, unit: str) -> str:
    """``12.345 ms`` for seconds, else ``value unit`` to 4 significant digits.

    How ``farmctl results`` and ``farmctl wait`` write a median, so the two agree.
    """
    return f"{value * 1e3:.3f} ms" if unit == "s" else f"{value:.4g} {unit}"


class Column:
    """One table column: a row key, a header, an optional justification.

    ``whole``: on a terminal the column is as wide as its widest cell and never
    shrinks, so its values (serials) are never cut with an ellipsis: other
    columns wrap first, and a terminal too narrow even for it folds the value
    onto more lines, whole. ``stack``: on a terminal a cell is split at this
    separator into one line per part, each never wrapped (``", "``: one reading
    a line, instead of words wrapped in a sliver); piped, the cell stays one line.
    """

    def __init__(self, key: str, header: str | None = None, justify: str = "left", *,
                 whole: bool = False, stack: str | None = None) -> None:
        self.key = key
        self.header = header or key
        self.justify = justify
        self.whole = whole
        self.stack = stack


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(v) for v in value)
    return str(value)


def _stdout_is_tty() -> bool:
    """Whether stdout is a terminal; ``TTY_COMPATIBLE=1`` or ``0`` (rich's variable) says so.

    ``TTY_COMPATIBLE=1 COLUMNS=100 farmctl devices | less -R`` draws the table a
    100-column terminal shows (rich reads both variables).
    """
    forced = os.environ.get("TTY_COMPATIBLE", "")
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stdout  # click's CliRunner swaps it too; get_text_stream is deprecated
    return hasattr(stream, "isatty") and stream.isatty()


def _console() -> Console:
    from rich.console import Console  # for a terminal only: a pipe never loads rich

    is_tty = _stdout_is_tty()
    return Console(file=sys.stdout, width=None if is_tty else PIPE_WIDTH, highlight=False)


def _tsv_cell(value: Any) -> str:
    """A cell on one line without tabs, whole."""
    return " ".join(_cell(value).split()) if value is not None else ""


def _stacked(text: str, separator: str | None) -> str:
    """``text`` with one line per part between ``separator``s (unchanged for None)."""
    return text if separator is None else "\n".join(text.split(separator))


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column],
                title: str | None = None, *, wide: bool = False) -> None:
    """Print ``rows`` on stdout: a rich table on a terminal, tab-separated lines elsewhere.

    ``no <title>`` goes to stderr when there are no rows. ``wide``: on a
    terminal, every cell on one line and the table as wide as they make it,
    past the terminal's width (as ``kubectl get -o wide``; ``less -S`` scrolls
    it), rather than many columns squeezed into slivers.
    """
    if not rows:
        note(f"no {title or 'rows'}")
        return
    if not _stdout_is_tty():
        lines = ["\t".join(c.header for c in columns)]
        lines += ["\t".join(_tsv_cell(row.get(c.key)) for c in columns) for row in rows]
        click.echo("\n".join(lines))
        return
    from rich.cells import cell_len
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    cells = [[_stacked(_cell(row.get(c.key)), c.stack) for c in columns] for row in rows]
    for index, column in enumerate(columns):
        width = None
        if column.whole:  # the widest cell, never collapsed (rich shrinks only unset widths)
            width = max(cell_len(line) for cell in [column.header, *(r[index] for r in cells)]
                        for line in cell.splitlines() or [""])
        table.add_column(column.header, justify=column.justify,  # type: ignore[arg-type]
                         width=width, overflow="fold",
                         no_wrap=wide or column.stack is not None)
    for row_cells in cells:
        table.add_row(*row_cells)
    console = _console()
    if wide:
        unbounded = console.options.update_width(_WIDE_MAX)
        console.width = max(console.width, console.measure(table, options=unbounded).maximum)
    console.print(table)


def note(message: str) -> None:
    """A message for people, on stderr."""
    click.echo(message, err=True)
