"""The demo fleet's APK: the stand-in TVM RPC app, signed with a key kept in the data folder.

Only for virtual phones (``farmd --virtual-phones``, ``farmctl demo``): real
phones get the APK built from apache/tvm ``apps/android_rpc`` (``apk.path``).
The key is created once and reused, so reinstalls never clash on signatures;
:func:`apk_tools.prepare.prepare` names its output by content, so this is
idempotent and cheap after the first call.
"""

from __future__ import annotations

from pathlib import Path

from apk_tools.keys import PemKey, create_pem_key
from apk_tools.prepare import prepare
from apk_tools.standin import build_standin_apk

STANDIN_VERSION_CODE = 1


def demo_apk(data_dir: Path) -> Path:
    """The signed stand-in APK under ``data_dir/apk`` (built on first use).

    Raises:
        ToolMissing: aapt, zipalign or apksigner is not installed.
        ApkError: building or signing failed.
    """
    root = Path(data_dir) / "apk"
    key_pem, cert_pem = root / "demo-key.pem", root / "demo-cert.pem"
    if key_pem.exists() and cert_pem.exists():
        key = PemKey(key_pem, cert_pem)
    else:
        root.mkdir(parents=True, exist_ok=True)
        key = create_pem_key(key_pem, cert_pem, common_name="farm demo")
    unsigned = build_standin_apk(root / "unsigned", version_code=STANDIN_VERSION_CODE)
    return prepare(unsigned, key, root / "signed")
