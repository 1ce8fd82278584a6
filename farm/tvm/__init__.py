"""TVM RPC tracker supervision, tracker queries, session probes and the usb-only relay.

Modules::

    protocol.py   the tracker's wire format (magic, length-prefixed JSON, codes)
    tracker.py    TrackerProcess (a supervised ``tvm.exec.rpc_tracker``) and summary()
    probe.py      probe_session(): a real session with a hard deadline
    relay.py      Relay: per-phone tracker relay that rewrites registrations
"""
