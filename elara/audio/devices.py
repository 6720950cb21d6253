"""Finding a sound device by name or index, with errors that say what exists and what to set.

`sounddevice` is imported lazily (`load_sounddevice`): PortAudio lists the devices once, when it
is initialised at import, so importing it before the sound server is up would freeze an empty
list. Nothing in `elara.audio` imports it at module level.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from elara.errors import AudioDeviceError

if TYPE_CHECKING:  # pragma: no cover
    import types

log = logging.getLogger(__name__)

Kind = Literal["input", "output"]

#: The configuration key that picks the device of each kind.
CONFIG_KEYS: dict[str, str] = {"input": "Audio.InputDevice", "output": "Audio.OutputDevice"}


@dataclass(frozen=True)
class DeviceInfo:
    """One PortAudio device as Elara sees it."""

    index: int
    name: str
    host_api: str
    max_input_channels: int
    max_output_channels: int
    default_samplerate: float

    def channels(self, kind: Kind) -> int:
        """How many channels the device offers for `kind`."""
        return self.max_input_channels if kind == "input" else self.max_output_channels

    def label(self) -> str:
        """`3 "USB Audio: Mic (hw:1,0)" (ALSA, 48000 Hz)` — for logs and error messages."""
        return f'{self.index} "{self.name}" ({self.host_api}, {self.default_samplerate:g} Hz)'


def load_sounddevice() -> types.ModuleType:
    """Import and return `sounddevice`; AudioDeviceError if the PortAudio library is missing."""
    try:
        import sounddevice
    except OSError as e:  # sounddevice raises OSError('PortAudio library not found')
        raise AudioDeviceError(
            f"PortAudio is not available ({e}); install it (Debian: apt-get install libportaudio2)",
            code="portaudio_missing",
        ) from e
    return sounddevice


def list_devices(kind: Kind | None = None) -> list[DeviceInfo]:
    """Every device PortAudio knows, or only those with channels of `kind`."""
    sd = load_sounddevice()
    apis = [api["name"] for api in sd.query_hostapis()]
    found = []
    for index, d in enumerate(sd.query_devices()):
        info = DeviceInfo(
            index=index,
            name=str(d["name"]),
            host_api=apis[d["hostapi"]] if 0 <= d["hostapi"] < len(apis) else "?",
            max_input_channels=int(d["max_input_channels"]),
            max_output_channels=int(d["max_output_channels"]),
            default_samplerate=float(d["default_samplerate"]),
        )
        if kind is None or info.channels(kind) > 0:
            found.append(info)
    return found


def describe_devices(kind: Kind, devices: list[DeviceInfo] | None = None) -> str:
    """`input devices: 0 "pulse" (ALSA, 44100 Hz), 1 "default" (…)` or a line saying there are none."""
    devices = list_devices(kind) if devices is None else devices
    if not devices:
        return (f"PortAudio sees no {kind} devices (is there a sound card, or a running "
                "PulseAudio/PipeWire server this user can reach?)")
    return f"{kind} devices: " + ", ".join(d.label() for d in devices)


def find_device(spec: int | str | None, kind: Kind) -> DeviceInfo:
    """The device `spec` names: an index, a name (exact, else a unique case-insensitive part of
    "name, host API"), or None for PortAudio's default. AudioDeviceError names what was looked
    for, what exists, and the key to set."""
    key = CONFIG_KEYS[kind]
    devices = list_devices(kind)
    every = {d.index: d for d in list_devices()}

    def fail(what: str, *, code: str = "device_missing") -> AudioDeviceError:
        return AudioDeviceError(
            f"{what}; {describe_devices(kind, devices)}. Set {key} to one of these names or "
            "indexes, or to null for the default device", code=code)

    if isinstance(spec, str) and spec.strip().lstrip("-").isdigit():
        spec = int(spec.strip())
    if spec is None:
        sd = load_sounddevice()
        index = sd.default.device[0 if kind == "input" else 1]
        if index is None or index < 0 or index not in every:
            raise fail(f"there is no default {kind} device")
        if every[index].channels(kind) <= 0:
            raise fail(f"the default {kind} device {every[index].label()} has no {kind} channels")
        return every[index]
    if isinstance(spec, bool) or not isinstance(spec, (int, str)):
        raise fail(f"{key} must be a device name, an index or null, got {spec!r}",
                   code="device_invalid")
    if isinstance(spec, int):
        if spec not in every:
            raise fail(f"there is no {kind} device with index {spec} ({key})")
        if every[spec].channels(kind) <= 0:
            raise fail(f"device {every[spec].label()} ({key}) has no {kind} channels")
        return every[spec]

    wanted = spec.strip().lower()
    exact = [d for d in devices if d.name.lower() == wanted]
    if len(exact) == 1:
        return exact[0]
    partial = exact or [d for d in devices if wanted and wanted in f"{d.name}, {d.host_api}".lower()]
    if len(partial) == 1:
        return partial[0]
    if not partial:
        raise fail(f'no {kind} device matches "{spec}" ({key})')
    raise fail(f'"{spec}" ({key}) matches more than one {kind} device: '
               + ", ".join(d.label() for d in partial) + "; give the index or a longer name",
               code="device_ambiguous")



#: PortAudio's paInvalidSampleRate.
_PA_INVALID_SAMPLE_RATE = -9997


def is_rate_error(error: Exception) -> bool:
    """True when a PortAudioError/ValueError says the sample rate is what the device refused."""
    args: tuple[object, ...] = getattr(error, "args", ())
    if len(args) > 1 and args[1] == _PA_INVALID_SAMPLE_RATE:
        return True
    return "sample rate" in str(error).lower()
