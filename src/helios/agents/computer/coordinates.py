"""Model space ↔ desktop pixels, for every provider, in one place.

- OpenAI and any generic model see screenshots at the desktop's own size and answer
  in its pixels (`native`).
- Anthropic's API downscales an image whose long edge exceeds 1568 px or whose area
  exceeds about 1.15 megapixels, and Claude then answers in the downscaled image's
  pixels. So for a larger desktop Helios sends the screenshot already downscaled to
  `anthropic(geometry).screenshot_size`, declares that size as the display, and maps
  Claude's points back up here (`anthropic`).
- Gemini's computer use answers on a 0–999 grid over the screen, whatever its size
  (`gemini`), mapped to pixels as Google's reference agent does: x·width/1000.

`Scale.to_model` is the inverse, for whatever must place a desktop point in the
model's space (the test model server, which renders scripted clicks per provider).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from helios.environments.desktop.actions import Geometry, Point, Region

#: Anthropic's image limits: longest edge, and total pixels
ANTHROPIC_MAX_EDGE = 1568
ANTHROPIC_MAX_PIXELS = 1_150_000
#: the extent of Gemini's normalized grid (coordinates 0..999)
GEMINI_GRID = 1000


@dataclass(frozen=True, slots=True)
class Scale:
    """A model's coordinate space over one desktop: `width` × `height` units, either
    the pixels of the screenshot the model saw or a normalized `grid`."""

    geometry: Geometry
    width: int
    height: int
    grid: bool = False

    @property
    def screenshot_size(self) -> tuple[int, int]:
        """The size a full screenshot must have when sent to the model."""
        if self.grid:
            return self.geometry.width, self.geometry.height
        return self.width, self.height

    @property
    def identity(self) -> bool:
        return not self.grid and (self.width, self.height) == (
            self.geometry.width, self.geometry.height)  # fmt: skip

    def _axis(self, value: float, model: int, desktop: int) -> int:
        if self.grid:
            return math.floor(value * desktop / model)
        # the centre of the model's pixel, in desktop pixels
        return math.floor((value + 0.5) * desktop / model)

    def to_desktop(self, x: float, y: float) -> Point:
        """A model point as a desktop pixel, clamped to the screen. Raises ValueError
        for a value that is not a finite number."""
        if not (_finite(x) and _finite(y)):
            raise ValueError(f"coordinates must be finite numbers, not ({x!r}, {y!r})")
        if self.identity:
            return self.geometry.clamp((int(x), int(y)))
        point = (self._axis(x, self.width, self.geometry.width),
                 self._axis(y, self.height, self.geometry.height))  # fmt: skip
        return self.geometry.clamp(point)

    def to_model(self, point: Point) -> tuple[int, int]:
        """A desktop pixel in the model's space (the inverse of `to_desktop`, to the
        pixel where the model's space is at least as fine as the desktop's)."""
        x, y = point
        geometry = self.geometry
        if self.grid:
            gx = round((x + 0.5) * GEMINI_GRID / geometry.width)
            gy = round((y + 0.5) * GEMINI_GRID / geometry.height)
            return min(max(gx, 0), GEMINI_GRID - 1), min(max(gy, 0), GEMINI_GRID - 1)
        mx = math.floor((x + 0.5) * self.width / geometry.width)
        my = math.floor((y + 0.5) * self.height / geometry.height)
        return min(max(mx, 0), self.width - 1), min(max(my, 0), self.height - 1)

    def region_to_desktop(self, x0: float, y0: float, x1: float, y1: float) -> Region:
        """A model region (two corners, in any order; the far edges excluded) as a
        desktop region x0, y0, x1, y1 (x1, y1 excluded), at least one pixel each way."""
        if not all(_finite(v) for v in (x0, y0, x1, y1)):
            raise ValueError("a region must be four finite numbers")
        left, right = self._span(min(x0, x1), max(x0, x1), self.width, self.geometry.width)
        top, bottom = self._span(min(y0, y1), max(y0, y1), self.height, self.geometry.height)
        return left, top, right, bottom

    @staticmethod
    def _span(low: float, high: float, model: int, desktop: int) -> tuple[int, int]:
        # Edges, not pixels: edge e of the model's space is at e·desktop/model.
        start = min(max(math.floor(low * desktop / model), 0), desktop - 1)
        end = min(max(math.ceil(high * desktop / model), start + 1), desktop)
        return start, end

    def length_to_desktop(self, value: float, *, vertical: bool) -> int:
        """A distance along one axis (Gemini's scroll magnitude) in desktop pixels."""
        if not _finite(value):
            raise ValueError(f"a distance must be a finite number, not {value!r}")
        desktop = self.geometry.height if vertical else self.geometry.width
        model = self.height if vertical else self.width
        return round(abs(value) * desktop / model)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def native(geometry: Geometry) -> Scale:
    """The desktop's own pixels (OpenAI, generic models)."""
    return Scale(geometry, geometry.width, geometry.height)


def anthropic(geometry: Geometry) -> Scale:
    """The pixels of the screenshot Claude sees: the desktop's, downscaled to fit
    Anthropic's limits when it is larger."""
    width, height = geometry.width, geometry.height
    factor = min(1.0, ANTHROPIC_MAX_EDGE / max(width, height),
                 math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)))  # fmt: skip
    if factor >= 1.0:
        return native(geometry)
    return Scale(geometry, max(1, math.floor(width * factor)), max(1, math.floor(height * factor)))


def gemini(geometry: Geometry) -> Scale:
    """Gemini's 0–999 grid over the screen."""
    return Scale(geometry, GEMINI_GRID, GEMINI_GRID, grid=True)
