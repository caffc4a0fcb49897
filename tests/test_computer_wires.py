"""Every provider's computer-use wire, end to end at the wire level: Helios's client of the
wire against the project's own model server on 127.0.0.1, playing one canonical GUI script
as each provider's native actions, aimed by colour in synthetic screenshots.

Checked per wire: the actions come back as canonical `Action`s in desktop pixels (each
provider's coordinate space mapped back), the last screenshot is what the script aims at
(a zoom's crop is not), only the last K screenshots are sent, safety checks are
acknowledged (OpenAI) and safety decisions confirmed (Gemini), reasoning items and thought
signatures go back, and errors are typed (429 with its wait, 401, malformed replies).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from helios.agents.computer import anthropic, coordinates, gemini
from helios.environments.desktop.actions import Action, ActionResult, Geometry
from helios.models.base import GenerationConfig, ImageRef, Message
from helios.models.errors import (
    AuthError,
    BadRequestError,
    ContextWindowError,
    RateLimitError,
    TransientError,
)
from helios.models.services import create_model
from helios.testing.mock_llm import MockLLMServer

from .computer_wire_helpers import (
    BLACK,
    BLUE,
    BY_NAME,
    GEOMETRY,
    GREEN,
    GUI_SCRIPT,
    RECTS,
    RED,
    WIRES,
    YELLOW,
    Wire,
    centre,
    images_sent,
    play,
    rects,
    screen,
    services_for,
)
from .mock_llm_helpers import run


def _near(got: Any, want: tuple[int, int], tolerance: int) -> bool:
    return got is not None and abs(got[0] - want[0]) <= tolerance and abs(
        got[1] - want[1]) <= tolerance  # fmt: skip


def _region_near(got: Any, want: tuple[int, int, int, int], tolerance: int) -> bool:
    return got is not None and all(abs(g - w) <= tolerance for g, w in zip(got, want, strict=True))


# -- the scripted episode on every wire ---------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES, ids=[w.name for w in WIRES])
def test_a_scripted_gui_episode_maps_to_desktop_actions(wire: Wire) -> None:
    with MockLLMServer(script=GUI_SCRIPT) as server:
        episode = run(play(wire, server))
        requests = server.requests
    tol = wire.tolerance
    turns = episode.turns
    assert episode.answer == "42"
    # turn 0: a left click on red, aimed in the first screenshot
    [click] = turns[0]
    assert click.kind == "click" and click.button == "left" and click.count == 1
    assert _near(click.point, centre(RED, 0), tol), click
    # turn 1: typing into green (Gemini's type_text_at is a click, then the text)
    kinds = [a.kind for a in turns[1]]
    assert kinds == ["click", "type"], turns[1]
    assert _near(turns[1][0].point, centre(GREEN, 1), tol) and turns[1][1].text == "hello"
    assert turns[2] == [Action("key", keys=("ctrl", "l"))]
    [scroll] = turns[3]
    assert scroll.kind == "scroll" and (scroll.dx, scroll.dy) == (0, 3)
    assert _near(scroll.point, centre(BLUE, 3), tol)
    [drag] = turns[4]
    assert drag.kind == "drag" and len(drag.path) == 2
    assert _near(drag.path[0], centre(GREEN, 4), tol)
    assert _near(drag.path[1], centre(YELLOW, 4), tol)
    [zoom] = turns[5]
    assert zoom.kind == "zoom" and _region_near(zoom.region, rects(5)[BLACK], tol), zoom
    # after the zoom, the crop is not where the script aims: the screenshot before it is
    [click] = turns[6]
    assert _near(click.point, centre(RED, 5), tol), (click, centre(RED, 5), centre(RED, 6))
    # only the last two screenshots went out; every older one has a placeholder or is gone
    images, placeholders = images_sent(requests[-1].body)
    assert images == 2, (images, placeholders)
    if wire.name != "gemini":  # Gemini drops an old function response's image, as Google's agent
        assert placeholders >= 5


def test_the_mock_aims_at_the_last_screenshot_not_the_first() -> None:
    """The same script with the screen moved: each click follows the red box."""
    with MockLLMServer(script=GUI_SCRIPT) as server:
        episode = run(play(BY_NAME["responses"], server))
    assert centre(RED, 0) != centre(RED, 5)
    assert episode.turns[0][0].point == centre(RED, 0)
    assert episode.turns[6][0].point == centre(RED, 5)


# -- coordinates: each provider's space -------------------------------------------------------


def test_claude_sees_a_large_desktop_downscaled_and_its_points_are_scaled_back() -> None:
    big = Geometry(1920, 1200)
    provider = anthropic.AnthropicProvider("claude-opus-4-5")
    width, height = provider.screenshot_size(big)
    assert (width, height) != (1920, 1200)
    assert width * height <= coordinates.ANTHROPIC_MAX_PIXELS
    assert max(width, height) <= coordinates.ANTHROPIC_MAX_EDGE
    script = {"scenarios": [{"match": "*", "turns": [
        {"action": "click", "target": RED}, {"action": "zoom", "target": BLUE},
        {"action": "done", "answer": "ok"}]}]}  # fmt: skip
    with MockLLMServer(script=script) as server:
        episode = run(play(BY_NAME["anthropic"], server, geometry=big, prompt="big"))
        tool = server.requests[0].body["tools"][0]
    assert (tool["display_width_px"], tool["display_height_px"]) == (width, height)
    # the rectangles were drawn at desktop coordinates scaled by width/1024: in desktop
    # pixels of the big screen they sit at that scale of RECTS
    fx, fy = 1920 / GEOMETRY.width, 1200 / GEOMETRY.height
    x0, y0, x1, y1 = RECTS[RED]
    want = (round((x0 + x1) / 2 * fx), round((y0 + y1) / 2 * fy))
    assert _near(episode.turns[0][0].point, want, 3), (episode.turns[0][0].point, want)
    zoom = episode.turns[1][0].region
    bx0, by0, bx1, by1 = rects(1)[BLUE]
    assert _region_near(zoom, (bx0 * fx, by0 * fy, bx1 * fx, by1 * fy), 4), zoom


def test_gemini_grid_round_trips_every_pixel() -> None:
    for geometry in (Geometry(1024, 768), Geometry(800, 600), Geometry(1440, 900)):
        scale = gemini.GeminiProvider("m").scale(geometry)
        for x in range(geometry.width):
            gx, _ = scale.to_model((x, 0))
            assert 0 <= gx <= 999
            back, _ = scale.to_desktop(gx, 0)
            assert abs(back - x) <= max(1, geometry.width // 1000 + 1), (geometry, x, gx, back)


# -- Anthropic: the beta header of each tool version ---------------------------------------------


@pytest.mark.parametrize(
    ("model", "tool", "beta", "zoom"),
    [
        ("claude-opus-4-5", "computer_20251124", "computer-use-2025-11-24", True),
        ("claude-sonnet-4-6", "computer_20251124", "computer-use-2025-11-24", True),
        ("claude-sonnet-4-5-20250929", "computer_20250124", "computer-use-2025-01-24", False),
        ("claude-haiku-4-5", "computer_20250124", "computer-use-2025-01-24", False),
        ("claude-sonnet-4-20250514", "computer_20250124", "computer-use-2025-01-24", False),
    ],
)
def test_anthropic_sends_each_tool_version_with_its_beta(
    model: str, tool: str, beta: str, zoom: bool
) -> None:
    script = {"scenarios": [{"match": "*", "turns": [{"action": "click", "target": RED}]}]}
    wire = Wire("a", f"anthropic/{model}", anthropic.AnthropicProvider,
                lambda s: s.anthropic_base_url)  # fmt: skip
    with MockLLMServer(script=script) as server:
        episode = run(play(wire, server, max_turns=2))
        first = server.requests[0]
    declared = first.body["tools"][0]
    assert declared["type"] == tool and first.headers["anthropic-beta"] == beta
    assert declared.get("enable_zoom", False) is zoom
    assert episode.turns[0][0].kind == "click"


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json", **headers})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_server_refuses_the_computer_tool_without_its_beta() -> None:
    tool = anthropic.AnthropicProvider("claude-opus-4-5").tools(GEOMETRY, bash=True)
    body = {"model": "claude-opus-4-5", "max_tokens": 10, "tools": tool,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    with MockLLMServer() as server:
        url = f"{server.base_url}/v1/messages"
        status, reply = _post(url, body, {"x-api-key": "k"})
        assert status == 400 and "computer-use-2025-11-24" in reply["error"]["message"]
        wrong = {"x-api-key": "k", "anthropic-beta": "computer-use-2025-01-24"}
        assert _post(url, body, wrong)[0] == 400
        right = {"x-api-key": "k", "anthropic-beta": "computer-use-2025-11-24"}
        assert _post(url, body, right)[0] == 200
        legacy = {**tool[0], "type": "computer_20250124"}
        legacy_body = {**body, "tools": [legacy]}
        status, reply = _post(
            url, legacy_body, {"x-api-key": "k", "anthropic-beta": "computer-use-2025-01-24"}
        )
        assert status == 400 and "enable_zoom" in reply["error"]["message"]


# -- safety -----------------------------------------------------------------------------------


def _computer_outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body["input"] if i.get("type") == "computer_call_output"]


@pytest.mark.parametrize("name", ["responses", "responses-preview"])
def test_openai_pending_safety_checks_are_acknowledged(name: str) -> None:
    with MockLLMServer(script=GUI_SCRIPT) as server:
        episode = run(play(BY_NAME[name], server))
        second = server.requests[1].body
    [output] = _computer_outputs(second)
    assert output["acknowledged_safety_checks"] == [
        {"id": "cu_sc_mock_0", "code": "malicious_instructions",
         "message": "This looks like a cookie banner."}]  # fmt: skip
    assert "cookie banner" in episode.messages[3].content  # the trajectory shows the check


def test_openai_unacknowledged_safety_checks_are_refused() -> None:
    def silent(provider: Any, call: Any, shot: ImageRef) -> Message:
        message = provider.result(call, ActionResult(), shot)
        message.provider_state = None
        return message

    with MockLLMServer(script=GUI_SCRIPT) as server, pytest.raises(BadRequestError) as error:
        run(play(BY_NAME["responses"], server, result=silent))
    assert "not acknowledged" in str(error.value)


def _function_responses(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["functionResponse"] for c in body["contents"] for p in c["parts"]
            if "functionResponse" in p]  # fmt: skip


def test_gemini_safety_decision_is_confirmed() -> None:
    with MockLLMServer(script=GUI_SCRIPT) as server:
        episode = run(play(BY_NAME["gemini"], server))
        second = server.requests[1].body
    [response] = _function_responses(second)
    assert response["name"] == "click_at"
    assert response["response"]["safety_acknowledgement"] == "true"
    assert response["response"]["url"] == ""
    assert "cookie banner" in episode.messages[3].content

    def unconfirmed(provider: Any, call: Any, shot: ImageRef) -> Message:
        message = provider.result(call, ActionResult(), shot)
        message.provider_state = {"response": {"url": ""}}
        return message

    with MockLLMServer(script=GUI_SCRIPT) as server, pytest.raises(BadRequestError) as error:
        run(play(BY_NAME["gemini"], server, result=unconfirmed))
    assert "safety_acknowledgement" in str(error.value)


def test_gemini_refuses_a_blocked_action() -> None:
    from helios.models.base import ToolCall

    call = ToolCall("c", "click_at", {"x": 1, "y": 2, "safety_decision": {"decision": "blocked"}})
    with pytest.raises(ValueError, match="not run"):
        gemini.GeminiProvider("m").actions(call, GEOMETRY)


# -- state the providers need back: thought signatures, reasoning items -------------------------


def test_thought_signatures_and_reasoning_items_go_back() -> None:
    with MockLLMServer(script=GUI_SCRIPT) as server:
        run(play(BY_NAME["gemini"], server))
        run(play(BY_NAME["responses"], server))
        bodies = [r.body for r in server.requests]
    gemini_second = next(b for b in bodies if "contents" in b and len(b["contents"]) > 2)
    model_turn = next(c for c in gemini_second["contents"] if c["role"] == "model")
    assert model_turn["parts"][-1]["thoughtSignature"]
    responses_second = next(b for b in bodies if "input" in b and len(b["input"]) > 2)
    kinds = [i.get("type") for i in responses_second["input"]]
    assert kinds.index("reasoning") < kinds.index("computer_call")


@pytest.mark.parametrize("name", ["gemini", "responses"])
def test_a_model_turn_rebuilt_without_its_state_is_refused(name: str) -> None:
    """The server checks what the real APIs check: without the model's own parts (the
    thought signature) or output items (the reasoning item), the next turn is a 400."""
    with MockLLMServer(script=GUI_SCRIPT) as server:
        wire = BY_NAME[name]
        provider = wire.make(wire.model.split("/", 1)[1])
        services = services_for(wire, server)
        first = Message("user", "calibrate", images=[ImageRef.of(screen(0))])
        tools = provider.tools(GEOMETRY, bash=False)

        async def two_turns() -> None:
            try:
                response = await services.generate([first], tools)
                reply = response.message
                reply.provider_state = None
                reply.wire.clear()
                answer = provider.result(reply.tool_calls[0], ActionResult(),
                                         ImageRef.of(screen(1)))  # fmt: skip
                if name == "responses":
                    checks = reply.tool_calls[0].arguments or {}
                    assert checks.get("pending_safety_checks")
                await services.generate([first, reply, answer], tools)
            finally:
                await services.close()

        with pytest.raises(BadRequestError):
            run(two_turns())


# -- errors, typed as on the other wires --------------------------------------------------------

NEW_WIRES = [BY_NAME["responses"], BY_NAME["gemini"], BY_NAME["anthropic"]]


async def _ask(wire: Wire, server: MockLLMServer, key: str = "k", text: str = "hi") -> Any:
    model = create_model(wire.spec(server, key))
    try:
        return await model.generate([Message("user", text)], [], GenerationConfig(timeout=10))
    except Exception as exc:
        return exc
    finally:
        await model.close()


@pytest.mark.parametrize("wire", NEW_WIRES, ids=[w.name for w in NEW_WIRES])
def test_errors_are_typed(wire: Wire) -> None:
    script = {"scenarios": [{"match": "overflow", "turns": [{"context_overflow": True}]},
                            {"match": "*", "turns": [{"text": "hello"}]}]}  # fmt: skip
    with MockLLMServer(script=script, retry_after=0.25) as server:
        server.set_faults(fail_sequence=[429])
        limited = run(_ask(wire, server))
        assert isinstance(limited, RateLimitError) and limited.retry_after == 0.25, limited
        server.set_faults(fail_sequence=[500])
        assert isinstance(run(_ask(wire, server)), TransientError)
        server.set_faults(fail_sequence=["malformed"])
        malformed = run(_ask(wire, server))
        assert isinstance(malformed, TransientError) and "malformed" in str(malformed)
        assert isinstance(run(_ask(wire, server, text="overflow")), ContextWindowError)
        server.set_faults(require_key="right")
        assert isinstance(run(_ask(wire, server, key="wrong")), AuthError)
        reply = run(_ask(wire, server, key="right"))
        assert not isinstance(reply, Exception), reply
        assert reply.message.content == "hello" and reply.usage.input_tokens > 0


@pytest.mark.parametrize("wire", NEW_WIRES, ids=[w.name for w in NEW_WIRES])
def test_a_429_is_retried_after_its_wait(wire: Wire) -> None:
    with MockLLMServer(script=GUI_SCRIPT, retry_after=0.05) as server:
        server.set_faults(fail_sequence=[429, "malformed"])
        episode = run(play(wire, server))
        stats = server.stats
    assert episode.answer == "42"
    assert stats["injected_429"] == 1 and stats["malformed"] == 1


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        ("responses", {"output": "no list"}),
        ("responses", {"output": [{"type": "computer_call", "call_id": "c"}]}),
        ("responses", {"output": [{"type": "computer_call", "action": {}}]}),
        ("responses", {"output": [], "usage": {"input_tokens": "many"}}),
        ("gemini", {}),
        ("gemini", {"candidates": [{"content": {"parts": "no list"}}]}),
        ("gemini", {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]}),
        ("gemini", {"candidates": [{"content": {"parts": [5]}}]}),
        (
            "gemini",
            {"candidates": [{"content": {"parts": []}, "finishReason": "MALFORMED_FUNCTION_CALL"}]},
        ),
    ],
)
def test_a_reply_of_the_wrong_shape_is_transient(name: str, reply: dict[str, Any]) -> None:
    from helios.testing.loopback import LoopbackServer

    class Shapes(LoopbackServer):
        def routes(self, app: Any) -> None:
            from aiohttp import web

            async def answer(request: web.Request) -> web.Response:
                return web.json_response(reply)

            app.router.add_post("/v1/responses", answer)
            app.router.add_post("/v1beta/models/{model}:generateContent", answer)

    wire = BY_NAME[name]
    with Shapes() as server:
        fake: Any = type("S", (), {"openai_base_url": f"{server.base_url}/v1",
                                   "gemini_base_url": server.base_url})()  # fmt: skip
        error = run(_ask(wire, fake))
    assert isinstance(error, TransientError) and "malformed" in str(error), repr(error)


def test_a_blocked_prompt_is_an_empty_answer_not_an_error() -> None:
    from helios.models.gemini_native import GeminiNativeModel
    from helios.models.routing import resolve_model

    model = GeminiNativeModel(resolve_model("gemini/m", api_key="k").with_api("gemini"))
    response = model._parse({"promptFeedback": {"blockReason": "SAFETY"}})
    assert response.finish_reason == "content_filter" and response.message.content == ""


def test_a_script_step_that_cannot_be_played_says_why() -> None:
    script = {"scenarios": [{"match": "*", "turns": [{"action": "click", "target": "#123456"}]}]}
    with MockLLMServer(script=script) as server, pytest.raises(BadRequestError) as error:
        run(play(BY_NAME["gemini"], server))
    assert "#123456 is not in the last screenshot" in str(error.value)
    hold = {"scenarios": [{"match": "*", "turns": [{"action": "hold_key", "keys": ["shift"]}]}]}
    with MockLLMServer(script=hold) as server, pytest.raises(BadRequestError) as error:
        run(play(BY_NAME["responses"], server))
    assert "hold_key step cannot be played on the responses wire" in str(error.value)


STEPS_SCRIPT = {"scenarios": [{"match": "*", "turns": [
    {"actions": [{"action": "click", "target": RED}, {"action": "key", "keys": "Return"}],
     "say": "Two at once."},
    {"action": "bash", "command": "ls /"},
    {"action": "type", "target": GREEN, "text": "x", "clear": True, "enter": True},
    {"action": "done", "answer": "fine"}]}]}  # fmt: skip


async def _steps_episode(wire: Wire, server: MockLLMServer) -> list[list[Action]]:
    provider = wire.make(wire.model.split("/", 1)[1])
    services = services_for(wire, server)
    messages = [Message("user", "go", images=[ImageRef.of(screen(0))])]
    tools = provider.tools(GEOMETRY, bash=True)
    turns: list[list[Action]] = []
    try:
        for _ in range(5):
            response = await services.generate(messages, tools)
            messages.append(response.message)
            if provider.final_answer(response.message) is not None:
                break
            actions = []
            for call in response.tool_calls:
                actions += provider.actions(call, GEOMETRY)
                shot = ImageRef.of(screen(1))
                messages.append(provider.result(call, ActionResult(output="ok"), shot))
            turns.append(actions)
            if actions[-1].kind == "done":
                break
    finally:
        await services.close()
    return turns


@pytest.mark.parametrize("wire", WIRES, ids=[w.name for w in WIRES])
def test_several_steps_in_one_turn_and_bash(wire: Wire) -> None:
    with MockLLMServer(script=STEPS_SCRIPT) as server:
        turns = run(_steps_episode(wire, server))
    assert [a.kind for a in turns[0]] == ["click", "key"], turns
    assert turns[0][1].keys == ("Return",)
    assert turns[1] == [Action("bash", text="ls /")], turns
    typed = [(a.kind, a.keys, a.text) for a in turns[2]]
    assert typed == [("click", (), ""), ("key", ("ctrl", "a"), ""), ("key", ("BackSpace",), ""),
                     ("type", (), "x"), ("key", ("Return",), "")], typed  # fmt: skip
