"""A small PNG reader for the desktop tests: the size, a pixel's colour and where a
colour is (ImageMagick writes 8-bit grey, RGB, RGBA and palette PNGs, palettes also
at 1, 2 or 4 bits). Decoded by Pillow (a dev dependency, C): this module's own
decoder, in Python, took 1.1 s of CPU for a 1024x768 screen, and the desktop tests
read dozens; it stays as the reader of what Pillow is not there for."""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import dataclass

MAGIC = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


@dataclass
class Image:
    width: int
    height: int
    #: rows of (r, g, b) tuples
    rows: list[list[tuple[int, int, int]]]

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        return self.rows[y][x]

    def colours(self) -> set[tuple[int, int, int]]:
        return {p for row in self.rows for p in row}

    def box(self, colour: tuple[int, int, int]) -> tuple[int, int, int, int] | None:
        """The bounding box (x0, y0, x1, y1, x1/y1 excluded) of `colour`'s pixels."""
        xs: list[int] = []
        ys: list[int] = []
        for y, row in enumerate(self.rows):
            hits = [x for x, p in enumerate(row) if p == colour]
            if hits:
                xs += [hits[0], hits[-1]]
                ys.append(y)
        if not xs:
            return None
        return min(xs), min(ys), max(xs) + 1, max(ys) + 1

    def centre(self, colour: tuple[int, int, int]) -> tuple[int, int] | None:
        box = self.box(colour)
        return None if box is None else ((box[0] + box[2]) // 2, (box[1] + box[3]) // 2)


def read_png(data: bytes) -> Image:
    if not data.startswith(MAGIC):
        raise ValueError("not a PNG")
    try:
        from PIL import Image as Pillow
    except ImportError:  # pragma: no cover - a dev dependency
        return _read_png(data)
    with Pillow.open(io.BytesIO(data)) as image:
        if image.format != "PNG":
            raise ValueError("not a PNG")
        rgb = image.convert("RGB")
    width, height = rgb.size
    raw = rgb.tobytes()
    pixels = list(zip(raw[0::3], raw[1::3], raw[2::3], strict=True))
    return Image(width, height, [pixels[y * width : (y + 1) * width] for y in range(height)])


def _read_png(data: bytes) -> Image:
    pos, chunks, palette = len(MAGIC), [], b""
    width = height = depth = kind = interlace = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        name, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if name == b"IHDR":
            width, height, depth, kind, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif name == b"PLTE":
            palette = body
        elif name == b"IDAT":
            chunks.append(body)
        elif name == b"IEND":
            break
    if interlace:
        raise ValueError("interlaced PNGs are not read here")
    raw = zlib.decompress(b"".join(chunks))
    samples = _CHANNELS[kind]
    stride = (width * samples * depth + 7) // 8
    step = max(1, samples * depth // 8)
    rows: list[list[tuple[int, int, int]]] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), previous, step)
        rows.append(_pixels(line, width, depth, kind, palette))
        previous = line
    return Image(width, height, rows)


def _unfilter(kind: int, line: bytearray, prev: bytearray, step: int) -> bytearray:
    for i in range(len(line)):
        left = line[i - step] if i >= step else 0
        up = prev[i]
        corner = prev[i - step] if i >= step else 0
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            line[i] = (line[i] + best) & 0xFF
    return line


def _pixels(line: bytearray, width: int, depth: int, kind: int, palette: bytes
            ) -> list[tuple[int, int, int]]:  # fmt: skip
    if kind == 3:
        per_byte = 8 // depth
        mask = (1 << depth) - 1
        out = []
        for x in range(width):
            byte = line[x // per_byte]
            index = (byte >> (8 - depth * (x % per_byte + 1))) & mask
            out.append((palette[3 * index], palette[3 * index + 1], palette[3 * index + 2]))
        return out
    if depth != 8:
        raise ValueError(f"bit depth {depth} is not read here")
    n = _CHANNELS[kind]
    if kind in (0, 4):
        return [(line[x * n],) * 3 for x in range(width)]  # type: ignore[misc]
    return [(line[x * n], line[x * n + 1], line[x * n + 2]) for x in range(width)]
