"""A toolcalls YAML file is data: it names agents, never an arbitrary callable. Round 4
ran `id` as root with `agent: {name: "subprocess:Popen", params: {args: "id", shell:
true}}` and no Python file beside the config."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ..conftest import helios_cmd

TESTS = "tests:\n  - {id: a, prompt: hello}\n"
HOSTILE = {
    "agent_popen": 'agent: {{name: "subprocess:Popen", params: {{args: "{cmd}", shell: true}}}}\n',
    "agent_dotted": 'agent: {{name: "subprocess.Popen", params: {{args: "{cmd}", shell: true}}}}\n',
    "agent_system": 'agent: {{name: "os:system", params: {{}}}}\n',
    "evaluator_popen": 'agent: {{name: http, params: {{url: "http://127.0.0.1:9/"}}}}\n'
                       'evaluator: {{name: "subprocess:Popen", '
                       'params: {{args: "{cmd}", shell: true}}}}\n',
    "synthesizer_popen": 'synthesizer: {{name: "subprocess:Popen", '
                         'params: {{args: "{cmd}", shell: true}}}}\nagent: http\n',
    "parser_popen": 'agent: {{name: http, params: {{url: "http://127.0.0.1:9/", parser: '
                    '{{name: "subprocess:Popen", params: {{args: "{cmd}", shell: true}}}}}}}}\n',
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_config_never_calls_an_arbitrary_callable(tmp_path: Path, name: str) -> None:
    marker = tmp_path / "ran"
    config = tmp_path / "c.yaml"
    config.write_text(HOSTILE[name].format(cmd=f"id > {marker}") + TESTS)
    result = subprocess.run(helios_cmd("toolcalls", "--config", str(config)), cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert not marker.exists(), "the config ran a host command"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is not a" in lines[0] and "c.yaml" in lines[0], lines
    assert "Traceback" not in result.stderr


def test_a_declared_agent_next_to_the_config_still_runs(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from helios import toolcalls\n\n"
        "@toolcalls.agent\nasync def echo(audio):\n    return [{'name': 'hello'}]\n\n"
        "class Echo:\n    async def run(self, audio):\n"
        "        return toolcalls.AgentResponse(tool_calls=[toolcalls.tool_call('hello')])\n\n"
        "class Synth:\n    async def synthesize(self, text):\n"
        "        return toolcalls.Audio(data=b'\\x00' * 480, format='pcm', transcript=text)\n"
    )
    for agent in ("mine:echo", "mine:Echo"):
        config = tmp_path / "c.yaml"
        config.write_text(f"synthesizer: mine:Synth\nagent: {agent}\ntests:\n"
                          "  - {id: a, prompt: hello, expect: [{name: hello}]}\n")  # fmt: skip
        result = subprocess.run(helios_cmd("toolcalls", "--config", str(config)), cwd=tmp_path,
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.returncode == 0, (agent, result.stdout + result.stderr)
