"""The hub's side of a satellite, fast: frames cut from the satellite's chunks, a reply paced and
cut, a link that drops and comes back — against a satellite side written with the `wyoming`
library's own events, speaking what wyoming-satellite 1.0.0 speaks (measured: `info` for
`describe`, `run-pipeline` then endless `audio-chunk`s for `run-satellite`, nothing back for the
audio it plays). The real satellites are in test_satellites_e2e.py."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import async_read_event, async_write_event
from wyoming.info import Attribution, Describe, Info, Satellite
from wyoming.pipeline import PipelineStage, RunPipeline
from wyoming.satellite import RunSatellite

from elara.audio.frames import FRAME_SAMPLES, AudioClip
from elara.errors import AudioDeviceError
from elara.settings import ServiceAddress
from elara.voice.satellites import SatelliteLink, SatelliteSpeaker


class SatelliteSide:
    """A satellite's side of the protocol on 127.0.0.1: streams a ramp as its microphone, keeps
    what it is sent to play."""

    def __init__(self, *, chunk_samples: int = 1024) -> None:
        self.chunk_samples = chunk_samples
        self.played: list[str] = []
        self.audio = bytearray()
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.port = 0
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self, port: int = 0) -> SatelliteSide:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self._writers:
            writer.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        streaming: asyncio.Task | None = None
        try:
            while (event := await async_read_event(reader)) is not None:
                if Describe.is_type(event.type):
                    info = Info(satellite=Satellite(name="test-room", area="kitchen", description=None,
                                                    attribution=Attribution("t", ""), installed=True,
                                                    version=None))
                    await async_write_event(info.event(), writer)
                elif RunSatellite.is_type(event.type):
                    await async_write_event(RunPipeline(start_stage=PipelineStage.WAKE,
                                                        end_stage=PipelineStage.TTS).event(), writer)
                    streaming = asyncio.create_task(self._stream(writer))
                elif AudioStart.is_type(event.type) or AudioStop.is_type(event.type):
                    self.played.append(event.type)
                elif AudioChunk.is_type(event.type):
                    self.played.append(event.type)
                    self.audio += AudioChunk.from_event(event).audio
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if streaming is not None:
                streaming.cancel()
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        n = self.chunk_samples
        start = 0
        while True:  # a ramp, so the frames' order shows; faster than real time (the link doesn't care)
            samples = (np.arange(start, start + n) % 30_000).astype("<i2")
            start += n
            await async_write_event(AudioChunk(rate=16_000, width=2, channels=1, audio=samples.tobytes(),
                                               timestamp=time.monotonic_ns()).event(), writer)
            await asyncio.sleep(n / 16_000 / 4)


async def collect(link: SatelliteLink, count: int, timeout: float = 10.0) -> list:
    frames = []
    async with asyncio.timeout(timeout):
        async for frame in link.frames():
            frames.append(frame)
            if len(frames) == count:
                return frames
    return frames


def test_the_microphone_arrives_as_whole_frames_in_order():
    async def run():
        side = await SatelliteSide(chunk_samples=1000).start()
        link = SatelliteLink("kitchen", ServiceAddress("127.0.0.1", side.port))
        task = asyncio.create_task(link.run())
        try:
            frames = await collect(link, 6)
            assert link.state == "connected" and link.info == "test-room (kitchen)"
            assert all(len(f.samples) == FRAME_SAMPLES for f in frames)
            joined = np.concatenate([f.samples for f in frames]).astype(np.int64)
            assert np.all(np.diff(joined) == 1)  # no sample lost or repeated across chunk edges
            assert all(b.captured_at >= a.captured_at for a, b in zip(frames, frames[1:]))
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await side.stop()

    asyncio.run(run())


def test_a_reply_is_sent_in_real_time_and_a_stop_cuts_it():
    async def run():
        side = await SatelliteSide().start()
        link = SatelliteLink("kitchen", ServiceAddress("127.0.0.1", side.port))
        task = asyncio.create_task(link.run())
        speaker = SatelliteSpeaker(link)
        try:
            await collect(link, 1)
            clip = AudioClip(samples=np.full(22_050, 1000, dtype=np.int16), sample_rate=22_050)  # 1 s
            started = time.monotonic()
            assert await speaker.play(clip) is True
            took = time.monotonic() - started
            assert 0.95 < took < 3.0  # returns once it has been heard, not when it was sent
            await asyncio.sleep(0.1)
            assert side.played[0] == "audio-start" and side.played[-1] == "audio-stop"
            assert len(side.audio) == 2 * 22_050

            side.played.clear()
            play = asyncio.create_task(speaker.play(clip))
            await asyncio.sleep(0.3)
            await speaker.stop()
            assert await play is False
            await asyncio.sleep(0.1)
            sent = side.played.count("audio-chunk") * 1024 / 22_050
            assert sent < 0.3 + 0.25  # what was sent by the stop, and no more than the lead
            assert side.played[-1] == "audio-stop"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await side.stop()

    asyncio.run(run())


def test_a_satellite_that_goes_away_is_retried_with_backoff_and_comes_back():
    async def run():
        side = await SatelliteSide().start()
        port = side.port
        link = SatelliteLink("bedroom", ServiceAddress("127.0.0.1", port), first_retry=0.05, max_retry=0.2,
                             quiet_seconds=1.0)
        task = asyncio.create_task(link.run())
        speaker = SatelliteSpeaker(link)
        try:
            await collect(link, 1)
            await side.stop()
            async with asyncio.timeout(5):
                while link.failures_in_a_row < 3:
                    await asyncio.sleep(0.02)
            assert link.state in ("down", "connecting") and link.last_error
            with pytest.raises(AudioDeviceError, match="bedroom .* is not connected"):
                await speaker.play(AudioClip(np.zeros(100, dtype=np.int16), 16_000))
            side = await SatelliteSide().start(port)
            async with asyncio.timeout(5):
                while link.state != "connected":
                    await asyncio.sleep(0.02)
            assert link.connections == 2 and link.failures_in_a_row == 0
            assert link.status()["state"] == "connected"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await side.stop()

    asyncio.run(run())


def test_a_satellite_that_falls_silent_is_dropped_and_retried():
    async def run():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)  # accepts, says nothing
        port = server.sockets[0].getsockname()[1]
        link = SatelliteLink("attic", ServiceAddress("127.0.0.1", port), first_retry=0.05, quiet_seconds=0.3)
        task = asyncio.create_task(link.run())
        try:
            async with asyncio.timeout(5):
                while link.failures_in_a_row < 1:
                    await asyncio.sleep(0.02)
            assert link.last_error == "TimeoutError" and link.connections == 0
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            server.close()

    asyncio.run(run())


def test_the_doctor_checks_each_satellite():
    from elara.config import load_settings
    from elara.service.doctor import check_satellites
    from tests.rig.ollama_server import closed_port

    async def run():
        side = await SatelliteSide().start()
        try:
            down = closed_port()
            settings = load_settings(env={
                "ELARA__Context__EncryptionKey": "doctor key",
                "ELARA__Satellites": f'[{{"Name": "kitchen", "Uri": "tcp://127.0.0.1:{side.port}"}},'
                                     f' {{"Name": "attic", "Uri": "tcp://127.0.0.1:{down}"}}]'})
            return await asyncio.to_thread(check_satellites, settings), side.connections
        finally:
            await side.stop()

    (kitchen, attic), connections = asyncio.run(run())
    assert kitchen.ok and kitchen.name == "satellite kitchen" and "'test-room' in kitchen" in kitchen.detail
    assert not attic.ok and "unreachable" in attic.detail and "Satellites" in attic.fix
    assert connections == 1  # describe only: a running hub keeps its satellite
