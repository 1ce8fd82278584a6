"""A Linux board's health reading from its one health round trip's output (pure).

:func:`farm.boards.commands.health_argv` prints the thermal zones, the load,
``/proc/meminfo``, ``df -k`` of the work folder and whether the server's
process group lives; :func:`reading_from_output` turns that into the readings
:data:`~farm.health.kind_readings.BOARD_READINGS` declares.
"""

from __future__ import annotations

from datetime import datetime

from farm.boards import commands
from farm.controllers.base import BOARD, HealthReading
from farm.device.cpu import parse_proc_meminfo
from farm.device.storage import parse_df_k
from farm.device.thermal import parse_thermal_zones
from farm.errors import PhoneFault
from farm.health.kind_readings import BoardRaw
from farm.health.readings import declared
from farm.health.sample import ADB_STATE_DEVICE

__all__ = ["reading_from_output"]


def reading_from_output(serial: str, at: datetime, output: bytes | str, *,
                        registered: bool | None = None) -> HealthReading:
    """A health reading from :func:`farm.boards.commands.health_argv`'s output.

    The readings are those :data:`~farm.health.kind_readings.BOARD_READINGS`
    declares (hottest zone, load, available memory, free space in the work
    folder); ``app_running``: the server's process group is alive.

    Raises:
        PhoneFault: the output is cut short or unreadable.
    """
    try:
        types, temps, loadavg, meminfo, df, server = commands.sections(output, 6)
        raw = BoardRaw(
            zone_temps_c=[zone.temp_c for zone in parse_thermal_zones(types, temps)],
            load=[float(part) for part in loadavg.split()[:3]],
            meminfo_kb=parse_proc_meminfo(meminfo), filesystems=parse_df_k(df),
        )
        if not raw.load:
            raise ValueError("empty /proc/loadavg")
    except (ValueError, IndexError) as exc:
        raise PhoneFault(serial, f"unreadable board health: {exc}") from exc
    return HealthReading(serial, at, ADB_STATE_DEVICE, kind=BOARD,
                         readings=declared(BOARD).read(raw),
                         app_running=server.strip() == "running", registered=registered)
