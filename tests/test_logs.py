"""Logs that suit journald: `<priority>` prefixes, no timestamps, one line per event."""

import logging
import os

from elara.service.logs import JournalFormatter, configure, stream_is_journal


def test_journal_lines_have_priorities_and_no_newlines():
    formatter = JournalFormatter("%(name)s: %(message)s")
    record = logging.LogRecord("elara.x", logging.WARNING, __file__, 1, "two\nlines", None, None)
    assert formatter.format(record) == "<4>elara.x: two | lines"
    record.levelno = logging.DEBUG
    assert formatter.format(record).startswith("<7>")


def test_journal_detected_from_journal_stream(tmp_path):
    with open(tmp_path / "log", "w") as stream:
        st = os.fstat(stream.fileno())
        assert stream_is_journal(stream, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        assert not stream_is_journal(stream, {"JOURNAL_STREAM": "1:2"})
        assert not stream_is_journal(stream, {})


def test_configure_writes_journal_format_when_stderr_is_the_journal(tmp_path, monkeypatch):
    with open(tmp_path / "log", "w") as stream:
        st = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        configure("INFO", stream)
        logging.getLogger("elara.test").info("ready")
        logging.getLogger("httpx").info("HTTP Request: POST")  # quieted
    configure("WARNING")
    assert (tmp_path / "log").read_text() == "<6>elara.test: ready\n"
