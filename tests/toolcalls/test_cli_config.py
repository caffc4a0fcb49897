"""`helios toolcalls --config`: the summary, exit codes, one-line config errors, reports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helios.cli.app import app

from ..waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
AGENTS = '''
from helios import toolcalls

class Echo:
    """Calls the function named by the prompt's first word."""
    async def run(self, audio):
        word = (audio.transcript or "").split()[0]
        if word == "crash":
            raise RuntimeError("agent crashed")
        return toolcalls.AgentResponse(tool_calls=[toolcalls.tool_call(word)])

class Synth:
    def __init__(self, voice="v"):
        self.voice = voice
    async def synthesize(self, text):
        return toolcalls.Audio(data=b"\\x00" * 480, format="pcm", transcript=text)

@toolcalls.agent
async def echo_function(audio):
    return [{"name": (audio.transcript or "").split()[0]}]
'''
GOOD = """
synthesizer: {name: "cli_agents:Synth", params: {voice: x}}
agent: cli_agents:Echo
runs: 2
max_concurrency: 3
tests:
  - id: one
    prompt: "book now"
    expect: [{name: book}]
  - id: two
    prompts: ["weather today", "weather tomorrow"]
    expect: [{name: weather}]
    runs: 1
"""


def _invoke(tmp_path: Path, config: str, *args: str) -> tuple[int, str]:
    (tmp_path / "cli_agents.py").write_text(AGENTS)
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(config))
    result = CliRunner().invoke(app, ["toolcalls", "--config", str(path), *args])
    return result.exit_code, result.output


def test_a_passing_config_prints_the_summary_and_exits_0(tmp_path: Path) -> None:
    code, out = _invoke(tmp_path, GOOD, "--report", str(tmp_path / "r.json"))
    assert code == 0, out
    assert "PASSED (100% pass rate, 2 runs)" in out
    assert "  PASS  one  (100% match)  [2/2 runs]" in out
    assert "  PASS  two  (100% match)  [2/2 runs]" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert [t["id"] for t in report["tests"]] == ["one", "two"]


def test_runs_from_the_command_line_win(tmp_path: Path) -> None:
    code, out = _invoke(tmp_path, GOOD, "--runs", "3", "--max-concurrency", "1")
    assert code == 0
    assert "[3/3 runs]" in out and "[6/6 runs]" in out


def test_a_failed_or_crashed_run_exits_1(tmp_path: Path) -> None:
    config = GOOD.replace('prompt: "book now"', 'prompt: "crash now"')
    code, out = _invoke(tmp_path, config, "--report", str(tmp_path / "r.html"), "--quiet")
    assert code == 1
    assert "  FAIL  one  (0% match)  [0/2 runs]" in out
    assert "error in agent: RuntimeError: agent crashed" in out
    assert "crash now" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize("quiet", [False, True])
def test_each_failure_is_printed_once(tmp_path: Path, quiet: bool) -> None:
    config = GOOD.replace('prompt: "book now"', 'prompt: "crash now"')
    code, out = _invoke(tmp_path, config, *(["--quiet"] if quiet else []))
    assert code == 1
    # two runs of the crashing prompt: one error line each, not two
    assert out.count("error in agent: RuntimeError: agent crashed") == 2, out
    assert "  FAIL  one  (0% match)  [0/2 runs]" in out


def test_a_function_agent_and_pipeline_section(tmp_path: Path) -> None:
    config = """
    pipeline:
      synthesizer: cli_agents:Synth
      agent: cli_agents.echo_function
    tests:
      - {id: t, prompt: "go", expect: [{name: go}]}
    """
    code, out = _invoke(tmp_path, config)
    assert code == 0, out


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("agent: cli_agents:Echo\n", "c.yaml: tests: Field required"),
        ("agent: cli_agents:Echo\ntests: []\n", "c.yaml: tests: List should have at least 1 item"),
        ("agent: cli_agents:Echo\ntests:\n  - {id: a}\n",
         "c.yaml: tests[0]: give exactly one of prompt or prompts"),
        ("agent: cli_agents:Echo\ntests:\n  - {id: a, prompt: x, prompts: [y]}\n",
         "c.yaml: tests[0]: give exactly one of prompt or prompts"),
        ("agent: cli_agents:Echo\ntests:\n  - {id: a, prompt: x, expect: [{arguments: {}}]}\n",
         "c.yaml: tests[0].expect[0].name: Field required"),
        ("agent: cli_agents:Echo\nruns: 0\ntests:\n  - {id: a, prompt: x}\n",
         "c.yaml: runs: Input should be greater than or equal to 1"),
        ("agent: cli_agents:Echo\nrunz: 2\ntests:\n  - {id: a, prompt: x}\n",
         "c.yaml: runz: Extra inputs are not permitted"),
        ("agent: cli_agents:Echo\ntests:\n  - {id: a, prompt: x}\n  - {id: a, prompt: y}\n",
         "duplicate test id 'a'"),
        ("agent: nosuch\ntests:\n  - {id: a, prompt: x}\n",
         "c.yaml: agent.name: unknown name 'nosuch'"),
        ("agent: cli_agents:Nope\ntests:\n  - {id: a, prompt: x}\n",
         "c.yaml: agent.name: 'cli_agents' has no attribute 'Nope'"),
        ("agent: agents:KeywordAgent\ntests:\n  - {id: a, prompt: x}\n",
         "c.yaml: agent.name: cannot import 'agents': no agents.py next to the config file "
         "or on the Python path"),
        ("agent: {name: http, params: {nope: 1}}\ntests:\n  - {id: a, prompt: x}\n",
         "c.yaml: agent.params: TypeError:"),
        ("agent: {name: http, params: {url: u, parser: {name: xml}}}\ntests:\n"
         "  - {id: a, prompt: x}\n", "c.yaml: agent.params.parser.name: unknown name 'xml'"),
        ("agent: {name: cli_agents:Echo, parms: {}}\ntests:\n  - {id: a, prompt: x}\n",
         "c.yaml: agent.parms: Extra inputs are not permitted"),
        ("agent: [unclosed\n", "c.yaml:2: not valid YAML: did not find expected ','"),
        ("- just\n- a list\n", "c.yaml: the config must be a mapping"),
    ],
)  # fmt: skip
def test_a_bad_config_is_one_line_and_exit_2(tmp_path: Path, config: str, message: str) -> None:
    code, out = _invoke(tmp_path, config)
    assert code == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert message in lines[0], out
    assert "Traceback" not in out


def test_missing_config_and_bad_report_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["toolcalls", "--config", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and "cannot read the config" in result.output
    code, out = _invoke(tmp_path, GOOD, "--report", "out.txt")
    assert code == 2 and "must end in .json or .html" in out


@pytest.mark.espeak
def test_the_example_config_runs_as_a_user_types_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "helios", "toolcalls", "--config",
         str(REPO / "examples/toolcalls/config.yaml"), "--runs", "1",
         "--report", str(tmp_path / "report.html")],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  book_flight_berlin_rome  (100% match)  [1/1 runs]" in result.stdout
    assert (tmp_path / "report.html").is_file()
    assert (tmp_path / ".helios_cache" / "audio").is_dir()


def test_text_mode_from_yaml_against_the_scripted_server(tmp_path: Path) -> None:
    from helios.testing.mock_llm import MockLLMServer

    script = {"scenarios": [{"match": "flight", "turns": [{"tool_calls": [
        {"name": "book_flight", "arguments": {"to_city": "LA"}}]}]}]}  # fmt: skip
    with MockLLMServer(script=script) as server:
        config = f"""
        synthesizer: null
        agent:
          name: model
          params:
            model: openai-compatible/scripted
            base_url: {server.openai_base_url}
            system_prompt: You book flights.
            tools:
              - name: book_flight
                parameters: {{type: object, properties: {{to_city: {{type: string}}}}}}
        tests:
          - id: flight
            prompt: Book a flight to LA
            expect: [{{name: book_flight, arguments: {{to_city: LA}}}}]
            runs: 3
        """
        code, out = _invoke(tmp_path, config)
    assert code == 0, out
    assert "  PASS  flight  (100% match)  [3/3 runs]" in out
    assert server.stats["served_ok"] == 3


def test_ctrl_c_exits_130_quickly(tmp_path: Path) -> None:
    import signal
    import time

    (tmp_path / "slow_agents.py").write_text(
        "import asyncio\n"
        "from helios import toolcalls\n"
        "class Slow:\n"
        "    async def run(self, audio):\n"
        "        open('run-started', 'w').close()\n"
        "        await asyncio.sleep(60)\n"
        "class Synth:\n"
        "    async def synthesize(self, text):\n"
        "        return toolcalls.Audio(data=b'', format='pcm')\n"
    )
    (tmp_path / "c.yaml").write_text(
        "synthesizer: slow_agents:Synth\nagent: slow_agents:Slow\nruns: 5\n"
        "tests:\n  - {id: t, prompt: x}\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "helios", "toolcalls", "--config", "c.yaml"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def run_started() -> bool:
        assert process.poll() is None, process.communicate()
        return (tmp_path / "run-started").exists()

    try:
        wait_until(run_started, "the agent's run started", within=60)
    except AssertionError:
        process.kill()
        process.communicate()
        raise
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    assert "interrupted" in err and "Traceback" not in err
    assert time.monotonic() - started < 15


SEVEN_SPOKEN = """
agent: cli_agents:Echo
tests:
  - id: spoken
    prompts: ["book a", "book b", "book c", "book d", "book e", "book f", "book g"]
    expect: [{name: book}]
"""


def test_a_missing_espeak_ng_is_one_setup_line_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default synthesizer without espeak-ng on PATH: checked once before the
    batch, one line naming it and how to install it, exit 2 (not one failure per run
    and exit 1)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, out = _invoke(tmp_path, SEVEN_SPOKEN)
    assert code == 2, out
    lines = [line for line in out.splitlines() if "espeak-ng" in line]
    assert len(lines) == 1, out
    assert "apt-get install espeak-ng" in lines[0]
    assert "error:" in lines[0]


def test_the_run_folder_saves_the_config(tmp_path: Path) -> None:
    """run.json's versioned `config`: the YAML config as it was validated, and the
    engine's settings (secrets removed: `engine.saved_config`)."""
    code, out = _invoke(tmp_path, GOOD, "-o", str(tmp_path / "out"), "--runs", "3")
    assert code == 0, out
    (run_dir,) = (tmp_path / "out").iterdir()
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["config_version"] == 1
    config = saved["config"]
    assert config["settings"]["config_file"] == str(tmp_path / "c.yaml")
    assert [t["id"] for t in config["settings"]["tests"]] == ["one", "two"]
    assert config["settings"]["synthesizer"]["params"] == {"voice": "x"}
    assert config["runs"] == 9 and config["max_concurrency"] == 3
    assert config["retry_policy"]["max_attempts"] >= 1 and config["agent"] == "Echo"


def test_resume_loads_the_saved_config(tmp_path: Path) -> None:
    """`--resume RUN_DIR` alone: the YAML config comes from run.json (its file may be
    gone), and the runs recorded before are not run again."""
    code, out = _invoke(tmp_path, GOOD, "-o", str(tmp_path / "out"))
    assert code == 0, out
    (run_dir,) = (tmp_path / "out").iterdir()
    results = run_dir / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    assert len(lines) == 4
    results.write_text("".join(lines[:2]))  # as if stopped before its last two runs
    (tmp_path / "c.yaml").unlink()
    resumed = CliRunner().invoke(app, ["toolcalls", "--resume", str(run_dir)])
    assert resumed.exit_code == 0, resumed.output
    assert "  PASS  one  (100% match)  [2/2 runs]" in resumed.output
    assert "  PASS  two  (100% match)  [2/2 runs]" in resumed.output
    assert len(results.read_text().splitlines()) == 4  # only the two missing ran
    # a saved config that does not fit is one line naming the file and the field
    path = run_dir / "run.json"
    stored = json.loads(path.read_text())
    stored["config"]["settings"]["runs"] = "many"
    path.write_text(json.dumps(stored))
    bad = CliRunner().invoke(app, ["toolcalls", "--resume", str(run_dir)])
    assert bad.exit_code == 2 and f"{path} [config.settings.runs]" in bad.output, bad.output
    del stored["config_version"]
    path.write_text(json.dumps(stored))
    old = CliRunner().invoke(app, ["toolcalls", "--resume", str(run_dir)])
    assert old.exit_code == 2 and "resume it with --config FILE" in old.output, old.output
    (tmp_path / "c.yaml").write_text(textwrap.dedent(GOOD))
    given = CliRunner().invoke(app, ["toolcalls", "--resume", str(run_dir), "-c",
                                     str(tmp_path / "c.yaml")])  # fmt: skip
    assert given.exit_code == 0, given.output


def test_a_token_budget_stops_the_runs_then_a_resume_goes_on(tmp_path: Path) -> None:
    from helios.testing.mock_llm import MockLLMServer

    script = {"scenarios": [{"match": "flight", "turns": [{"tool_calls": [
        {"name": "book_flight", "arguments": {"to_city": "LA"}}]}]}]}  # fmt: skip
    with MockLLMServer(script=script) as server:
        config = f"""
        synthesizer: null
        max_concurrency: 1
        agent:
          name: model
          params:
            model: openai-compatible/scripted
            base_url: {server.openai_base_url}
            tools:
              - name: book_flight
                parameters: {{type: object, properties: {{to_city: {{type: string}}}}}}
        tests:
          - id: flight
            prompt: Book a flight to LA
            expect: [{{name: book_flight, arguments: {{to_city: LA}}}}]
            runs: 6
        """
        code, out = _invoke(tmp_path, config, "--output", str(tmp_path / "out"),
                            "--max-total-tokens", "1")  # fmt: skip
        assert code == 3, out  # the budget stopped it: its own exit code
        assert "stopped by a budget" in out and "--max-total-tokens" in out
        assert server.stats["served_ok"] == 1  # one run at a time: the first one's spend
        (run_dir,) = (tmp_path / "out").iterdir()
        summary = json.loads((run_dir / "toolcalls_summary.json").read_text())
        assert summary["budget"]["stopped_by"] == "max_tokens" and summary["passed_count"] == 1
        result = CliRunner().invoke(app, ["toolcalls", "--resume", str(run_dir),
                                          "--max-total-tokens", "1000000"])  # fmt: skip
        assert result.exit_code == 0, result.output
        assert server.stats["served_ok"] == 6  # the five left, none twice
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == len({json.loads(line)["trial_id"] for line in lines}) == 6


def test_a_cost_budget_without_the_models_price_is_one_line(tmp_path: Path) -> None:
    config = """
    synthesizer: null
    agent:
      name: model
      params: {model: openai-compatible/unpriced, base_url: "http://127.0.0.1:9/v1"}
    tests:
      - {id: one, prompt: "book now", expect: [{name: book}]}
    """
    code, out = _invoke(tmp_path, config, "--max-cost", "1")
    assert code == 2 and "--max-cost needs the price" in out and "unpriced" in out, out
    assert len(out.strip().splitlines()) == 1
