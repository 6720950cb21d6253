"""Every typed error Elara raises on purpose, in one module.

In the manner of Home Assistant's `assist_pipeline/error.py`: one base class and a subclass per
part that can fail. Each error carries

- `code`: a stable identifier for logs, `elara status`, tests and fix-it tables (an instance may
  narrow its class's code, e.g. a LanguageModelError with code "timeout");
- the message: what failed, naming the thing (a config key, a file, a host) and the fix;
- `exit_status`: what the command line exits with when the error ends a command;
- `apology`: the sentence the user hears when the error ends a spoken turn, or None for errors
  that are never heard (they are printed or logged instead).

Plain ValueError/TypeError stay for programming mistakes (a bad argument from code, not from a
user); the configuration loader turns bad values into ConfigError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

#: Exit statuses (sysexits.h, and LSB's "program is not running" for `elara status`).
EXIT_FAILURE = 1
EXIT_NOT_RUNNING = 3
EX_UNAVAILABLE = 69
EX_CONFIG = 78


class ElaraError(Exception):
    """Base of every error Elara raises on purpose."""

    code = "error"
    #: Process exit status the command line uses for this error.
    exit_status = EXIT_FAILURE
    #: Spoken apologies by code; a class without any is never heard, only printed or logged.
    APOLOGIES: ClassVar[Mapping[str, str]] = {}

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message

    @property
    def apology(self) -> str | None:
        """A short sentence, fit to be spoken, for this error's code (or its class's); None if none."""
        return self.APOLOGIES.get(self.code, self.APOLOGIES.get(type(self).code))


# ---------------------------------------------------------------------------------------------
# configuration and models


class ConfigError(ElaraError):
    """The configuration is invalid; start-up stops with exit status 78 (EX_CONFIG)."""

    code = "config"
    exit_status = EX_CONFIG


class ModelNotFoundError(ConfigError):
    """A configured model is not installed or not where the configuration says."""

    code = "model_not_found"


class ModelLoadError(ConfigError):
    """A model was found but does not load (a damaged or wrong file)."""

    code = "model_load"


# ---------------------------------------------------------------------------------------------
# the conversation store


class StoreError(ElaraError):
    """The conversation store could not be read or written."""

    code = "store"


class CommandError(ElaraError):
    """A local command (a timer) could not be carried out: its record could not be written."""

    code = "command"
    APOLOGIES: ClassVar[Mapping[str, str]] = {
        "command": "Sorry, I couldn't do that: I can't write to my storage."}


class WrongKeyError(StoreError):
    """No stored message decrypts with the configured passphrase."""

    code = "wrong_key"
    exit_status = EX_CONFIG


class EnvelopeError(StoreError):
    """Stored bytes could not be opened as an envelope."""

    code = "envelope"


class MalformedEnvelopeError(EnvelopeError):
    """The bytes are not an AES-256-GCM envelope (not JSON, wrong fields, bad base64 or sizes)."""

    code = "malformed_envelope"


class AuthenticationError(EnvelopeError):
    """The envelope is well formed but does not authenticate: wrong key or tampered bytes."""

    code = "authentication_failed"


# ---------------------------------------------------------------------------------------------
# a turn: context and the language model


class ContextError(ElaraError):
    """A context provider could not supply context for a prompt (the turn goes on without it)."""

    code = "context"


class ToolRefused(ElaraError):
    """A built-in tool turned a call down; its message is the reason the model reads."""

    code = "tool_refused"


class ToolServerLost(Exception):
    """An MCP server stopped answering while its session was held (it is restarted)."""


class EvaluationStopped(Exception):
    """The built-in model's prompt evaluation was stopped between two steps, as asked (not a
    failure: what was read stays cached)."""


class LanguageModelError(ElaraError):
    """The language model failed; `code` says how and `apology` is what the user hears."""

    code = "model_error"
    exit_status = EX_UNAVAILABLE

    APOLOGIES: ClassVar[Mapping[str, str]] = {
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


class SpeechServiceError(ElaraError):
    """A remote speech engine (a Wyoming service) is unreachable, too slow, or failed mid-request."""

    code = "speech_service"
    exit_status = EX_UNAVAILABLE

    APOLOGIES: ClassVar[Mapping[str, str]] = {
        "unreachable": "I can't reach the speech service right now.",
        "timeout": "The speech service took too long to answer.",
        "connection_lost": "I lost the connection to the speech service.",
        "service_error": "The speech service ran into a problem.",
        "speech_service": "The speech service ran into a problem.",
    }

    def __init__(self, message: str, *, code: str | None = None, service: str = "speech") -> None:
        super().__init__(message, code=code)
        #: "speech-to-text" or "text-to-speech"
        self.service = service


# ---------------------------------------------------------------------------------------------
# sound


class AudioDeviceError(ElaraError):
    """A sound device is missing or unusable, or PortAudio is not installed (exit status 69)."""

    code = "audio_device"
    exit_status = EX_UNAVAILABLE  # an operational problem, not a bad config value


class WavError(ElaraError):
    """A file is not a WAV Elara can read."""

    code = "wav"


class EnrollmentError(ElaraError):
    """Enrolling a voice for the wake-word verifier failed (nothing was saved)."""

    code = "enrollment"


# ---------------------------------------------------------------------------------------------
# the running daemon


class DaemonNotRunning(ElaraError):
    """No daemon answered on the status socket."""

    code = "not_running"
    exit_status = EXIT_NOT_RUNNING
