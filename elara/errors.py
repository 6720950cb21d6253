"""Typed errors: each carries a stable code and a message that names the thing and the fix."""

from __future__ import annotations


class ElaraError(Exception):
    """Base of every error Elara raises on purpose."""

    code = "error"
    #: Process exit status the command line uses for this error.
    exit_status = 1

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class ConfigError(ElaraError):
    """The configuration is invalid; start-up stops with exit status 78 (EX_CONFIG)."""

    code = "config"
    exit_status = 78


class StoreError(ElaraError):
    """The conversation store could not be read or written."""

    code = "store"


class WrongKeyError(StoreError):
    """No stored message decrypts with the configured passphrase."""

    code = "wrong_key"
    exit_status = 78


class ContextError(ElaraError):
    """A context provider could not supply context for a prompt."""

    code = "context"


class LanguageModelError(ElaraError):
    """The language model failed; `code` says how and `apology` is what the user hears."""

    code = "model_error"
    exit_status = 69  # EX_UNAVAILABLE

    APOLOGIES = {
        "unreachable": "I can't reach the language model right now.",
        "model_missing": "The language model isn't installed yet.",
        "timeout": "The language model took too long to answer.",
        "connection_lost": "I lost the connection to the language model.",
        "model_error": "The language model ran into a problem.",
    }

    @property
    def apology(self) -> str:
        """A short sentence, fit to be spoken, that names the cause."""
        return self.APOLOGIES.get(self.code, self.APOLOGIES["model_error"])
