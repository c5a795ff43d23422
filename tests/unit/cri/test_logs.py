"""CRI log format: timestamps, streams, full and partial lines, reading back."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from cri.logs import FULL, PARTIAL, STDERR, STDOUT, CRILogWriter, copy_stream, parse_line, read_log, rfc3339nano


def test_timestamps_are_go_rfc3339nano() -> None:
    assert rfc3339nano(1_475_713_029_669_794_202) == "2016-10-06T00:17:09.669794202Z"
    assert rfc3339nano(1_475_713_029_669_794_000) == "2016-10-06T00:17:09.669794Z"
    assert rfc3339nano(1_475_713_029_000_000_000) == "2016-10-06T00:17:09Z"


def test_lines_and_partial_lines(tmp_path: Path) -> None:
    path = tmp_path / "c" / "0.log"
    writer = CRILogWriter(path, max_line=8, clock=lambda: 1_475_713_029_669_794_202)
    writer.write(STDOUT, b"hello\nwor")
    writer.write(STDERR, b"oops\n")
    writer.write(STDOUT, b"ld\n" + b"x" * 20 + b"\n")
    writer.write(STDOUT, b"tail-without-newline")
    writer.close()
    lines = path.read_bytes().splitlines()
    assert lines[0] == b"2016-10-06T00:17:09.669794202Z stdout F hello"
    entries = [parse_line(line) for line in lines]
    assert [(e.stream, e.tag, e.content) for e in entries] == [
        (STDOUT, FULL, b"hello"),
        (STDERR, FULL, b"oops"),
        (STDOUT, FULL, b"world"),
        (STDOUT, PARTIAL, b"x" * 8), (STDOUT, PARTIAL, b"x" * 8), (STDOUT, FULL, b"x" * 4),
        (STDOUT, PARTIAL, b"tail-wit"), (STDOUT, PARTIAL, b"hout-new"), (STDOUT, PARTIAL, b"line"),
    ]
    assert list(read_log(path)) == [(STDOUT, b"hello"), (STDERR, b"oops"), (STDOUT, b"world"),
                                    (STDOUT, b"x" * 20), (STDOUT, b"tail-without-newline")]


def test_empty_lines_and_exact_length(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    writer = CRILogWriter(path, max_line=4)
    writer.write(STDOUT, b"\nabcd\n")
    writer.close()
    assert [(e.tag, e.content) for e in map(parse_line, path.read_bytes().splitlines())] == [
        (FULL, b""), (FULL, b"abcd")]


def test_reopen_after_rotation(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    writer = CRILogWriter(path)
    writer.write(STDOUT, b"before\n")
    path.rename(tmp_path / "0.log.1")
    writer.reopen()
    writer.write(STDOUT, b"after\n")
    writer.close()
    assert list(read_log(tmp_path / "0.log.1")) == [(STDOUT, b"before")]
    assert list(read_log(path)) == [(STDOUT, b"after")]


def test_copy_from_pipes(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    writer = CRILogWriter(path)
    threads = []
    for stream, payload in ((STDOUT, b"out 1\nout 2\n"), (STDERR, b"err\nno newline")):
        read_end, write_end = os.pipe()
        thread = threading.Thread(target=copy_stream, args=(read_end, writer, stream))
        thread.start()
        os.write(write_end, payload)
        os.close(write_end)
        threads.append((thread, read_end))
    for thread, read_end in threads:
        thread.join(5)
        os.close(read_end)
    writer.close()
    got = list(read_log(path))
    assert [c for s, c in got if s == STDOUT] == [b"out 1", b"out 2"]
    assert [c for s, c in got if s == STDERR] == [b"err", b"no newline"]


@pytest.mark.parametrize("bad", [b"", b"2016-10-06T00:17:09Z stdout", b"t stdin F x", b"t stdout X x"])
def test_parse_rejects_malformed_lines(bad: bytes) -> None:
    with pytest.raises(ValueError):
        parse_line(bad)
