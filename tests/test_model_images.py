"""Images in conversations, per wire: where each wire puts a screenshot, the window of
the last K that are sent (placeholders for the others), and the per-message wire cache
that makes an image cost one encoding however long the conversation grows. Also the
routing that gives an agent another wire of its model's provider."""

from __future__ import annotations

from typing import Any

import pytest

from helios.models import anthropic_messages, gemini_native, images, openai_chat, openai_responses
from helios.models.base import GenerationConfig, ImageRef, Message, ToolCall
from helios.models.images import OMITTED, PLACEHOLDER_PNG, ImageWindow, data_url, image_window
from helios.models.routing import GEMINI_NATIVE_URL, resolve_model
from helios.models.services import ModelServices
from helios.testing.screens import make_png, png_size


def _shot(n: int) -> ImageRef:
    return ImageRef.of(make_png(4 + n, 4, "#102030"))


def _conversation(turns: int, name: str = "computer") -> list[Message]:
    """A user turn with a screenshot, then `turns` of call → result with a screenshot."""
    messages = [Message("system", "sys"), Message("user", "go", images=[_shot(0)])]
    for turn in range(1, turns + 1):
        call = ToolCall(f"c{turn}", name, {"action": {"type": "screenshot"}})
        messages.append(Message("assistant", "", tool_calls=[call]))
        messages.append(Message("tool", "", tool_call_id=f"c{turn}", images=[_shot(turn)]))
    return messages


# -- the window ---------------------------------------------------------------------------------


def test_the_window_keeps_the_last_k_images() -> None:
    messages = [Message("user", "a", images=[_shot(0), _shot(1)]), Message("assistant", "b"),
                Message("tool", "c", images=[_shot(2)]),
                Message("tool", "d", images=[_shot(3)])]  # fmt: skip
    kept = lambda window: [window.kept(i, m) for i, m in enumerate(messages)]  # noqa: E731
    assert kept(image_window(messages, None)) == [2, 0, 1, 1]
    assert kept(image_window(messages, 10)) == [2, 0, 1, 1]
    assert kept(image_window(messages, 3)) == [1, 0, 1, 1]
    assert kept(image_window(messages, 2)) == [0, 0, 1, 1]
    assert kept(image_window(messages, 1)) == [0, 0, 0, 1]
    assert kept(image_window(messages, 0)) == [0, 0, 0, 0]
    assert image_window([], 3) == ImageWindow()


def test_the_placeholder_is_a_real_png() -> None:
    assert png_size(PLACEHOLDER_PNG.data) == (1, 1)
    from PIL import Image

    with Image.open(__import__("io").BytesIO(PLACEHOLDER_PNG.data)) as image:
        image.load()


# -- each wire: where images go, and the cache --------------------------------------------------


def _count_encodings(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    original = getattr(module, name)

    def counting(image: ImageRef) -> str:
        calls.append(1)
        return str(original(image))

    monkeypatch.setattr(module, name, counting)
    return calls


def _grow(build: Any, turns: int, keep: int) -> list[Any]:
    """Build the request after each turn of a growing conversation; the bodies."""
    messages = _conversation(0)
    bodies = []
    for turn in range(1, turns + 1):
        call = ToolCall(f"c{turn}", "computer", {"action": {"type": "screenshot"}})
        messages.append(Message("assistant", "", tool_calls=[call]))
        messages.append(Message("tool", "", tool_call_id=f"c{turn}", images=[_shot(turn)]))
        bodies.append(build(messages, keep))
    return bodies


WIRES = {
    "anthropic": (anthropic_messages, "b64",
                  lambda m, k: anthropic_messages.assemble(m, image_window(m, k))[1]),
    "responses": (openai_responses, "data_url",
                  lambda m, k: openai_responses.assemble(m, image_window(m, k))),
    "gemini": (gemini_native, "b64", lambda m, k: gemini_native.assemble(m, image_window(m, k))),
    "openai": (openai_chat, "data_url", lambda m, k: openai_chat.assemble(m, k)),
}  # fmt: skip


@pytest.mark.parametrize("wire", WIRES)
def test_each_image_is_encoded_once_however_long_the_conversation(
    wire: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, name, build = WIRES[wire]
    encodings = _count_encodings(monkeypatch, module, name)
    bodies = _grow(build, turns=12, keep=3)
    # 13 screenshots, each encoded once
    assert len(encodings) == 13, len(encodings)
    last = bodies[-1]
    sent = str(last).count("base64") if wire != "gemini" else str(last).count("inlineData")
    placeholder = data_url(PLACEHOLDER_PNG)
    if wire == "responses":
        sent -= str(last).count(placeholder)
    assert sent == 3, (wire, sent)
    assert OMITTED in str(last) or wire == "gemini"


def test_a_message_leaving_the_window_gets_one_more_cached_form() -> None:
    messages = _conversation(5)
    for _ in range(3):
        anthropic_messages.assemble(messages, image_window(messages, 2))
    first_tool = messages[3]
    assert set(first_tool.wire) == {"anthropic:0"}  # never sent whole: it was out at once
    latest = messages[-1]
    assert set(latest.wire) == {"anthropic"}
    before = latest.wire["anthropic"]
    messages += _conversation(2)[2:]
    anthropic_messages.assemble(messages, image_window(messages, 2))
    assert latest.wire["anthropic"] is before and set(latest.wire) == {"anthropic", "anthropic:0"}


def test_chat_completions_sends_tool_screenshots_after_the_run_of_results() -> None:
    call_a = ToolCall("a", "computer", {})
    call_b = ToolCall("b", "computer", {})
    messages = [Message("user", "go", images=[_shot(0)]),
                Message("assistant", "", tool_calls=[call_a, call_b]),
                Message("tool", "ok", tool_call_id="a", images=[_shot(1)]),
                Message("tool", "ok", tool_call_id="b", images=[_shot(2)]),
                Message("user", "next")]  # fmt: skip
    wire = openai_chat.assemble(messages, None)
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert [p["type"] for p in wire[0]["content"]] == ["text", "image_url"]
    assert wire[2]["content"] == "ok"
    assert [p["type"] for p in wire[4]["content"]] == ["text", "image_url", "image_url"]
    assert wire[4]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert wire[5] == {"role": "user", "content": "next"}


def test_responses_input_items() -> None:
    messages = _conversation(2)
    bash = ToolCall("f1", "bash", {"command": "ls"}, '{"command": "ls"}')
    messages += [Message("assistant", "Let me look.", tool_calls=[bash]),
                 Message("tool", "file", tool_call_id="f1", images=[_shot(9)])]  # fmt: skip
    messages[5].provider_state = {"acknowledged_safety_checks": [{"id": "sc"}]}
    messages[5].content = "the click missed"
    items = openai_responses.assemble(messages, image_window(messages, 2))
    kinds = [i.get("type") for i in items]
    assert kinds == ["message", "computer_call", "computer_call_output", "computer_call",
                     "computer_call_output", "message", "message", "function_call",
                     "function_call_output"]  # fmt: skip
    first_output, second_output = items[2], items[4]
    assert first_output["output"]["image_url"] == data_url(PLACEHOLDER_PNG)  # out of the window
    assert second_output["acknowledged_safety_checks"] == [{"id": "sc"}]
    assert items[5]["content"] == [{"type": "input_text", "text": "the click missed"}]
    output = items[-1]["output"]
    assert [p["type"] for p in output] == ["input_text", "input_image"]
    assert items[0]["content"][-1] == {"type": "input_text", "text": OMITTED}


def test_gemini_contents_merge_function_responses_and_keep_state() -> None:
    call_a = ToolCall("helios-gc-1", "click_at", {"x": 1, "y": 1})
    call_b = ToolCall("native-2", "wait_5_seconds", {})
    reply = Message("assistant", "", tool_calls=[call_a, call_b])
    signed = [{"functionCall": {"name": "click_at", "args": {"x": 1, "y": 1}},
               "thoughtSignature": "c2ln"},
              {"functionCall": {"name": "wait_5_seconds"}}]  # fmt: skip
    reply.provider_state = {"parts": signed}
    messages = [Message("system", "sys"), Message("user", "go", images=[_shot(0)]), reply,
                Message("tool", "", tool_call_id="helios-gc-1", images=[_shot(1)],
                        provider_state={"response": {"url": "u"}}),
                Message("tool", "oops", tool_call_id="native-2", is_error=True)]  # fmt: skip
    contents = gemini_native.assemble(messages, image_window(messages, 1))
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1]["parts"] is signed
    first, second = (p["functionResponse"] for p in contents[2]["parts"])
    assert first == {"name": "click_at", "response": {"url": "u"},
                     "parts": [{"inlineData": {"mimeType": "image/png",
                                               "data": images.b64(_shot(1))}}]}  # fmt: skip
    assert second == {"name": "wait_5_seconds", "id": "native-2",
                      "response": {"error": "oops"}}  # fmt: skip
    assert contents[0]["parts"] == [{"text": "go"}, {"text": OMITTED}]


# -- routing: another wire of the same provider -------------------------------------------------


def test_with_api_routes_each_wire_to_its_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_BASE_URL", raising=False)
    gemini = resolve_model("gemini/gemini-2.5-computer-use-preview-10-2025", api_key="k")
    assert gemini.api == "openai"  # the tool agent's wire is unchanged
    native = gemini.with_api("gemini")
    assert native.api == "gemini" and native.base_url == GEMINI_NATIVE_URL
    for given in ("http://127.0.0.1:9/v1beta/openai/", "http://127.0.0.1:9/v1beta",
                  "http://127.0.0.1:9"):  # fmt: skip
        spec = resolve_model("gemini/m", base_url=given, api_key="k").with_api("gemini")
        assert spec.base_url == "http://127.0.0.1:9", given
    monkeypatch.setenv("GEMINI_BASE_URL", "http://127.0.0.1:7/")
    assert resolve_model("gemini/m", api_key="k").with_api("gemini").base_url == (
        "http://127.0.0.1:7")  # fmt: skip
    openai = resolve_model("openai/gpt-5.4", api_key="k")
    assert openai.with_api("responses").api == "responses"
    assert openai.with_api("responses").base_url == openai.base_url
    anthropic = resolve_model("anthropic/claude-opus-4-5", api_key="k")
    assert anthropic.with_api("anthropic") is anthropic
    from helios.errors import ConfigError

    with pytest.raises(ConfigError):
        openai.with_api("gemini")
    with pytest.raises(ConfigError):
        openai.with_api("anthropic")


def test_services_over_another_wire_are_made_once_and_share_the_budget() -> None:
    services = ModelServices(spec=resolve_model("openai/gpt-5.4", api_key="k"))
    responses = services.with_api("responses")
    assert services.with_api("responses") is responses
    assert services.with_api("openai") is services
    assert responses.limiter is services.limiter and responses.totals is services.totals
    assert responses.spec.api == "responses" and services.spec.api == "openai"
    assert type(responses.model).__name__ == "OpenAIResponsesModel"


def test_keep_images_is_part_of_the_identity_only_when_changed() -> None:
    assert "keep_images" not in GenerationConfig().identity()
    assert GenerationConfig(keep_images=5).identity()["keep_images"] == 5
    assert GenerationConfig(keep_images=None).identity()["keep_images"] is None
