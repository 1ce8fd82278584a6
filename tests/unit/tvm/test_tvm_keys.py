"""Job tracker keys say their devices' kind; phones' keys are the ones farm always used."""

from __future__ import annotations

from farm.controllers import ANDROID, BOARD, GPU
from farm.tvm.keys import PHONE_KIND, job_key


class TestJobKey:
    def test_phones_keep_the_tracker_prefix(self) -> None:
        """``android-job-42`` as before: a key stored on a hold before an upgrade still matches."""
        assert job_key("android", 42) == "android-job-42"
        assert job_key("lab", 42, ANDROID) == "lab-job-42"

    def test_other_kinds_use_their_kind(self) -> None:
        """A GPU host's or a board's job is not an Android one."""
        assert job_key("android", 42, GPU) == "gpu-job-42"
        assert job_key("android", 42, BOARD) == "board-job-42"

    def test_phone_kind_is_the_controllers_android(self) -> None:
        assert PHONE_KIND == ANDROID
