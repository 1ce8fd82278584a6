"""The settings of devices other than phones: Linux boards over SSH, GPUs, an RPC proxy."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from farm.config.base import Frozen


class BoardSettings(Frozen):
    """One Linux board farm reaches over SSH (``[[boards]]``, one table per board).

    Attributes:
        name: the board's serial in farm (``devices.serial``): letters, digits, ``-``.
        host: the board's SSH address.
        port: its SSH port.
        user: the SSH user farm logs in as.
        key_file: the private key farm logs in with; None = the SSH agent and
            ``~/.ssh/id_*``.
        known_hosts: a known_hosts file holding the board's host key; None =
            ``~/.ssh/known_hosts``.
        host_key_policy: ``strict`` refuses a board whose host key is not known;
            ``accept-new`` trusts the first key seen (and writes it to
            ``known_hosts`` when set), refusing a changed one later.
        tracker_key: the tracker key its RPC server registers under; None =
            ``board-<name>``.
        python: the board's Python interpreter (for ``server = "python"``).
        server: ``python`` runs ``<python> -m tvm.exec.rpc_server``; any other
            value is the path of the C++ ``tvm_rpc`` binary on the board.
        work_dir: the board's working folder for farm (pidfile, server log,
            session files); relative paths are under the user's home.
        tracker_host: the address the board dials the tracker at; None =
            ``tracker.phone_host`` or ``tracker.host``.
        tracker_via: how the board's server reaches the tracker. ``direct``: it
            dials ``tracker_host``; ``forward``: an SSH remote port forward on the
            board's loopback carries it to the tracker (like ``adb reverse``), and
            the server reports ``host`` as its address; ``auto``: ``forward`` when
            ``tracker_host`` is a loopback address and the board is not local.
        reboot_allowed: whether recovery may ``reboot`` the board (needs
            passwordless ``sudo reboot`` or root).
        cc: the cross compiler that links kernels for the board, e.g.
            ``aarch64-linux-gnu-g++`` (Debian's ``g++-aarch64-linux-gnu``);
            None = the host compiler, for boards of the host's own ``uname -m``.
        sysfs_root: where the board's sysfs is (``/sys``); virtual boards fake
            thermal zones under their sandbox.
        connect_timeout_s: SSH connect and authentication deadline.
        command_timeout_s: deadline of one remote command.
    """

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9-]*$")
    host: str = Field(min_length=1)
    port: int = Field(22, gt=0, lt=65536)
    user: str = Field(min_length=1)
    key_file: Path | None = None
    known_hosts: Path | None = None
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    tracker_key: str | None = Field(None, min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    python: str = Field("python3", min_length=1)
    server: str = Field("python", min_length=1)
    work_dir: str = Field("farm-board", min_length=1)
    tracker_host: str | None = None
    tracker_via: Literal["auto", "direct", "forward"] = "auto"
    reboot_allowed: bool = False
    cc: str | None = None
    sysfs_root: str = Field("/sys", min_length=1)
    connect_timeout_s: float = Field(10.0, gt=0)
    command_timeout_s: float = Field(30.0, gt=0)


class GpuSettings(Frozen):
    """This host's NVIDIA GPUs as fleet devices (kind ``gpu``, :mod:`farm.controllers.gpu`).

    Attributes:
        enabled: whether farmd looks for GPUs through NVML (needs the ``gpu``
            extra, ``nvidia-ml-py``, and an NVIDIA driver).
        gpus: which GPUs to serve, by NVML index (``"0"``) or UUID
            (``"GPU-5c3f..."``); empty serves every GPU NVML lists.
        temp_max_c: above this core temperature the GPU cools (thermal gating
            waits). 83 °C is farm's choice, under the slowdown threshold an H100
            reports through NVML (``slowdown_temp_c`` in
            ``tests/fixtures/nvml/h100_idle.json``); a GPU slowing itself for
            heat cools whatever its temperature.
        key_prefix: tracker keys are ``<prefix>-<first 8 hex digits of the UUID>``.
        server_host: the address each GPU's RPC server binds and announces.
    """

    enabled: bool = False
    gpus: tuple[str, ...] = ()
    temp_max_c: float = Field(83.0, gt=0)
    key_prefix: str = Field("gpu", min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    server_host: str = "127.0.0.1"


class ProxySettings(Frozen):
    """A ``tvm.exec.rpc_proxy`` for devices that connect out (iOS RPC app, a browser).

    Attributes:
        enabled: whether farmd runs the proxy, registered at its tracker.
        host: the address the proxy binds.
        port: where devices connect (``is_proxy`` RPC servers, the iOS app).
        web_port: the proxy's websocket port for browsers; 0 = none.
    """

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(9091, gt=0, lt=65536)
    web_port: int = Field(0, ge=0, lt=65536)
