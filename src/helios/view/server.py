"""The `helios view` web server: the JSON API, the static front end, and the guards
around both (the token beyond loopback, the Host check, the security headers)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import sys
import webbrowser
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import TextIO

from aiohttp import web

from helios.errors import InputError
from helios.view import api
from helios.view.query import BadQuery
from helios.view.roots import OutsideRoots, Roots
from helios.view.runs import RunList
from helios.view.steps import NotATIF

LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN = web.AppKey("token", str)
HOSTS = web.AppKey("hosts", set[str])
#: the page may run only its own script and style, load images from itself (and
#: inline data: images from a trajectory), and talk only to its own server
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
STATIC = {"/": ("index.html", "text/html"), "/app.js": ("app.js", "text/javascript"),
          "/app.css": ("app.css", "text/css")}  # fmt: skip

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def token_cookie(token: str) -> str:
    """The cookie that carries `token`: named after it, because cookies ignore the
    port, and two viewers on one host must not overwrite each other's."""
    return "helios_view_" + hashlib.sha256(token.encode()).hexdigest()[:12]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The Host check (a DNS-rebinding page cannot read a loopback viewer), the token
    when one is set, the errors as JSON, and the headers on every response."""
    hosts = request.app[HOSTS]
    if hosts and request.host not in hosts:
        return _error(403, f"unexpected Host header {request.host[:80]!r}")
    token = request.app[TOKEN]
    from_query = False
    if token:
        given = request.query.get("token") or request.cookies.get(token_cookie(token), "")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return _error(403, "this viewer needs the token of the URL it printed (?token=…)")
        from_query = "token" in request.query
    try:
        response = await handler(request)
    except web.HTTPException:
        raise
    except OutsideRoots as exc:
        response = _error(403, str(exc))
    except FileNotFoundError as exc:
        response = _error(404, str(exc))
    except (BadQuery, NotATIF, InputError) as exc:
        response = _error(400, str(exc))
    except Exception as exc:
        response = _error(500, f"{type(exc).__name__}: {exc}"[:500])
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers["Referrer-Policy"] = "no-referrer"  # the token is in the URL
    response.headers.setdefault("Cache-Control", "no-store")
    if from_query:
        response.set_cookie(token_cookie(token), token, httponly=True, samesite="Strict")
    return response


async def _static(request: web.Request) -> web.Response:
    name, kind = STATIC[request.path]
    body = resources.files("helios.view").joinpath("static", name).read_bytes()
    return web.Response(body=body, content_type=kind, charset="utf-8")


def make_app(
    folders: list[Path], *, token: str = "", hosts: set[str] | None = None
) -> web.Application:
    app = web.Application(middlewares=[guard])
    app[api.ROOTS] = Roots.of(folders)
    app[api.INDEXES] = {}
    app[api.WORKER] = ThreadPoolExecutor(1, thread_name_prefix="helios-view")
    app[api.COMPARER] = ThreadPoolExecutor(1, thread_name_prefix="helios-compare")
    app[api.RUN_LIST] = RunList()
    app.on_cleanup.append(_stop_worker)
    app[TOKEN] = token
    app[HOSTS] = hosts if hosts is not None else set()
    app.add_routes(api.routes())
    for path in STATIC:
        app.router.add_get(path, _static)
    return app


async def _stop_worker(app: web.Application) -> None:
    app[api.WORKER].shutdown(wait=False, cancel_futures=True)
    app[api.COMPARER].shutdown(wait=False, cancel_futures=True)


def needs_token(host: str) -> bool:
    return host not in LOOPBACK


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def serve(folders: list[Path], *, host: str = "127.0.0.1", port: int = 0,
                open_browser: bool = False, out: TextIO = sys.stdout) -> None:  # fmt: skip
    """Serve until cancelled; the URL is the first line written to `out`."""
    token = secrets.token_urlsafe(24) if needs_token(host) else ""
    app = make_app(folders, token=token)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = int(runner.addresses[0][1])
        if not token:  # loopback: only requests naming this server's own address
            app[HOSTS].update(f"{name}:{bound}" for name in ("127.0.0.1", "localhost",
                                                             "[::1]", _url_host(host)))  # fmt: skip
        url = f"http://{_url_host(host)}:{bound}/" + (f"?token={token}" if token else "")
        out.write(url + "\n")
        out.flush()
        roots = app[api.ROOTS].folders
        out.write(f"serving {', '.join(map(str, roots)) or 'no folders (none exist)'}; "
                  "Ctrl-C stops\n")  # fmt: skip
        out.flush()
        if open_browser:
            await asyncio.to_thread(webbrowser.open, url)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
