"""The reader thread hands every condition's blocks over in order, raises its errors in the caller's
thread, and stops when the caller stops early."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from crs.evaluate.units import Condition, ConditionReader


def conditions(n_conditions: int = 5, rows: int = 10_000):
    for c in range(n_conditions):
        features = np.full((rows, 3), c, dtype=np.float16)
        features[:, 1] = np.arange(rows) % 2048
        yield Condition("corrupt", f"c{c}", 1, "", np.zeros(rows), features)


def test_blocks_arrive_in_order_across_conditions():
    reader = ConditionReader(conditions(), depth=2)
    seen = []
    try:
        for condition in reader.conditions():
            starts, rows = [], 0
            for start, block in reader.blocks():
                assert (block[:, 0] == int(condition.corruption[1:])).all()
                starts.append(start)
                rows += len(block)
            assert rows == 10_000 and starts == sorted(starts) and starts[0] == 0
            seen.append(condition.corruption)
    finally:
        reader.close()
    assert seen == [f"c{c}" for c in range(5)]


def test_an_error_while_reading_is_raised_in_the_callers_thread():
    def failing():
        yield from conditions(2)
        raise OSError("disk gone")

    reader = ConditionReader(failing())
    try:
        with pytest.raises(OSError, match="disk gone"):
            for _ in reader.conditions():
                for _ in reader.blocks():
                    pass
    finally:
        reader.close()


def test_closing_early_stops_the_reader_thread():
    reader = ConditionReader(conditions(50), depth=1)
    first = next(reader.conditions())
    assert first.corruption == "c0"
    reader.close()  # the reader is blocked on a full queue: close must not hang
    assert not any(t.name == "crs-read" and t.is_alive() for t in threading.enumerate())
