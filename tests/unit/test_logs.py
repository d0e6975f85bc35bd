"""The log line of a fault: its type and where it came from (the frames), never its text."""

from __future__ import annotations

import json
import logging
import sys

from gateway.observability.logs import JsonLines, PlainText

SECRET = "tok_do-not-log-me"


def _fault() -> None:
    raise KeyError(SECRET)


def _record() -> logging.LogRecord:
    try:
        _fault()
    except KeyError:
        exc_info = sys.exc_info()
    return logging.LogRecord("gateway.write", logging.ERROR, __file__, 1, "write failed: %s", ("KeyError",), exc_info)


def test_a_json_line_carries_the_faults_frames_and_not_its_text() -> None:
    line = json.loads(JsonLines().format(_record()))
    assert line["exception"] == "KeyError"
    assert line["stack"][-1].endswith("in _fault") and "test_logs.py" in line["stack"][-1]
    assert SECRET not in json.dumps(line)


def test_plain_text_carries_the_faults_frames_and_not_its_text() -> None:
    text = PlainText().format(_record())
    assert "KeyError, raised at:" in text and "in _fault" in text
    assert SECRET not in text
