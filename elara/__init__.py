"""Elara: a local, private, always-on voice assistant backed by Ollama."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("elara")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
