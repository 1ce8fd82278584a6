#!/usr/bin/env bash
# Installs everything farm needs on a fresh Debian/Ubuntu machine (idempotent):
# the Android SDK tools that Debian packages (apksigner, zipalign, aapt with the
# framework resources, for the stand-in TVM RPC APK) and the Python package with
# its test extras. Re-running it is cheap.
set -euo pipefail
cd "$(dirname "$0")"

need_apt=()
for tool in apksigner zipalign aapt systemd-analyze; do
  command -v "$tool" >/dev/null 2>&1 || need_apt+=("$tool")
done
[ -e /usr/share/android-framework-res/framework-res.apk ] || need_apt+=(framework-res)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    apksigner zipalign aapt android-framework-res systemd >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -e ".[test,postgres]"
echo "farm is set up: $(python3 -c 'import farm; print(farm.__version__)')" >&2
