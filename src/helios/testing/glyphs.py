"""Reading short text in a screenshot by matching glyphs the reader renders itself:
the scripted model server's "eyes" for a code printed small on a page.

The text's pixels are the dark, grey ones (anti-aliased black on a light ground; a
coloured border is not text). They are cut into characters at the empty columns
between them, and each character is compared with every character of the alphabet
rendered by Pillow in the same font, scaled to the character's own box: the least
squared difference wins. Pillow is needed (it is in the `dev` extra); the font is
DejaVu Sans Mono where it is installed, else Pillow's own.
"""

from __future__ import annotations

import io
import string
from functools import cache
from pathlib import Path
from typing import Any

#: where the font a page's monospace text is shown in is looked for
FONT_PATHS = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"),
    Path("/usr/share/fonts/TTF/DejaVuSansMono.ttf"),
)
ALPHABET = string.ascii_uppercase + string.digits
#: a pixel is text when it is this dark (0-255) and this grey (channel spread)
DARK, GREY = 150, 48


class GlyphError(ValueError):
    """The image holds no text this reader can cut into characters."""


def _pil() -> Any:
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError as exc:  # pragma: no cover - Pillow is in the dev extra
        raise GlyphError("reading text needs Pillow (pip install pillow)") from exc
    return Image, ImageDraw, ImageFont


@cache
def _glyph(char: str) -> Any:
    """`char` rendered large (white on black: its darkness), cropped to its ink."""
    image_mod, draw_mod, font_mod = _pil()
    path = next((p for p in FONT_PATHS if p.is_file()), None)
    font = font_mod.truetype(str(path), 64) if path else font_mod.load_default(size=64)
    canvas = image_mod.new("L", (96, 96), 0)
    draw_mod.Draw(canvas).text((8, 4), char, fill=255, font=font)
    box = canvas.getbbox()
    if box is None:
        raise GlyphError(f"the font has no ink for {char!r}")
    return canvas.crop(box)


def read_text(png: bytes, alphabet: str = ALPHABET) -> str:
    """The characters of `alphabet` written in `png`, left to right."""
    image_mod, _, _ = _pil()
    rgb = image_mod.open(io.BytesIO(png)).convert("RGB")
    width, height = rgb.size
    pixels = rgb.load()
    ink = image_mod.new("L", (width, height), 0)
    dots = ink.load()
    for y in range(height):
        for x in range(width):
            r, g, b = pixels[x, y]
            if max(r, g, b) - min(r, g, b) <= GREY and (r + g + b) // 3 <= DARK:
                dots[x, y] = 255 - (r + g + b) // 3
    columns = [any(dots[x, y] for y in range(height)) for x in range(width)]
    spans: list[tuple[int, int]] = []
    for x, inked in enumerate(columns):
        if inked and (not spans or spans[-1][1] != x):
            spans.append((x, x + 1))
        elif inked:
            spans[-1] = (spans[-1][0], x + 1)
    if not spans:
        raise GlyphError("no text in the image")
    text = ""
    for x0, x1 in spans:
        piece = ink.crop((x0, 0, x1, height))
        box = piece.getbbox()
        if box is None:
            continue
        piece = piece.crop(box)
        text += min(alphabet, key=lambda c: _distance(piece, _glyph(c)))
    return text


def _distance(piece: Any, glyph: Any) -> float:
    """Squared difference of `piece` and `glyph` scaled to a common box (12x16),
    plus a penalty for a different shape of box (an I against an M)."""
    size = (12, 16)
    a = piece.resize(size).tobytes()
    b = glyph.resize(size).tobytes()
    shape = abs(piece.width / piece.height - glyph.width / glyph.height)
    return float(sum((p - q) ** 2 for p, q in zip(a, b, strict=True)) / 65025 + 40 * shape)
