"""Whether something heard over her own voice is the person's or hers: the gate a wake word or a
"stop" said while she speaks must pass.

Two ears hear the wake phrase over her: the wake word's engine, and the "stop" reader (Whisper,
reading short utterances over her). Her voice can only say the words she said, so the phrase heard
by both, in words she did not say, is the person's however loud her echo may be. That matters in
the seconds after her echo path moved (a stalled sound server), when cancelling may leave her
voice as loud as the person's and no level can tell the two apart."""

from __future__ import annotations

from elara.voice.echo import EchoFilter, is_barge_in
from elara.voice.wake_phrase import PLAYED_NAME_SIMILARITY, names_wake_word

#: frames a wake phrase spans, over which the barge-in decision compares levels
WAKE_WINDOW_FRAMES = 12
#: how far back her own words count as what a "stop" or a wake heard could be an echo of
PLAYED_WORDS_SECONDS = 3.0
#: how close together (capture times) the two ears must hear the wake phrase to have heard it once:
#: the reader's utterance ends with the phrase, and the engine scores it up to half a second later
HEARD_TOGETHER_SECONDS = 1.5
#: `playback_explains`'s answer when her own recent words name the wake word
SHE_SAID_IT = "she just said it"


def playback_explains(name: str, near: float, far: float, played_words: str,
                      echo: EchoFilter | None, could_be_her: bool = True) -> str | None:
    """Why her own voice could explain wake word `name` heard over it (None: it is the person's).
    Where the microphone can't have heard her voice (`could_be_her` False: `EchoFilter.could_be_her`)
    it is the person's. Else only if louder (`near`, the cleaned microphone) than what cancelling
    can leave of hers (`far`, what she played), and never just after she said the name herself."""
    if not could_be_her:
        return None
    if names_wake_word(played_words, name, similarity=PLAYED_NAME_SIMILARITY):
        return SHE_SAID_IT
    if echo is not None and not is_barge_in(near, far, echo.trusted_erle_db):
        return f"{near:.0f} vs {far:.0f} RMS, ERLE {echo.trusted_erle_db:.1f} dB"
    return None
