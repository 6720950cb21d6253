"""Typed errors: all in elara/errors.py, each with its own code, an exit status and, if heard, an apology."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from elara import errors
from elara.errors import (
    AudioDeviceError,
    ConfigError,
    DaemonNotRunning,
    ElaraError,
    LanguageModelError,
    ModelNotFoundError,
    StoreError,
    WrongKeyError,
)

PACKAGE = Path(errors.__file__).resolve().parent


def every_error() -> list[type[ElaraError]]:
    """ElaraError and all its subclasses, depth first."""
    found: list[type[ElaraError]] = []
    pending: list[type[ElaraError]] = [ElaraError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_no_error_class_is_declared_outside_errors_py():
    exceptions = {name for name in dir(errors) if name.endswith("Error") or name == "DaemonNotRunning"}
    exceptions |= {name for name, value in vars(builtins).items()
                   if isinstance(value, type) and issubclass(value, BaseException)}
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                     for base in node.bases}
            if bases & exceptions:
                elsewhere.append(f"{path.relative_to(PACKAGE.parent)}: {node.name}")
    assert not elsewhere, "typed errors belong in elara/errors.py: " + ", ".join(elsewhere)


def test_every_error_lives_in_errors_and_has_its_own_code():
    classes = every_error()
    assert {cls.__module__ for cls in classes} == {"elara.errors"}
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes)), codes
    for cls in classes:
        assert cls.__doc__, f"{cls.__name__} needs a docstring"
        assert isinstance(cls.exit_status, int) and 0 < cls.exit_status < 126


def test_exit_statuses_the_command_line_relies_on():
    assert ConfigError("x").exit_status == ModelNotFoundError("x").exit_status == 78  # EX_CONFIG
    assert WrongKeyError("x").exit_status == 78
    assert LanguageModelError("x").exit_status == AudioDeviceError("x").exit_status == 69
    assert DaemonNotRunning("x").exit_status == 3  # LSB: program is not running
    assert StoreError("x").exit_status == 1


def test_message_code_and_apology():
    error = AudioDeviceError("there is no input device 3 (Audio.InputDevice)", code="device_missing")
    assert str(error) == error.message == "there is no input device 3 (Audio.InputDevice)"
    assert error.code == "device_missing" and AudioDeviceError.code == "audio_device"
    assert error.apology is None  # a device error is printed or logged, never spoken
    for code, apology in LanguageModelError.APOLOGIES.items():
        assert LanguageModelError("x", code=code).apology == apology
    assert LanguageModelError("x", code="something new").apology == LanguageModelError.APOLOGIES["model_error"]


def test_modules_that_raised_them_still_offer_them():
    from elara.audio import devices, wav
    from elara.conversation import crypto
    from elara.voice import models

    assert devices.AudioDeviceError is errors.AudioDeviceError
    assert wav.WavError is errors.WavError
    assert crypto.EnvelopeError is errors.EnvelopeError
    assert models.ModelNotFoundError is errors.ModelNotFoundError
