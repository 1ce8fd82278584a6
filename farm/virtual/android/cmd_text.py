"""toybox text commands: md5sum, sha256sum, grep, head, tail, wc.

They read files (or stdin) and print what they found; error texts are
toybox's, as in :mod:`farm.virtual.android.cmd_files`.
"""

from __future__ import annotations

import hashlib
import re

from farm.virtual.android.context import Ctx, command, read_all, strerror


async def _input_lines(ctx: Ctx, files: list[str]) -> list[str] | None:
    if not files:
        return (await read_all(ctx.stdin)).decode(errors="replace").splitlines(keepends=True)
    lines: list[str] = []
    for arg in files:
        try:
            text = ctx.phone.read_file(ctx.path(arg), app=ctx.app).decode(errors="replace")
            lines += text.splitlines(keepends=True)
        except OSError as exc:
            ctx.eprint(f"{ctx.argv[0]}: {arg}: {strerror(exc)}\n")
            return None
    return lines


async def _digest(ctx: Ctx, algo: str) -> int:
    status = 0
    for arg in ctx.argv[1:] or ["-"]:
        try:
            if arg == "-":
                data = await read_all(ctx.stdin)
            else:
                data = ctx.phone.read_file(ctx.path(arg), app=ctx.app)
        except OSError as exc:
            ctx.eprint(f"{algo}sum: {arg}: {strerror(exc)}\n")
            status = 1
            continue
        ctx.print(f"{hashlib.new(algo, data).hexdigest()}  {arg}\n")
    return status


@command("md5sum")
async def md5sum(ctx: Ctx) -> int:
    """MD5 of files: ``HEX  NAME``."""
    return await _digest(ctx, "md5")


@command("sha256sum")
async def sha256sum(ctx: Ctx) -> int:
    """SHA-256 of files: ``HEX  NAME``."""
    return await _digest(ctx, "sha256")


@command("grep")
async def grep(ctx: Ctx) -> int:
    """Filter lines: ``-v``, ``-i``, ``-c``, ``-q``, ``-E``, ``-F``, ``-e PAT``."""
    flags, pattern, files = "", None, []
    args = ctx.argv[1:]
    while args:
        arg = args.pop(0)
        if arg == "-e" and args:
            pattern = args.pop(0)
        elif arg.startswith("-") and len(arg) > 1 and pattern is None:
            flags += arg[1:]
        elif pattern is None:
            pattern = arg
        else:
            files.append(arg)
    if pattern is None:
        ctx.eprint("grep: Need 1 argument\n")
        return 2
    regex = re.compile(re.escape(pattern) if "F" in flags else pattern,
                       re.IGNORECASE if "i" in flags else 0)
    lines = await _input_lines(ctx, files)
    if lines is None:
        return 2
    hits = [line for line in lines if bool(regex.search(line)) != ("v" in flags)]
    if "q" not in flags:
        if "c" in flags:
            ctx.print(f"{len(hits)}\n")
        else:
            ctx.print("".join(h if h.endswith("\n") else h + "\n" for h in hits))
    return 0 if hits else 1


def _count_arg(ctx: Ctx) -> tuple[int, list[str]]:
    count, rest = 10, []
    args = ctx.argv[1:]
    while args:
        arg = args.pop(0)
        if arg == "-n" and args:
            count = int(args.pop(0))
        elif arg.startswith("-n"):
            count = int(arg[2:])
        elif arg.startswith("-") and arg[1:].isdigit():
            count = int(arg[1:])
        else:
            rest.append(arg)
    return count, rest


@command("head")
async def head(ctx: Ctx) -> int:
    """First N lines (``-n N``)."""
    count, files = _count_arg(ctx)
    lines = await _input_lines(ctx, files)
    if lines is None:
        return 1
    ctx.print("".join(lines[:count]))
    return 0


@command("tail")
async def tail(ctx: Ctx) -> int:
    """Last N lines (``-n N``)."""
    count, files = _count_arg(ctx)
    lines = await _input_lines(ctx, files)
    if lines is None:
        return 1
    ctx.print("".join(lines[-count:] if count else []))
    return 0


@command("wc")
async def wc(ctx: Ctx) -> int:
    """Count lines (``-l``) of stdin or files."""
    files = [a for a in ctx.argv[1:] if not a.startswith("-")]
    lines = await _input_lines(ctx, files)
    if lines is None:
        return 1
    if "-l" in ctx.argv:
        ctx.print(f"{len(lines)}\n")
    else:
        words = sum(len(x.split()) for x in lines)
        size = sum(len(x.encode()) for x in lines)
        ctx.print(f"{len(lines):7d} {words:7d} {size:7d}\n")
    return 0
