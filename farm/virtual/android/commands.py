"""Importing this module registers every shell command in ``context.COMMANDS``."""

from farm.virtual.android import cmd_am, cmd_dumpsys, cmd_files, cmd_pm, cmd_system  # noqa: F401
