"""Memory per idle virtual phone and shell round-trip latency through the real adb server.

Reproduce with::

    python bench/bench_virtual_phones.py --phones 16 --calls 300

It starts a private adb server (``farm.virtual.testing.adb_server``), measures
this process's RSS, starts N phones attached to that server, waits until every
one is ``device`` and idle, and measures RSS again: (after - before) / N is
the memory of one idle phone (adbd listener, network, Android userland; no
RPC process). Then it times ``echo`` round trips through adbutils (shell v1,
one new adb stream per call, spread over every phone) and prints p50/p95.
For comparison it also times the same ``shell:echo ping`` spoken directly
to the adb server's smart socket (``host:transport:SERIAL`` then the
service, AOSP ``adb/SERVICES.TXT``): the gap between the two is adbutils'
own per-call overhead, not the phone's.
"""

from __future__ import annotations

import argparse
import gc
import socket
import statistics
import sys
import time

import adbutils
import psutil
from _stats import percentile

from farm.virtual.testing import adb_server, fleet


def _raw_shell(adb_port: int, serial: str, command: str) -> bytes:
    """One ``shell:`` call over the adb server's smart-socket protocol, no client library."""
    with socket.create_connection(("127.0.0.1", adb_port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for request in (f"host:transport:{serial}", f"shell:{command}"):
            data = request.encode()
            sock.sendall(b"%04x" % len(data) + data)
            status = sock.recv(4)
            if status != b"OKAY":
                raise RuntimeError(f"{request}: {status!r}")
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=16, help="number of idle phones (N)")
    parser.add_argument("--calls", type=int, default=300, help="shell round trips to time")
    args = parser.parse_args(argv)

    process = psutil.Process()
    with adb_server() as server:
        gc.collect()
        rss_before_bytes = process.memory_info().rss
        with fleet(args.phones, adb_port=server.port) as phones:
            gc.collect()
            rss_after_bytes = process.memory_info().rss
            client = adbutils.AdbClient(host="127.0.0.1", port=server.port)
            devices = [client.device(serial) for serial in phones.serials]
            for device in devices:  # warm up each phone's shell once
                device.shell(["echo", "warm"])
            latencies_ms: list[float] = []
            for i in range(args.calls):
                device = devices[i % len(devices)]
                start = time.perf_counter()
                out = device.shell(["echo", "ping"])
                latencies_ms.append((time.perf_counter() - start) * 1000)
                if out.strip() != "ping":
                    print(f"unexpected output {out!r}", file=sys.stderr)
                    return 1
            raw_ms: list[float] = []
            for i in range(args.calls):
                serial = phones.serials[i % len(devices)]
                start = time.perf_counter()
                raw = _raw_shell(server.port, serial, "echo ping")
                raw_ms.append((time.perf_counter() - start) * 1000)
                if raw != b"ping\n":
                    print(f"unexpected output {raw!r}", file=sys.stderr)
                    return 1

    per_phone_kib = (rss_after_bytes - rss_before_bytes) / args.phones / 1024
    print(
        f"command: python bench/bench_virtual_phones.py --phones {args.phones} --calls {args.calls}"
    )
    print(
        f"python {sys.version.split()[0]}, adbutils {adbutils.__version__},"
        f" {psutil.cpu_count()} cpus"
    )
    print(f"memory per idle phone: {per_phone_kib:.0f} KiB (RSS delta / {args.phones})")
    print(
        f"shell round trip (adbutils echo, {args.calls} calls): "
        f"p50 {statistics.median(latencies_ms):.2f} ms, p95 {percentile(latencies_ms, 95):.2f} ms"
    )
    print(
        f"shell round trip (raw adb protocol echo, {args.calls} calls): "
        f"p50 {statistics.median(raw_ms):.2f} ms, p95 {percentile(raw_ms, 95):.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
