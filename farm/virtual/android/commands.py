"""Importing this module registers every shell command in ``context.COMMANDS``."""

from farm.virtual.android import cmd_files, cmd_system  # noqa: F401
