"""Tests for farm.config."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from farm.config import Settings, load_config
from farm.errors import ConfigError

SAMPLE = """
data_dir = "{data_dir}"

[adb]
connect = ["192.168.1.20:5555"]

[tracker]
phone_host = "10.0.2.2"

[apk]
path = "/opt/farm/tvmrpc.apk"

[[schedules]]
cron = "0 1 * * *"
spec = {{ kind = "tune", workload = "resnet18" }}
"""


@pytest.fixture
def sample(tmp_path):
    """A farm.toml with the common settings, its data_dir under tmp_path."""
    path = tmp_path / "farm.toml"
    path.write_text(SAMPLE.format(data_dir=tmp_path / "data"))
    return path


class TestLoadConfig:
    def test_defaults(self, tmp_path, monkeypatch):
        """With no file and no variables every setting has its documented default."""
        monkeypatch.setattr("farm.config.DEFAULT_PATH", tmp_path / "absent.toml")
        settings = load_config(env={"FARM_DATA_DIR": str(tmp_path)})
        assert settings.adb.port == 5037
        assert settings.tracker.port == 9190
        assert settings.tracker.external is False
        assert settings.health.battery_temp_max_c == 35
        assert settings.health.thermal_status_max == 0
        assert settings.apk.on_signature_clash == "fail"
        assert settings.database_url == f"sqlite:///{tmp_path / 'farm.db'}"

    def test_file(self, sample, tmp_path):
        """Values from the TOML file are read, nested tables included."""
        settings = load_config(sample, env={})
        assert settings.data_dir == tmp_path / "data"
        assert settings.adb.connect == ("192.168.1.20:5555",)
        assert settings.tracker.phone_host == "10.0.2.2"
        assert settings.apk.path == Path("/opt/farm/tvmrpc.apk")
        assert settings.schedules[0].cron == "0 1 * * *"
        assert settings.schedules[0].spec == {"kind": "tune", "workload": "resnet18"}

    def test_default_path(self, sample, monkeypatch):
        """/etc/farm/farm.toml is read when it exists and nothing else names a file."""
        monkeypatch.setattr("farm.config.DEFAULT_PATH", sample)
        assert load_config(env={}).tracker.phone_host == "10.0.2.2"

    def test_farm_config_variable(self, sample):
        """$FARM_CONFIG names the file when no path is given."""
        settings = load_config(env={"FARM_CONFIG": str(sample)})
        assert settings.tracker.phone_host == "10.0.2.2"

    def test_env_overrides_file(self, sample):
        """FARM_ variables with __ between levels override the file."""
        settings = load_config(
            sample,
            env={
                "FARM_ADB__PORT": "5038",
                "FARM_TRACKER__EXTERNAL": "true",
                "FARM_HEALTH__BATTERY_TEMP_MAX_C": "38.5",
                "FARM_ADB__CONNECT": '["10.0.0.5:5555", "10.0.0.6:5555"]',
                "FARM_DATABASE_URL": "postgresql+psycopg://farm@db/farm",
            },
        )
        assert settings.adb.port == 5038
        assert settings.tracker.external is True
        assert settings.tracker.phone_host == "10.0.2.2"  # untouched sibling kept
        assert settings.health.battery_temp_max_c == 38.5
        assert settings.adb.connect == ("10.0.0.5:5555", "10.0.0.6:5555")
        assert settings.database_url == "postgresql+psycopg://farm@db/farm"

    def test_frozen(self, sample):
        """Settings cannot be changed after loading."""
        settings = load_config(sample, env={})
        with pytest.raises(ValidationError):
            settings.adb.port = 1

    @pytest.mark.parametrize(
        ("env", "key", "reason"),
        [
            ({"FARM_ADB__PORT": "x"}, "adb.port", "FARM_ADB__PORT"),
            ({"FARM_ADB__PORT": "70000"}, "adb.port", "less than 65536"),
            ({"FARM_HEALTH__NOPE": "1"}, "health.nope", "unknown setting"),
            ({"FARM_HEALTH__THERMAL_STATUS_MAX": "7"}, "health.thermal_status_max", "6"),
            (
                {"FARM_APK__ON_SIGNATURE_CLASH": "wipe"},
                "apk.on_signature_clash",
                "'fail' or 'uninstall'",
            ),
            ({"FARM_ADB__CONNECT": '["phone"]'}, "adb.connect", "not host:port"),
            ({"FARM_ADB__CONNECT": "[oops"}, "adb.connect", "not valid JSON"),
            ({"FARM_VIRTUAL__NETWORK": "wifi"}, "virtual.network", "usb-only"),
            (
                {"FARM_SCHEDULES": '[{"cron": "bad", "spec": {}}]'},
                "schedules.0.cron",
                "FARM_SCHEDULES",
            ),
            ({"FARM_SUPERVISE__BACKOFF_BASE_S": "900"}, "supervise", "backoff_base_s"),
            ({"FARM_APK__KEYSTORE": "/k.p12"}, "apk.keystore", "unknown setting"),
            ({"FARM_ADB__HOST": "10.0.0.1"}, "adb.host", "unknown setting"),
        ],
    )
    def test_invalid_values_name_the_key(self, tmp_path, monkeypatch, env, key, reason):
        """Each invalid value raises ConfigError naming the dotted key and why."""
        monkeypatch.setattr("farm.config.DEFAULT_PATH", tmp_path / "absent.toml")
        with pytest.raises(ConfigError) as caught:
            load_config(env={"FARM_DATA_DIR": str(tmp_path), **env})
        assert caught.value.key == key
        assert reason in caught.value.reason

    def test_unknown_key_in_file(self, tmp_path):
        """A typo in the file is refused, naming the key."""
        path = tmp_path / "farm.toml"
        path.write_text("[tracker]\nprot = 9190\n")
        with pytest.raises(ConfigError) as caught:
            load_config(path, env={})
        assert caught.value.key == "tracker.prot"

    def test_missing_file(self, tmp_path):
        """An explicitly named file that does not exist is an error."""
        with pytest.raises(ConfigError, match="not found"):
            load_config(tmp_path / "absent.toml", env={})

    def test_bad_toml(self, tmp_path):
        """A file that is not TOML is an error naming the file."""
        path = tmp_path / "farm.toml"
        path.write_text("[adb\n")
        with pytest.raises(ConfigError) as caught:
            load_config(path, env={})
        assert caught.value.key == str(path)

    def test_config_error_is_a_user_fault(self, tmp_path):
        """Config errors exit farmctl with the usage exit code."""
        with pytest.raises(ConfigError) as caught:
            load_config(tmp_path / "absent.toml", env={})
        assert caught.value.exit_code == 2


class TestSettings:
    def test_data_dir_expands_home(self):
        """``~`` in data_dir is expanded."""
        assert "~" not in str(Settings(data_dir=Path("~/farm")).data_dir)
