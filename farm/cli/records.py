"""``farmctl records list | export --out DIR | import DIR``: the fleet's tuning records.

Every record a tuning measured is kept in the database by workload, target and
device model (:mod:`farm.queue.tuning`), and a tuning starts from the best of
them (:mod:`farm.tuning.fleet_records`). ``export`` writes them as a MetaSchedule
JSON database (``database_workload.json``, ``database_tuning_record.json``:
``tvm.s_tir.meta_schedule.database.JSONDatabase(work_dir=DIR)`` loads it);
``import`` keeps such a folder's records, e.g. from another farm or a
MetaSchedule run of one's own, under the device model they were measured on.
These commands work on the farm host's database (not through ``--server``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from farm.cli.output import Column, echo_json, note, print_table
from farm.cli.state import CliState, pass_state
from farm.clock import SystemClock
from farm.errors import UserFault

__all__ = ["records"]

_COLUMNS = [
    Column("workload"), Column("shash", "structural hash"), Column("target_label", "target"),
    Column("device_model", "device model"), Column("best_ms", "best ms", "right"),
    Column("trials", justify="right"), Column("failed", justify="right"),
]


def _target_label(target: str) -> str:
    """A target's canonical JSON, short: ``llvm mtriple=aarch64-linux-android num-cores=8``."""
    try:
        data = json.loads(target)
    except ValueError:
        return target
    if not isinstance(data, dict):
        return target
    words = [str(data.get("kind", "?"))]
    words += [f"{k}={data[k]}" for k in ("mtriple", "mcpu", "num-cores") if data.get(k)]
    return " ".join(words)


@click.group()
def records() -> None:
    """The fleet's tuning records: list, export (MetaSchedule JSON) and import them."""


@records.command(name="list")
@click.option("--device-model", help="Only the records of this device model.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_state
def list_(state: CliState, device_model: str | None, as_json: bool) -> None:
    """Per workload, target and device model: its task, best latency and trials measured."""
    summaries = state.store.tuning_record_summaries(device_model)
    rows: list[dict[str, Any]] = [
        {"workload": s.label, "shash": s.shash, "target": s.target,
         "target_label": _target_label(s.target), "device_model": s.device_model,
         "best_ms": None if s.best_s is None else round(s.best_s * 1e3, 4),
         "trials": s.trials, "failed": s.failed}
        for s in summaries
    ]
    if as_json:
        echo_json(rows)
        return
    print_table(rows, _COLUMNS, "tuning records")


@records.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              required=True, help="Folder to write the two MetaSchedule JSON files into.")
@click.option("--device-model", help="Only the records of this device model.")
@pass_state
def export(state: CliState, out_dir: Path, device_model: str | None) -> None:
    """Write the measured records as a MetaSchedule JSON database folder."""
    from farm.tuning import write_database

    workloads, kept = state.store.fleet_database(device_model)
    try:
        write_database(out_dir, workloads, kept)
    except OSError as exc:
        raise UserFault(f"cannot write {out_dir}: {exc.strerror or exc}") from exc
    note(f"{len(kept)} records of {len(workloads)} workloads written to {out_dir}")


@records.command(name="import")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--device-model", required=True,
              help="The device model (or SoC) the records were measured on.")
@pass_state
def import_(state: CliState, folder: Path, device_model: str) -> None:
    """Keep a MetaSchedule JSON database folder's records (those kept already are skipped)."""
    from farm.jobs.tuning_db import RECORDS_FILE
    from farm.tuning import read_database
    from farm.tuning.fleet_records import fleet_records

    if not (folder / RECORDS_FILE).is_file():
        raise UserFault(f"{folder / RECORDS_FILE}: no such file (a MetaSchedule JSON database "
                        "folder holds it and database_workload.json)")
    try:
        database = read_database(folder)
    except OSError as exc:
        raise UserFault(f"cannot read {exc.filename or folder}: {exc.strerror or exc}") from exc
    found = fleet_records(database, device_model.strip(), lambda _index: f"import {folder.name}")
    kept = state.store.keep_tuning_records(dict(database.workloads), found, None, None,
                                           SystemClock().now())
    note(f"{kept} records kept, {len(found) - kept} kept already, from {folder}")
