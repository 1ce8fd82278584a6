"""``am``, ``input``, ``uiautomator`` and ``run-as``.

Texts: ``am start`` prints ``Starting: Intent { cmp=PKG/.Cls }`` first (AOSP
``ActivityManagerShellCommand.runStartActivity``, fixture
``am_start__success_stdout_derived.txt``); an unexported activity gets the
``Security exception: Permission Denial ...`` block on stderr (fixture
``am_start__not_exported_stderr_derived.txt``) and exit 255 (-1 from
``BasicShellCommandHandler.exec``); a missing class prints ``Error type 3``
(fixture ``am_start__class_not_found_derived.txt``). ``uiautomator dump`` prints
``UI hierchary dumped to: PATH`` (typo as in AOSP ``DumpCommand.java``).
``run-as`` refuses with ``run-as: unknown package: P`` or ``run-as: package
not debuggable: P`` (AOSP system/core/run-as/run-as.cpp).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from farm.virtual.android import tvmrpc_app
from farm.virtual.android.context import Ctx, command
from farm.virtual.android.packages import SYSTEM_PACKAGES
from farm.virtual.android.ui import render_dump

_KEYCODES = {
    "HOME": 3, "BACK": 4, "DPAD_UP": 19, "DPAD_DOWN": 20, "POWER": 26, "TAB": 61,
    "ENTER": 66, "DEL": 67, "MENU": 82, "FORWARD_DEL": 112, "MOVE_HOME": 122,
    "MOVE_END": 123, "SLEEP": 223, "WAKEUP": 224,
}  # fmt: skip


def _short(package: str, cls: str) -> str:
    """``pkg/.Cls`` when the class is inside the package, else ``pkg/full.Cls``."""
    if cls.startswith(package + "."):
        return f"{package}/{cls[len(package):]}"
    return f"{package}/{cls}"


@command("am")
async def am(ctx: Ctx) -> int:
    """``am start [-W] [-S] -n PKG/CLS [--es K V ...]``, ``am force-stop PKG``."""
    return await am_args(ctx, ctx.argv[1:])


async def am_args(ctx: Ctx, args: list[str]) -> int:
    """``am`` with its arguments (also reached through ``cmd activity``)."""
    if not args:
        ctx.eprint("Activity manager (activity) commands:\n  help\n      Print this help text.\n")
        return 0
    verb, rest = args[0], args[1:]
    if verb == "force-stop" and rest:
        await ctx.phone.app.force_stop(rest[-1])
        return 0
    if verb in ("start", "start-activity"):
        return await _start(ctx, rest)
    ctx.eprint(f"Unknown command: {verb}\n")
    return 255


@dataclass
class _StartArgs:
    """The ``am start`` options the virtual phone acts on; the others are skipped."""

    wait: bool = False
    stop: bool = False
    component: str | None = None
    action: str | None = None
    category: str | None = None
    extras: bool = False


def _parse_start(args: list[str]) -> _StartArgs:
    """``am start``'s arguments (consumed from ``args``) as options."""
    opts = _StartArgs()
    while args:
        arg = args.pop(0)
        if arg == "-W":
            opts.wait = True
        elif arg == "-S":
            opts.stop = True
        elif arg == "-n" and args:
            opts.component = args.pop(0)
        elif arg == "-a" and args:
            opts.action = args.pop(0)
        elif arg == "-c" and args:
            opts.category = args.pop(0)
        elif arg in ("--es", "--ei", "--ez", "--el", "--ef", "--eu") and len(args) >= 2:
            args[:2] = []
            opts.extras = True
        elif arg in ("--user", "-f", "--windowingMode", "--display") and args:
            args.pop(0)
        elif not arg.startswith("-") and "/" in arg and opts.component is None:
            opts.component = arg
    return opts


def _intent_text(opts: _StartArgs, package: str, full: str) -> str:
    """The Intent's fields as ``am start`` prints them: ``act=A cat=[C] cmp=P/.C``."""
    parts = []
    if opts.action:
        parts.append(f"act={opts.action}")
    if opts.category:
        parts.append(f"cat=[{opts.category}]")
    parts.append(f"cmp={_short(package, full)}")
    return " ".join(parts) + (" (has extras)" if opts.extras else "")


async def _start(ctx: Ctx, args: list[str]) -> int:
    opts = _parse_start(args)
    component, wait = opts.component, opts.wait
    if component is None or "/" not in component:
        ctx.eprint("Error: Activity not started, unable to resolve Intent\n")
        return 0
    package, cls = component.split("/", 1)
    full = package + cls if cls.startswith(".") else cls
    intent = _intent_text(opts, package, full)
    ctx.print(f"Starting: Intent {{ {intent} }}\n")
    if opts.stop:
        await ctx.phone.app.force_stop(package)
    errors = ctx.out if wait else ctx.err
    installed = ctx.phone.packages.installed.get(package)
    activity = installed.activity(full) if installed else None
    if installed is None or activity is None:
        errors.write(
            f"Error type 3\nError: Activity class {{{package}/{full}}} does not exist.\n".encode()
        )
        return 0
    if not activity[1]:
        denial = (
            f"Permission Denial: starting Intent {{ flg=0x10000000 {intent} }} from null "
            f"(pid={ctx.phone.processes.next_pid()}, uid=2000) "
            f"not exported from uid {installed.uid}"
        )
        ctx.eprint(
            f"Security exception: {denial}\n\njava.lang.SecurityException: {denial}\n"
            "\tat com.android.server.wm.ActivityTaskSupervisor"
            ".checkStartAnyActivityPermission(ActivityTaskSupervisor.java:1153)\n"
            "\tat com.android.server.wm.ActivityStarter.executeRequest(ActivityStarter.java:1063)\n"
        )
        return 255
    started = time.monotonic()
    warning = ""
    if package == tvmrpc_app.PACKAGE and full == tvmrpc_app.MAIN:
        warning = ctx.phone.app.launch_main()
    ctx.print(warning)
    if wait:
        took_ms = int((time.monotonic() - started) * 1000) + 180
        state = "UNKNOWN (0)" if warning else "COLD"
        ctx.print(f"Status: ok\nLaunchState: {state}\nActivity: {_short(package, full)}\n")
        if not warning:
            ctx.print(f"TotalTime: {took_ms}\n")
        ctx.print(f"WaitTime: {took_ms + 12}\nComplete\n")
    return 0


@command("input")
async def input_(ctx: Ctx) -> int:
    """``input tap X Y``, ``input text STR``, ``input keyevent CODE...``, ``input swipe ...``."""
    args = ctx.argv[1:]
    if args and args[0] in ("touchscreen", "keyboard", "mouse"):
        args = args[1:]
    app, screen = ctx.phone.app, ctx.phone.screen
    if len(args) == 3 and args[0] == "tap":
        return await _tap(ctx, args[1], args[2])
    if len(args) == 2 and args[0] == "text":
        if screen.foreground == "main" and screen.focused_id:
            attr = screen.focused_id.removeprefix("input_")
            value = getattr(app.fields, attr) + args[1].replace("%s", " ")
            setattr(app.fields, attr, value)
        return 0
    if args and args[0] == "keyevent":
        for code_text in (a for a in args[1:] if not a.startswith("--")):
            name = code_text.removeprefix("KEYCODE_")
            code = int(name) if name.isdigit() else _KEYCODES.get(name)
            if code is None:
                ctx.eprint(f"Error: Unknown keycode: {code_text}\n")
                return 1
            await _key(ctx, code)
        return 0
    if args and args[0] in ("swipe", "draganddrop", "roll", "press"):
        return 0
    ctx.eprint("Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]\n")
    return 1


async def _tap(ctx: Ctx, x_text: str, y_text: str) -> int:
    """``input tap X Y``: act on the clickable node under the point; 1 on bad numbers."""
    app, screen = ctx.phone.app, ctx.phone.screen
    try:
        x, y = int(float(x_text)), int(float(y_text))
    except ValueError:
        ctx.eprint("Error: Invalid arguments for command: tap\n")
        return 1
    node = screen.hit(x, y)
    if node is None:
        return 0
    rid = node.resource_id.rpartition("/")[2]
    if rid in ("input_address", "input_port", "input_key"):
        screen.focused_id = rid
    elif rid == "switch_persistent":
        app.set_switch(not app.fields.switch)
    elif rid == "button_stop_rpc":
        await app.back()
    elif node.text == "TVM RPC" and app.installed:
        app.launch_main()
    return 0


async def _key(ctx: Ctx, code: int) -> None:
    phone, app, screen = ctx.phone, ctx.phone.app, ctx.phone.screen
    if code == 26:
        phone.awake = not phone.awake
    elif code in (224, 82):
        phone.awake = True
    elif code == 223:
        phone.awake = False
    elif code == 3:
        app.go_home() if screen.foreground == "main" else setattr(screen, "foreground", "home")
    elif code == 4:
        await app.back()
    elif screen.foreground == "main" and screen.focused_id:
        attr = screen.focused_id.removeprefix("input_")
        value = getattr(app.fields, attr)
        if code == 67:
            setattr(app.fields, attr, value[:-1])
        elif code == 61:
            order = ["input_address", "input_port", "input_key"]
            screen.focused_id = order[(order.index(screen.focused_id) + 1) % 3]


@command("uiautomator")
async def uiautomator(ctx: Ctx) -> int:
    """``uiautomator dump [--compressed] [PATH]`` (default ``/sdcard/window_dump.xml``)."""
    args = [a for a in ctx.argv[1:] if not a.startswith("--")]
    if not args or args[0] != "dump":
        ctx.eprint("Usage: uiautomator <subcommand> [options]\n")
        return 1
    target = args[1] if len(args) > 1 else "/sdcard/window_dump.xml"
    root = ctx.phone.screen.root()
    if root is None:
        ctx.eprint("ERROR: null root node returned by UiTestAutomationBridge.\n")
        return 0
    try:
        host = ctx.phone.storage.check(ctx.path(target), write=True, app=ctx.app)
        host.write_text(render_dump(root))
    except OSError:
        ctx.eprint(f"ERROR: could not write dump file {target}\n")
        return 1
    ctx.print(f"UI hierchary dumped to: {target}\n")
    return 0


@command("run-as")
async def run_as(ctx: Ctx) -> int:
    """``run-as PKG [CMD ARGS...]``: run as a debuggable app, in its data directory."""
    from farm.virtual.android.shell import Shell

    if len(ctx.argv) < 2:
        ctx.eprint("usage: run-as <package-name> [--user <uid>] <command> [<args>]\n")
        return 1
    package, argv = ctx.argv[1], ctx.argv[2:]
    if argv[:1] == ["--user"]:
        argv = argv[2:]
    pkg = ctx.phone.packages.installed.get(package)
    if pkg is None:
        system = any(name == package for name, _ in SYSTEM_PACKAGES)
        why = "package not debuggable" if system else "unknown package"
        ctx.eprint(f"run-as: {why}: {package}\n")
        return 1
    if not pkg.debuggable:
        ctx.eprint(f"run-as: package not debuggable: {package}\n")
        return 1
    cwd = f"/data/data/{package}"
    ctx.phone.storage.app_dir(package).mkdir(parents=True, exist_ok=True)
    shell = Shell(ctx.phone, ctx.stdin, ctx.out, ctx.err, app=package, cwd=cwd)
    if not argv:
        return await shell.run_interactive()
    sub = Ctx(phone=ctx.phone, argv=argv, stdin=ctx.stdin, out=ctx.out, err=ctx.err,
              env=dict(shell.env), cwd=cwd, app=package)
    from farm.virtual.android.context import COMMANDS

    if argv[0] not in COMMANDS and argv[0] not in ("sh", "exit", "cd", "export"):
        ctx.eprint(f"run-as: exec failed for {argv[0]}: No such file or directory\n")
        return 1
    return await shell.dispatch(sub)
