#!/usr/bin/env bash
# Installs everything farm needs on a fresh Debian/Ubuntu machine (idempotent):
# the Android SDK tools that Debian packages (apksigner, zipalign, aapt with the
# framework resources, for the stand-in TVM RPC APK), OpenSSH's sshd (virtual
# Linux boards), chromium and its WebDriver (the dashboard's browser test drives
# them through selenium), then farm with its test and lint extras into the
# virtual environment .venv in this folder.
#
# Why a virtual environment: Debian 12 and Ubuntu 24.04 mark their python3 as
# externally managed (PEP 668), so `python3 -m pip install` is refused there
# (error: externally-managed-environment). .venv/bin/farmctl, .venv/bin/farmd and
# .venv/bin/python are then ready to run; nothing needs activating.
#
# Re-running it is cheap: apt runs only for a missing tool, and pip only when
# pyproject.toml changed since the last install (farm itself is installed
# editable, so changes to its code need no reinstall). `-I` keeps the current
# folder and $PYTHONPATH out of the "is farm installed" check.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.farm-setup  # the sha256 of the pyproject.toml last installed

need_apt=()
for tool in apksigner zipalign aapt systemd-analyze chromium chromedriver; do
  command -v "$tool" >/dev/null 2>&1 || need_apt+=("$tool")
done
[ -e /usr/share/android-framework-res/framework-res.apk ] || need_apt+=(android-framework-res)
# OpenSSH's sshd runs the virtual Linux boards (farm.virtual.board); installing the
# package may start a system sshd where systemd runs: farm's boards use their own.
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
# Debian's aarch64 cross compiler links kernels for ARM boards (the cross-compile test uses it).
command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || need_apt+=(g++-aarch64-linux-gnu)
# QEMU user mode runs the AArch64 virtual boards' TVM RPC server (farm.virtual.qemu).
command -v qemu-aarch64-static >/dev/null 2>&1 || need_apt+=(qemu-user-static)
# CMake builds the C++ example of `farmctl export` bundles (the export test builds it).
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
# Debian and Ubuntu ship `python3 -m venv` without ensurepip unless python3-venv is installed.
"$PYTHON" -c 'import ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    apksigner zipalign aapt android-framework-res systemd python3-venv openssh-server \
    g++-aarch64-linux-gnu qemu-user-static cmake chromium chromium-driver >/dev/null
fi

# A venv whose interpreter is gone (python upgraded or removed) is made again.
if ! "$VENV/bin/python" -c '' >/dev/null 2>&1; then
  "$PYTHON" -m venv --clear "$VENV"
  rm -f "$STAMP"
fi
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$wanted" ] \
   || ! "$VENV/bin/python" -I -c 'import farm' >/dev/null 2>&1; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[test,postgres,lint]"
  echo "$wanted" >"$STAMP"
fi
# The AArch64 TVM runtime and RPC server of virtual ARM boards: the aarch64 wheels are
# downloaded once and cross-built into ~/.cache/farm/aarch64 (a no-op once there).
"$VENV/bin/python" -I -m farm.virtual.qemu >/dev/null
echo "farm is set up in $VENV: $("$VENV/bin/python" -I -c 'import farm; print(farm.__version__)')" >&2
