"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ollama_server import FakeOllamaServer


@pytest.fixture
def ollama_server() -> Iterator[FakeOllamaServer]:
    """A started fake Ollama (models {"test-model"}, no fault) on a free port; stopped after."""
    server = FakeOllamaServer().start()
    try:
        yield server
    finally:
        server.stop()
