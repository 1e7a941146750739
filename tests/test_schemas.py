"""Shipped-schema validation: errors name the file and the field; date-times are really checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.schemas import load_json, validate

REAL_LOG = Path(__file__).resolve().parents[1] / "solutions/experiments/ddp_cpu/results/allreduce-cpu.json"


@pytest.mark.parametrize("value", ["yesterday", "2026-11-29", "2026-11-29T18:52:10", "2026-13-01T00:00:00Z"])
def test_a_bad_date_time_names_the_field(value):
    data = json.loads(REAL_LOG.read_text())
    data["started_utc"] = value
    with pytest.raises(ConfigError, match=r"log\.json, started_utc: .* is not a 'date-time'"):
        validate(data, "allreduce-result.schema.json", "log.json")


@pytest.mark.parametrize("value", ["2026-11-29T18:52:10+00:00", "2026-11-29T18:52:10Z"])
def test_utc_date_times_pass(value):
    data = json.loads(REAL_LOG.read_text())
    data["started_utc"] = value
    validate(data, "allreduce-result.schema.json", "log.json")


def test_not_json_names_the_line(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{\n  "a": 1,\n  oops\n}\n')
    with pytest.raises(ConfigError, match=r"r\.json, line 3: not valid JSON"):
        load_json(path, "allreduce-result.schema.json")


def test_a_byte_order_mark_is_not_a_json_error(tmp_path):
    # Notepad and some Windows tools save UTF-8 with a BOM; the JSON after it is the learner's, intact
    path = tmp_path / "r.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{\n  "a": 1\n}\n')
    with pytest.raises(ConfigError, match=r"r\.json") as info:
        load_json(path, "allreduce-result.schema.json")
    assert "JSON" not in str(info.value) and "BOM" not in str(info.value)  # only the schema's own findings
