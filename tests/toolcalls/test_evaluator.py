"""ExactEvaluator and the result types, including russo's bugs fixed."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helios import toolcalls as russo
from helios.toolcalls.evaluators import ExactEvaluator
from helios.toolcalls.types import BatchResult, EvalResult, SingleRunResult, ToolCall

A = russo.tool_call("a", x=1)
B = russo.tool_call("b", y=[1, {"z": 2}])


def test_tool_call_is_hashable_and_comparable_with_nested_arguments() -> None:
    one = ToolCall(name="f", arguments={"a": {"b": [1, 2]}, "c": [{"d": 1}]})
    two = ToolCall(name="f", arguments={"c": [{"d": 1}], "a": {"b": [1, 2]}})
    assert one == two
    assert hash(one) == hash(two)
    assert len({one, two, ToolCall(name="f", arguments={"a": {"b": [2, 1]}})}) == 2
    assert ToolCall("f", {"x": 1}) == russo.tool_call("f", x=1)


def test_ordered_matching_accepts_the_same_order() -> None:
    result = ExactEvaluator(match_order=True).evaluate([A, B], [A, B])
    assert result.passed
    assert result.match_rate == 1.0


def test_ordered_matching_rejects_another_order_and_says_why() -> None:
    result = ExactEvaluator(match_order=True).evaluate([A, B], [B, A])
    assert not result.passed
    assert [m.matched for m in result.matches] == [True, False]
    assert "out of order" in result.matches[1].details


def test_ordered_matching_allows_ignored_extra_calls_in_between() -> None:
    extra = russo.tool_call("log")
    assert ExactEvaluator(match_order=True).evaluate([A, B], [extra, A, extra, B]).passed
    strict = ExactEvaluator(match_order=True, ignore_extra_calls=False)
    assert not strict.evaluate([A, B], [extra, A, B]).passed


def test_unordered_matching_ignores_order() -> None:
    assert ExactEvaluator().evaluate([A, B], [B, A]).passed


def test_empty_expect_fails_on_calls_when_extra_calls_count() -> None:
    strict = ExactEvaluator(ignore_extra_calls=False)
    result = strict.evaluate([], [A])
    assert not result.passed
    assert "unexpected extra tool call" in result.matches[0].details
    assert strict.evaluate([], []).passed
    assert ExactEvaluator().evaluate([], [A]).passed


def test_extra_calls_fail_when_not_ignored() -> None:
    result = ExactEvaluator(ignore_extra_calls=False).evaluate([A], [A, B])
    assert not result.passed
    assert result.matches[-1].actual == B


def test_mismatch_reports_the_closest_call_and_a_diff() -> None:
    expected = russo.tool_call("book_flight", from_city="NYC", to_city="LA")
    actual = [
        russo.tool_call("get_weather", city="LA"),
        russo.tool_call("book_flight", from_city="NYC", to_city="SF"),
    ]
    result = ExactEvaluator().evaluate([expected], actual)
    match = result.matches[0]
    assert not match.matched
    assert match.actual == actual[1]
    assert match.details == "arg 'to_city': expected 'LA', got 'SF'"
    assert "book_flight(from_city='NYC', to_city='SF')" in result.summary()


def test_ignore_extra_args() -> None:
    actual = [russo.tool_call("book_flight", from_city="NYC", to_city="LA", seat="aisle")]
    assert ExactEvaluator(ignore_extra_args=True).evaluate([russo.tool_call("book_flight")],
                                                            actual).passed  # fmt: skip
    strict = ExactEvaluator().evaluate([russo.tool_call("book_flight", from_city="NYC")], actual)
    assert not strict.passed
    assert "arg 'seat': not expected" in strict.matches[0].details


def test_missing_argument_is_named() -> None:
    result = ExactEvaluator().evaluate([russo.tool_call("f", a=1)], [russo.tool_call("f")])
    assert result.matches[0].details == "arg 'a': missing (expected 1)"


def test_a_call_matches_only_one_expectation() -> None:
    result = ExactEvaluator().evaluate([A, A], [A])
    assert not result.passed
    assert result.match_rate == 0.5


def _batch(passes: list[bool]) -> BatchResult:
    runs = []
    for i, ok in enumerate(passes):
        match = russo.ToolCallMatch(expected=A, matched=ok)
        evaluation = EvalResult(passed=ok, expected=[A], matches=[match])
        runs.append(SingleRunResult(prompt=f"p{i // 3}", run_index=i % 3, eval_result=evaluation))
    return BatchResult(runs=runs)


def test_summary_has_russos_lines() -> None:
    batch = _batch([True] * 6)
    assert batch.summary().splitlines() == [
        "PASSED (100% pass rate, 6 runs)",
        "  Passed: 6/6",
        "  Prompt: 'p0'",
        "    3/3 passed",
        "    [+] run 0: 100% match",
        "    [+] run 1: 100% match",
        "    [+] run 2: 100% match",
        "  Prompt: 'p1'",
        "    3/3 passed",
        "    [+] run 0: 100% match",
        "    [+] run 1: 100% match",
        "    [+] run 2: 100% match",
    ]


def test_batch_counts() -> None:
    batch = _batch([True, False, True])
    assert (batch.total, batch.passed_count, batch.failed_count) == (3, 2, 1)
    assert not batch.passed
    assert abs(batch.pass_rate - 2 / 3) < 1e-9
    assert abs(batch.match_rate - 2 / 3) < 1e-9
    assert "[-] run 1: 0% match" in batch.summary()
    empty = BatchResult()
    assert empty.passed and empty.pass_rate == 1.0 and empty.total == 0


def test_assert_tool_calls_raises_with_the_summary() -> None:
    failed = ExactEvaluator().evaluate([A], [B])
    try:
        russo.assert_tool_calls(failed, message="flight")
    except russo.ToolCallAssertionError as exc:
        assert str(exc).startswith("flight\nFAILED (0% match rate)")
    else:
        raise AssertionError("no error raised")
    russo.assert_tool_calls(ExactEvaluator().evaluate([A], [A]))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=8,
)  # fmt: skip
calls = st.builds(
    ToolCall,
    name=st.sampled_from(["a", "b", "c"]),
    arguments=st.dictionaries(st.sampled_from(["x", "y"]), json_values, max_size=2),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(calls, max_size=4), st.lists(calls, max_size=4), st.booleans(), st.booleans(),
       st.booleans())  # fmt: skip
def test_evaluator_never_raises_and_is_consistent(
    expected: list[ToolCall], actual: list[ToolCall], order: bool, extra_args: bool,
    extra_calls: bool,
) -> None:  # fmt: skip
    evaluator = ExactEvaluator(match_order=order, ignore_extra_args=extra_args,
                               ignore_extra_calls=extra_calls)  # fmt: skip
    result = evaluator.evaluate(expected, actual)
    assert 0.0 <= result.match_rate <= 1.0
    assert result.passed == (all(m.matched for m in result.matches))
    assert evaluator.evaluate(actual, actual).passed
    hash(tuple(expected))


def test_types_take_the_issues_positional_signatures() -> None:
    audio = russo.Audio(b"\x00\x00", "pcm", 16000)
    assert (audio.format, audio.sample_rate, audio.channels, audio.sample_width) == (
        "pcm", 16000, 1, 2)  # fmt: skip
    assert "2 bytes" in str(audio) and "\\x00" not in repr(audio)
    assert russo.ToolCall("f", {"a": 1}) == ToolCall(name="f", arguments={"a": 1})
    assert russo.AgentResponse([A]).tool_calls == [A]
    evaluation = russo.EvalResult(True, [A], [A])
    assert evaluation.match_rate == 0.0  # no matches recorded
    run = russo.SingleRunResult("p", 0, evaluation)
    assert russo.BatchResult([run]).total == 1
