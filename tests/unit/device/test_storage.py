"""Tests for farm.device.storage."""

import pytest

from farm.device.storage import Filesystem, free_bytes_for, parse_df_k


class TestParseDfK:
    def test_full_listing(self, fixture_text):
        """All 15 rows of the MTK ``df`` are read with exact numbers."""
        filesystems = parse_df_k(fixture_text("df__mtk_tb8168_android13.txt"))
        assert len(filesystems) == 15
        assert filesystems[0] == Filesystem("tmpfs", 1944756, 2516, 1942240, 1, "/dev")
        assert filesystems[2] == Filesystem("/dev/block/dm-4", 1579928, 1575144, 0, 100, "/")
        assert filesystems[12] == Filesystem(
            "/dev/block/dm-7", 54563696, 411164, 54005076, 1, "/data"
        )

    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            (
                "df_-k_data__honor_x8b_android14.txt",
                Filesystem("/dev/block/dm-23", 236630016, 7861776, 228637168, 4, "/data/user/0"),
            ),
            (
                "df_-k_data__mtk_tb8168_android13_derived.txt",
                Filesystem("/dev/block/dm-7", 54563696, 411164, 54005076, 1, "/data/user/0"),
            ),
        ],
    )
    def test_data_reports_bind_mount(self, fixture_text, name, expected):
        """``df -k /data`` names ``/data/user/0``, as toybox does."""
        assert parse_df_k(fixture_text(name)) == [expected]

    def test_human_readable_is_refused(self, fixture_text):
        """``df -h`` output raises: sizes like 1.8G are not KiB."""
        with pytest.raises(ValueError, match="1K-blocks"):
            parse_df_k(fixture_text("df_-h__mtk_tb8168_android13_derived.txt"))

    def test_short_row(self):
        """A row without six columns raises naming it."""
        with pytest.raises(ValueError, match="tmpfs 12"):
            parse_df_k("Filesystem 1K-blocks Used Available Use% Mounted on\ntmpfs 12\n")

    def test_empty_output(self):
        """Empty output raises."""
        with pytest.raises(ValueError, match="header"):
            parse_df_k("")


class TestFreeBytesFor:
    def test_longest_mount_wins(self, fixture_text):
        """A path under /data is charged to /data, not to /."""
        filesystems = parse_df_k(fixture_text("df__mtk_tb8168_android13.txt"))
        assert free_bytes_for(filesystems, "/data/local/tmp") == 54005076 * 1024
        assert free_bytes_for(filesystems, "/system/bin") == 0

    def test_bind_mount_quirk(self, fixture_text):
        """``/data`` is found in the single ``/data/user/0`` row of ``df -k /data``."""
        filesystems = parse_df_k(fixture_text("df_-k_data__honor_x8b_android14.txt"))
        assert free_bytes_for(filesystems, "/data") == 228637168 * 1024

    def test_no_filesystem(self):
        """A path no row holds raises."""
        rows = [Filesystem("tmpfs", 1, 0, 1, 0, "/dev"), Filesystem("tmpfs", 1, 0, 1, 0, "/mnt")]
        with pytest.raises(ValueError, match="no filesystem holds '/data'"):
            free_bytes_for(rows, "/data")
