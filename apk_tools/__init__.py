"""apk_tools: build, align, sign, verify and inspect the TVM RPC APK.

Modules, one job each::

    tools.py     find aapt / zipalign / apksigner / keytool (SDK, then PATH)
    inspect.py   inspect_apk(path) -> ApkInfo, through pyaxmlparser
    standin.py   build_standin_apk(out_dir) -> unsigned stand-in TVM RPC APK
    keys.py      SigningKey: a PKCS12 keystore or a PEM key + certificate
    align.py     zipalign -p 4 (page-aligned native libraries)
    sign.py      apksigner sign (v1+v2+v3), passwords via env:/file: only
    verify.py    apksigner verify -> schemes verified, signer SHA-256
    prepare.py   prepare(unsigned, key, out_dir) -> signed APK named by content
    __main__.py  ``python -m apk_tools keystore|align|sign|verify|inspect|prepare|standin``

Import from the modules (``from apk_tools.prepare import prepare``): this
package re-exports nothing, because functions named like their modules
(``align``, ``sign``, ``verify``, ``prepare``) would shadow them here.
"""
