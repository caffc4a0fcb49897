"""Screenshots for the scripted model server: small synthetic PNGs, and finding a
colour in a screenshot.

Decoding uses Pillow (a dev dependency, imported on first use): screenshots from
Xvfb come as RGB, RGBA or palette PNGs of any bit depth, and a pure-Python
decoder's per-byte unfiltering takes about a second for one 1024×768 screen, which
would make the test server the slowest part of every GUI test. Pillow decodes and
masks a screen in a few milliseconds. Making a PNG needs no library (`make_png`).
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: x0, y0, x1, y1 (x1, y1 excluded)
Box = tuple[int, int, int, int]
Rgb = tuple[int, int, int]


class ScreenError(ValueError):
    """A screenshot that cannot be read, or a colour that is not on it."""


def parse_color(value: object) -> Rgb:
    """ "#e53935", "e53935" or [229, 57, 53] as an RGB triple."""
    if isinstance(value, str):
        text = value.strip().removeprefix("#")
        if len(text) == 6:
            try:
                return int(text[0:2], 16), int(text[2:4], 16), int(text[4:6], 16)
            except ValueError:
                pass
    elif (
        isinstance(value, list | tuple)
        and len(value) == 3
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255 for v in value)
    ):
        return value[0], value[1], value[2]
    raise ValueError(f"a colour is '#rrggbb' or [r, g, b], not {value!r}")


def make_png(
    width: int, height: int, background: object = "#ffffff",
    rects: Iterable[tuple[Box, object]] = (),
) -> bytes:  # fmt: skip
    """An RGB PNG of `background` with filled rectangles (box, colour) drawn in order."""
    if width < 1 or height < 1:
        raise ValueError("a PNG is at least 1x1")
    rows = [bytearray(bytes(parse_color(background)) * width) for _ in range(height)]
    for (x0, y0, x1, y1), color in rects:
        x0, x1 = max(0, x0), min(width, x1)
        run = bytes(parse_color(color)) * max(0, x1 - x0)
        for y in range(max(0, y0), min(height, y1)):
            rows[y][x0 * 3 : x1 * 3] = run
    raw = b"".join(b"\x00" + bytes(row) for row in rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6))
            + chunk(b"IEND", b""))  # fmt: skip


def png_size(data: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its header (no decoding)."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ScreenError("the screenshot is not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


@dataclass
class Screen:
    """One screenshot, decoded on first use."""

    data: bytes
    _image: Any = None

    @property
    def size(self) -> tuple[int, int]:
        return png_size(self.data)

    def _rgb(self) -> Any:
        if self._image is None:
            try:
                from PIL import Image
            except ImportError:  # pragma: no cover - dev dependency
                raise ScreenError(
                    "finding colours in screenshots needs Pillow (pip install pillow)"
                ) from None
            try:
                with Image.open(io.BytesIO(self.data)) as image:
                    self._image = image.convert("RGB")
            except (OSError, ValueError, Image.DecompressionBombError) as exc:
                raise ScreenError(f"the screenshot cannot be decoded: {exc}") from None
        return self._image

    def find(self, color: Rgb, tolerance: int = 0) -> Box | None:
        """The bounding box of the pixels within `tolerance` of `color` (per channel),
        or None if there are none."""
        from PIL import ImageChops

        bands = self._rgb().split()
        masks = [
            band.point([255 if abs(v - c) <= tolerance else 0 for v in range(256)])
            for band, c in zip(bands, color, strict=True)
        ]
        mask = ImageChops.multiply(ImageChops.multiply(masks[0], masks[1]), masks[2])
        box = mask.getbbox()
        return None if box is None else (box[0], box[1], box[2], box[3])
