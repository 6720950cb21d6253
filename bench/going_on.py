#!/usr/bin/env python3
"""Benchmark what Whisper reads of a question the person went on with after a thinking pause, by
how much of the pause it hears (offline, ≈4 min).

When the person goes on within `Listening.GoOnMs` of the end taken for the turn's, the daemon
joins the words before the pause to the speech that went on and has Whisper read them as one
(`going_on.shorten_pause`): the words and their 80 ms tail, `PAUSE_KEPT_FRAMES` of the pause,
then the speech from where the going-on was heard (three 80 ms frames of speech in a row). This
feeds the hesitant questions of `bench/turn.py` (14 questions × the 5 voices of `bench/voice.py`,
pauses of 0.6 and 1.2 s) through Silero VAD, builds that audio for each number of kept frames
with the daemon's own function, and counts the questions Whisper (the shipped settings) read on
past the pause: more words than were said before it.

    .venv/bin/python -m bench.going_on [--kept 0,1,2,5,all]
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.common import QUESTIONS, VOICES, log, question, words
from elara.audio.frames import FRAME_SECONDS
from elara.config import load_settings
from elara.service.engines import transcriber
from elara.service.slices import SpeechToTextSlice
from elara.voice import going_on
from elara.voice.models import resolve_whisper
from elara.voice.vad import create_vad
from tests.rig import voice_clips

PAUSES_MS = (600, 1200)
TAIL_FRAMES = 1  # the segmenter's tail after the last speech: min(EarlyStartMs, EndSilenceMs) = 80 ms
GONE_ON_FRAMES = 3  # speech frames in a row when the going-on is heard (MinSpeechMs 200)


def parse_kept(value: str) -> list[int | None]:
    """"0,1,2,all" → [0, 1, 2, None] (None: the whole pause)."""
    return [None if v == "all" else int(v) for v in value.split(",")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kept", type=parse_kept, default=parse_kept("0,1,2,5,all"),
                        help="frames of the pause Whisper hears, comma-separated ('all': the whole pause)")
    args = parser.parse_args()
    stt = transcriber(resolve_whisper("tiny.en"), SpeechToTextSlice.of(load_settings()))
    read_on = {kept: 0 for kept in args.kept}
    misses: dict[int | None, list[str]] = {kept: [] for kept in args.kept}
    asked = 0
    for source in VOICES:
        for first, rest in QUESTIONS:
            for pause in PAUSES_MS:
                clip = voice_clips.concat(voice_clips.silence(0.3), question(source, first, rest, pause),
                                          voice_clips.silence(1.0))
                vad = create_vad("silero")
                frames = list(voice_clips.frames(clip))
                speech = "".join("1" if vad.speech_probability(f) >= 0.5 else "0" for f in frames)
                try:
                    end = speech.index("000", speech.index("1"))  # the words so far end here
                    heard = speech.index("1" * GONE_ON_FRAMES, end + 3) + GONE_ON_FRAMES  # gone on
                    done = speech.index("00", heard) + 2  # the early end after the going-on
                except ValueError:
                    log(f"  skipped (the VAD heard no pause): {source} {first} … {rest}")
                    continue
                asked += 1
                for kept in args.kept:
                    going_on.PAUSE_KEPT_FRAMES = 10_000 if kept is None else kept
                    joined = going_on.shorten_pause(frames[:heard], 0, (end + TAIL_FRAMES) * FRAME_SECONDS,
                                                 GONE_ON_FRAMES) + frames[heard:done]
                    text = stt.transcribe(np.concatenate([f.samples for f in joined])).text
                    if len(words(text)) > len(words(first)):
                        read_on[kept] += 1
                    else:
                        misses[kept].append(f"{source} {pause} ms: {text!r}")
        log(f"  {source}: {asked} questions so far")
    print(f"{asked} questions gone on after a thinking pause ({len(VOICES)} voices, "
          f"{'/'.join(map(str, PAUSES_MS))} ms), tiny.en as shipped\n")
    print("| of the pause, Whisper hears (beyond the words' 80 ms tail) | read on past the pause |")
    print("| --- | ---: |")
    for kept in args.kept:
        label = "all of it" if kept is None else f"{kept} frame{'s' if kept != 1 else ''} ({kept * FRAME_SECONDS * 1000:.0f} ms)"
        print(f"| {label} | {read_on[kept]}/{asked} |")
    for kept in args.kept:
        for miss in misses[kept]:
            log(f"- {'all' if kept is None else kept}: {miss}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
