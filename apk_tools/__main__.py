"""``python -m apk_tools``: keystore, align, sign, verify, inspect, prepare, standin.

Every command prints a readable summary, or JSON with ``--json`` (before the
command name). A :class:`farm.errors.FarmError` becomes one ``error: ...`` line
on stderr and its ``exit_code`` (2 for the user's mistakes); a traceback means a
bug. Passwords are given as ``env:NAME`` or ``file:PATH`` only.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from apk_tools.align import align
from apk_tools.inspect import inspect_apk
from apk_tools.keys import (
    KeystoreKey,
    PemKey,
    Secret,
    SigningKey,
    create_keystore,
    create_pem_key,
    fingerprint,
)
from apk_tools.prepare import prepare
from apk_tools.sign import sign
from apk_tools.standin import build_standin_apk
from apk_tools.verify import verify
from farm.click_types import CONTEXT_SETTINGS
from farm.errors import ApkError, FarmError, SpecError

_PATH = click.Path(path_type=Path)
_EXISTING = click.Path(path_type=Path, exists=True, dir_okay=False)


class _Cli(click.Group):
    """A group that turns FarmError into a one-line message and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FarmError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)


def _emit(ctx: click.Context, data: dict[str, Any]) -> None:
    """Print ``data`` as JSON or as aligned ``key: value`` lines."""
    if ctx.obj["json"]:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    width = max(len(k) for k in data)
    for name, value in data.items():
        click.echo(f"{name + ':':<{width + 2}}{_shown(value)}")


def _shown(value: Any) -> str:
    """One value of :func:`_emit` as text: lists joined with commas, None as ``-``."""
    if isinstance(value, (list, tuple)):
        return (
            ", ".join(
                f"{v['name']}{'' if v['exported'] else ' (not exported)'}"
                if isinstance(v, dict)
                else str(v)
                for v in value
            )
            or "-"
        )
    return "-" if value is None else str(value)


def _signing_key(
    ks: Path | None, ks_pass: str | None, alias: str | None, key: Path | None, cert: Path | None
) -> SigningKey:
    if ks is not None and key is None and cert is None:
        if ks_pass is None:
            raise SpecError("--ks-pass", "a keystore needs --ks-pass env:NAME or file:PATH")
        return KeystoreKey(ks, Secret.parse(ks_pass), alias)
    if ks is None and key is not None and cert is not None:
        return PemKey(key, cert)
    raise SpecError("key", "give either --ks (with --ks-pass) or both --key and --cert")


def _key_options(func: Any) -> Any:
    for option in reversed(
        [
            click.option("--ks", type=_EXISTING, help="PKCS12 keystore."),
            click.option(
                "--ks-pass", metavar="env:NAME|file:PATH", help="Keystore password source."
            ),
            click.option("--ks-key-alias", "alias", help="Key alias in the keystore."),
            click.option("--key", type=_EXISTING, help="PEM private key (with --cert)."),
            click.option("--cert", type=_EXISTING, help="PEM certificate (with --key)."),
        ]
    ):
        func = option(func)
    return func


@click.group(cls=_Cli, context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def cli(ctx: click.Context, as_json: bool) -> None:
    """Build, align, sign, verify and inspect Android APKs (the TVM RPC app)."""
    ctx.ensure_object(dict)
    ctx.obj["json"] = as_json


@cli.command()
@click.option("--out", type=_PATH, help="Create a PKCS12 keystore here (needs --password).")
@click.option("--password", metavar="env:NAME|file:PATH", help="Keystore password source.")
@click.option("--alias", default="farm", show_default=True)
@click.option("--key-out", type=_PATH, help="Create a PEM private key here (with --cert-out).")
@click.option("--cert-out", type=_PATH, help="Create a PEM certificate here (with --key-out).")
@click.option("--name", "common_name", default="farm", show_default=True, help="Certificate CN.")
@click.option("--validity-days", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.pass_context
def keystore(
    ctx: click.Context, out: Path | None, password: str | None, alias: str,
    key_out: Path | None, cert_out: Path | None, common_name: str, validity_days: int,
) -> None:  # fmt: skip
    """Create a signing key: a PKCS12 keystore, or a PEM key + certificate."""
    if out is not None and key_out is None and cert_out is None:
        if password is None:
            raise SpecError("--password", "a keystore needs --password env:NAME or file:PATH")
        key: SigningKey = create_keystore(
            out,
            Secret.parse(password),
            alias=alias,
            dname=f"CN={common_name}",
            validity_days=validity_days,
        )
        _emit(ctx, {"keystore": str(out), "alias": alias, "certificate_sha256": fingerprint(key)})
    elif out is None and key_out is not None and cert_out is not None:
        key = create_pem_key(
            key_out, cert_out, common_name=common_name, validity_days=validity_days
        )
        _emit(
            ctx,
            {"key": str(key_out), "cert": str(cert_out), "certificate_sha256": fingerprint(key)},
        )
    else:
        raise SpecError(
            "keystore", "give either --out (with --password) or both --key-out and --cert-out"
        )


@cli.command("align")
@click.argument("apk", type=_EXISTING)
@click.option("--out", type=_PATH, required=True, help="Aligned APK to write.")
@click.pass_context
def align_command(ctx: click.Context, apk: Path, out: Path) -> None:
    """Zipalign -p 4 APK into --out (page-aligned native libraries)."""
    _emit(ctx, {"aligned": str(align(apk, out))})


@cli.command("sign")
@click.argument("apk", type=_EXISTING)
@click.option("--out", type=_PATH, required=True, help="Signed APK to write.")
@_key_options
@click.option("--schemes", default="1,2,3", show_default=True, help="Comma-separated schemes.")
@click.pass_context
def sign_command(
    ctx: click.Context, /, apk: Path, out: Path, schemes: str, **key_args: Any
) -> None:
    """Sign an (aligned) APK with apksigner."""
    try:
        wanted = tuple(int(s) for s in schemes.split(","))
    except ValueError as exc:
        raise SpecError("--schemes", f"expected numbers like 1,2,3; got {schemes!r}") from exc
    key = _signing_key(**key_args)
    signed = sign(apk, out, key, schemes=wanted)
    result = verify(signed)
    _emit(ctx, {"signed": str(signed), "schemes": result.schemes, "signers": result.signers})


@cli.command("prepare")
@click.argument("apk", type=_EXISTING)
@click.option("--out-dir", type=_PATH, required=True, help="Folder of prepared APKs.")
@_key_options
@click.pass_context
def prepare_command(ctx: click.Context, /, apk: Path, out_dir: Path, **key_args: Any) -> None:
    """Align and sign APK into --out-dir, named by content; reuse an earlier result."""
    _emit(ctx, {"prepared": str(prepare(apk, _signing_key(**key_args), out_dir))})


def _verdict(apk: Path) -> dict[str, Any]:
    """One APK's verification as a JSON-able dict; ``ok`` False with ``error`` when it fails."""
    try:
        result = verify(apk)
    except ApkError as exc:
        return {"apk": str(apk), "ok": False, "error": exc.reason,
                "schemes": [], "signers": [], "warnings": []}
    return {"apk": str(apk), "ok": True, "error": None, **dataclasses.asdict(result)}


def _verdict_line(verdict: dict[str, Any]) -> str:
    """``APK: verified (v2, v3), signer SHA256`` or ``APK: <why it fails>``."""
    if not verdict["ok"]:
        return f"{verdict['apk']}: {verdict['error']}"
    schemes = ", ".join(f"v{s}" for s in verdict["schemes"]) or "-"
    signers = ", ".join(verdict["signers"]) or "-"
    return f"{verdict['apk']}: verified ({schemes}), signer {signers}"


@cli.command("verify")
@click.argument("apks", metavar="APK...", nargs=-1, required=True, type=_PATH)
@click.pass_context
def verify_command(ctx: click.Context, apks: tuple[Path, ...]) -> None:
    """Verify the signatures of each APK with apksigner, one line per APK.

    Exits 0 if every APK verifies, 2 if any does not (all are checked).
    """
    verdicts = [_verdict(apk) for apk in apks]
    if ctx.obj["json"]:
        click.echo(json.dumps(verdicts, indent=2))
    else:
        for v in verdicts:
            click.echo(_verdict_line(v))
    if not all(v["ok"] for v in verdicts):
        ctx.exit(ApkError.exit_code)


@cli.command("inspect")
@click.argument("apk", type=_EXISTING)
@click.pass_context
def inspect_command(ctx: click.Context, apk: Path) -> None:
    """Show package, versions, SDKs, ABIs, activities, permissions and signers."""
    _emit(ctx, dataclasses.asdict(inspect_apk(apk)))


@cli.command()
@click.option("--out-dir", type=_PATH, required=True)
@click.option("--version-code", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--version-name", default="1.0", show_default=True)
@click.option("--debuggable/--no-debuggable", default=True, show_default=True)
@click.option("--abi", "abis", multiple=True, help="Add a placeholder native library for this ABI.")
@click.pass_context
def standin(
    ctx: click.Context,
    out_dir: Path,
    version_code: int,
    version_name: str,
    debuggable: bool,
    abis: tuple[str, ...],
) -> None:
    """Build the unsigned stand-in TVM RPC APK with aapt."""
    path = build_standin_apk(
        out_dir,
        version_code=version_code,
        version_name=version_name,
        debuggable=debuggable,
        native_abis=abis,
    )
    _emit(ctx, {"standin": str(path)})


def main() -> None:
    """Console entry point."""
    cli(prog_name="python -m apk_tools")


if __name__ == "__main__":
    main()
