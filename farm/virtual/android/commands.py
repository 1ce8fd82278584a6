"""Importing this module registers every shell command in ``context.COMMANDS``."""

from farm.virtual.android import (  # noqa: F401
    cmd_am,
    cmd_dumpsys,
    cmd_files,
    cmd_pm,
    cmd_system,
    cmd_text,
)
