"""Screenshots in trajectories: ATIF v1.6 content parts that reference image files
(each written once, by content hash, beside trajectory.json), never base64 in JSON;
text-only trajectories unchanged (v1.5, byte for byte); ShareGPT rows unbroken."""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from helios.models.base import ImageRef, Message, ToolCall
from helios.trajectories import (
    ATIF_MULTIMODAL_VERSION,
    ATIF_VERSION,
    TrajectoryRecorder,
    image_part,
    load_schema,
    text_part,
    validate_trajectory,
)
from helios.trajectories.atif_writer import conversation_to_atif, write_atif
from helios.trajectories.images import write_images
from helios.trajectories.sharegpt import to_sharegpt
from helios.usage import Usage

from .computer_fakes import png, sha

GOLDEN = Path(__file__).parent / "fixtures" / "atif_text_only_v1_5.json"
META: dict[str, Any] = {
    "session_id": "s-1", "agent_name": "helios-tool", "agent_version": "1.0",
    "model_name": "p/m-1",
    "tool_definitions": [{"type": "function", "function": {
        "name": "bash", "description": "run", "parameters": {"type": "object"}}}],
}  # fmt: skip
#: base64 of 40 characters or more: what an inlined image would look like
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")


def text_conversation() -> list[Message]:
    t = 1_700_000_000.0
    usage = Usage(input_tokens=90, output_tokens=12, cache_read_tokens=10, cost_usd=0.001)
    return [
        Message("system", "You are careful.", created=t),
        Message("user", "List the files. ünïcode", created=t + 1),
        Message("assistant", "Let me look.", tool_calls=[ToolCall("c1", "bash", {"command": "ls"})],
                reasoning="first, look", usage=usage, model="m-1", created=t + 2),
        Message("tool", "a.txt\nb.txt\n", tool_call_id="c1", created=t + 3),
        Message("assistant", "Two files.", usage=Usage(input_tokens=120, output_tokens=4),
                model="m-1", created=t + 4),
    ]  # fmt: skip


def gui_conversation() -> list[Message]:
    """A computer-use run: the same screen twice (one file), then a new one."""
    first, same, other = ImageRef.of(png(1)), ImageRef.of(png(1)), ImageRef.of(png(2))
    click = ToolCall("k1", "computer", {"action": "left_click", "coordinate": [10, 20]})
    look = ToolCall("k2", "computer", {"action": "screenshot"})
    return [
        Message("system", "You operate a computer."),
        Message("user", "Open the page.", images=[first]),
        Message("assistant", "", tool_calls=[click], usage=Usage(input_tokens=5)),
        Message("tool", "", tool_call_id="k1", images=[same]),
        Message("assistant", "Looking again.", tool_calls=[look], usage=Usage(input_tokens=6)),
        Message("tool", "done", tool_call_id="k2", images=[other]),
        Message("assistant", "The page is open.", usage=Usage(input_tokens=7)),
    ]


def _json_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.json")]


def test_text_only_trajectories_are_unchanged_v1_5(tmp_path: Path) -> None:
    out = tmp_path / "agent" / "trajectory.json"
    write_atif(out, text_conversation(), **META)
    # written by the writer before images existed (git archive of that commit)
    assert out.read_bytes() == GOLDEN.read_bytes()
    assert json.loads(out.read_text())["schema_version"] == ATIF_VERSION == "ATIF-v1.5"
    assert not (tmp_path / "agent" / "images").exists()


def test_screenshots_become_image_files_referenced_by_path(tmp_path: Path) -> None:
    out = tmp_path / "trial" / "agent" / "trajectory.json"
    write_atif(out, gui_conversation(), **META)
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == ATIF_MULTIMODAL_VERSION == "ATIF-v1.6"
    assert validate_trajectory(doc) == []
    images = sorted(p.name for p in (out.parent / "images").iterdir())
    assert images == sorted({f"{sha(png(1))}.png", f"{sha(png(2))}.png"})  # deduplicated
    user = doc["steps"][1]["message"]
    assert user == [
        {"type": "text", "text": "Open the page."},
        {"type": "image", "source": {"media_type": "image/png",
                                     "path": f"images/{sha(png(1))}.png"}},
    ]  # fmt: skip
    first_result = doc["steps"][2]["observation"]["results"][0]
    assert first_result["content"] == [user[1]]  # no empty text part
    assert doc["steps"][2]["message"] == ""  # an agent step without images stays a string
    for step in doc["steps"]:
        for part in _parts(step):
            if part["type"] == "image":
                path = part["source"]["path"]
                assert not Path(path).is_absolute() and ".." not in path
                assert (out.parent / path).read_bytes() in (png(1), png(2))


def _parts(step: dict[str, Any]) -> list[dict[str, Any]]:
    parts = step["message"] if isinstance(step["message"], list) else []
    for result in (step.get("observation") or {}).get("results", []):
        if isinstance(result.get("content"), list):
            parts += result["content"]
    return parts


def test_no_base64_in_any_json_file_of_the_trial(tmp_path: Path) -> None:
    out = tmp_path / "trial" / "agent" / "trajectory.json"
    write_atif(out, gui_conversation(), **META)
    encoded = [base64.b64encode(png(n)).decode() for n in (1, 2)]
    for path in _json_files(tmp_path / "trial"):
        text = path.read_text()
        assert "data:" not in text and not any(e[:40] in text for e in encoded), path
        assert BASE64_RUN.findall(text.replace(sha(png(1)), "").replace(sha(png(2)), "")) == []


def test_images_are_written_once(tmp_path: Path) -> None:
    images = [ImageRef.of(png(n % 2)) for n in range(6)]
    assert write_images(tmp_path, images) == 2
    stamp = {p: p.stat().st_mtime_ns for p in (tmp_path / "images").iterdir()}
    assert write_images(tmp_path, images) == 0  # a rewrite of the trajectory: nothing new
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "images").iterdir()} == stamp
    assert not [p for p in (tmp_path / "images").iterdir() if p.name.startswith(".")]


def test_an_image_of_a_type_atif_has_no_place_for_is_left_out_in_words(tmp_path: Path) -> None:
    odd = ImageRef.of(b"BM....", media_type="image/bmp")
    doc = conversation_to_atif([Message("user", "see", images=[odd])], **META)
    assert doc["steps"][0]["message"][1] == text_part("[an image of type image/bmp was left out]")
    assert validate_trajectory(doc) == []
    write_atif(tmp_path / "t.json", [Message("user", "see", images=[odd])], **META)
    assert not (tmp_path / "images").exists()


# -- the schema and the validator -----------------------------------------------


@pytest.fixture
def gui_doc() -> dict[str, Any]:
    return conversation_to_atif(gui_conversation(), **META)


INVALID: dict[str, tuple[Any, str]] = {
    "image without source": ({"type": "image"}, "$.steps[1].message[0]"),
    "text part with a source": (
        {"type": "text", "text": "x", "source": {"media_type": "image/png", "path": "a.png"}},
        "$.steps[1].message[0]",
    ),
    "inline data": (image_part("data:image/png;base64,iVBORw0KGgo="), "$.steps[1].message[0]"),
    "unknown media type": (image_part("a.bmp", "image/bmp"), "$.steps[1].message[0]"),
    "unknown part type": ({"type": "audio", "text": "x"}, "$.steps[1].message[0]"),
    "extra field": ({"type": "text", "text": "x", "alt": "y"}, "$.steps[1].message[0]"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_bad_content_parts_are_reported(gui_doc: dict[str, Any], case: str) -> None:
    part, where = INVALID[case]
    gui_doc["steps"][1]["message"] = [part]
    problems = validate_trajectory(gui_doc)
    assert any(p.startswith(where) for p in problems), problems


def test_content_parts_need_v1_6(gui_doc: dict[str, Any]) -> None:
    old = copy.deepcopy(gui_doc)
    old["schema_version"] = "ATIF-v1.5"
    problems = validate_trajectory(old)
    assert "$.steps[1].message: content parts need ATIF-v1.6 or later" in problems[0]
    assert any(".observation.results[0].content: content parts need" in p for p in problems)
    text_only = conversation_to_atif(text_conversation(), **META)
    text_only["schema_version"] = "ATIF-v1.6"  # a v1.6 reader reads text as before
    assert validate_trajectory(text_only) == []


def test_harbor_style_documents_validate() -> None:
    """What Harbor's computer-1 writes: parts on an agent step and in observations,
    paths relative or absolute."""
    rec = TrajectoryRecorder(session_id="h", agent_name="computer-1", agent_version="1",
                             model_name=None, tool_definitions=[])  # fmt: skip
    rec.add_user([text_part("Task"), image_part("/logs/agent/screenshot_init.webp", "image/webp")])
    step = rec.add_agent(message=[text_part("clicking")], tool_calls=None)
    assert step == 2
    doc = rec.to_dict()
    assert doc["schema_version"] == "ATIF-v1.6" and validate_trajectory(doc) == []
    schema = load_schema()
    assert "ATIF-v1.6" in schema["properties"]["schema_version"]["enum"]
    assert "v1.6" in schema["title"]


# -- ShareGPT (the datagen door) ---------------------------------------------------


def test_sharegpt_rows_leave_images_out() -> None:
    conversation = gui_conversation()
    rows = to_sharegpt(conversation, prompt="Open the page.", tools=[], setup_messages=1)
    text = json.dumps(rows)
    assert [r["from"] for r in rows] == ["system", "human", "gpt", "tool", "gpt", "tool", "gpt"]
    assert "done" in rows[5]["value"] and "The page is open." in rows[-1]["value"]
    assert sha(png(1)) not in text and base64.b64encode(png(1)).decode()[:40] not in text
