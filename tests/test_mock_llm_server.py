"""The mock model server's injected faults, stats and controls, and its command line."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import subprocess
import time
from pathlib import Path

import anthropic
import openai
import pytest

import helios.testing
from helios.testing.mock_llm import MockLLMServer
from helios.testing.mock_script import Script

from .conftest import mock_llm_cmd
from .mock_llm_helpers import (
    SCRIPT,
    ant,
    ant_ask,
    http_json,
    oai,
    oai_ask,
    run,
    user,
)

# ----- faults ----------------------------------------------------------------------------------


def test_rate_limit_429_with_retry_after() -> None:
    with MockLLMServer(script=SCRIPT, rate_429=1.0, retry_after=2) as server:
        with pytest.raises(openai.RateLimitError) as oerr:
            run(oai_ask(server, "hi"))
        assert oerr.value.response.headers["retry-after"] == "2"
        assert oerr.value.code == "rate_limit_exceeded"
        with pytest.raises(anthropic.RateLimitError) as aerr:
            run(ant_ask(server, "hi"))
        assert aerr.value.response.headers["retry-after"] == "2"
        assert aerr.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
        stats = server.stats
        assert stats["injected_429"] == 2 and stats["served_ok"] == 0 and stats["requests"] == 2


def test_internal_server_error_500() -> None:
    with MockLLMServer(script=SCRIPT, rate_500=1.0) as server:
        with pytest.raises(openai.InternalServerError):
            run(oai_ask(server, "hi"))
        with pytest.raises(anthropic.InternalServerError) as aerr:
            run(ant_ask(server, "hi"))
        assert aerr.value.body["error"]["type"] == "api_error"  # type: ignore[index]
        assert server.stats["injected_500"] == 2


def test_dropped_connection() -> None:
    with MockLLMServer(script=SCRIPT, drop=1.0) as server:
        with pytest.raises(openai.APIConnectionError):
            run(oai_ask(server, "hi"))
        with pytest.raises(anthropic.APIConnectionError):
            run(ant_ask(server, "hi"))
        assert server.stats["dropped"] == 2


def test_malformed_body_is_an_error() -> None:
    with MockLLMServer(script=SCRIPT, malformed=1.0) as server:
        # These SDK versions surface an unparsable 200 body as a bare json.JSONDecodeError
        # (a ValueError); accept that or any SDK error, but nothing unrelated.
        with pytest.raises((ValueError, openai.OpenAIError)):
            run(oai_ask(server, "hi"))
        with pytest.raises((ValueError, anthropic.AnthropicError)):
            run(ant_ask(server, "hi"))
        assert server.stats["malformed"] == 2
        assert server.stats["served_ok"] == 0


async def _consume_stream(server: MockLLMServer) -> None:
    async with oai(server) as client:
        stream = await client.chat.completions.create(model="m", messages=user("x"), stream=True)
        async for _ in stream:
            pass


async def _consume_anthropic_stream(server: MockLLMServer) -> None:
    async with ant(server) as client:
        stream = await client.messages.create(
            model="c", max_tokens=5, messages=user("x"), stream=True
        )
        async for _ in stream:
            pass


def test_malformed_stream_is_an_error() -> None:
    with MockLLMServer(script=SCRIPT, malformed=1.0) as server:
        with pytest.raises((ValueError, openai.OpenAIError)):
            run(_consume_stream(server))
        with pytest.raises((ValueError, anthropic.AnthropicError)):
            run(_consume_anthropic_stream(server))
        assert server.stats["malformed"] == 2


def test_require_key() -> None:
    with MockLLMServer(script=SCRIPT, require_key="s3cret") as server:
        with pytest.raises(openai.AuthenticationError):
            run(oai_ask(server, "hi"))
        with pytest.raises(anthropic.AuthenticationError) as aerr:
            run(ant_ask(server, "hi"))
        assert aerr.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]

        async def with_right_key() -> None:
            async with oai(server, key="s3cret") as client:
                reply = await client.chat.completions.create(model="m", messages=user("hi"))
                assert reply.choices[0].message.content == "Default hello."
            async with ant(server, key="s3cret") as aclient:
                areply = await aclient.messages.create(model="c", max_tokens=5, messages=user("x"))
                assert areply.content[0].text == "Default hello."  # type: ignore[union-attr]

        run(with_right_key())
        stats = server.stats
        assert stats["auth_failed"] == 2 and stats["served_ok"] == 2
        assert "s3cret" not in repr(server.faults)
        assert "s3cret" not in json.dumps(stats)


def test_context_overflow_errors() -> None:
    with MockLLMServer(script=SCRIPT) as server:
        with pytest.raises(openai.BadRequestError) as oerr:
            run(oai_ask(server, "overflow please"))
        assert oerr.value.code == "context_length_exceeded"
        assert "maximum context length" in oerr.value.message
        with pytest.raises(anthropic.BadRequestError) as aerr:
            run(ant_ask(server, "overflow please"))
        assert "prompt is too long" in aerr.value.message
        assert aerr.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
        assert server.stats["context_overflow"] == 2


def test_fail_sequence_then_normal_and_stats() -> None:
    async def outcomes(server: MockLLMServer, n: int) -> list[str]:
        names: list[str] = []
        for _ in range(n):
            try:
                await oai_ask(server, "hi")
                names.append("ok")
            except openai.APIStatusError as exc:
                names.append(str(exc.status_code))
            except openai.APIConnectionError:
                names.append("drop")
        return names

    with MockLLMServer(script=SCRIPT, fail_sequence=[429, 500, "drop", 503]) as server:
        assert run(outcomes(server, 6)) == ["429", "500", "drop", "503", "ok", "ok"]
        stats = server.stats
        assert stats["requests"] == 6
        assert stats["injected_429"] == 1 and stats["injected_500"] == 2
        assert stats["dropped"] == 1 and stats["served_ok"] == 2
        assert stats["per_path"] == {"/v1/chat/completions": 6}
        server.set_faults(fail_sequence=[401], rate_429=0.0)
        assert run(outcomes(server, 2)) == ["401", "ok"]
        assert server.stats["injected_other"] == 1


def test_seeded_random_faults_are_reproducible() -> None:
    async def pattern(server: MockLLMServer) -> list[bool]:
        results: list[bool] = []
        async with oai(server) as client:  # one client: each new one loads the CA bundle
            for _ in range(30):
                try:
                    await client.chat.completions.create(model="gpt-mock", messages=user("hi"))
                    results.append(True)
                except openai.RateLimitError:
                    results.append(False)
        return results

    runs = []
    for _ in range(2):
        with MockLLMServer(script=SCRIPT, rate_429=0.5, retry_after=0, seed=1234) as server:
            runs.append(run(pattern(server)))
            assert server.stats["injected_429"] == runs[-1].count(False)
    assert runs[0] == runs[1]
    assert 0 < runs[0].count(False) < 30


def test_latency_is_added_without_blocking() -> None:
    async def body(server: MockLLMServer) -> float:
        start = time.monotonic()
        await asyncio.gather(*(oai_ask(server, "hi") for _ in range(5)))
        return time.monotonic() - start

    with MockLLMServer(script=SCRIPT, latency_ms=2000) as server:
        elapsed = run(body(server))
    # five concurrent replies, not five sequential sleeps (10 s); the margin is for a
    # loaded machine (the suite runs on several workers): 3.4 s over the sleep was seen
    assert 2.0 <= elapsed < 8.0


def test_control_and_stats_endpoints() -> None:
    with MockLLMServer(script=SCRIPT) as server:
        status, reply = http_json(f"{server.base_url}/_control", {"rate_500": 1.0})
        assert status == 200 and reply["faults"]["rate_500"] == 1.0
        with pytest.raises(openai.InternalServerError):
            run(oai_ask(server, "hi"))
        status, stats = http_json(f"{server.base_url}/_stats")
        assert status == 200 and stats["injected_500"] == 1 and stats["requests"] == 1

        new_script = {"scenarios": [{"match": "*", "turns": [{"text": "swapped"}]}]}
        control = {"rate_500": 0, "reset_stats": True, "script": new_script, "require_key": "k2"}
        status, reply = http_json(f"{server.base_url}/_control", control)
        assert status == 200 and reply["faults"]["require_key"] is True  # the key is not echoed
        assert server.stats["requests"] == 0 and server.requests == []
        with pytest.raises(openai.AuthenticationError):
            run(oai_ask(server, "hi"))
        server.set_faults(require_key=None)
        assert run(oai_ask(server, "hi")).choices[0].message.content == "swapped"

        status, reply = http_json(f"{server.base_url}/_control", {"no_such_fault": 1})
        assert status == 400 and "no_such_fault" in reply["error"]
        status, reply = http_json(f"{server.base_url}/_control", {"drop": 2.0})
        assert status == 400 and "probability" in reply["error"]


def test_async_lifecycle_inside_running_loop() -> None:
    async def body() -> None:
        async with MockLLMServer(script=SCRIPT) as server:
            reply = await oai_ask(server, "list the files")
            assert reply.choices[0].finish_reason == "tool_calls"
        with pytest.raises(RuntimeError, match="not running"):
            _ = server.port

    run(body())


def test_script_validation_and_file_loading(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tool_cals"):
        Script.from_dict({"scenarios": [{"match": "*", "turns": [{"tool_cals": []}]}]})
    with pytest.raises(ValueError, match="name"):
        Script.from_dict({"scenarios": [{"turns": [{"tool_calls": [{"arguments": {}}]}]}]})
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    script = Script.from_file(path)
    assert script.select("please list the files\n") is script.scenarios[0]
    assert script.select("nothing") is script.scenarios[-1]
    assert script.scenarios[0].turn(5).text == "All finished."
    with pytest.raises(ValueError, match="probability"):
        MockLLMServer(rate_429=1.5)
    with pytest.raises(ValueError, match="fail_sequence"):
        MockLLMServer(fail_sequence=[200])


# ----- command line ----------------------------------------------------------------------------


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise AssertionError(f"no output from the mock server within {timeout}s")
    return proc.stdout.readline()


def test_cli_subprocess_serves_and_exits_on_sigterm(tmp_path: Path) -> None:
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    port_file = tmp_path / "port"
    src_dir = str(Path(helios.testing.__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src_dir, os.environ.get("PYTHONPATH", "")])}
    cmd = mock_llm_cmd(script_path, port_file, "cli-key")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = _read_line(proc, timeout=30)
        assert line.startswith("listening on http://127.0.0.1:"), line
        port = int(line.strip().rsplit(":", 1)[1])
        assert port > 0 and int(port_file.read_text()) == port

        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="cli-key", max_retries=0, timeout=10
        )
        with client:
            reply = client.chat.completions.create(model="m", messages=user("list the files"))
        assert reply.choices[0].message.tool_calls[0].function.name == "bash"  # type: ignore[index,union-attr]
        status, stats = http_json(f"http://127.0.0.1:{port}/_stats")
        assert status == 200 and stats["served_ok"] == 1

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        stderr = proc.stderr.read() if proc.stderr else ""
    assert "cli-key" not in stderr and "Traceback" not in stderr


def test_every_cli_option_has_a_help_text() -> None:
    """The docs send readers to `--help` for the fault options: each must say what it does."""
    from helios.testing.mock_llm import build_parser

    options = [a for a in build_parser()._actions if a.option_strings]
    assert {"--rate-429", "--rate-500", "--drop", "--malformed"} <= {
        name for a in options for name in a.option_strings
    }
    missing = [a.option_strings[0] for a in options if not (a.help or "").strip()]
    assert missing == []
