"""Tests for farm.device.eventlog.

The am_proc_died lines are from public transcripts of real phones' event logs
(a bugreport grep on Android 6: the three-field form; an OPPO phone logged with
``-v usec``: five fields, microseconds).
"""

from farm.device.eventlog import AppDeath, parse_app_death

PKG = "org.apache.tvm.tvmrpc"


class TestParseAppDeath:
    def test_old_three_field_proc_died(self):
        """Android before 10 prints user, pid and process only."""
        line = "10-01 18:07:06.494  4600  9696 I am_proc_died: [0,20074,com.android.musicfx]  \n"
        assert parse_app_death(line.rstrip(" \n"), "com.android.musicfx") == AppDeath(
            "am_proc_died", "10-01 18:07:06.494", 20074, "com.android.musicfx")

    def test_secondary_process_with_usec_time(self):
        """A ``pkg:name`` process counts for its package; microsecond stamps parse."""
        line = ("05-07 20:05:04.920525  2083  3982 I am_proc_died: "
                "[0,10798,com.oplus.wirelesssettings:tzupdate,915,19]")
        death = parse_app_death(line, "com.oplus.wirelesssettings")
        assert death is not None
        assert (death.pid, death.process, death.java_crash) == (
            10798, "com.oplus.wirelesssettings:tzupdate", False)

    def test_crash_with_commas_in_its_message(self):
        """am_crash's exception class is read; commas in the message do not shift it."""
        line = (f"11-24 02:30:00.123   832  2345 I am_crash: [0,4242,{PKG},550026822,"
                "java.lang.IllegalStateException,bad a, b, c,MainActivity.java,126,0]")
        death = parse_app_death(line, PKG)
        assert death == AppDeath("am_crash", "11-24 02:30:00.123", 4242, PKG,
                                 "java.lang.IllegalStateException")
        assert death.java_crash
        assert death.reason == f"am_crash {PKG} pid 4242 (java.lang.IllegalStateException)"

    def test_native_crash_is_not_a_java_crash(self):
        """A native crash has no FATAL EXCEPTION block in logcat."""
        line = (f"11-24 02:30:00.123   832  2345 I am_crash: [0,4242,{PKG}:RPCProcess,"
                "550026822,native_crash,Segmentation fault,unknown,0,0]")
        death = parse_app_death(line, PKG)
        assert death is not None and not death.java_crash

    def test_other_lines_are_not_deaths(self):
        """Other packages, prefixes of the package, other tags and markers give None."""
        head = "11-24 02:30:00.123   832  2345 I"
        for line in (
            f"{head} am_proc_died: [0,1,com.other,0,2]",
            f"{head} am_proc_died: [0,1,{PKG}x,0,2]",
            f"{head} am_kill : [0,1,{PKG},0,stop {PKG} due to from pid 9]",
            "--------- beginning of events",
            f"{head} am_proc_died: [0,1",
        ):
            assert parse_app_death(line, PKG) is None, line
