"""``pm`` and ``cmd package`` (AOSP ``PackageManagerShellCommand``), ``dumpsys package PKG``.

The ``dumpsys package PKG`` block follows fixture
``dumpsys_package__mtk_tb8168_android13_com.mediatek.camera_excerpt.txt``.

``adb install`` on a modern host streams the APK into ``cmd package install -S
SIZE`` over stdin; ``pm install PATH`` reads a file already pushed to the phone.
Both reach :meth:`PackageManager.install`.
"""

from __future__ import annotations

import tempfile
import time
import zlib
from pathlib import Path

from farm.virtual.android.context import Ctx, command
from farm.virtual.android.packages import Installed

_PM_USAGE = "Package manager (package) commands:\n  help\n    Print this help text.\n"


@command("pm")
async def pm(ctx: Ctx) -> int:
    """``pm install|uninstall|list packages|path|clear|dump``."""
    return await _package(ctx, ctx.argv[1:])


@command("cmd")
async def cmd(ctx: Ctx) -> int:
    """``cmd package ...`` is ``pm``; ``cmd activity ...`` is ``am``."""
    if ctx.argv[1:2] == ["package"]:
        return await _package(ctx, ctx.argv[2:])
    if ctx.argv[1:2] == ["activity"]:
        from farm.virtual.android.cmd_am import am_args

        return await am_args(ctx, ctx.argv[2:])
    if len(ctx.argv) < 2:
        ctx.eprint("cmd: No service specified; use -l to list all running services. "
                   "Use -w to start and wait for a service.\n")
        return 20
    ctx.eprint(f"cmd: Can't find service: {ctx.argv[1]}\n")
    return 20


async def _package(ctx: Ctx, args: list[str]) -> int:
    if not args:
        ctx.eprint(_PM_USAGE)
        return 1
    verb, rest = args[0], args[1:]
    pm_ = ctx.phone.packages
    if verb == "install":
        return await _install(ctx, rest)
    if verb == "uninstall":
        names = [a for a in rest if not a.startswith("-")]
        if not names:
            ctx.eprint("Error: package name not specified\n")
            return 1
        out, status = pm_.uninstall(names[0], keep_data="-k" in rest)
        if status == 0:
            await ctx.phone.app.package_removed(names[0])
        ctx.print(out)
        return status
    if verb == "list" and rest[:1] == ["packages"]:
        return _list_packages(ctx, rest[1:])
    if verb == "path":
        name = rest[0] if rest else ""
        pkg = pm_.installed.get(name)
        if pkg is not None:
            ctx.print(f"package:{pkg.apk_path}\n")
            return 0
        system = dict(pm_.listing(third_party_only=False))
        if name in system:
            ctx.print(f"package:{system[name]}\n")
            return 0
        return 1
    if verb == "clear" and rest:
        await ctx.phone.app.force_stop(rest[-1])
        out, status = pm_.clear(rest[-1])
        ctx.print(out)
        return status
    if verb == "dump" and rest:
        return _dump(ctx, rest[0])
    ctx.eprint(f"Unknown command: {verb}\n")
    return 1


def _list_packages(ctx: Ctx, args: list[str]) -> int:
    """``list packages [-f] [-3] [FILTER]``: ``package:NAME`` (``package:APK=NAME`` with -f)."""
    flags = "".join(a[1:] for a in args if a.startswith("-"))
    words = [a for a in args if not a.startswith("-")]
    for name, path in ctx.phone.packages.listing(third_party_only="3" in flags):
        if words and words[0] not in name:
            continue
        ctx.print(f"package:{path}={name}\n" if "f" in flags else f"package:{name}\n")
    return 0


async def _read_stdin(ctx: Ctx, size: int | None) -> bytearray:
    """Stdin up to ``size`` bytes (to its end when None); shorter when stdin ends first."""
    data = bytearray()
    while size is None or len(data) < size:
        chunk = await ctx.stdin.read()
        if not chunk:
            break
        data += chunk
    return data


async def _install(ctx: Ctx, rest: list[str]) -> int:
    """``install [-r] [-d] [-g] [-t] [-S SIZE] [PATH]``."""
    allow_downgrade, size, path = False, None, None
    args = list(rest)
    while args:
        arg = args.pop(0)
        if arg == "-d":
            allow_downgrade = True
        elif arg == "-S" and args:
            size = int(args.pop(0))
        elif arg in ("-i", "--user", "--install-reason", "--abi", "--pkg") and args:
            args.pop(0)
        elif arg.startswith("-"):
            continue
        else:
            path = arg
    pm_ = ctx.phone.packages
    if path is not None and path != "-":
        try:
            host = ctx.phone.storage.check(ctx.path(path), write=False, app=ctx.app)
            if not host.is_file():
                raise FileNotFoundError(path)
        except OSError:
            ctx.eprint(f"Error: Can't open file: {path}\n")
            ctx.eprint("Exception occurred while executing 'install':\n")
            ctx.eprint(f"java.lang.IllegalArgumentException: Error: Can't open file: {path}\n")
            return 255
        out, status = pm_.install(host, allow_downgrade=allow_downgrade)
    else:
        data = await _read_stdin(ctx, size)
        if size is not None and len(data) < size:
            ctx.print("Failure [INSTALL_FAILED_INVALID_APK: Failed to read all of stdin]\n")
            return 1
        with tempfile.TemporaryDirectory(dir=ctx.phone.storage.generated_dir) as tmp:
            host = Path(tmp) / "base.apk"
            host.write_bytes(bytes(data[: size or len(data)]))
            out, status = pm_.install(host, allow_downgrade=allow_downgrade)
    if status == 0:
        package = max(pm_.installed.values(), key=lambda p: p.last_update_s).package
        await ctx.phone.app.package_replaced(package)
    ctx.print(out)
    return status


def _stamp(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch_s))


def render_package(pkg: Installed) -> str:
    """The ``Packages:`` block of ``dumpsys package PKG`` for an installed app."""
    flags = ["DEBUGGABLE"] if pkg.debuggable else []
    flags += ["HAS_CODE", "ALLOW_CLEAR_USER_DATA", "ALLOW_BACKUP"]
    sig_ids = ", ".join(s[:8] for s in pkg.signers)
    obj = f"{zlib.crc32(pkg.package.encode()) & 0xFFFFFFF:x}"
    abi = pkg.native_abis[0] if pkg.native_abis else "null"
    lines = [
        "Packages:",
        f"  Package [{pkg.package}] ({obj}):",
        f"    userId={pkg.uid}",
        f"    pkg=Package{{{obj[::-1]} {pkg.package}}}",
        f"    codePath={pkg.code_dir}",
        f"    resourcePath={pkg.code_dir}",
        f"    legacyNativeLibraryDir={pkg.code_dir}/lib",
        "    extractNativeLibs=false",
        f"    primaryCpuAbi={abi}",
        "    secondaryCpuAbi=null",
        "    cpuAbiOverride=null",
        f"    versionCode={pkg.version_code} minSdk={pkg.min_sdk} targetSdk={pkg.target_sdk}",
        "    minExtensionVersions=[]",
        f"    versionName={pkg.version_name}",
        "    usesNonSdkApi=false",
        "    splits=[base]",
        "    apkSigningVersion=2",
        f"    flags=[ {' '.join(flags)} ]",
        ("    privateFlags=[ PRIVATE_FLAG_ACTIVITIES_RESIZE_MODE_RESIZEABLE_VIA_SDK_VERSION "
         "ALLOW_AUDIO_PLAYBACK_CAPTURE PRIVATE_FLAG_ALLOW_NATIVE_HEAP_POINTER_TAGGING ]"),
        "    forceQueryable=false",
        f"    dataDir=/data/user/0/{pkg.package}",
        "    supportsScreens=[small, medium, large, xlarge, resizeable, anyDensity]",
        f"    timeStamp={_stamp(pkg.last_update_s)}",
        f"    lastUpdateTime={_stamp(pkg.last_update_s)}",
        "    installerPackageName=null",
        "    packageSource=0",
        (f"    signatures=PackageSignatures{{{obj[:7]} version:2, "
         f"signatures:[{sig_ids}], past signatures:[]}}"),
        "    installPermissionsFixed=true",
        f"    pkgFlags=[ {' '.join(flags)} ]",
        "    install permissions:",
    ]
    lines += [f"      {perm}: granted=true" for perm in pkg.permissions]
    lines += [
        (f"    User 0: ceDataInode={pkg.uid * 7 + 1000003} installed=true hidden=false "
         "suspended=false distractionFlags=0 stopped=false notLaunched=false enabled=0 "
         "instant=false virtual=false"),
        "      installReason=0",
        f"      firstInstallTime={_stamp(pkg.first_install_s)}",
        "      uninstallReason=0",
        "      runtime permissions:",
    ]
    return "\n".join(lines) + "\n"


def _dump(ctx: Ctx, package: str) -> int:
    pkg = ctx.phone.packages.installed.get(package)
    if pkg is None:
        ctx.print(f"Unable to find package: {package}\n")
        return 0
    ctx.print(render_package(pkg))
    return 0
