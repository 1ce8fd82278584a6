"""Prometheus metrics of farmd, on a private registry, served on loopback.

The series (prometheus-client; names follow Prometheus' naming practice of a
``farm_`` prefix and base units in the name)::

    farm_up                                    1 while farmd runs
    farm_phones{state}                         phones per state (ready, busy, ...; unreachable:
                                               a dead host's, farm.queue.hosts), fleet-wide
    farm_jobs{state}                           jobs per state (queued, running, ...)
    farm_device_reading{serial,kind,name}      latest value of each declared reading
    <series>{serial}                           latest value of each reading declared with a
                                               series of its own (farm.health.kind_readings:
                                               a phone's battery temperature, °C, and its
                                               thermal status, 0..6)
    farm_recoveries_total{serial,step}         recovery-ladder steps applied
    farm_job_duration_seconds{kind}            histogram of attempt durations
    farm_regressions_total{serial,workload}    phones the regression watch found slower
    farm_phone_reserved{serial}                1 while a person's reservation holds it, else 0
    farm_pool_phones                           phones offered under the pool key now

A private :class:`~prometheus_client.CollectorRegistry` (not the library's global
one) keeps each :class:`FarmMetrics` independent, so tests and two daemons in one
process never share counters, and the endpoint carries no process/GC series the
docs do not list.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from farm.errors import ConfigError, InfraFault
from farm.health.readings import all_declared
from farm.health.sample import HealthSample
from farm.netaddr import is_loopback

#: Job durations span a 1 s GEMM to a night of tuning.
JOB_DURATION_BUCKETS_S = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, float("inf"))


class FarmMetrics:
    """The collectors of one farmd, and the setters the daemon calls.

    Counts by state are set as a whole each time (:meth:`set_phone_counts`), so a
    state that emptied drops to 0 instead of keeping a stale value.
    """

    def __init__(self) -> None:
        """Create the registry and every series; ``farm_up`` starts at 1."""
        self.registry = CollectorRegistry(auto_describe=True)
        self.up = Gauge("farm_up", "1 while farmd is running.", registry=self.registry)
        self.phones = Gauge("farm_phones", "Phones per state.", ["state"], registry=self.registry)
        self.jobs = Gauge("farm_jobs", "Jobs per state.", ["state"], registry=self.registry)
        # A reading's own series, by reading name: the declarations say which (``series``).
        self.series: dict[str, Gauge] = {}
        for declared in all_declared():
            for r in declared.readings:
                if r.series and r.name not in self.series:
                    unit = f", {r.unit}" if r.unit else ""
                    self.series[r.name] = Gauge(r.series, f"Latest {r.description}{unit}.",
                                                ["serial"], registry=self.registry)
        self.reading = Gauge(
            "farm_device_reading",
            "Latest value of each reading a device's kind declares (farm.health.readings), "
            "in the unit its name ends with.",
            ["serial", "kind", "name"],
            registry=self.registry,
        )
        self.recoveries = Counter(
            "farm_recoveries",
            "Recovery-ladder steps applied to a phone.",
            ["serial", "step"],
            registry=self.registry,
        )
        self.job_duration_s = Histogram(
            "farm_job_duration_seconds",
            "Duration of job attempts, seconds.",
            ["kind"],
            buckets=JOB_DURATION_BUCKETS_S,
            registry=self.registry,
        )
        self.regressions = Counter(
            "farm_regressions",
            "Phones the regression watch found slower than their baseline.",
            ["serial", "workload"],
            registry=self.registry,
        )
        self.reserved = Gauge(
            "farm_phone_reserved",
            "1 while a person's reservation takes the phone out of scheduling, else 0.",
            ["serial"],
            registry=self.registry,
        )
        self.pool_phones = Gauge(
            "farm_pool_phones", "Phones offered under the pool key now.", registry=self.registry
        )
        self._lock = threading.Lock()
        self._reserved: set[str] = set()
        self._phone_states: set[str] = set()
        self._job_states: set[str] = set()
        self.up.set(1)

    def _set_counts(self, gauge: Gauge, known: set[str], counts: Mapping[str, int],
                    label: str = "state") -> None:
        """Set every ``label`` value in ``counts`` and zero those seen before but absent now."""
        with self._lock:
            known.update(counts)
            for value in known:
                gauge.labels(**{label: value}).set(counts.get(value, 0))

    def set_phone_counts(self, counts: Mapping[str, int]) -> None:
        """Publish how many phones are in each state, e.g. ``{"ready": 3}``."""
        self._set_counts(self.phones, self._phone_states, counts)

    def set_reserved(self, serials: set[str]) -> None:
        """Publish which phones are reserved now; those reserved before and not now drop to 0."""
        self._set_counts(self.reserved, self._reserved, dict.fromkeys(serials, 1), "serial")

    def set_job_counts(self, counts: Mapping[str, int]) -> None:
        """Publish how many jobs are in each state, e.g. ``{"queued": 5}``."""
        self._set_counts(self.jobs, self._job_states, counts)

    def observe_health(self, sample: HealthSample) -> None:
        """Publish a device's readings from a health sample; unknown readings are kept."""
        for name, value in sample.readings.items():
            if value is None:
                continue
            self.reading.labels(serial=sample.serial, kind=sample.kind, name=name).set(value)
            if (gauge := self.series.get(name)) is not None:
                gauge.labels(serial=sample.serial).set(value)

    def count_recovery(self, serial: str, step: str) -> None:
        """Count one recovery step applied to a phone (``step`` as in ``farm.supervise.Step``)."""
        self.recoveries.labels(serial=serial, step=str(getattr(step, "value", step))).inc()

    def observe_job(self, kind: str, duration_s: float) -> None:
        """Record one finished attempt's duration in seconds, by job kind (gemm, model, tune)."""
        self.job_duration_s.labels(kind=kind).observe(duration_s)

    def count_regression(self, serial: str, workload: str) -> None:
        """Count one phone found slower than its baseline on a workload (regression watch)."""
        self.regressions.labels(serial=serial, workload=workload).inc()


@dataclass(frozen=True)
class MetricsServer:
    """A running metrics endpoint.

    Attributes:
        host: the address it listens on.
        port: the TCP port it listens on (the real one when 0 was asked for).
        stop: stops serving and closes the socket; safe to call twice.
    """

    host: str
    port: int
    stop: Callable[[], None]

    @property
    def url(self) -> str:
        """The scrape URL, e.g. ``http://127.0.0.1:9464/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"


def start_metrics_server(
    metrics: FarmMetrics,
    host: str = "127.0.0.1",
    port: int = 9464,
) -> MetricsServer:
    """Serve ``metrics`` over HTTP (``GET /metrics``) in a daemon thread.

    Loopback only: the endpoint names phones and has no authentication (put a
    proxy in front to expose it). prometheus-client's own
    server is used (a ThreadingWSGIServer) rather than one of farm's.

    Args:
        metrics: the collectors to serve.
        host: address to bind.
        port: TCP port; 0 picks a free one (tests). 9464 is farm's default.

    Returns:
        The running server, with its real port and a ``stop`` callable.

    Raises:
        ConfigError: ``host`` is not loopback.
        InfraFault: the port cannot be bound.
    """
    if not is_loopback(host):
        raise ConfigError(
            "metrics.host", f"{host} is not loopback; the endpoint has no authentication"
        )
    try:
        httpd, thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise InfraFault(f"metrics endpoint {host}:{port}: {exc}") from exc
    stopped = threading.Event()

    def stop() -> None:
        if stopped.is_set():
            return
        stopped.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

    return MetricsServer(host=host, port=httpd.server_address[1], stop=stop)
