"""toybox file commands and the shell's small ones.

ls, cat, cp, rm, mkdir, chmod, touch, echo, sleep, true, false, pwd, test; the
text commands (md5sum, sha256sum, grep, head, tail, wc) are
:mod:`farm.virtual.android.cmd_text`.

Error texts are toybox's (``lib/lib.c perror_msg``): ``cat: PATH: No such file
or directory`` on stderr and exit 1; ``Permission denied`` as in fixture
``cat_permission_denied_stderr__honor_x8b_android14.txt``.
"""

from __future__ import annotations

import asyncio
import shutil
import stat
from datetime import UTC, datetime

from farm.virtual.android.context import Ctx, command, read_all, strerror

BOOT_EPOCH_S = 1_704_067_200  # 2024-01-01 00:00 UTC: mtime shown for files rendered on read


@command("true")
async def true_(_ctx: Ctx) -> int:
    """Exit 0."""
    return 0


@command("false")
async def false_(_ctx: Ctx) -> int:
    """Exit 1."""
    return 1


@command("echo")
async def echo(ctx: Ctx) -> int:
    """mksh ``echo``: ``-n`` drops the newline, ``-e`` interprets escapes."""
    args, newline, escapes = ctx.argv[1:], True, False
    while args and args[0] in ("-n", "-e", "-E", "-ne", "-en"):
        newline = newline and "n" not in args[0]
        escapes = "e" in args[0]
        args = args[1:]
    text = " ".join(args)
    if escapes:
        text = text.encode().decode("unicode_escape")
    ctx.print(text + ("\n" if newline else ""))
    return 0


@command("pwd")
async def pwd(ctx: Ctx) -> int:
    """Print the working directory."""
    ctx.print(ctx.cwd + "\n")
    return 0


@command("cat")
async def cat(ctx: Ctx) -> int:
    """Concatenate files (or stdin) to stdout."""
    status = 0
    paths = [a for a in ctx.argv[1:] if a != "-u"] or ["-"]
    for arg in paths:
        if arg == "-":
            ctx.out.write(await read_all(ctx.stdin))
            continue
        try:
            ctx.out.write(ctx.phone.read_file(ctx.path(arg), app=ctx.app))
        except OSError as exc:
            ctx.eprint(f"cat: {arg}: {strerror(exc)}\n")
            status = 1
    return status


@command("ls")
async def ls(ctx: Ctx) -> int:
    """List files: names one per line (``-1``, default off a TTY) or ``-l``."""
    flags = "".join(a[1:] for a in ctx.argv[1:] if a.startswith("-") and len(a) > 1)
    paths = [a for a in ctx.argv[1:] if not (a.startswith("-") and len(a) > 1)] or ["."]
    status, files, dirs = 0, [], []
    for arg in paths:
        path = ctx.path(arg)
        if not ctx.phone.exists(path, app=ctx.app):
            ctx.eprint(f"ls: {arg}: No such file or directory\n")
            status = 1
        elif ctx.phone.isdir(path, app=ctx.app) and "d" not in flags:
            names = ctx.phone.listdir(path, app=ctx.app)
            if names is None:
                ctx.eprint(f"ls: {arg}: Permission denied\n")
                status = 1
            else:
                dirs.append((arg, path, names))
        else:
            files.append((arg, path))
    for arg, path in files:
        ctx.print(_ls_line(ctx, arg, path, "l" in flags))
    for i, (arg, path, all_names) in enumerate(dirs):
        if len(paths) > 1:
            ctx.print(("\n" if i or files else "") + f"{arg}:\n")
        names = all_names if "a" in flags else [n for n in all_names if not n.startswith(".")]
        if "l" in flags:
            ctx.print(f"total {len(names) * 4}\n")
        for name in sorted(names, key=lambda n: n.encode()):
            ctx.print(_ls_line(ctx, name, path.rstrip("/") + "/" + name, "l" in flags))
    return status


def _ls_line(ctx: Ctx, shown: str, path: str, long: bool) -> str:
    """One ``ls`` line; ``-l`` as toybox prints it.

    Mode and mtime (UTC, the phone's ``persist.sys.timezone``) come from the
    backing file, so a pushed file shows the host mtime the sync DONE carried.
    """
    if not long:
        return shown + "\n"
    is_dir = ctx.phone.isdir(path, app=ctx.app)
    size, mtime_s = (4096 if is_dir else 0), BOOT_EPOCH_S
    mode = "drwxrwx--x" if is_dir else "-rw-rw-rw-"
    if not ctx.phone.is_virtual(path):
        try:
            st = ctx.phone.storage.check(path, write=False, app=ctx.app).stat()
        except OSError:
            pass
        else:
            mtime_s = int(st.st_mtime)
            if not is_dir:  # folders keep Android's modes, not the host's
                size, mode = st.st_size, stat.filemode(st.st_mode)
    when = datetime.fromtimestamp(mtime_s, UTC).strftime("%Y-%m-%d %H:%M")
    shell_owned = path.startswith(("/data/local/tmp", "/storage"))
    owner = "shell    shell" if shell_owned else "root     root"
    return f"{mode} 1 {owner} {size:>8} {when} {shown}\n"


@command("rm")
async def rm(ctx: Ctx) -> int:
    """Remove files; ``-r`` for directories, ``-f`` to ignore missing ones."""
    flags = "".join(a[1:] for a in ctx.argv[1:] if a.startswith("-"))
    status = 0
    for arg in (a for a in ctx.argv[1:] if not a.startswith("-")):
        try:
            host = ctx.phone.storage.check(ctx.path(arg), write=True, app=ctx.app)
            if host.is_dir():
                if "r" not in flags.lower():
                    ctx.eprint(f"rm: {arg}: Is a directory\n")
                    status = 1
                    continue
                shutil.rmtree(host)
            else:
                host.unlink()
        except OSError as exc:
            if not ("f" in flags and isinstance(exc, FileNotFoundError)):
                ctx.eprint(f"rm: {arg}: {strerror(exc)}\n")
                status = 1
    return status


@command("mkdir")
async def mkdir(ctx: Ctx) -> int:
    """Make directories; ``-p`` makes parents and accepts existing ones."""
    parents = "-p" in ctx.argv
    status = 0
    for arg in (a for a in ctx.argv[1:] if not a.startswith("-")):
        try:
            host = ctx.phone.storage.check(ctx.path(arg), write=True, app=ctx.app)
            host.mkdir(parents=parents, exist_ok=parents)
        except OSError as exc:
            ctx.eprint(f"mkdir: '{arg}': {strerror(exc)}\n")
            status = 1
    return status


@command("cp")
async def cp(ctx: Ctx) -> int:
    """Copy files (``cp [-f] SRC... DEST``); DEST may be a directory."""
    args = [a for a in ctx.argv[1:] if not a.startswith("-")]
    if len(args) < 2:
        ctx.eprint("cp: Needs 2 arguments\n")
        return 1
    *sources, dest = args
    status = 0
    for src in sources:
        try:
            data = ctx.phone.read_file(ctx.path(src), app=ctx.app)
            target = ctx.path(dest)
            host = ctx.phone.storage.check(target, write=True, app=ctx.app)
            if host.is_dir():
                target = target.rstrip("/") + "/" + src.rsplit("/", 1)[-1]
                host = ctx.phone.storage.check(target, write=True, app=ctx.app)
            host.write_bytes(data)
        except OSError as exc:
            ctx.eprint(f"cp: {src}: {strerror(exc)}\n")
            status = 1
    return status


@command("touch")
async def touch(ctx: Ctx) -> int:
    """Create empty files or update their times."""
    status = 0
    for arg in (a for a in ctx.argv[1:] if not a.startswith("-")):
        try:
            ctx.phone.storage.check(ctx.path(arg), write=True, app=ctx.app).touch()
        except OSError as exc:
            ctx.eprint(f"touch: '{arg}': {strerror(exc)}\n")
            status = 1
    return status


@command("chmod")
async def chmod(ctx: Ctx) -> int:
    """Change mode bits of files the caller owns (octal modes)."""
    args = [a for a in ctx.argv[1:] if a != "-R"]
    if len(args) < 2:
        ctx.eprint("chmod: Need 2 arguments\n")
        return 1
    status = 0
    for arg in args[1:]:
        try:
            host = ctx.phone.storage.check(ctx.path(arg), write=True, app=ctx.app)
            if args[0].isdigit():
                host.chmod(int(args[0], 8))
            elif not host.exists():
                raise FileNotFoundError(arg)
        except OSError as exc:
            ctx.eprint(f"chmod: {arg}: {strerror(exc)}\n")
            status = 1
    return status


@command("sleep")
async def sleep(ctx: Ctx) -> int:
    """Sleep for the given seconds (fractions allowed, as toybox)."""
    try:
        await asyncio.sleep(float(ctx.argv[1]) if len(ctx.argv) > 1 else 0)
    except ValueError:
        ctx.eprint(f"sleep: Not a number: '{ctx.argv[1]}'\n")
        return 1
    return 0


@command("test", "[")
async def test(ctx: Ctx) -> int:
    """``test``/``[``: ``-e -f -d -n -z``, ``= !=``, ``-eq -ne -lt -gt``."""
    args = ctx.argv[1:]
    if ctx.argv[0] == "[":
        if not args or args[-1] != "]":
            ctx.eprint("[: missing ]\n")
            return 2
        args = args[:-1]
    negate = bool(args) and args[0] == "!"
    if negate:
        args = args[1:]
    result = False
    if len(args) == 1:
        result = args[0] != ""
    elif len(args) == 2:
        op, arg = args
        path = ctx.path(arg)
        result = {
            "-e": lambda: ctx.phone.exists(path, app=ctx.app),
            "-f": lambda: (ctx.phone.exists(path, app=ctx.app)
                           and not ctx.phone.isdir(path, app=ctx.app)),
            "-d": lambda: ctx.phone.isdir(path, app=ctx.app),
            "-n": lambda: arg != "",
            "-z": lambda: arg == "",
        }.get(op, lambda: False)()
    elif len(args) == 3:
        a, op, b = args
        if op in ("=", "=="):
            result = a == b
        elif op == "!=":
            result = a != b
        elif op in ("-eq", "-ne", "-lt", "-gt", "-le", "-ge"):
            try:
                x, y = int(a), int(b)
            except ValueError:
                ctx.eprint(f"{ctx.argv[0]}: bad number\n")
                return 2
            result = {
                "-eq": x == y, "-ne": x != y, "-lt": x < y,
                "-gt": x > y, "-le": x <= y, "-ge": x >= y,
            }[op]
    return 0 if result != negate else 1
