"""farmd: the daemon that runs a host's devices, queue and API (``farm.daemon:main``).

It makes no decisions (those are pure functions elsewhere); it starts the
long-lived pieces, runs periodic jobs on an APScheduler ``BackgroundScheduler``
and stops everything in order on SIGTERM::

    adb server ──track──> FleetManager ──provision/heal──> phones
    tracker (supervised)      │ sweep every health.interval_s, hand sessions every
                              │   health.held_interval_s (farm.fleet.held)
    Dispatcher.tick() on a wake (enqueue, child exit, phone ready) or every
        jobs.tick_interval_s: claim -> child process per attempt (farm.runner.wake)
    metrics, systemd watchdog, recurring jobs (cron), retention, regression watch,
        reservation expiry (reservations.expire_interval_s), pool key offers (pool.interval_s)

On SIGTERM farmd at once stops taking work and starting provisioning (a phone
plugged in meanwhile is left for the next farmd), lets running attempts finish
for ``jobs.stop_grace_s`` (3 s), then kills and requeues them without charging
a try (rq's warm then cold shutdown); a tune resumes from its checkpointed
records. It is gone within about 10 s.

Restarts are clean: nothing farmd starts outlives it, even after ``kill -9``
(the tracker and the virtual phones' apps end their process groups when farmd
dies, :mod:`farm.procs`; attempt children watch ``--parent-pid``). A new farmd
first ends whatever its predecessor's ``farmd.json`` still names
(:func:`farm.runner.pidfile.adopt_predecessor`), then reclaims the attempts its
predecessor on this host left running (``Store.reclaim``) without charging their
jobs a try, so they start again at once instead of after their leases.
The adb server is the one exception: ``adb start-server`` daemonizes it, and
phones stay connected through a farmd restart only if it keeps running; the new
farmd owns it again (:mod:`farm.controllers.adb_host`), so its stop ends it.

::

    farmd.py     Farmd: wiring of the fleet, tracker, dispatcher, API and watches; start, stop
    watches.py   the periodic checks: the tracker's restarts, the gauges
    cli.py       the ``farmd`` command: settings, signals, start and stop
"""

from farm.daemon.cli import main
from farm.daemon.farmd import Farmd

__all__ = ["Farmd", "main"]
