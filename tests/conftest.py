"""Shared fixtures: every test gets its own store directory on the real disk."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import seglog

# Spark workers and subprocess writers must run this interpreter, with this package.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

with warnings.catch_warnings():
    # kafka-python 3.0 reads its protocol schemas with importlib.resources.read_text and
    # open_text (deprecated since Python 3.11) as its modules are imported: import it here,
    # once, before any test module does.
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    import kafka
    import kafka.errors
    import kafka.record.default_records
    import kafka.record.memory_records  # noqa: F401


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(store_path: Path) -> Iterator[seglog.Store]:
    s = seglog.open(store_path)
    yield s
    s.close()


@pytest.fixture
def broker(store: seglog.Store) -> Iterator[seglog.Broker]:
    """A broker on 127.0.0.1 (a free port) serving the test's store."""
    with seglog.Broker(store) as b:
        yield b
