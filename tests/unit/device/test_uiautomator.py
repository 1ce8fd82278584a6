"""Tests for farm.device.uiautomator."""

import pytest

from farm.device.uiautomator import Bounds, UiNode, center, parse_dump_path, parse_ui_dump


class TestParseUiDump:
    def test_landscape_game(self, fixture_text):
        """The single-line dump gives six nodes in document order with exact attributes."""
        nodes = parse_ui_dump(fixture_text("uiautomator_window_dump__landscape_game.xml"))
        assert len(nodes) == 6
        assert nodes[2].resource_id == "android:id/content"
        assert nodes[-1] == UiNode(
            resource_id="com.kabam.marvelbattle:id/unitySurfaceView",
            text="",
            class_name="android.view.View",
            package="com.kabam.marvelbattle",
            content_desc="Game view",
            bounds=Bounds(0, 0, 2780, 1264),
            checked=False,
            clickable=False,
            enabled=True,
            focused=True,
        )

    def test_bytes_and_fields(self):
        """Bytes input, a checked clickable EditText with text."""
        xml = (
            b"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">"
            b'<node index="0" text="10.0.2.2" resource-id="org.apache.tvm.tvmrpc:id/input_address" '
            b'class="android.widget.EditText" package="org.apache.tvm.tvmrpc" content-desc="" '
            b'checked="true" clickable="true" enabled="true" focused="false" '
            b'bounds="[40,200][1040,320]" /></hierarchy>'
        )
        (node,) = parse_ui_dump(xml)
        assert (node.text, node.checked, node.clickable) == ("10.0.2.2", True, True)
        assert center(node.bounds) == (540, 260)

    def test_malformed(self):
        """Truncated XML raises."""
        with pytest.raises(ValueError, match="malformed"):
            parse_ui_dump("<hierarchy><node")

    def test_wrong_root(self):
        """A document that is not a hierarchy raises."""
        with pytest.raises(ValueError, match="not <hierarchy>"):
            parse_ui_dump("<html/>")

    def test_bad_bounds(self):
        """Unreadable bounds raise."""
        with pytest.raises(ValueError, match="bounds"):
            parse_ui_dump('<hierarchy><node bounds="0,0,1,1"/></hierarchy>')


class TestCenter:
    def test_odd_sizes_round_down(self):
        """The centre of an odd-sized rectangle rounds toward the top left."""
        assert center(Bounds(0, 0, 3, 5)) == (1, 2)


class TestParseDumpPath:
    def test_stdout(self, fixture_text):
        """The path after AOSP's 'hierchary' typo line."""
        assert (
            parse_dump_path(fixture_text("uiautomator_dump__stdout.txt"))
            == "/sdcard/window_dump.xml"
        )

    def test_null_root(self, fixture_text):
        """No window: the phone's stderr message is raised."""
        with pytest.raises(ValueError, match="null root node"):
            parse_dump_path("", fixture_text("uiautomator_dump__null_root_stderr.txt"))
