"""The computer agent's loop over a fake desktop, provider and model: its endings
(each writes final_answer.txt), the last-K screenshots, bash only when the task
allows it, malformed actions as errors for the model; and how the agent is chosen."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from helios.agents.computer.agent import ComputerAgent, tool_specs
from helios.agents.computer.choice import provider_name
from helios.agents.computer.settings import ComputerSettings, parse_geometry
from helios.agents.registry import available_agents, choose_agent, create_agent
from helios.environments.desktop.actions import Geometry
from helios.errors import ConfigError
from helios.models.base import Message
from helios.models.errors import AuthError
from helios.models.routing import ModelSpec

from .computer_fakes import FakeScreen, call, png, rig, run_agent, sha

GEMINI_CU = "gemini/gemini-2.5-computer-use-preview-10-2025"


def _roles(messages: list[Message]) -> list[str]:
    return [m.role for m in messages]


# -- endings -------------------------------------------------------------------------


def test_a_done_action_ends_the_run_with_its_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    r = rig(monkeypatch, tmp_path, [
        {"text": "I click it.", "calls": [call("click", x=100, y=2000)]},
        {"calls": [call("done", answer="42")]},
    ])  # fmt: skip
    outcome = run_agent(r)
    assert outcome.error is None and outcome.n_turns == 2
    assert r.screen.answers == ["42"]
    assert [(a.kind, a.point) for a in r.screen.executed] == [("click", (100, 767))]
    conversation = outcome.conversation
    assert _roles(conversation) == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert "1024x768" in conversation[0].content
    assert conversation[1].content == "Click the button." and len(conversation[1].images) == 1
    assert all(len(m.images) == 1 for m in conversation if m.role == "tool")
    # the final screen is kept on the host, and it is the screen after the click
    final = (tmp_path / "agent" / "images" / "final.png").read_bytes()
    assert final == png(1000) == conversation[-1].images[0].data
    assert outcome.setup_messages == 1
    assert [t.name for t in outcome.tools] == ["computer"]
    assert r.ctx.usage.calls == 2


def test_without_a_done_action_the_reply_text_is_the_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    r = rig(monkeypatch, tmp_path, [
        {"calls": [call("type", text="hello")]},
        {"text": "The title is Hello."},
    ], has_done=False)  # fmt: skip
    outcome = run_agent(r)
    assert outcome.error is None
    assert r.screen.answers == ["The title is Hello."]
    assert r.screen.executed[0].text == "hello"


def test_max_turns_is_partial_and_writes_the_last_text(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replies = [{"text": f"step {n}", "calls": [call("click", x=n, y=n)]} for n in range(1, 9)]
    r = rig(monkeypatch, tmp_path, replies)
    outcome = run_agent(r, max_turns=3)
    assert outcome.error is not None and outcome.error.type == "MaxTurns"
    assert outcome.n_turns == 3 and len(r.model.sent) == 3
    assert r.screen.answers == ["step 3"]
    assert (tmp_path / "agent" / "images" / "final.png").is_file()


def test_its_own_deadline_ends_the_run_in_time_to_write_the_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    r = rig(monkeypatch, tmp_path, [], timeout=1.0, block=True)
    outcome = run_agent(r)
    assert outcome.error is not None and outcome.error.type == "AgentTimeout"
    assert r.screen.answers == [""]  # no model message yet: an empty answer, still a file
    assert (tmp_path / "agent" / "images" / "final.png").is_file()


def test_a_model_error_propagates_after_the_answer_is_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    r = rig(monkeypatch, tmp_path, [{"text": "first look", "calls": [call("screenshot")]}],
            error=AuthError("bad key"))  # fmt: skip
    with pytest.raises(AuthError):
        run_agent(r)
    assert r.screen.answers == ["first look"]


def test_a_failed_answer_write_is_recorded_not_raised(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    screen = FakeScreen(fail_answer=True)
    r = rig(monkeypatch, tmp_path, [{"calls": [call("done", answer="x")]}], screen=screen)
    outcome = run_agent(r)
    assert outcome.error is not None and outcome.error.type == "FinalAnswerNotWritten"


def test_a_dead_desktop_ends_the_run_as_partial(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    screen = FakeScreen(die_after=2)
    r = rig(monkeypatch, tmp_path, [{"text": "go", "calls": [call("click", x=1, y=1)]}],
            screen=screen)  # fmt: skip
    outcome = run_agent(r)
    assert outcome.error is not None and outcome.error.type == "DesktopLost"
    assert "Xvfb is gone" in outcome.error.message
    assert screen.answers == ["go"]


def test_no_desktop_at_the_start_is_an_infrastructure_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from helios.agents.computer.agent import DesktopLost
    from helios.failures import ErrorInfo

    r = rig(monkeypatch, tmp_path, [{"calls": [call("done", answer="x")]}],
            screen=FakeScreen(die_after=0))  # fmt: skip
    with pytest.raises(DesktopLost) as info:
        run_agent(r)
    assert ErrorInfo.from_exception(info.value, "agent").infrastructure
    assert r.model.sent == []


# -- per turn --------------------------------------------------------------------------


def test_the_last_k_screenshots_setting_reaches_the_client(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replies = [{"calls": [call("click", x=n, y=n)]} for n in range(1, 6)]
    r = rig(monkeypatch, tmp_path, [*replies, {"calls": [call("done", answer="ok")]}])
    outcome = run_agent(r, keep_screenshots=2)
    assert outcome.error is None
    # the client sends the last K (its image window); the agent asks for its K
    assert {c.keep_images for c in r.model.configs} == {2}
    assert r.ctx.services is not None and r.ctx.services.config.keep_images == 3  # the batch's
    # the trial keeps every screenshot, and the messages are not rewritten
    assert sum(len(m.images) for m in outcome.conversation) == 7
    assert all(len(m.images) == 1 for m in r.model.sent[-1] if m.role == "tool")
    default = rig(monkeypatch, tmp_path, [{"calls": [call("done", answer="x")]}])
    run_agent(default)
    assert default.model.configs[0].keep_images == 3


def test_a_zoom_answers_with_the_crop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    r = rig(monkeypatch, tmp_path, [
        {"calls": [call("zoom", region=[0, 0, 100, 50])]},
        {"calls": [call("done", answer="code 7")]},
    ])  # fmt: skip
    outcome = run_agent(r)
    assert r.screen.regions[:2] == [None, (0, 0, 100, 50)]
    zoomed = outcome.conversation[3]
    assert zoomed.images[0].data == png(1)  # the crop of an unchanged screen
    assert r.screen.executed == []  # a zoom is a screenshot, not an input


def test_a_desktop_past_the_models_image_limits_is_shown_scaled_and_a_zoom_is_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    screen = FakeScreen(geometry=Geometry(1920, 1200))
    r = rig(monkeypatch, tmp_path, [
        {"calls": [call("click", x=5, y=5)]},
        {"calls": [call("zoom", region=[0, 0, 100, 50])]},
        {"calls": [call("done", answer="ok")]},
    ], screen=screen, max_width=1280)  # fmt: skip
    outcome = run_agent(r)
    assert outcome.error is None
    # the whole screen at the model's size, scaled in the sandbox; a zoom at full size
    assert screen.sizes[:3] == [(1280, 800), (1280, 800), None]
    assert screen.regions[2] == (0, 0, 100, 50)


def test_a_malformed_action_goes_back_to_the_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    r = rig(monkeypatch, tmp_path, [
        {"calls": [call("fly", x=1), call(None)]},
        {"calls": [call("done", answer="fine")]},
    ])  # fmt: skip
    outcome = run_agent(r)
    assert outcome.error is None and r.screen.answers == ["fine"]
    errors = [m for m in outcome.conversation if m.role == "tool" and m.is_error]
    assert [e.content for e in errors] == ["unknown action 'fly'", "the arguments of computer "
                                           "are not JSON"]  # fmt: skip
    # nothing changed on the screen: the errors answer with the screenshot already taken
    assert len(r.screen.regions) == 2
    assert errors[0].images[0].sha256 == sha(png(0))


def test_malformed_replies_in_a_row_end_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    r = rig(monkeypatch, tmp_path, [{"text": "hmm", "calls": [call("fly")]}])
    outcome = run_agent(r)
    assert outcome.error is not None and outcome.error.type == "InvalidReplies"
    assert outcome.n_turns == 3 and r.screen.answers == ["hmm"]


def test_a_reply_without_action_or_answer_is_nudged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    r = rig(monkeypatch, tmp_path, [{"text": "thinking"}, {"calls": [call("done", answer="a")]}])
    outcome = run_agent(r)
    assert outcome.error is None and r.screen.answers == ["a"]
    assert _roles(outcome.conversation)[2:5] == ["assistant", "user", "assistant"]


def test_an_action_that_hangs_times_out_as_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    screen = FakeScreen(hang=30)
    r = rig(monkeypatch, tmp_path, [
        {"calls": [call("click", x=1, y=1)]}, {"calls": [call("done", answer="b")]},
    ], screen=screen)  # fmt: skip
    outcome = run_agent(r, action_timeout=0.2)
    tool = outcome.conversation[3]
    assert tool.is_error and "did not finish in 0.2 s" in tool.content
    assert screen.answers == ["b"]


# -- bash --------------------------------------------------------------------------


BASH_THEN_DONE = [
    {"calls": [call(name="bash", command="echo hi")]},
    {"calls": [call("done", answer="c")]},
]


REFUSED = [{}, {"bash": True}, {"bash": False, "task_allows_bash": True}]


@pytest.mark.parametrize("settings", REFUSED)
def test_bash_is_refused_unless_the_task_allows_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, settings: dict[str, Any]
) -> None:
    r = rig(monkeypatch, tmp_path, BASH_THEN_DONE)
    outcome = run_agent(r, **settings)
    assert r.provider.bash_offered == [False]
    assert r.env.commands == []
    tool = outcome.conversation[3]
    assert tool.is_error and "bash is not allowed" in tool.content


def test_bash_runs_when_the_task_allows_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    r = rig(monkeypatch, tmp_path, BASH_THEN_DONE)
    outcome = run_agent(r, task_allows_bash=True)
    assert r.provider.bash_offered == [True]
    assert [c for c, _ in r.env.commands] == ["echo hi"]
    assert r.env.commands[0][1] == {"DISPLAY": ":1"}
    assert outcome.conversation[3].content == "ran echo hi\n"
    assert [t.name for t in outcome.tools] == ["computer", "bash"]


# -- settings, providers, choice ---------------------------------------------------


def test_settings_are_checked_in_one_line() -> None:
    assert ComputerSettings.read({}).keep_screenshots is None
    assert parse_geometry("1280x800") == Geometry(1280, 800) == parse_geometry([1280, 800])
    for bad in ({"keep_screenshots": 0}, {"geometry": "big"}, {"max_turns": "x"},
                {"bash": "maybe"}, {"provider": "tinker"}, {"toolsets": ["core"]}):  # fmt: skip
        with pytest.raises(ConfigError):
            ComputerAgent(**bad)
    identity = ComputerAgent(task_allows_bash=True).identity()
    assert identity["name"] == "computer" and identity["bash"] is True
    assert ComputerAgent().identity()["bash"] is False


def test_the_provider_follows_the_models_vendor() -> None:
    def spec(provider: str, api: str = "openai") -> ModelSpec:
        return ModelSpec(provider, "m", api, None)  # type: ignore[arg-type]

    assert provider_name(spec("anthropic", "anthropic")) == "anthropic"
    assert provider_name(spec("openai")) == "openai"
    assert provider_name(spec("gemini")) == "gemini"
    assert provider_name(spec("openai-compatible")) == "generic"
    assert provider_name(spec("openrouter")) == "generic"
    assert provider_name(spec("gemini"), "generic") == "generic"
    with pytest.raises(ConfigError, match="cannot drive anthropic/m"):
        provider_name(spec("anthropic", "anthropic"), "generic")


def test_native_tools_are_listed_for_the_trajectory() -> None:
    specs = tool_specs([
        {"type": "computer_20250124", "name": "computer", "display_width_px": 1024},
        {"computer_use": {"environment": "ENVIRONMENT_BROWSER"}},
        {"type": "function", "function": {"name": "bash", "description": "d", "parameters": {}}},
    ])  # fmt: skip
    assert [s.name for s in specs] == ["computer", "computer_use", "bash"]
    assert "computer_20250124" in specs[0].description
    assert all(s.to_openai()["type"] == "function" for s in specs)


def test_the_agent_is_chosen_by_the_model_and_the_task() -> None:
    assert "computer" in available_agents()
    assert isinstance(create_agent("computer"), ComputerAgent)
    assert choose_agent(None, GEMINI_CU) == "computer"
    assert choose_agent(None, "openai/computer-use-preview") == "computer"
    assert choose_agent(None, "anthropic/claude-sonnet-4-5") == "tool"
    assert choose_agent(None, None) == "tool"
    assert choose_agent(None, None, desktop=True) == "computer"
    assert choose_agent("oracle", GEMINI_CU) == "oracle"
    assert choose_agent("tool", "anthropic/claude-sonnet-4-5", desktop=True) == "tool"
    with pytest.raises(ConfigError) as info:
        choose_agent("tool", GEMINI_CU)
    assert "\n" not in str(info.value) and "--agent computer" in str(info.value)


def test_a_cancelled_run_writes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    r = rig(monkeypatch, tmp_path, [], block=True)

    async def go() -> None:
        task = asyncio.ensure_future(ComputerAgent().run("x", r.env, r.ctx))  # type: ignore[arg-type]
        await r.model.called.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert r.screen.answers == []


# -- the task door: which agent, and bash from the task --------------------------


def test_a_batch_picks_the_agent_per_task(make_task: Any, tmp_path: Path) -> None:
    from helios import ParallelRunner

    make_task("gui", toml_extra="[environment.desktop]\nwidth = 800\nheight = 600\nbash = true\n")
    make_task("plain")
    make_task("harbor-gui")  # Harbor's way: [metadata] category = "computer-use"
    tasks = tmp_path / "tasks"
    (tasks / "harbor-gui" / "task.toml").write_text(
        (tasks / "harbor-gui" / "task.toml")
        .read_text()
        .replace('author = "test"', 'author = "test"\ncategory = "computer-use"')
    )

    def plan(**kw: Any) -> dict[str, tuple[str, Any]]:
        runner = ParallelRunner(tasks, provider="local", show_progress=False,
                                output_dir=tmp_path / "out", **kw)  # fmt: skip
        specs = runner._plan()
        return {
            s.task.name: (s.agent, s.episode().agent_settings.get("task_allows_bash"))
            for s in specs
        }

    assert plan() == {
        "gui": ("computer", True), "harbor-gui": ("computer", False), "plain": ("tool", None),
    }  # fmt: skip
    assert set(plan(model=GEMINI_CU).values()) == {("computer", True), ("computer", False)}
    assert plan(agent="tool", model="anthropic/claude-sonnet-4-5")["gui"] == ("tool", None)
    # a user's setting never turns bash on where the task does not allow it
    forced = plan(agent="computer", agent_settings={"task_allows_bash": True})
    assert forced["plain"] == ("computer", False)


def test_the_cli_refuses_the_tool_agent_with_a_computer_use_model(make_task: Any) -> None:
    import subprocess

    from .conftest import helios_cmd

    task = make_task("plain")
    done = subprocess.run(
        helios_cmd("batch", str(task.parent), "-m", GEMINI_CU, "--agent", "tool"),
        capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "computer-use model" in lines[0], done.stderr
