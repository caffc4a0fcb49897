"""A short fuzz pass (issue 18) over the parsers that take hostile input: reward
files, dataset lines, the toolcalls YAML, task.toml and model replies.

Whatever hypothesis makes (deep nesting, integers of thousands of digits, NaN and
Infinity literals, numbers past the float range, alias bombs, bytes that are not
UTF-8), each parser either reads it or raises its one typed, one-line error; any
other exception would be an "internal error" with a traceback at the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helios.datagen.dataset import load_dataset
from helios.errors import HeliosError, InputError, RewardFileInvalid, RewardFileMissing
from helios.models.base import ModelResponse
from helios.models.errors import ModelError
from helios.safe_json import JsonValueError, parse_json
from helios.safe_yaml import load_yaml
from helios.tasks.plan import load_tasks
from helios.tasks.verifier import primary_reward, read_rewards
from helios.testing.loopback import LoopbackServer
from helios.toolcalls.config import load_config

from .mock_llm_helpers import ask_once

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])  # fmt: skip

# -- hostile pieces of text ------------------------------------------------------------
leaves = (st.none() | st.booleans() | st.integers(min_value=-(10**400), max_value=10**400)
          | st.floats() | st.text(max_size=12))  # fmt: skip
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=16,
)  # fmt: skip


def _deep(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


#: depths around the interpreter's recursion limit and far past it, not only small ones
depths = st.integers(1, 3_000) | st.sampled_from([999, 1_000, 1_001, 20_000, 250_000])
deep_json = st.builds(_deep, depths, st.sampled_from(["array", "object"]))
long_numbers = st.builds(lambda n, sign: sign + "9" * n, st.integers(300, 6_000),
                         st.sampled_from(["", "-"]))  # fmt: skip
odd_numbers = st.sampled_from(
    [
        "NaN",
        "Infinity",
        "-Infinity",
        "1e309",
        "-1e400",
        "1e-400",
        "0x10",
        "1_000",
        "01",
        "-0",
        ".5",
        "1.",
        "+1",
        "nan",
        "inf",
    ]
)
json_texts = st.one_of(values.map(json.dumps), deep_json, long_numbers, odd_numbers,
                       st.text(max_size=60))  # fmt: skip
raw_bytes = st.binary(max_size=80)


def _embedded(piece: str, template: str) -> str:
    return template.replace("@", piece)


reward_templates = st.sampled_from(['{"reward": @}', '{"a": @, "b": @}', "@",
                                    '{"reward": 1, "x": @}', "[@]"])  # fmt: skip
reward_texts = st.one_of(json_texts, st.builds(_embedded, json_texts, reward_templates))


# -- reward files -------------------------------------------------------------------------
@FUZZ
@given(body=st.one_of(reward_texts.map(str.encode), raw_bytes),
       name=st.sampled_from(["reward.json", "reward.txt"]))  # fmt: skip
def test_reward_files(tmp_path_factory: pytest.TempPathFactory, body: bytes, name: str) -> None:
    folder = tmp_path_factory.mktemp("rewards")
    (folder / name).write_bytes(body)
    try:
        rewards = read_rewards(folder)
    except (RewardFileInvalid, RewardFileMissing) as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        return
    assert rewards and all(math.isfinite(v) for v in rewards.values())
    assert math.isfinite(primary_reward(rewards))


# -- dataset lines --------------------------------------------------------------------------
dataset_templates = st.sampled_from(['{"prompt": @}', '{"prompt": "go", "n": @}', "@",
                                     '{"prompt": "go", "image": @, "cwd": @}'])  # fmt: skip
dataset_lines = st.one_of(json_texts, st.builds(_embedded, json_texts, dataset_templates))


@FUZZ
@given(lines=st.lists(st.one_of(dataset_lines.map(str.encode), raw_bytes), max_size=6))
def test_dataset_lines(tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]) -> None:
    path = tmp_path_factory.mktemp("dataset") / "p.jsonl"
    path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n")
    try:
        dataset = load_dataset(path)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert all(isinstance(row.prompt, str) and row.prompt.strip() for row in dataset.rows)
    assert all("\n" not in bad.render(path) for bad in dataset.bad)


# -- the toolcalls YAML -----------------------------------------------------------------------
def _alias_bomb(levels: int, width: int) -> str:
    lines = ["{", f" l0: &l0 [{', '.join(['lol'] * width)}],"]
    for i in range(1, levels):
        lines.append(f" l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}],")
    return "\n".join(lines) + "\n}"


def _yaml_deep(depth: int, flow: bool) -> str:
    if flow:
        return "[" * depth + "]" * depth
    depth = min(depth, 1_500)  # block nesting costs depth² bytes; libyaml stops at 1,000
    return "\n" + "".join(" " * i + "- \n" for i in range(depth)) + " " * depth + "x"


yaml_pieces = st.one_of(
    values.map(json.dumps),  # JSON is YAML (NaN and Infinity are plain strings there)
    st.builds(_alias_bomb, st.integers(1, 14), st.integers(1, 12)),
    st.builds(_yaml_deep, st.integers(1, 25_000), st.booleans()),
    long_numbers,
    st.sampled_from([".nan", ".inf", "-.inf", "1e400", "0o777", "!!python/object:os.system {}",
                     "&a [*a]", "*nope", "!!binary AAAA", "2001-12-14", "<<: {a: 1}", "~",
                     "'unclosed", "{a: 1, a: 2}", "\t- tab"]),
    st.text(max_size=40),
)  # fmt: skip
config_templates = st.sampled_from([
    "@",
    "agent: cli:Echo\ntests: @\n",
    "agent: cli:Echo\nruns: @\ntests:\n  - {id: t, prompt: go}\n",
    "agent: cli:Echo\ntests:\n  - {id: t, prompt: go, expect: [{name: f, arguments: @}]}\n",
    "agent: cli:Echo\ntests:\n  - {id: t, prompts: @, runs: 2}\n",
    "agent: @\ntests:\n  - {id: @, prompt: go}\n",
])  # fmt: skip


@FUZZ
@given(text=st.builds(_embedded, yaml_pieces, config_templates), raw=st.none() | raw_bytes)
def test_toolcalls_configs(
    tmp_path_factory: pytest.TempPathFactory, text: str, raw: bytes | None
) -> None:
    path = tmp_path_factory.mktemp("config") / "c.yaml"
    path.write_bytes(raw if raw is not None else text.encode("utf-8", "surrogatepass"))
    try:
        config = load_config(path)
        config.cases()
    except InputError as exc:
        assert "\n" not in str(exc), str(exc)


@FUZZ
@given(text=yaml_pieces)
def test_the_bounded_yaml_loader_only_raises_yaml_errors(text: str) -> None:
    import yaml

    with contextlib.suppress(yaml.YAMLError):
        load_yaml(text)


# -- task.toml ----------------------------------------------------------------------------------
toml_values = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "+nan", "1e309", "-1e400", "0", "-1", "1e300",
                     "true", '"x"', "[]", "{}", "1979-05-27", "0x_1", "1__0", '"""a"""']),
    long_numbers,
    st.builds(lambda n: "[" * n + "]" * n, st.integers(1, 20_000)),
    st.builds(lambda n: "{a = " * n + "1" + "}" * n, st.integers(1, 5_000)),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats().map(repr),  # inf and nan are TOML's spelling too
    st.text(max_size=20),
)  # fmt: skip
toml_keys = st.sampled_from([
    "[agent]\ntimeout_sec", "[verifier]\ntimeout_sec", "[environment]\ncpus",
    "[environment]\nmemory_mb", "[environment]\nstorage_mb", "[environment]\nallow_internet",
    "[metadata]\nx", "version", "[[steps]]\nname = \"a\"\nmin_reward", "[solution]\nenv",
    "x",
])  # fmt: skip


@FUZZ
@given(entries=st.lists(st.tuples(toml_keys, toml_values), min_size=1, max_size=3),
       raw=st.none() | raw_bytes)  # fmt: skip
def test_task_toml(
    tmp_path_factory: pytest.TempPathFactory, entries: list[tuple[str, str]], raw: bytes | None
) -> None:
    task = tmp_path_factory.mktemp("tasks") / "t"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (task / "instruction.md").write_text("Do it.\n")
    text = "\n".join(f"{key} = {value}" for key, value in entries) + "\n"
    (task / "task.toml").write_bytes(raw if raw is not None else text.encode("utf-8", "replace"))
    loaded = load_tasks([task])  # the batch's path: a bad task is data, never a raise
    assert len(loaded.tasks) + len(loaded.invalid) + len(loaded.unsupported) == 1
    for invalid in loaded.invalid:
        assert "\n" not in invalid.error
    for good in loaded.tasks:
        config = good.config
        for value in (config.agent.timeout_sec, config.verifier.timeout_sec,
                      config.environment.cpus):  # fmt: skip
            assert math.isfinite(value)


@FUZZ
@given(text=toml_values)
def test_helios_run_loads_a_task_or_raises_a_task_error(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    """`helios run TASK` calls load_task itself: only a HeliosError may leave it."""
    from helios.tasks.task import load_task

    task = tmp_path_factory.mktemp("task") / "t"
    (task / "tests").mkdir(parents=True)
    (task / "instruction.md").write_text("Do it.\n")
    (task / "task.toml").write_text(f"[agent]\ntimeout_sec = {text}\n", "utf-8", "replace")
    try:
        load_task(task)
    except HeliosError as exc:
        assert "\n" not in str(exc)


# -- model replies --------------------------------------------------------------------------------
class RawReplies(LoopbackServer):
    """Answers every model call with the bytes and status it is given."""

    status = 200
    body = b""

    def routes(self, app: web.Application) -> None:
        async def answer(request: web.Request) -> web.Response:
            await request.read()
            return web.Response(status=self.status, body=self.body,
                                content_type="application/json")  # fmt: skip

        app.router.add_post("/v1/chat/completions", answer)
        app.router.add_post("/v1/messages", answer)


def _reply(api: str, piece: Any, where: str) -> Any:
    """A reply of the right shape with a hostile value in one place."""
    if api == "openai":
        call = {"id": "c", "function": {"name": "f", "arguments": piece}}
        shapes: dict[str, Any] = {
            "arguments": {"choices": [{"message": {"content": "x", "tool_calls": [call]}}]},
            "usage": {
                "choices": [{"message": {"content": "x"}}],
                "usage": {"prompt_tokens": piece, "completion_tokens": piece},
            },
            "content": {"choices": [{"message": {"content": piece}}]},
            "whole": piece,
        }
    else:
        block = {"type": "tool_use", "id": "c", "name": "f", "input": piece}
        shapes = {
            "arguments": {"content": [block]},
            "usage": {"content": [], "usage": {"input_tokens": piece, "output_tokens": piece}},
            "content": {"content": [{"type": "text", "text": piece}], "stop_reason": piece},
            "whole": piece,
        }
    return shapes[where]


def _body(api: str, piece: str, where: str, as_text: bool) -> bytes:
    """The reply as bytes; a piece that is JSON text goes in as a value, or (for an
    OpenAI arguments string) as the string itself."""
    if as_text and where == "arguments" and api == "openai":
        return json.dumps(_reply(api, piece, where)).encode()
    marker = "\u2063@@piece@@\u2063"
    return json.dumps(_reply(api, marker, where)).replace(f'"{marker}"', piece).encode()


@pytest.fixture(scope="module")
def raw_server() -> Any:
    with RawReplies() as server:
        yield server


@FUZZ
@given(api=st.sampled_from(["openai", "anthropic"]),
       where=st.sampled_from(["arguments", "usage", "content", "whole"]),
       piece=json_texts, as_text=st.booleans(),
       status=st.sampled_from([200, 200, 200, 400, 429, 500]),
       raw=st.none() | st.none() | st.none() | raw_bytes)  # fmt: skip
def test_model_replies(
    raw_server: RawReplies, api: str, where: str, piece: str, as_text: bool, status: int,
    raw: bytes | None,
) -> None:  # fmt: skip
    raw_server.status = status
    raw_server.body = raw if raw is not None else _body(api, piece, where, as_text)
    outcome = asyncio.run(_ask(raw_server, api))
    assert isinstance(outcome, ModelResponse | ModelError), repr(outcome)
    if isinstance(outcome, ModelResponse):
        for call in outcome.message.tool_calls:
            if call.arguments is not None:  # what a trajectory will hold: strict JSON
                parse_json(json.dumps(call.arguments))
        usage = outcome.usage
        assert min(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) >= 0


async def _ask(server: RawReplies, api: str) -> object:
    return await ask_once(server.base_url, api)


@FUZZ
@given(text=json_texts)
def test_strict_json_raises_only_its_own_error(text: str) -> None:
    try:
        value = parse_json(text)
    except JsonValueError as exc:
        assert "\n" not in str(exc)
        return
    json.dumps(value, allow_nan=False)  # what it read can be written back as JSON
