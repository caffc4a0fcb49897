"""A callable agent hearing real speech: espeak-ng (offline) speaks each prompt once,
its runs share the audio, and the engine runs 2 prompts × 3 runs, 4 at a time.

    python examples/toolcalls/callable_agent.py

The "agent" here is a stand-in that checks it got real speech and books a flight;
put your own model call in its place.
"""

import asyncio

from helios import toolcalls
from helios.toolcalls.evaluators import ExactEvaluator


@toolcalls.agent
async def voice_agent(audio: toolcalls.Audio) -> toolcalls.AgentResponse:
    await asyncio.sleep(0.05)  # the model's latency
    if audio.duration < 0.5:
        return toolcalls.AgentResponse(tool_calls=[])  # heard nothing
    city = "Rome" if "Rome" in (audio.transcript or "") else "Sydney"
    return toolcalls.AgentResponse(tool_calls=[toolcalls.tool_call("book_flight", to_city=city)])


async def main() -> int:
    result = await toolcalls.run_concurrent(
        cases=[
            ("Book a flight from Berlin to Rome", [toolcalls.tool_call("book_flight", to_city="Rome")]),
            ("Fly me from Tokyo to Sydney", [toolcalls.tool_call("book_flight", to_city="Sydney")]),
        ],
        synthesizer=toolcalls.EspeakSynthesizer(voice="en-us", sample_rate=24000),
        agent=voice_agent,
        evaluator=ExactEvaluator(ignore_extra_args=True),
        runs=3,
        max_concurrency=4,
    )
    print(result.summary())
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
