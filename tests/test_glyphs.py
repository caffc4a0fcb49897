"""The scripted model server's reader: text cut into characters and matched with
glyphs it renders itself; a done step's `{read}` is what it reads in the last image."""

from __future__ import annotations

import base64
import io

import pytest

from helios.testing.glyphs import FONT_PATHS, GlyphError, read_text
from helios.testing.mock_gui import GuiStep, ScriptError, fill_answer

Image = pytest.importorskip("PIL.Image")
ImageDraw = pytest.importorskip("PIL.ImageDraw")
ImageFont = pytest.importorskip("PIL.ImageFont")


def _png(text: str, size: int = 11, border: tuple[int, int, int] | None = (0, 137, 123)) -> bytes:
    """`text` in small print, spaced out, on white inside a coloured border."""
    path = next((p for p in FONT_PATHS if p.is_file()), None)
    if path is None:
        pytest.skip("no DejaVu Sans Mono here")
    font = ImageFont.truetype(str(path), size)
    image = Image.new("RGB", (130, 54), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    if border is not None:
        draw.rectangle((0, 0, 129, 53), outline=border, width=5)
    x = 40
    for char in text:
        draw.text((x, 20), char, fill=(0, 0, 0), font=font)
        x += int(font.getlength(char)) + 3
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@pytest.mark.parametrize("code", ["Z7KQ", "A1B2", "M0W9", "XY34"])
def test_a_small_code_is_read(code: str) -> None:
    assert read_text(_png(code)) == code


def test_a_done_answer_reads_the_last_image() -> None:
    step = GuiStep("done", answer="PASS CODE: {read}")
    image = base64.b64encode(_png("Z7KQ")).decode()
    assert fill_answer(step, image) == "PASS CODE: Z7KQ"
    assert fill_answer(GuiStep("done", answer="plain"), None) == "plain"
    with pytest.raises(ScriptError, match="carries none"):
        fill_answer(step, None)
    blank = Image.new("RGB", (20, 20), (255, 255, 255))
    out = io.BytesIO()
    blank.save(out, format="PNG")
    with pytest.raises(GlyphError, match="no text"):
        read_text(out.getvalue())
