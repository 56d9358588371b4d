"""Shared fixtures: every test gets its own store directory on the real disk."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import seglog

# Spark workers and subprocess writers must run this interpreter, with this package.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


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
