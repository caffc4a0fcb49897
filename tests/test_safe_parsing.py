"""The shared helpers for hostile input and for writing JSON: `helios.safe_yaml`
(bounded YAML, with libyaml and without) and `helios.safe_json`."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import yaml

from helios import safe_yaml
from helios.safe_json import JsonValueError, dumps, parse_json
from helios.safe_yaml import MAX_YAML_BYTES, YamlLimitError, load_yaml


@pytest.fixture(params=[loader.__name__ for loader in safe_yaml._LOADERS])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each composer Helios can use: libyaml's events (when PyYAML has it) and PyYAML's own."""
    chosen = [c for c in safe_yaml._LOADERS if c.__name__ == request.param]
    monkeypatch.setattr(safe_yaml, "_LOADERS", chosen)
    return str(request.param)


def _refused(text: str, **bounds: int) -> str:
    with pytest.raises(yaml.YAMLError) as caught:
        load_yaml(text, **bounds)
    problem = getattr(caught.value, "problem", None) or str(caught.value)
    assert caught.value.problem_mark is not None  # type: ignore[attr-defined]
    return str(problem)


def _laughs(levels: int, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.usefixtures("loader")
class TestBoundedYaml:
    def test_an_ordinary_document_loads_as_safe_load_has_it(self) -> None:
        text = ("a: &x {b: 1, c: [1.5, -3, 0x10, ~, yes, 'q']}\nd: *x\n"
                "e: {<<: *x, f: 2}\ng: 2001-12-14\nh: !!binary aGVsbG8=\n")  # fmt: skip
        assert load_yaml(text) == yaml.safe_load(text)
        assert load_yaml("") is None and load_yaml("# nothing\n") is None

    def test_an_alias_bomb_is_refused_before_it_is_built(self) -> None:
        assert "aliases are expanded" in _refused(_laughs(10))
        assert load_yaml(_laughs(3))["l2"][0][0] == ["lol"] * 9  # small ones load

    def test_a_recursive_alias_is_refused(self) -> None:
        assert "contains it" in _refused("a: &a [1, *a]\n")

    @pytest.mark.parametrize("depth", [150, 999, 20_000])
    def test_nesting_too_deep_is_refused(self, depth: int) -> None:
        _refused("a: " + "[" * depth + "]" * depth + "\n")

    def test_nesting_made_deep_by_aliases_is_refused(self) -> None:
        text = "a0: &a0 [x]\n" + "".join(
            f"a{i}: &a{i} [" + "[" * 40 + f"*a{i - 1}" + "]" * 40 + "]\n" for i in range(1, 6)
        )
        assert "nested deeper than 100" in _refused(text)

    def test_too_many_nodes_is_refused_as_they_are_composed(self) -> None:
        assert "more than 1,000 nodes" in _refused("[" + ", ".join(["1"] * 2_000) + "]",
                                                  max_nodes=1_000)  # fmt: skip

    @pytest.mark.parametrize("value", [".nan", ".inf", "-.Inf", "1.0e+400"])
    def test_a_non_finite_number_is_refused(self, value: str) -> None:
        assert "not a finite number" in _refused(f"a: {value}\n")

    def test_an_integer_of_too_many_digits_is_refused(self) -> None:
        assert "too many digits" in _refused("a: " + "9" * 5_000 + "\n")

    def test_a_text_past_the_size_bound_is_refused_at_once(self) -> None:
        assert "MiB" in _refused("#" * (MAX_YAML_BYTES + 1))

    def test_the_mark_says_where(self) -> None:
        with pytest.raises(YamlLimitError) as caught:
            load_yaml("ok: 1\nbad: .nan\n")
        assert caught.value.problem_mark.line + 1 == 2  # type: ignore[union-attr]


def test_both_composers_are_tested() -> None:
    names = {loader.__name__ for loader in safe_yaml._LOADERS}
    assert "_PythonLoader" in names
    assert "_LibyamlLoader" in names or not yaml.__with_libyaml__


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("NaN", "NaN is not a JSON number"),
        ('{"a": -Infinity}', "-Infinity is not a JSON number"),
        ("[1e400]", "out of range"),
        ("9" * 5_000, "too long"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": }', "invalid JSON: Expecting value at column 7"),
        ('{"a":\n }', "at line 2 column 2"),
        (b'"\xff"', "not valid UTF-8"),
    ],
)
def test_parse_json_refuses_in_one_line(text: str | bytes, reason: str) -> None:
    with pytest.raises(JsonValueError, match=reason) as caught:
        parse_json(text)
    assert "\n" not in str(caught.value)


def test_parse_json_may_let_non_finite_numbers_through() -> None:
    value = parse_json("[NaN, 1e400, -Infinity, 1]", allow_nan=True)
    assert math.isnan(value[0]) and value[1:] == [math.inf, -math.inf, 1]
    with pytest.raises(JsonValueError, match="nested too deeply"):
        parse_json("[" * 100_000, allow_nan=True)


def test_dumps_writes_null_for_a_non_finite_number() -> None:
    value: Any = {"a": math.nan, "b": [math.inf, (1.5, -math.inf)], "c": "NaN"}
    assert json.loads(dumps(value)) == {"a": None, "b": [None, [1.5, None]], "c": "NaN"}
    assert dumps({"x": 1.0}, indent=2) == json.dumps({"x": 1.0}, indent=2)
    with pytest.raises(ValueError, match="Circular"):
        loop: list[Any] = []
        loop.append(loop)
        dumps(loop)
