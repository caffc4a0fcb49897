"""Every synthesizer and adapter against a loopback server that speaks its protocol."""

from __future__ import annotations

import asyncio
import io
import wave
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from helios import toolcalls as russo
from helios.models.errors import AuthError, BadRequestError
from helios.models.retry import RetryPolicy
from helios.testing.voice_server import VoiceServer
from helios.toolcalls import audio as au
from helios.toolcalls.types import Audio

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.02)
BOOK = russo.tool_call("book_flight", from_city="NYC", to_city="LA")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_flight",
            "description": "Book",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


@pytest.fixture
def server() -> Iterator[VoiceServer]:
    with VoiceServer(require_key="sk-loopback-key") as running:
        yield running  # type: ignore[misc]


def _speech(seconds: float = 0.5, rate: int = 24000) -> Audio:
    pcm = au.resample_pcm16(b"\x10\x00\x20\x00" * int(rate * seconds / 2), rate, rate)
    return Audio(data=au.pcm16_to_wav(pcm, rate), format="wav", sample_rate=rate)


AGENTS: dict[str, Callable[[VoiceServer], Any]] = {
    "http": lambda s: russo.HttpAgent(s.http_agent_url,
                                      headers={"Authorization": "Bearer sk-loopback-key"}),
    "websocket": lambda s: russo.WebSocketAgent(
        s.ws_agent_url, headers={"Authorization": "Bearer sk-loopback-key"}),
    "openai": lambda s: russo.OpenAIAgent(base_url=s.openai_base_url, api_key="sk-loopback-key",
                                          tools=TOOLS, system_prompt="travel"),
    "realtime": lambda s: russo.OpenAIRealtimeAgent(base_url=s.openai_base_url,
                                                    api_key="sk-loopback-key", tools=TOOLS),
    "gemini": lambda s: russo.GeminiAgent(base_url=s.base_url, api_key="sk-loopback-key",
                                          tools=TOOLS, system_instruction="travel"),
    "gemini-live": lambda s: russo.GeminiLiveAgent(base_url=s.base_url,
                                                   api_key="sk-loopback-key", tools=TOOLS),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_agent_speaks_its_protocol(server: VoiceServer, name: str) -> None:
    agent = AGENTS[name](server)

    async def go() -> russo.AgentResponse:
        try:
            return await agent.run(_speech(0.5))  # type: ignore[no-any-return]
        finally:
            await agent.aclose()

    response = asyncio.run(go())
    assert response.tool_calls == [BOOK]
    (received,) = server.received
    if name == "realtime":  # PCM16 at 24 kHz, header stripped
        assert len(received.audio) == 2 * 12000
        assert received.body["tools"][0]["name"] == "book_flight"
    elif name == "gemini-live":  # PCM16 at 16 kHz
        assert len(received.audio) == 2 * 8000
        setup = received.body["setup"]
        assert setup["tools"][0]["functionDeclarations"][0]["name"] == "book_flight"
    else:  # the WAV file as sent
        with wave.open(io.BytesIO(received.audio)) as handle:
            assert handle.getnframes() == 12000


def test_openai_agent_sends_input_audio_and_system_prompt(server: VoiceServer) -> None:
    agent = AGENTS["openai"](server)
    asyncio.run(agent.run(Audio(data=b"\x00\x01" * 800, format="pcm", sample_rate=16000)))
    body = server.received[0].body
    assert body["messages"][0] == {"role": "system", "content": "travel"}
    part = body["messages"][1]["content"][0]
    assert part["type"] == "input_audio" and part["input_audio"]["format"] == "wav"
    assert body["tools"] == TOOLS


@pytest.mark.parametrize("fault", [429, 500, 503, "drop"])
@pytest.mark.parametrize("name", ["http", "openai", "gemini", "realtime", "gemini-live",
                                  "websocket"])  # fmt: skip
def test_transient_faults_are_retried_through_the_engine(
    server: VoiceServer, name: str, fault: Any
) -> None:
    server.set_faults([fault, fault])
    result = asyncio.run(russo.run_concurrent(
        "Book", _Fixed(), AGENTS[name](server), None, [BOOK], retry_policy=FAST,
    ))  # fmt: skip
    assert result.passed, result.summary()
    # aiohttp itself retries a GET (a WebSocket handshake) once on a reused connection
    assert 1 <= result.runs[0].retries <= 2
    assert server.next_fault() is None


@pytest.mark.parametrize("name", ["websocket", "realtime", "gemini-live"])
def test_a_websocket_closed_at_once_is_retried(server: VoiceServer, name: str) -> None:
    server.set_faults(["close"])
    result = asyncio.run(russo.run_concurrent(
        "Book", _Fixed(), AGENTS[name](server), None, [BOOK], retry_policy=FAST,
    ))  # fmt: skip
    assert result.passed, result.summary()
    assert result.runs[0].retries == 1


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_wrong_key_is_an_auth_error_and_not_retried(server: VoiceServer, name: str) -> None:
    server.require_key = "another-key"
    result = asyncio.run(russo.run_concurrent(
        "Book", _Fixed(), AGENTS[name](server), None, [BOOK], retry_policy=FAST,
    ))  # fmt: skip
    error = result.runs[0].error
    assert error is not None and error.type == "AuthError"
    assert result.runs[0].retries == 0
    assert "sk-loopback-key" not in result.summary()


def test_realtime_error_events_are_typed() -> None:
    from helios.toolcalls.adapters.openai_realtime import realtime_error

    assert isinstance(realtime_error({"error": {"code": "invalid_api_key"}}), AuthError)
    assert realtime_error({"error": {"code": "rate_limit_exceeded"}}).retryable
    assert isinstance(realtime_error({"error": {"type": "invalid_request_error"}}),
                      BadRequestError)  # fmt: skip


def test_realtime_empty_audio_is_a_bad_request(server: VoiceServer) -> None:
    agent = AGENTS["realtime"](server)
    with pytest.raises(BadRequestError, match="commit_empty"):
        asyncio.run(agent.run(Audio(data=b"", format="pcm")))


def test_websocket_agent_collects_until_complete(server: VoiceServer) -> None:
    server.ws_messages = lambda calls: [{"event": "thinking"}, {"event": "call", "call": calls[0]},
                                        {"event": "done"}]  # fmt: skip
    agent = russo.WebSocketAgent(
        server.ws_agent_url,
        parser=russo.JsonResponseParser(tool_calls_key="call", single=True),
        is_complete=lambda messages: messages[-1].get("event") == "done",
        headers={"Authorization": "Bearer sk-loopback-key"},
    )
    response = asyncio.run(agent.run(_speech(0.1)))
    assert response.tool_calls == [BOOK]
    assert len(response.raw) == 3


def test_websocket_agent_can_send_raw_bytes(server: VoiceServer) -> None:
    agent = russo.WebSocketAgent(
        server.ws_agent_url, send_bytes=True, headers={"Authorization": "Bearer sk-loopback-key"}
    )
    audio = _speech(0.1)
    assert asyncio.run(agent.run(audio)).tool_calls == [BOOK]
    assert server.received[0].audio == audio.data


def test_websocket_agent_times_out_without_an_answer(server: VoiceServer) -> None:
    server.ws_messages = lambda calls: []
    agent = russo.WebSocketAgent(
        server.ws_agent_url,
        response_timeout=0.2,
        headers={"Authorization": "Bearer sk-loopback-key"},
    )
    with pytest.raises(Exception, match="no answer within"):
        asyncio.run(agent.run(_speech(0.1)))


class _Fixed:
    async def synthesize(self, text: str) -> Audio:
        return _speech(0.2)


def test_openai_synthesizer(server: VoiceServer) -> None:
    for fmt in ("wav", "pcm"):
        synth = russo.OpenAISynthesizer(base_url=server.openai_base_url,
                                        api_key="sk-loopback-key", audio_format=fmt)  # type: ignore[arg-type]  # fmt: skip
        audio = asyncio.run(synth.synthesize("Book a flight"))
        assert audio.format == fmt and audio.sample_rate == 24000
        assert audio.duration > 0.5
    body = server.received[0].body
    assert body["input"] == "Book a flight" and body["response_format"] == "wav"


def test_google_synthesizer(server: VoiceServer) -> None:
    synth = russo.GoogleSynthesizer(base_url=server.base_url, api_key="sk-loopback-key")
    audio = asyncio.run(synth.synthesize("Book a flight"))
    assert au.is_wav(audio.data) and audio.sample_rate == 24000 and audio.duration > 0.5
    config = server.received[0].body["generationConfig"]
    assert config["responseModalities"] == ["AUDIO"]
    assert config["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]["voiceName"] == "Kore"


def test_synthesizer_faults_are_retried(server: VoiceServer) -> None:
    server.set_faults([429, "drop"])
    synth = russo.OpenAISynthesizer(base_url=server.openai_base_url, api_key="sk-loopback-key")
    agent = AGENTS["http"](server)
    result = asyncio.run(russo.run_concurrent("Book", synth, agent, None, [BOOK], runs=3,
                                              retry_policy=FAST, cache=False))  # fmt: skip
    assert result.passed
    assert server.next_fault() is None  # both faults were met and waited out
    assert server.count("/audio/speech") == 1  # one synthesis served three runs


def test_keys_are_required_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for make in (russo.OpenAISynthesizer, russo.OpenAIAgent, russo.OpenAIRealtimeAgent,
                 russo.GoogleSynthesizer, russo.GeminiAgent, russo.GeminiLiveAgent):  # fmt: skip
        with pytest.raises(Exception, match="API key"):
            make()
