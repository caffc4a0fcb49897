"""A desktop inside the task's own sandbox: Harbor's computer-1 contract.

`Desktop.start` brings up, as sandbox *services* (Helios's processes, not the
agent's: `Environment.start_service`), `Xvfb :1` at the geometry, then a window
manager if the image has one (xfwm4, openbox, …), then Chromium when the image has
it. Readiness is checked, never slept for: the X socket and `xdpyinfo`, the window
manager's EWMH check (`wmctrl -m`), a browser window in `wmctrl -l`. A second
`start` in the same sandbox (the computer agent after the task's own desktop hook)
attaches to the running desktop instead.

Every action is a command through the sandbox's `exec` with `DISPLAY=:1`: xdotool
for input (`xdotool.py`), ImageMagick's `import` (else `scrot`, else `xwd` and
`convert`) for screenshots, returned as PNG bytes (base64 on the command's stdout:
one round trip). The final answer goes to /logs/agent/final_answer.txt.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import shlex
import time
from dataclasses import dataclass, replace

from helios.environments.base import Environment, ExecResult
from helios.environments.desktop.actions import Action, ActionResult, Geometry, Region
from helios.environments.desktop.capture import capture_command
from helios.environments.desktop.services import SERVICE_BROWSER, SERVICE_WM, SERVICE_X
from helios.environments.desktop.xdotool import input_commands, navigate_commands
from helios.errors import EnvironmentUnhealthy

DISPLAY = ":1"
X_SOCKET = "/tmp/.X11-unix/X1"
#: the services (`services.py`: `start_service`) log to /logs/helios/services/<name>.log
#: the browser's profile and the desktop's scratch files
RUNTIME_DIR = "/tmp/helios-desktop"
FINAL_ANSWER = "/logs/agent/final_answer.txt"
SERVICE_LOGS = "/logs/helios/services"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: window managers tried in this order (Harbor's images have xfwm4)
WINDOW_MANAGERS = ("xfwm4", "openbox", "fluxbox", "icewm", "matchbox-window-manager")
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Harbor's computer-1 flags, less its debugging port, plus background traffic off,
#: and the address bar's popup drawn natively: as a WebUI page (Chromium 13x on) it is
#: a renderer of its own, preloaded after start, about 1.4 s of CPU per desktop (the
#: suite starts dozens) for a popup no agent needs drawn as a web page
BROWSER_FLAGS = (
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--ignore-certificate-errors",
    "--no-first-run", "--no-default-browser-check", "--disable-default-apps",
    "--disable-extensions", "--disable-dev-tools", "--disable-infobars", "--test-type",
    "--disable-features=IsolateOrigins,site-per-process,AutomationControlled,HttpsUpgrades,"
    "Translate,MediaRouter,OptimizationHints,WebUIOmniboxPopup,WebUIOmniboxFullPopup,"
    "WebUIOmniboxAimPopup",
    "--disable-blink-features=AutomationControlled",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-breakpad", "--disable-session-crashed-bubble", "--hide-crash-restore-bubble",
    "--noerrdialogs", "--password-store=basic", "--use-mock-keychain",
    "--force-device-scale-factor=1", "--force-color-profile=srgb",
    "--renderer-process-limit=4", "--lang=en-US",
)  # fmt: skip
#: seconds a readiness condition may take on a loaded machine
READY_TIMEOUT = 60.0
#: seconds the browser's window may take to get the input focus
FOCUS_TIMEOUT = 10.0
#: seconds one action may take (a long `type` included)
ACTION_TIMEOUT = 60.0
#: the longest `wait` action, in seconds
MAX_WAIT = 60.0
#: bash output kept for the model
BASH_OUTPUT = 8192
#: polls of a readiness condition per command (20 ms apart: about a second)
_SLICE = 50


class DesktopUnavailable(EnvironmentUnhealthy):
    """The desktop could not be brought up in the sandbox (no Xvfb in the image,
    a service that died, a condition past its deadline): infrastructure, not the
    agent's doing."""

    kind = "DesktopUnavailable"


@dataclass(frozen=True)
class DesktopTools:
    """What the sandbox's image has, found by one probe."""

    x_server: str | None = None
    window_manager: str | None = None
    browser: str | None = None
    xdotool: bool = False
    wmctrl: bool = False
    xdpyinfo: bool = False
    #: "import", "scrot" or "xwd" (with convert); None: no screenshots
    capture: str | None = None
    convert: bool = False
    x11vnc: bool = False

    @classmethod
    def parse(cls, text: str) -> DesktopTools:
        found = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

        def first(names: tuple[str, ...]) -> str | None:
            return next((name for name in names if found.get(name)), None)

        capture = first(("import", "scrot"))
        if capture is None and found.get("xwd") and found.get("convert"):
            capture = "xwd"
        return cls(
            x_server="Xvfb" if found.get("Xvfb") else None,
            window_manager=first(WINDOW_MANAGERS),
            browser=first(BROWSERS),
            xdotool=bool(found.get("xdotool")),
            wmctrl=bool(found.get("wmctrl")),
            xdpyinfo=bool(found.get("xdpyinfo")),
            capture=capture,
            convert=bool(found.get("convert")),
            x11vnc=bool(found.get("x11vnc")),
        )


_PROBE_NAMES = ("Xvfb", "xdotool", "wmctrl", "xdpyinfo", "import", "scrot", "xwd", "convert",
                "x11vnc", *WINDOW_MANAGERS, *BROWSERS)  # fmt: skip
_PROBE = "; ".join(f'echo "{n}=$(command -v {n})"' for n in _PROBE_NAMES)
#: holds once the browser's (visible) window has the input focus; each failed check
#: activates and focuses it, so the next one may hold
_FOCUS_BROWSER = (
    "{ wid=$(xdotool search --onlyvisible --class 'chromium|chrome' 2>/dev/null | head -n 1); "
    '[ -n "$wid" ] && [ "$(xdotool getwindowfocus 2>/dev/null)" = "$wid" ] '
    '|| { [ -n "$wid" ] && { timeout 2 xdotool windowactivate --sync "$wid"; '
    'timeout 2 xdotool windowfocus --sync "$wid"; } >/dev/null 2>&1; false; }; }'
)
_X_UP = f"if [ -S {X_SOCKET} ] && xdpyinfo >/dev/null 2>&1; then echo x-up=1; fi"


class Desktop:
    """The desktop of one sandbox: start (or attach), act, look, answer."""

    def __init__(self, env: Environment, geometry: Geometry, tools: DesktopTools) -> None:
        self.env = env
        self.geometry = geometry
        self.tools = tools
        #: the region of the next screenshot (a `zoom` action), then cleared
        self._zoom: Region | None = None
        #: seconds `start` took (benchmarks, the trial's log)
        self.start_seconds = 0.0

    # -- lifecycle -----------------------------------------------------------
    @classmethod
    async def start(
        cls,
        env: Environment,
        geometry: Geometry | None = None,
        *,
        start_url: str | None = None,
        timeout: float = READY_TIMEOUT,
    ) -> Desktop:
        """Bring the desktop up in `env` (or attach to the one running there) and
        return once it is ready. `DesktopUnavailable` when it cannot be."""
        mark = time.monotonic()
        geometry = geometry or Geometry()
        probe = await env.exec(f"{_PROBE}; mkdir -p {RUNTIME_DIR} /logs/agent; {_X_UP}",
                               cwd="/", env={"DISPLAY": DISPLAY}, timeout=timeout)  # fmt: skip
        tools = DesktopTools.parse(probe.stdout)
        # Up already: started by the task's desktop hook (a service), or by the image.
        running = "x-up=1" in probe.stdout or await env.service_running(SERVICE_X)
        if tools.x_server is None and not running:
            raise DesktopUnavailable("the sandbox's image has no Xvfb: it cannot show a desktop")
        desktop = cls(env, geometry, tools)
        if running:
            await desktop._attach(start_url, timeout)
        else:
            await desktop._bring_up(start_url, timeout)
        desktop.start_seconds = time.monotonic() - mark
        return desktop

    async def _bring_up(self, start_url: str | None, timeout: float) -> None:
        g, tools = self.geometry, self.tools
        # -nolisten local: no abstract socket, which a host-network sandbox would share
        await self._service(
            SERVICE_X,
            f"exec Xvfb {DISPLAY} -screen 0 {g.width}x{g.height}x24 -nolisten tcp "
            "-nolisten local -noreset",
        )
        await self._until(SERVICE_X, f"[ -S {X_SOCKET} ] && {self._x_answers()}", timeout)
        if tools.xdotool:
            # The pointer off the page (Xvfb puts it mid-screen): a page that loads, or
            # is moved by the window manager, under it would get pointer events no
            # action made (a hover, a mousemove), depending on the machine's load.
            await self.run("xdotool mousemove 0 0")
        if tools.window_manager is not None:
            await self._service(SERVICE_WM, _window_manager_command(tools.window_manager))
            if tools.wmctrl:
                # The window manager manages the screen before the browser maps its
                # window: a window mapped first may never get the input focus.
                await self._until(SERVICE_WM, "wmctrl -m >/dev/null 2>&1", timeout)
        if tools.browser is not None:
            await self._service(SERVICE_BROWSER, self._browser_command(tools.browser, start_url))
            await self._until(SERVICE_BROWSER, self._browser_window(), timeout)
            await self._fill_screen()
            await self._focus_browser(timeout)

    async def _attach(self, start_url: str | None, timeout: float) -> None:
        """The desktop is up already: check it answers, take its real size, and
        open `start_url` in its browser."""
        await self._until(SERVICE_X, self._x_answers(), timeout)
        if self.tools.xdpyinfo:
            info = await self.run("xdpyinfo | grep -m1 'dimensions:'")
            size = info.stdout.split()[1].split("x") if info.stdout.split()[1:] else []
            if len(size) == 2 and all(part.isdigit() for part in size):
                self.geometry = replace(self.geometry, width=int(size[0]), height=int(size[1]))
        if self.tools.browser is not None and self.tools.xdotool:
            await self._focus_browser(timeout)
        if start_url and self.tools.xdotool:
            await self.execute(Action("navigate", url=start_url))

    def _x_answers(self) -> str:
        # without xdpyinfo, xdotool asking for the screen size proves the same
        if self.tools.xdpyinfo:
            return "xdpyinfo >/dev/null 2>&1"
        return "xdotool getdisplaygeometry >/dev/null 2>&1"

    def _browser_window(self) -> str:
        if self.tools.wmctrl and self.tools.window_manager is not None:
            return "wmctrl -l | grep -qiE 'chromium|chrome'"
        return "xdotool search --onlyvisible --class chromium >/dev/null 2>&1"

    def _browser_command(self, browser: str, start_url: str | None) -> str:
        g = self.geometry
        flags = [
            *BROWSER_FLAGS, f"--user-data-dir={RUNTIME_DIR}/profile",
            "--window-position=0,0", f"--window-size={g.width},{g.height}",
            start_url or "about:blank",
        ]  # fmt: skip
        return "exec " + " ".join(shlex.quote(part) for part in [browser, *flags])

    async def _fill_screen(self) -> None:
        """The browser's window over the whole screen, as in Harbor (a maximised
        window leaves no bare desktop in the screenshots)."""
        if not (self.tools.wmctrl and self.tools.window_manager):
            return
        await self.run(
            "wid=$(wmctrl -l | grep -iE 'chromium|chrome' | head -n 1 | cut -d' ' -f1); "
            '[ -z "$wid" ] || wmctrl -i -r "$wid" -b add,maximized_vert,maximized_horz'
        )

    async def _focus_browser(self, timeout: float) -> None:
        """The browser's window holds the X input focus, so keys sent before any
        click (ctrl+l, a URL, Return) reach it. Checked, and set only when needed:
        activated through the window manager (EWMH), then focused directly, until X
        says the focus is on it. Within `FOCUS_TIMEOUT` at most, and never fatal: a
        desktop whose focus cannot be set still takes clicks (and a click focuses)."""
        if not self.tools.xdotool:
            return
        with contextlib.suppress(DesktopUnavailable):
            await self._until(SERVICE_BROWSER, _FOCUS_BROWSER, min(timeout, FOCUS_TIMEOUT))

    async def _service(self, name: str, command: str) -> None:
        await self.env.start_service(name, command, env={"DISPLAY": DISPLAY})

    async def _until(self, service: str, condition: str, timeout: float) -> None:
        """Poll `condition` inside the sandbox until it holds, in slices of about a
        second (one command each); between slices, a service that died ends the
        wait at once. The deadline, or a dead service, is `DesktopUnavailable`."""
        polls = (
            f"i=0; until {condition}; do "
            f"i=$((i+1)); [ $i -lt {_SLICE} ] || exit 3; sleep 0.02; done"
        )
        ends = time.monotonic() + timeout
        while True:
            result = await self.run(polls, timeout=max(1.0, ends - time.monotonic()))
            if result.ok:
                return
            alive = await self.env.service_running(service)
            if result.timed_out or not alive or time.monotonic() >= ends:
                break
        log = await self.run(f"tail -n 5 {SERVICE_LOGS}/{service}.log 2>/dev/null")
        state = "running" if alive else "not running"
        tail = " ".join(log.stdout.split())[-300:]
        raise DesktopUnavailable(
            f"desktop service {service} ({state}) not ready within {timeout:g}s (waiting for "
            f"`{condition}`); its log: {tail or '(empty)'}"
        )

    async def running(self) -> bool:
        """The X server (and the browser, where there is one) still runs."""
        if not await self.env.service_running(SERVICE_X):
            return False
        return self.tools.browser is None or await self.env.service_running(SERVICE_BROWSER)

    # -- commands ------------------------------------------------------------
    async def run(self, command: str, *, timeout: float = ACTION_TIMEOUT) -> ExecResult:
        """`command` in the sandbox on the desktop's display."""
        return await self.env.exec(command, cwd="/", env={"DISPLAY": DISPLAY}, timeout=timeout)

    async def _xdotool(self, commands: list[list[str]]) -> ActionResult:
        script = " && ".join(shlex.join(["xdotool", *argv]) for argv in commands)
        result = await self.run(script)
        if result.ok:
            return ActionResult()
        return ActionResult(error=_failure("xdotool", result))

    async def execute(self, action: Action) -> ActionResult:
        """Do `action` on the desktop. A failure comes back as `ActionResult.error`
        (text for the model), never as an exception."""
        try:
            return await self._execute(action)
        except ValueError as exc:
            return ActionResult(error=str(exc))

    async def _execute(self, action: Action) -> ActionResult:
        kind = action.kind
        if kind == "screenshot":
            return ActionResult()
        if kind == "zoom":
            self._zoom = self._checked_region(action.region) if action.region else None
            return ActionResult(output="the next screenshot shows the region")
        if kind == "wait":
            await asyncio.sleep(max(0.0, min(action.seconds, MAX_WAIT)))
            return ActionResult()
        if kind == "done":
            await self.write_final_answer(action.text)
            return ActionResult(output="done")
        if kind == "bash":
            return await self._bash(action.text)
        if not self.tools.xdotool:
            return ActionResult(error="the desktop has no xdotool: input actions cannot run")
        if kind == "navigate":
            if not action.url:
                raise ValueError("navigate needs a url")
            return await self._xdotool(navigate_commands(action.url))
        return await self._xdotool(input_commands(action, self.geometry))

    async def _bash(self, command: str) -> ActionResult:
        if not command.strip():
            raise ValueError("bash needs a command")
        result = await self.env.exec(command, env={"DISPLAY": DISPLAY}, timeout=ACTION_TIMEOUT)
        output = (result.stdout + result.stderr)[-BASH_OUTPUT:]
        if result.ok:
            return ActionResult(output=output)
        return ActionResult(output=output, error=_failure("bash", result))

    # -- screenshots ---------------------------------------------------------
    def _checked_region(self, region: Region) -> Region:
        x0, y0, x1, y1 = region
        x0, y0 = self.geometry.clamp((min(x0, x1), min(y0, y1)))
        x1, y1 = max(x0, x1), max(y0, y1)
        x1, y1 = min(x1, self.geometry.width), min(y1, self.geometry.height)
        if x1 - x0 < 1 or y1 - y0 < 1:
            raise ValueError(f"the zoom region {region} is empty on a "
                             f"{self.geometry.width}x{self.geometry.height} screen")  # fmt: skip
        return x0, y0, x1, y1

    async def screenshot(
        self, region: Region | None = None, *, size: tuple[int, int] | None = None
    ) -> bytes:
        """The screen as PNG bytes; `region` (or a pending zoom's) is a crop of it
        at full resolution; `size` scales the whole (uncropped) screen to that many
        pixels, in the sandbox, so only the small image travels (a model whose image
        limit is below the desktop's size). `DesktopUnavailable` if none can be taken."""
        crop = self._checked_region(region) if region is not None else self._zoom
        self._zoom = None
        command = self._capture(crop)
        if size is not None and crop is None:
            if not self.tools.convert:
                raise DesktopUnavailable(
                    f"cannot scale a screenshot to {size[0]}x{size[1]}: the image has no "
                    "ImageMagick `convert`"
                )
            command = f"{{ {command}; }} | convert png:- -resize {size[0]}x{size[1]}! png:-"
        result = await self.run(command + " | base64 -w0")
        try:
            data = base64.b64decode(result.stdout.strip(), validate=True)
        except (binascii.Error, ValueError):
            data = b""
        if not result.ok or not data.startswith(PNG_MAGIC):
            raise DesktopUnavailable(f"screenshot failed: {_failure('capture', result)}")
        return data

    def _capture(self, crop: Region | None) -> str:
        return capture_command(self.tools.capture, crop, convert=self.tools.convert,
                               scratch=f"{RUNTIME_DIR}/shot.png")  # fmt: skip

    # -- answer --------------------------------------------------------------
    async def write_final_answer(self, text: str) -> None:
        """/logs/agent/final_answer.txt, as Harbor's tests read it."""
        script = f"mkdir -p /logs/agent && printf '%s' {shlex.quote(text)} > {FINAL_ANSWER}"
        result = await self.env.exec(script, cwd="/", timeout=60)
        if not result.ok:
            raise DesktopUnavailable(f"cannot write {FINAL_ANSWER}: {_failure('write', result)}")


def _window_manager_command(name: str) -> str:
    if name == "xfwm4":
        # no compositor (Xvfb has no GL) and no session manager to register with;
        # its settings come from xfconfd over a session bus (without one it never
        # manages a window), so a private bus where the image has dbus
        flags = "xfwm4 --compositor=off --sm-client-disable"
        return (f"if command -v dbus-run-session >/dev/null 2>&1; then "
                f"exec dbus-run-session -- {flags}; fi; exec {flags}")  # fmt: skip
    return f"exec {shlex.quote(name)}"


def _failure(what: str, result: ExecResult) -> str:
    if result.timed_out:
        return f"{what} timed out"
    text = " ".join(result.stderr.split())[-300:]
    return f"{what} failed (exit {result.exit_code}){': ' + text if text else ''}"
