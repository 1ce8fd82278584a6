"""System commands.

getprop, setprop, id, whoami, uname, nproc, ps, pidof, df, settings, svc, wm,
reboot, logcat, date.

Sources for the formats: ``getprop`` (fixture ``getprop__*``), toybox ``ps``,
``pidof`` and ``df`` (fixtures ``ps_-A__*``, ``pidof_*``, ``df*``), AOSP
``SettingsService`` (``settings get`` prints ``null`` when unset), AOSP
``cmds/svc/.../PowerCommand.java`` (``svc power stayon true`` sets
``stay_on_while_plugged_in`` to AC|USB|WIRELESS = 7 and prints nothing).
"""

from __future__ import annotations

import time

from farm.virtual.android import logbuf
from farm.virtual.android.context import Ctx, command
from farm.virtual.android.processes import render_ps
from farm.virtual.android.props import SHELL_SETTABLE, render_getprop
from farm.virtual.android.shell import SH
from farm.virtual.android.sysfiles import machine


@command("getprop")
async def getprop(ctx: Ctx) -> int:
    """``getprop``: all as ``[k]: [v]``, or one key's value (``""`` if unset)."""
    props = ctx.phone.props
    if len(ctx.argv) == 1:
        ctx.print(render_getprop(props))
    else:
        default = ctx.argv[2] if len(ctx.argv) > 2 else ""
        ctx.print(props.get(ctx.argv[1], default) + "\n")
    return 0


@command("setprop")
async def setprop(ctx: Ctx) -> int:
    """``setprop KEY VALUE`` for the keys the shell domain may write.

    The failure text is toybox-era ``setprop`` (AOSP system/core/toolbox/setprop.cpp).
    """
    if len(ctx.argv) != 3:
        ctx.eprint("usage: setprop NAME VALUE\n")
        return 1
    key, value = ctx.argv[1], ctx.argv[2]
    unset_ro = key.startswith("ro.") and key not in ctx.phone.props
    allowed = key.startswith(SHELL_SETTABLE) or unset_ro
    if ctx.phone.spec.rooted and not key.startswith("ro."):
        allowed = True
    if not allowed:
        ctx.eprint(f"Failed to set property '{key}' to '{value}'.\nSee dmesg for error reason.\n")
        return 1
    ctx.phone.props[key] = value
    if key.startswith("persist."):
        ctx.phone.save()
    return 0


@command("id")
async def id_(ctx: Ctx) -> int:
    """The shell user's identity (uid 2000), or the app's under ``run-as``."""
    if ctx.app:
        uid = ctx.phone.packages.uid_of(ctx.app)
        app_id = uid - 10000
        name = f"u0_a{app_id}"
        ctx.print(
            f"uid={uid}({name}) gid={uid}({name}) groups={uid}({name}),3003(inet),"
            f"9997(everybody),20{app_id:03d}(u0_a{app_id}_cache),50{app_id:03d}(all_a{app_id}) "
            f"context=u:r:untrusted_app:s0:c{app_id},c256,c512,c768\n"
        )
    else:
        ctx.print(
            "uid=2000(shell) gid=2000(shell) groups=2000(shell),1004(input),1007(log),1011(adb),"
            "1015(sdcard_rw),1028(sdcard_r),1078(ext_data_rw),1079(ext_obb_rw),"
            "3001(net_bt_admin),3002(net_bt),3003(inet),3006(net_bw_stats),3009(readproc),"
            "3011(uhid),3012(readtracefs) "
            "context=u:r:shell:s0\n"
        )
    return 0


@command("whoami")
async def whoami(ctx: Ctx) -> int:
    """``shell``, or the app's user name under ``run-as``."""
    if ctx.app:
        ctx.print(f"u0_a{ctx.phone.packages.uid_of(ctx.app) - 10000}\n")
    else:
        ctx.print("shell\n")
    return 0


@command("uname")
async def uname(ctx: Ctx) -> int:
    """toybox ``uname`` (``-a`` everything, ``-s``, ``-n``, ``-r``, ``-v``, ``-m``).

    The release and version are ``/proc/version``'s and the machine follows
    the ABI, so ``uname``, ``/proc/cpuinfo`` and ``ro.product.cpu.abi`` agree.
    """
    spec = ctx.phone.spec
    version = "#1 SMP PREEMPT Mon Jan 1 00:00:00 UTC 2024"
    fields = {"s": "Linux", "n": "localhost", "r": spec.kernel_release, "v": version,
              "m": machine(spec.cpu_abi)}
    flags = "".join(a[1:] for a in ctx.argv[1:] if a.startswith("-"))
    if "a" in flags:
        ctx.print(" ".join(fields.values()) + " Toybox\n")
    else:
        ctx.print(" ".join(v for k, v in fields.items() if k in flags or (k == "s" and not flags))
                  + "\n")
    return 0


@command("nproc")
async def nproc(ctx: Ctx) -> int:
    """Number of online cores."""
    ctx.print(f"{ctx.phone.spec.cores}\n")
    return 0


@command("ps")
async def ps(ctx: Ctx) -> int:
    """toybox ``ps``; ``-A`` lists every process, without it only the caller's."""
    table = ctx.phone.processes
    own = table.spawn("shell", "ps", ppid_name="adbd")
    own.state = "R"
    own.vsz_kb, own.rss_kb = 10790584, 3728
    try:
        rows = sorted(table.procs.values(), key=lambda p: p.pid)
        if not any((a.startswith("-") and "A" in a) or a == "-e" for a in ctx.argv[1:]):
            rows = [p for p in rows if p.user == "shell" and p.name != "adbd"]
        names = [a for a in ctx.argv[1:] if not a.startswith("-")]
        if names:
            rows = [p for p in rows if p.name in names or str(p.pid) in names]
        ctx.print(render_ps(rows))
    finally:
        table.kill(own.pid)
    return 0


@command("pidof")
async def pidof(ctx: Ctx) -> int:
    """Pids of processes by exact name, space-separated; exit 1 if none (toybox pidof.c)."""
    pids: list[int] = []
    for name in (a for a in ctx.argv[1:] if not a.startswith("-")):
        pids += ctx.phone.processes.pids_of(name)
    if not pids:
        return 1
    ctx.print(" ".join(str(p) for p in pids) + "\n")
    return 0


@command("kill")
async def kill(ctx: Ctx) -> int:
    """mksh's builtin ``kill [-9|-s SIG|-SIG] PID...`` as the shell user (or a ``run-as`` app).

    A process of another user answers ``Operation not permitted`` (EPERM: the
    shell user, uid 2000, may signal only its own processes), an unknown pid
    ``No such process``; the text is mksh's ``bi_errorf``:
    ``/system/bin/sh: kill: PID: <strerror>``, exit 1.
    """
    user = f"u0_a{ctx.phone.packages.uid_of(ctx.app) - 10000}" if ctx.app else "shell"
    args = ctx.argv[1:]
    if args[:1] == ["-s"]:
        args = args[2:]
    elif args and args[0].startswith("-") and args[0] != "--":
        args = args[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        ctx.eprint(f"{SH}: kill: usage: kill [-s signame | -signum | -signame] "
                   "{job | pid | pgrp} ...\n")
        return 1
    status = 0
    for arg in args:
        proc = ctx.phone.processes.procs.get(int(arg)) if arg.isdigit() else None
        reason = None
        if not arg.isdigit():
            reason = "arguments must be jobs or process IDs"
        elif proc is None:
            reason = "No such process"
        elif proc.user != user:
            reason = "Operation not permitted"
        elif not await ctx.phone.app.kill_process(proc.pid):
            ctx.phone.processes.kill(proc.pid)
        if reason is not None:
            ctx.eprint(f"{SH}: kill: {arg}: {reason}\n")
            status = 1
    return status


@command("logcat")
async def logcat(ctx: Ctx) -> int:
    """``logcat [-d] [-c] [-b BUF] [-s] [-t N|-T N|-T TIME] [TAG:L ...]`` in threadtime format.

    ``-t``/``-T`` take a line count (digits only) or a time: ``sssss.mmm``
    (epoch seconds), ``MM-DD hh:mm:ss.mmm`` or ``YYYY-MM-DD hh:mm:ss.mmm``
    (AOSP ``logcat.cpp`` ``parseTime``); lines logged at or after it are shown.

    Without ``-d`` (or ``-t``) logcat prints the buffer and then follows it
    until the reader goes away, as the real one does: ``adb logcat`` (the
    shell's ``exec logcat``) and ``adb exec-out logcat`` stream until Ctrl-C.
    """
    args = ctx.argv[1:]
    buffers: list[str] = []
    specs: list[str] = []
    silent = clear = dump = False
    start: str | None = None
    while args:
        arg = args.pop(0)
        if arg == "-b" and args:
            buffers += args.pop(0).split(",")
        elif arg.startswith("-b") and len(arg) > 2:
            buffers += arg[2:].split(",")
        elif arg == "-s":
            silent = True
        elif arg == "-c":
            clear = True
        elif arg == "-d":
            dump = True
        elif arg in ("-v", "-t", "-T") and args:
            value = args.pop(0)  # -v's format is ignored: threadtime always
            # -t N prints and exits; -T N follows.
            start, dump = (start, dump) if arg == "-v" else (value, dump or arg == "-t")
        elif arg.startswith("-"):
            continue
        else:
            specs.append(arg)
    chosen = logbuf.ALL_BUFFERS if "all" in buffers else tuple(buffers) or logbuf.DEFAULT_BUFFERS
    logs = ctx.phone.logs
    if clear:
        logs.clear(chosen)
        return 0
    accept = logbuf.make_filter(specs, silent)
    cursor = logs.appended
    try:
        entries = logbuf.backlog(logs.entries, start, logs.now_s())
    except ValueError as exc:
        ctx.eprint(f"logcat: {exc}\n")
        return 1
    text, current = logbuf.render_from(entries, chosen, accept, None)
    ctx.print(text)
    while not dump:  # ends when the transport cancels the command (reader gone)
        await logs.wait_beyond(cursor)
        fresh, cursor = logs.since(cursor), logs.appended
        text, current = logbuf.render_from(fresh, chosen, accept, current)
        ctx.print(text)
    return 0


@command("reboot")
async def reboot(ctx: Ctx) -> int:
    """Ask the transport to reboot the phone (``reboot [bootloader|recovery]``)."""
    if not ctx.phone.spec.rooted:
        ctx.eprint("reboot: Operation not permitted\n")
        return 1
    ctx.phone.request_reboot(ctx.argv[1] if len(ctx.argv) > 1 else "")
    return 0


_SETTINGS_USAGE = "usage:  settings [--user <USER_ID> | current] get namespace key\n"


@command("settings")
async def settings(ctx: Ctx) -> int:
    """``settings get|put|delete|list NAMESPACE [KEY [VALUE]]`` (AOSP SettingsService)."""
    args = list(ctx.argv[1:])
    if args[:1] == ["--user"]:
        args = args[2:]
    if len(args) < 2 or args[1] not in ctx.phone.settings:
        ctx.eprint(f"Invalid namespace '{args[1]}'\n" if len(args) > 1 else _SETTINGS_USAGE)
        return 255
    verb, ns, rest = args[0], ctx.phone.settings[args[1]], args[2:]
    if verb == "get" and rest:
        ctx.print(ns.get(rest[0], _setting_default(ctx, args[1], rest[0])) + "\n")
    elif verb == "put" and len(rest) >= 2:
        ns[rest[0]] = rest[1]
        if rest[0] == "stay_on_while_plugged_in":
            ctx.phone.stay_on_while_plugged = int(rest[1]) if rest[1].isdigit() else 0
        ctx.phone.save()
    elif verb == "delete" and rest:
        existed = ns.pop(rest[0], None) is not None
        ctx.print(f"Deleted {int(existed)} rows\n")
        ctx.phone.save()
    elif verb == "list":
        ctx.print("".join(f"{k}={v}\n" for k, v in sorted(ns.items())))
    else:
        ctx.eprint(_SETTINGS_USAGE)
        return 255
    return 0


def _setting_default(ctx: Ctx, namespace: str, key: str) -> str:
    if namespace == "global" and key == "stay_on_while_plugged_in":
        return str(ctx.phone.stay_on_while_plugged)
    if namespace == "global" and key in ("adb_enabled", "development_settings_enabled"):
        return "1"
    return "null"


@command("svc")
async def svc(ctx: Ctx) -> int:
    """``svc power stayon true|false|usb|ac|wireless`` (AOSP PowerCommand.java)."""
    args = ctx.argv[1:]
    values = {"true": 7, "false": 0, "ac": 1, "usb": 2, "wireless": 4}
    if len(args) == 3 and args[0] == "power" and args[1] == "stayon" and args[2] in values:
        value = values[args[2]]
        ctx.phone.stay_on_while_plugged = value
        ctx.phone.settings["global"]["stay_on_while_plugged_in"] = str(value)
        if value:
            ctx.phone.awake = True
        ctx.phone.save()
        return 0
    ctx.eprint(
        "Control the power manager\n\n"
        "usage: svc power stayon [true|false|usb|ac|wireless]\n"
        "         Set the 'keep awake while plugged in' setting.\n"
        "       svc power reboot [reason]\n"
        "         Perform a runtime shutdown and reboot device with specified reason.\n"
        "       svc power shutdown\n"
        "         Perform a runtime shutdown and power off the device.\n"
    )
    return 0 if len(args) <= 1 else 1


@command("wm")
async def wm(ctx: Ctx) -> int:
    """``wm size`` and ``wm density`` (AOSP WindowManagerShellCommand)."""
    spec = ctx.phone.spec
    if ctx.argv[1:2] == ["size"]:
        ctx.print(f"Physical size: {spec.screen_w_px}x{spec.screen_h_px}\n")
    elif ctx.argv[1:2] == ["density"]:
        ctx.print(f"Physical density: {spec.density_dpi}\n")
    else:
        ctx.eprint("Window manager (window) commands:\n"
                   "  size [reset|WxH|WdpxHdp]\n  density [reset|DENSITY]\n")
        return 255
    return 0


@command("date")
async def date(ctx: Ctx) -> int:
    """toybox ``date [+FORMAT]`` of the phone's clock in UTC (``%s``: epoch seconds).

    Without a format toybox prints ``%a %b %e %H:%M:%S %Z %Y``. Setting the
    clock (``date MMDDhhmm``) needs root and is not modelled.
    """
    fmt = "%a %b %e %H:%M:%S %Z %Y"
    for arg in ctx.argv[1:]:
        if arg.startswith("+"):
            fmt = arg[1:]
        elif arg not in ("-u",):
            ctx.eprint("date: Need root\n")
            return 1
    now_s = ctx.phone.logs.now_s()
    ctx.print(time.strftime(fmt.replace("%s", str(int(now_s))), time.gmtime(now_s)) + "\n")
    return 0
