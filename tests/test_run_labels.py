"""Named and tagged runs (`--name`, `--tag key=value`) on every door that keeps a run
folder, and `helios run` taking batch's options (-q, --retry-errors, --force,
--fail-under): run.json, the folder's name, resume, and bad labels refused in one line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from helios.engine.labels import (
    MAX_NAME,
    RunLabels,
    check_name,
    labels_of,
    parse_tag,
    read_labels,
)
from helios.errors import ConfigError
from helios.tasks.settings import TaskBatchSettings

from .cli_inprocess import helios_inprocess
from .conftest import TaskMaker

HTML = "<img src=x onerror=alert(1)>"
#: the verifier of the tasks below: passes when the agent wrote /app/out.txt
CHECK = (
    "[ -f /app/out.txt ] && echo 1 > /logs/verifier/reward.txt "
    "|| echo 0 > /logs/verifier/reward.txt\n"
)


def test_labels_are_checked_one_line_each() -> None:
    labels = labels_of("nightly  gpt/5 ✓", ["git=abc123", "team=evals", f"html={HTML}",
                                            "git=def456", "empty="])  # fmt: skip
    assert labels.name == "nightly  gpt/5 ✓"
    # the last value of a key wins; HTML is printable, so it is kept as text
    assert labels.tags == {"git": "def456", "team": "evals", "html": HTML, "empty": ""}
    assert labels.recorded() == {"name": labels.name, "tags": dict(labels.tags)}
    assert labels.folder_stem() == "nightly-gpt-5"
    assert RunLabels().recorded() == {} and not RunLabels()
    assert RunLabels(name="../..").folder_stem() is None  # nothing safe left: the prefix
    bad = {
        "x" * (MAX_NAME + 1): "at most 100 characters",
        "   ": "cannot be empty",
        "a\x1b[31mred": "printable",
        "two\nlines": "printable",
        "bidi\u202eevil": "printable",
    }
    for name, why in bad.items():
        with pytest.raises(ConfigError, match=why) as raised:
            check_name(name)
        assert "\n" not in str(raised.value)
    for tag, why in {"novalue": "key=value", "1st=x": "identifier", "a b=x": "identifier",
                     "k=\x1b]0;title\x07": "printable", "k=" + "v" * 201: "at most 200",
                     "x" * 65 + "=v": "identifier"}.items():  # fmt: skip
        with pytest.raises(ConfigError, match=why):
            parse_tag(tag)
    with pytest.raises(ConfigError, match="at most 32 tags"):
        labels_of(None, [f"k{i}=v" for i in range(33)])
    # the Python API's settings are checked the same way
    with pytest.raises(ConfigError, match="printable"):
        TaskBatchSettings(labels=RunLabels(name="ok", tags={"k": "\x07"}))
    assert TaskBatchSettings(labels=RunLabels(tags={"k": "v"})).labels.tags == {"k": "v"}


def test_read_labels_of_a_hostile_run_json_degrades_to_one_line_each() -> None:
    labels, problems = read_labels({"name": 7, "tags": ["a", "b"]})
    assert labels == RunLabels() and len(problems) == 2
    assert "field name: expected a string, got int" in problems[0]
    assert "field tags: expected an object, got list" in problems[1]
    labels, problems = read_labels({"name": "n" * 5000, "tags": {"ok": "v", "bad": {"x": 1}}})
    assert labels.name == "n" * MAX_NAME and labels.tags == {"ok": "v"}
    assert problems == ["field tags: 1 tag(s) not a string (or past 32); ignored"]


def _meta(run_dir: Path) -> dict[str, object]:
    return json.loads((run_dir / "run.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.usefixtures("need_bwrap")
def test_helios_run_takes_batch_options_and_labels(tmp_path: Path, make_task: TaskMaker) -> None:
    task = make_task("hello", solve="echo hi > /app/out.txt\n", test=CHECK)
    result = helios_inprocess(
        "run", str(task), "--provider", "local", "--agent", "oracle", "-o", "out", "-q",
        "--fail-under", "1.0", "--name", "nightly <b>α</b>", "--tag", "git=abc",
        "--tag", f"html={HTML}", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    assert run_dir.name.startswith("nightly-b-b_")  # the name names the folder
    meta = _meta(run_dir)
    assert meta["name"] == "nightly <b>α</b>" and meta["tags"] == {"git": "abc", "html": HTML}
    assert "[Result]" not in result.stdout  # -q: no trial lines
    # --fail-under: the nop agent fails the task, exit 1 with the reason
    failing = helios_inprocess(
        "run", str(task), "--provider", "local", "--agent", "nop", "-o", "nop", "-q",
        "--fail-under", "0.5", cwd=tmp_path,
    )  # fmt: skip
    assert failing.returncode == 1 and "below --fail-under" in failing.stderr
    (nop_dir,) = (tmp_path / "nop").iterdir()
    assert nop_dir.name.startswith("run_") and "name" not in _meta(nop_dir)
    # a resume keeps the labels (they are no part of the run's identity) and takes
    # --retry-errors and --force; one that names a tag again replaces that tag only
    again = helios_inprocess("run", "--resume", str(run_dir), "--retry-errors", "--force",
                             "-q", "--tag", "git=def", cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    meta = _meta(run_dir)
    assert meta["name"] == "nightly <b>α</b>" and meta["tags"] == {"git": "def", "html": HTML}
    assert [p.name for p in (tmp_path / "out").iterdir()] == [run_dir.name]


@pytest.mark.usefixtures("need_bwrap")
def test_batch_names_its_folder_and_resume_keeps_the_labels(
    tmp_path: Path, make_task: TaskMaker
) -> None:
    make_task("one", solve="echo hi > /app/out.txt\n", test=CHECK)
    tasks = tmp_path / "tasks"
    result = helios_inprocess(
        "batch", str(tasks), "--provider", "local", "--agent", "oracle", "-o", "out", "-q",
        "--name", "exp 1", "--tag", "model_family=gpt", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    assert run_dir.name.startswith("exp-1_")
    resumed = helios_inprocess("batch", "--resume", str(run_dir), "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    meta = _meta(run_dir)
    assert meta["name"] == "exp 1" and meta["tags"] == {"model_family": "gpt"}


@pytest.mark.parametrize(
    "args",
    [
        ("batch", "tasks", "--agent", "nop", "--tag", "a=\x1b[2J"),
        ("run", "tasks", "--agent", "nop", "--name", "x" * 10_000),
        ("generate", "--dataset_file=p.jsonl", "--batch_size=1", "--run_name=r", "--tag", "9=x"),
        ("toolcalls", "--config", "c.yaml", "--tag", "novalue"),
    ],
    ids=["batch", "run", "generate", "toolcalls"],
)
def test_bad_labels_exit_2_with_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "task.toml").write_text("")  # the labels are what is refused
    result = helios_inprocess(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "tag" in lines[0] or "name" in lines[0]
    assert "\x1b" not in result.stderr and "Traceback" not in result.stderr


AGENTS = """
from helios import toolcalls

class Synth:
    async def synthesize(self, text):
        return toolcalls.Audio(data=b"\\x00" * 480, format="pcm", transcript=text)

@toolcalls.agent
async def echo(audio):
    return [{"name": (audio.transcript or "").split()[0]}]
"""
CONFIG = """
synthesizer: {name: "label_agents:Synth"}
agent: label_agents:echo
tests:
  - id: one
    prompt: "book now"
    expect: [{name: book}]
"""


def test_toolcalls_output_keeps_name_and_tags(tmp_path: Path) -> None:
    (tmp_path / "label_agents.py").write_text(AGENTS)
    (tmp_path / "c.yaml").write_text(textwrap.dedent(CONFIG))
    result = helios_inprocess("toolcalls", "--config", "c.yaml", "-o", "out", "--name",
                              "voice smoke", "--tag", "stage=ci", cwd=tmp_path,
                              env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    assert run_dir.name.startswith("voice-smoke_")
    meta = _meta(run_dir)
    assert meta["name"] == "voice smoke" and meta["tags"] == {"stage": "ci"}
