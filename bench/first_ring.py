#!/usr/bin/env python3
"""Benchmark "Stop." over the first ring after start-up, with a microphone that hears her.

Before speexdsp has learnt the room, WebRTC's AEC3 stands in (`LearningCanceller`). A timer's ring
is the chime, then "Your 5 minute timer is done." in her Piper voice.

Offline (the default, ≈2 min): her ring reaches the microphone `--delay-ms` late at `--echo-db`
(`--room loopback` or `room`, as `bench/echo.py` builds them); a person says "Stop." over it 0.6,
1.2, 1.8 and 2.4 s into the ring, in four voices, at −6 / 0 / +6 dB against her echo. Each source
is read as the daemon reads a "stop" candidate (the StopReader, then `heard_stop` with her words):
the shipped canceller fresh, speexdsp alone fresh, and the microphone as it is; with Silero's peak
over the word (would the spotter offer it?) and false stops over her ring alone, 1 s windows.

Live (`--live N`): N fresh daemons on the virtual sound card, the speaker looped back into the
microphone; each has a timer set, by voice (her confirmation is the first she says) or with
`--by-ask` (`elara ask`: the ring is the first she says), and is told "Stop." `--after` seconds
into its first ring; counted: the rings stopped within 5 s. The daemons' DEBUG logs go to `--out`.

    .venv/bin/python -m bench.first_ring [--delay-ms 60] [--echo-db -6] [--room loopback] [--verbose]
    .venv/bin/python -m bench.first_ring --live 8 [--by-ask] [--after 1.2] [--out DIR]
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.common import speech
from bench.echo import NoCanceller, hand_over, her_echo
from elara.audio.frames import FRAME_SAMPLES, SAMPLE_RATE, AudioFrame
from elara.audio.reference import PlaybackHistory
from elara.skills.announcements import chime
from elara.voice.echo import EchoFilter, SpeexCanceller, make_canceller
from elara.voice.stop import heard_stop
from elara.voice.stt import phantom_reason
from tests.rig import voice_clips

HER = "Your 5 minute timer is done."
PERSON = [("espeak", "en-us", 150), ("espeak", "en-gb", 150), ("espeak", "en-us+f3", 150), ("piper", 1.1)]


def ring() -> tuple[np.ndarray, int]:
    """Her ring as the speaker plays it (the chime, her words, 1.5 s of silence), and its rate."""
    synthesizer = voice_clips.synthesizer()
    rate = synthesizer.sample_rate
    said = synthesizer.synthesize(HER).samples
    return np.concatenate([chime(rate).samples, said, np.zeros(int(1.5 * rate), dtype=np.int16)]), rate


def cleaned(mic: np.ndarray, played: np.ndarray, rate: int, canceller) -> np.ndarray:
    """`mic` through an EchoFilter on `canceller`, fed as the daemon feeds it (80 ms frames)."""
    history = PlaybackHistory(seconds=10.0)
    start = 100.0
    echo = EchoFilter(canceller, history)
    written, out = 0, []
    for i in range(len(mic) // FRAME_SAMPLES):
        captured = start + (i + 1) * FRAME_SAMPLES / SAMPLE_RATE
        written = hand_over(history, played, rate, start, written, captured)
        out.append(echo.clean(AudioFrame(mic[i * FRAME_SAMPLES:(i + 1) * FRAME_SAMPLES], captured)).samples)
    return np.concatenate(out)


def live(args: argparse.Namespace) -> int:
    """`--live N`: N fresh daemons on the virtual sound card, the speaker looped back into the
    microphone; each sets a timer by voice and is told "Stop." over its first ring."""
    import tempfile
    import time
    from pathlib import Path

    from tests.rig.daemon_process import daemon_env, listening_daemon
    from tests.rig.ollama_server import FakeOllamaServer
    from tests.rig.pulse import VirtualSoundCard

    stopped = 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for trial in range(args.live):
        with tempfile.TemporaryDirectory() as tmp_name, VirtualSoundCard() as card, \
                FakeOllamaServer(responder=lambda endpoint, body: "Not asked.") as server:
            tmp = Path(tmp_name)
            module = card.add_echo(latency_ms=round(args.delay_ms), volume=10 ** (args.echo_db / 20))
            env = daemon_env(card.env, server.url, tmp, Listening__Mode="wake_word", Timers__RingSeconds="30",
                             Logging__Level="DEBUG")
            voice = PERSON[trial % len(PERSON)]
            try:
                with listening_daemon(env, out / f"daemon-{trial}.log") as daemon:
                    if args.by_ask:  # nothing said by her before the ring: the canceller knows no room
                        from bench.common import elara
                        done = elara(env, "ask", "Set a timer for three seconds.")
                        assert done.returncode == 0, done.stderr
                    else:
                        card.play_into_mic(voice_clips.write_wav(tmp / "set.wav", voice_clips.concat(
                            voice_clips.silence(0.5), voice_clips.piper_speech("Hey Jarvis."),
                            voice_clips.silence(0.5), voice_clips.piper_speech("Set a timer for two seconds."),
                            voice_clips.silence(1.5))))
                    daemon.wait_for(r"announcing \(timer\)", timeout=30)
                    time.sleep(args.after)
                    card.play_into_mic(voice_clips.write_wav(tmp / "stop.wav", voice_clips.concat(
                        voice_clips.silence(0.2), speech(voice, "Stop."), voice_clips.silence(1.0))))
                    try:
                        daemon.wait_for(r"stopped 1 ringing announcement", timeout=5)
                        ok = True
                    except Exception:
                        ok = False
                    stopped += ok
                    print(f"trial {trial} {voice[1]}: {'stopped' if ok else 'RANG ON'}", flush=True)
            finally:
                card.remove_echo(module)
    print(f"stopped {stopped}/{args.live}")
    return 0


def offline(args: argparse.Namespace) -> int:
    """The table: each source's stops heard, words Silero would offer, false stops."""

    from elara.config import load_settings
    from elara.service.engines import load_whisper
    from elara.service.listening import stop_reader
    from elara.service.slices import SpeechToTextSlice
    from elara.voice.vad import SileroVad

    settings = load_settings(env={})
    whisper = load_whisper(SpeechToTextSlice.of(settings))
    reader = stop_reader(whisper, ("hey jarvis",)) or whisper
    vad = SileroVad()

    played, rate = ring()
    echo = her_echo(played, rate, args.room, args.delay_ms, args.echo_db)
    echo_level = float(np.sqrt(np.mean(echo[np.abs(echo) > 50] ** 2)))
    sources = {"shipped": lambda: make_canceller("speex"), "speex": SpeexCanceller, "raw": NoCanceller}
    hits = {name: 0 for name in sources}
    spotted = {name: 0 for name in sources}
    trials = 0
    for onset in (0.6, 1.2, 1.8, 2.4):
        for voice in PERSON:
            for level in (-6.0, 0.0, 6.0):
                said = speech(voice, "Stop.").astype(np.float64)
                voiced = said[np.abs(said) > 50]
                said *= echo_level * 10 ** (level / 20) / max(float(np.sqrt(np.mean(voiced ** 2))), 1.0)
                mic = echo.copy()
                at = int(onset * SAMPLE_RATE)
                mic[at:at + len(said)] += said[: len(mic) - at]
                mic = np.clip(mic + np.random.default_rng(1).standard_normal(len(mic)) * 3, -32768, 32767).astype(np.int16)
                loud = np.flatnonzero(np.abs(said) > 0.05 * np.abs(said).max())
                begin, end = at + int(loud[0]), at + int(loud[-1])
                first, last = max(0, begin // FRAME_SAMPLES - 3), end // FRAME_SAMPLES + 2
                trials += 1
                line = []
                for name, make in sources.items():
                    out = cleaned(mic, played, rate, make())
                    segment = out[first * FRAME_SAMPLES:last * FRAME_SAMPLES]
                    vad.reset()
                    peak = max(vad.speech_probability(AudioFrame(out[i * FRAME_SAMPLES:(i + 1) * FRAME_SAMPLES], 0.0))
                               for i in range(first, last))
                    transcript = reader.transcribe(segment)
                    ok = phantom_reason(transcript) is None and heard_stop(transcript.text, HER, ringing=True)
                    hits[name] += ok
                    spotted[name] += peak >= 0.5
                    line.append(f"{name}: {transcript.text!r} vad {peak:.2f} {'STOP' if ok else '-'}")
                if args.verbose:
                    print(f"{onset} {voice[1]} {level:+.0f}: " + " | ".join(line), flush=True)
    # her ring alone: windows of 1 s through each source
    false = {name: 0 for name in sources}
    windows = 0
    mic = np.clip(echo + np.random.default_rng(1).standard_normal(len(echo)) * 3, -32768, 32767).astype(np.int16)
    for name, make in sources.items():
        out = cleaned(mic, played, rate, make())
        for start in np.arange(0.0, len(out) / SAMPLE_RATE - 1.0, 0.5):
            segment = out[int(start * SAMPLE_RATE):int((start + 1.0) * SAMPLE_RATE)]
            transcript = reader.transcribe(segment)
            bad = phantom_reason(transcript) is None and heard_stop(transcript.text, HER, ringing=True)
            false[name] += bad
            windows += name == "raw"
            if args.verbose and bad:
                print(f"false stop through {name} at {start:.1f}: {transcript.text!r}")
    print('| source | "Stop." read as a stop | Silero ≥ 0.5 over it | false stops over her ring alone |')
    print("| --- | ---: | ---: | ---: |")
    for name in sources:
        print(f"| {name} | {hits[name]}/{trials} | {spotted[name]}/{trials} | {false[name]}/{windows} |")
    return 0


def main() -> int:
    """Offline, or `--live N`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=0)
    parser.add_argument("--after", type=float, default=1.2)
    parser.add_argument("--by-ask", action="store_true")
    parser.add_argument("--out", default="/tmp/first-ring")
    parser.add_argument("--delay-ms", type=float, default=60)
    parser.add_argument("--echo-db", type=float, default=-6)
    parser.add_argument("--room", default="loopback")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    return live(args) if args.live else offline(args)


if __name__ == "__main__":
    raise SystemExit(main())
