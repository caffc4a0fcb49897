"""An HTTP voice agent served by a tiny local app, tested with HttpAgent.

    python examples/toolcalls/http_agent.py

The app takes `{"audio": <base64 WAV>, "format": "wav"}` and answers in its own
JSON shape, which JsonResponseParser reads with dot paths. It also answers the
first request with a 503, to show the engine retrying it.
"""

import asyncio
import base64
import io
import wave

from aiohttp import web

from helios import toolcalls


def make_app() -> web.Application:
    state = {"requests": 0}

    async def voice(request: web.Request) -> web.Response:
        state["requests"] += 1
        if state["requests"] == 1:
            return web.json_response({"error": "warming up"}, status=503)
        body = await request.json()
        audio = base64.b64decode(body["audio"])
        with wave.open(io.BytesIO(audio)) as handle:
            seconds = handle.getnframes() / handle.getframerate()
        calls = [{"function": "book_flight", "args": {"from_city": "NYC", "to_city": "LA"}}]
        return web.json_response({"result": {"heard_seconds": seconds,
                                             "calls": calls if seconds > 0.5 else []}})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/voice", voice)
    return app


async def main() -> int:
    runner = web.AppRunner(make_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        agent = toolcalls.HttpAgent(
            f"http://127.0.0.1:{port}/voice",
            parser=toolcalls.JsonResponseParser(
                tool_calls_key="result.calls", name_key="function", arguments_key="args"
            ),
        )
        result = await toolcalls.run_concurrent(
            prompts=["Book a flight from New York to Los Angeles", "I need to fly NYC to LA"],
            synthesizer=toolcalls.EspeakSynthesizer(),
            agent=agent,
            expect=[toolcalls.tool_call("book_flight", from_city="NYC", to_city="LA")],
            runs=2,
        )
    finally:
        await runner.cleanup()
    print(result.summary())
    print(f"retries: {sum(run.retries for run in result.runs)}")
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
