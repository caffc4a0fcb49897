"""The ShareGPT writer, Hermes's tool statistics, distributions and the dataset reader."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helios.datagen.dataset import load_dataset
from helios.datagen.distributions import (
    BUILTIN,
    Distribution,
    ToolsetSampler,
    load_distributions_file,
    resolve_distribution,
)
from helios.datagen.rows import normalized, tool_failed, tool_stats
from helios.errors import ConfigError, InputError
from helios.models.base import Message, ToolCall
from helios.models.tools import ToolSpec
from helios.trajectories.sharegpt import gpt_value, has_reasoning, system_preamble, to_sharegpt
from tests.datagen.conftest import reference

SPEC = ToolSpec("terminal", "Run a command.", {"type": "object", "properties": {}})


def _call(i: int, name: str = "terminal", args: dict[str, str] | None = None) -> ToolCall:
    return ToolCall(f"c{i}", name, args if args is not None else {"command": "ls"})


def test_preamble_is_hermes_wording_with_our_tools() -> None:
    ref = reference("row")["conversations"][0]["value"]
    ours = system_preamble([SPEC])
    assert ours.split("<tools>\n")[0] == ref.split("<tools>\n")[0]
    assert ours.split("\n</tools>\n")[1] == ref.split("\n</tools>\n")[1]
    assert json.loads(ours.split("<tools>\n")[1].split("\n</tools>")[0]) == [SPEC.to_hermes()]


def test_conversation_turns_and_what_is_never_written() -> None:
    conversation = [
        Message("system", "EPHEMERAL"),
        Message("user", "PREFILL question"),
        Message("assistant", "PREFILL answer"),
        Message("user", "Do it."),
        Message("assistant", "", tool_calls=[_call(1), _call(2, "read_file", {"path": "a"})],
                reasoning="plan"),
        Message("tool", '{"output": "x", "exit_code": 0, "error": null}', tool_call_id="c1"),
        Message("tool", "plain text result", tool_call_id="c2"),
        Message("user", "nudge"),
        Message("assistant", "<think>inline thought</think>Final."),
    ]  # fmt: skip
    turns = to_sharegpt(conversation, prompt="Do it.", tools=[SPEC], setup_messages=3)
    assert [t["from"] for t in turns] == ["system", "human", "gpt", "tool", "human", "gpt"]
    text = json.dumps(turns)
    assert "EPHEMERAL" not in text and "PREFILL" not in text
    assert turns[2]["value"] == (
        '<think>\nplan\n</think>\n<tool_call>\n{"name": "terminal", "arguments": {"command": '
        '"ls"}}\n</tool_call>\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}'
        "\n</tool_call>"
    )
    first, second = turns[3]["value"].split("\n<tool_response>\n")
    assert json.loads(first.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>"))[
        "content"] == {"output": "x", "exit_code": 0, "error": None}  # fmt: skip
    assert json.loads(second.removesuffix("\n</tool_response>")) == {
        "tool_call_id": "c2", "name": "read_file", "content": "plain text result"}  # fmt: skip
    assert turns[5]["value"] == "<think>\ninline thought\n</think>\nFinal."


def test_reasoning_sources() -> None:
    assert gpt_value(Message("assistant", "hi")) == "<think>\n</think>\nhi"
    scratch = Message("assistant", "<REASONING_SCRATCHPAD>hmm</REASONING_SCRATCHPAD>ok")
    assert gpt_value(scratch) == "<think>\nhmm\n</think>\nok" and has_reasoning(scratch)
    assert has_reasoning(Message("assistant", "x", reasoning="native"))
    assert not has_reasoning(Message("assistant", "<think>  </think>x"))
    assert not has_reasoning(Message("assistant", "x", reasoning="   "))


@pytest.mark.parametrize(
    ("content", "failed"),
    [
        ('{"output": "", "exit_code": 1, "error": null}', False),
        ('{"output": "", "exit_code": 124, "error": "timed out"}', True),
        ('{"success": false, "error": "nope"}', True),
        ('{"content": {"error": "inner"}}', True),
        ("[1, 2]", False),
        ("Error: unknown tool 'x'", True),
        ("", True),
        ("all fine", False),
        ("{not json", False),
    ],
)
def test_hermes_success_rules(content: str, failed: bool) -> None:
    assert tool_failed(content) is failed


def test_tool_stats_count_calls_and_keep_hallucinated_names() -> None:
    conversation = [
        Message("assistant", "", tool_calls=[_call(1), _call(2, "made_up")]),
        Message("tool", '{"error": null}', tool_call_id="c1"),
        Message("tool", "Error: unknown tool", tool_call_id="c2"),
    ]
    stats = tool_stats(conversation)
    assert stats == {"terminal": {"count": 1, "success": 1, "failure": 0},
                     "made_up": {"count": 1, "success": 0, "failure": 1}}  # fmt: skip
    full = normalized(stats, ["terminal", "patch"])
    assert list(full) == ["terminal", "patch", "made_up"]


def test_builtin_distributions_keep_hermes_names_and_only_our_toolsets() -> None:
    for name in ("default", "terminal_only", "terminal_web", "science", "development",
                 "balanced", "minimal", "mixed_tasks", "terminal_tasks"):  # fmt: skip
        assert name in BUILTIN
    assert all(set(d.toolsets) <= {"terminal", "file", "web"} for d in BUILTIN.values())
    assert dict(BUILTIN["development"].toolsets) == {"terminal": 80, "file": 80, "web": 30}
    with pytest.raises(ConfigError, match="browser"):
        resolve_distribution("browser_only", {})


def test_sampling_semantics_fallback_and_warn_once() -> None:
    warnings: list[str] = []
    dist = Distribution("d", "", {"web": 100, "terminal": 1, "browser": 90})
    usable = {"terminal": None, "web": "no backend", "browser": "not provided"}
    sampler = ToolsetSampler(dist, usable.__getitem__, warnings.append)
    assert len(warnings) == 2 and "'web'" in warnings[0] and "'browser'" in warnings[1]
    rng = random.Random(0)
    samples = [sampler.sample(rng) for _ in range(200)]
    assert all(s == ["terminal"] for s in samples)  # 1% or the fallback: always terminal
    mixed = ToolsetSampler(Distribution("m", "", {"terminal": 50, "file": 20}), lambda _: None,
                           warnings.append)  # fmt: skip
    counts = {"terminal": 0, "file": 0}
    for _ in range(2000):
        for name in mixed.sample(rng):
            counts[name] += 1
    assert 1720 < counts["terminal"] < 1880  # 50%, plus the fallback when nothing is drawn (40%)
    assert 320 < counts["file"] < 480
    with pytest.raises(ConfigError, match="no toolset"):
        ToolsetSampler(Distribution("w", "", {"web": 100}), usable.__getitem__, warnings.append)


def test_distributions_file_yaml_and_json_with_located_errors(tmp_path: Path) -> None:
    good = tmp_path / "d.yaml"
    good.write_text("mine:\n  description: mostly terminal\n  toolsets: {terminal: 90, file: 10}\n"
                    "short: {web: 50}\n")  # fmt: skip
    loaded = load_distributions_file(good)
    assert dict(loaded["mine"].toolsets) == {"terminal": 90.0, "file": 10.0}
    assert loaded["short"].toolsets == {"web": 50.0}
    bad = tmp_path / "bad.yaml"
    bad.write_text("mine:\n  toolsets: {terminal: 190}\n")
    with pytest.raises(InputError, match=r"bad.yaml \[mine\]: .*0-100"):
        load_distributions_file(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": {"terminal": 5},\n "b": }')
    with pytest.raises(InputError, match=r"broken.json:2"):
        load_distributions_file(broken)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=30), st.binary(max_size=30).map(lambda b: b.decode(
    "latin-1")), st.dictionaries(st.sampled_from(["prompt", "image", "cwd"]),
    st.one_of(st.none(), st.integers(), st.text(max_size=10)), max_size=3).map(json.dumps)),
    max_size=12))  # fmt: skip
def test_any_dataset_either_loads_or_is_rejected_with_one_error(lines: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.jsonl"
        path.write_text("\n".join(line.replace("\n", " ") for line in lines) + "\n",
                        encoding="utf-8", errors="surrogateescape")  # fmt: skip
        try:
            dataset = load_dataset(path)
        except InputError as exc:
            assert "p.jsonl" in str(exc)
            return
        assert all(row.prompt.strip() for row in dataset.rows)
        assert len({row.key for row in dataset.rows}) == len(dataset.rows)
        assert [row.index for row in dataset.rows] == list(range(len(dataset.rows)))
