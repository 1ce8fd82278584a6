"""farmctl records: import a MetaSchedule database folder, list it, export it back."""

from __future__ import annotations

import json
from pathlib import Path

from farm.jobs.tuning_db import RECORDS_FILE, WORKLOADS_FILE

TARGET = {"keys": ["cpu"], "kind": "llvm", "mtriple": "aarch64-linux-android", "num-cores": 8}


def database(folder: Path) -> Path:
    """A MetaSchedule JSON database: two workloads, three measured records and a failed one."""
    folder.mkdir()
    (folder / WORKLOADS_FILE).write_text('["111", "bQ=="]\n["222", "bg=="]\n')
    records = [[0, [[[1], []], [0.002, 0.002], TARGET, []]],
               [0, [[[2], []], [0.001, 0.001], TARGET, []]],
               [1, [[[3], []], [0.004], TARGET, []]],
               [1, [[[4], []], [1e10], TARGET, []]]]
    (folder / RECORDS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


class TestRecords:
    def test_import_list_and_export_round_trip(self, farmctl, tmp_path: Path) -> None:
        """Imported records list per workload and model (best, trials, failed); importing again
        keeps none twice; the export is the measured records as MetaSchedule's two files."""
        folder = database(tmp_path / "db")
        result = farmctl("records", "import", str(folder), "--device-model", "Pixel 7")
        assert result.exit_code == 0, result.output
        assert "4 records kept, 0 kept already" in result.stderr
        again = farmctl("records", "import", str(folder), "--device-model", "Pixel 7")
        assert "0 records kept, 4 kept already" in again.stderr

        rows = json.loads(farmctl("records", "list", "--json").stdout)
        assert [(r["shash"], r["device_model"], r["best_ms"], r["trials"], r["failed"])
                for r in rows] == [("111", "Pixel 7", 1.0, 2, 0), ("222", "Pixel 7", 4.0, 1, 1)]
        table = farmctl("records", "list").stdout
        assert "llvm mtriple=aarch64-linux-android num-cores=8" in table

        out = tmp_path / "out"
        assert farmctl("records", "export", "--out", str(out)).exit_code == 0
        lines = [json.loads(x) for x in (out / RECORDS_FILE).read_text().splitlines()]
        assert [r[1][0] for r in lines] == [[[1], []], [[2], []], [[3], []]]
        assert (out / WORKLOADS_FILE).read_text() == (folder / WORKLOADS_FILE).read_text()
        empty = farmctl("records", "export", "--out", str(tmp_path / "none"),
                        "--device-model", "Galaxy S23")
        assert "0 records of 0 workloads" in empty.stderr

    def test_a_broken_file_is_one_line_naming_it(self, farmctl, tmp_path: Path) -> None:
        """A record line that is not JSON, or a folder without the records file, is refused
        with the user's file named, exit 2, no traceback."""
        folder = database(tmp_path / "db")
        with (folder / RECORDS_FILE).open("a") as out:
            out.write("{oops\n")
        result = farmctl("records", "import", str(folder), "--device-model", "Pixel 7")
        assert result.exit_code == 2
        assert f"{folder / RECORDS_FILE}: line 5 is not JSON" in result.stderr
        missing = farmctl("records", "import", str(tmp_path), "--device-model", "Pixel 7")
        assert missing.exit_code == 2
        assert f"{tmp_path / RECORDS_FILE}: no such file" in missing.stderr
        assert json.loads(farmctl("records", "list", "--json").stdout) == []
