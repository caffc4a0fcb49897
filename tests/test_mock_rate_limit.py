"""The scripted server's rate-limit mode (`rate_limit_rps`, `--rate-limit-rps`): a
provider's limit of R requests answered per second, the others a 429 with Retry-After."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from helios.testing.mock_llm import MockLLMServer

from .mock_llm_helpers import http_json


def _ask(url: str) -> tuple[int, str | None]:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = urllib.request.Request(f"{url}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("retry-after")


def test_the_server_answers_r_requests_a_second_and_429s_the_rest() -> None:
    with MockLLMServer(rate_limit_rps=2) as server:
        answers = [_ask(server.openai_base_url) for _ in range(5)]
        _, stats = http_json(f"{server.base_url}/_stats")
    assert [status for status, _ in answers] == [200, 200, 429, 429, 429]
    waits = [float(after) for status, after in answers if status == 429 and after]
    assert len(waits) == 3 and all(0 < wait <= 1.0 for wait in waits)
    assert stats["rate_limited"] == 3 and stats["peak_per_second"] == 5
    assert stats["faults"]["rate_limit_rps"] == 2
