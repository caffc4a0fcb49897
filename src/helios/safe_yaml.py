"""YAML from users, read with bounds: depth, size after alias expansion, finite numbers.

`yaml.safe_load` is safe from code execution but not from exhaustion:
- an alias is the same Python object as its anchor, so a "billion laughs" file of a
  few hundred bytes loads at once, and then explodes in whatever walks it (hashing,
  validation, printing), in C code that holds off SIGTERM until it is done;
- the composer recurses once per level: `[[[[...]]]]` 20,000 deep is a RecursionError;
- an integer of 5,000 digits is a ValueError, not a YAMLError.

`load_yaml` composes the document with a bound on depth and on nodes, then counts
the nodes and depth the document has once every alias is expanded (memoised per
node, so this costs the number of distinct nodes), all before anything is
constructed. Every refusal is a `yaml.YAMLError` with a line, like a syntax error.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

#: levels of nesting a document may have, aliases expanded
MAX_YAML_DEPTH = 100
#: nodes (scalars, lists, mappings) a document may have, aliases expanded
MAX_YAML_NODES = 1_000_000
#: bytes of YAML text (libyaml composes a whole document before it can be counted)
MAX_YAML_BYTES = 16 * 1024 * 1024


class YamlLimitError(ComposerError):
    """A document past a bound (depth, nodes after alias expansion) or with a value
    Python cannot hold (a non-finite float, an integer of too many digits)."""


def _construct_float(loader: yaml.SafeLoader, node: ScalarNode) -> float:
    value: float = yaml.SafeLoader.construct_yaml_float(loader, node)
    if not math.isfinite(value):
        raise YamlLimitError(None, None, f"{node.value!r} is not a finite number", node.start_mark)
    return value


def _construct_int(loader: yaml.SafeLoader, node: ScalarNode) -> int:
    try:
        value: int = yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:  # past sys.get_int_max_str_digits()
        raise YamlLimitError(None, None, "an integer with too many digits",
                             node.start_mark) from None  # fmt: skip
    return value


class _BoundedComposer(Composer):
    """PyYAML's composer (it recurses once per level), bounded as it goes: in depth,
    and in nodes, so a huge file is refused before it is all in memory."""

    max_depth: int
    max_nodes: int
    _depth: int
    _composed: int

    def bound(self, max_depth: int, max_nodes: int) -> None:
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self._depth = 0
        self._composed = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        self._composed += 1
        try:
            if self._depth > self.max_depth:
                self._refuse(f"nested deeper than {self.max_depth} levels")
            if self._composed > self.max_nodes:
                self._refuse(f"more than {self.max_nodes:,} nodes")
            return Composer.compose_node(self, parent, index)
        finally:
            self._depth -= 1

    def _refuse(self, problem: str) -> None:
        mark = self.peek_event().start_mark  # type: ignore[attr-defined]
        raise YamlLimitError(None, None, problem, mark)


class _PythonLoader(_BoundedComposer, yaml.SafeLoader):
    def __init__(self, stream: str, max_depth: int, max_nodes: int) -> None:
        yaml.SafeLoader.__init__(self, stream)
        self.bound(max_depth, max_nodes)


_LOADERS: list[type[Any]] = [_PythonLoader]
if getattr(yaml, "__with_libyaml__", False):
    from yaml._yaml import CParser

    class _LibyamlLoader(_BoundedComposer, CParser, SafeConstructor, Resolver):
        """libyaml scans and parses (five times faster than PyYAML's Python, and it
        refuses nesting past 1,000 levels itself); the composer is the bounded one."""

        def __init__(self, stream: str, max_depth: int, max_nodes: int) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self.anchors: dict[Any, Node] = {}
            self.bound(max_depth, max_nodes)

    _LOADERS.insert(0, _LibyamlLoader)

for _loader in _LOADERS:
    _loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
    _loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


class _Expansion:
    """Nodes and depth of a composed document with its aliases expanded."""

    def __init__(self, max_depth: int, max_nodes: int) -> None:
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        #: id(node) -> (nodes, height) of its expansion
        self._seen: dict[int, tuple[int, int]] = {}
        self._path: set[int] = set()

    def check(self, node: Node) -> None:
        nodes, _ = self._measure(node, 1)
        if nodes > self.max_nodes:
            self._refuse(node, f"more than {self.max_nodes:,} nodes once its aliases are expanded")

    def _measure(self, node: Node, depth: int) -> tuple[int, int]:
        if depth > self.max_depth:  # before going deeper: this recursion stays short
            self._refuse(node, f"nested deeper than {self.max_depth} levels once its "
                               "aliases are expanded")  # fmt: skip
        known = self._seen.get(id(node))
        if known is None:
            if id(node) in self._path:
                self._refuse(node, "an alias refers to a node that contains it")
            self._path.add(id(node))
            known = self._expand(node, depth)
            self._path.discard(id(node))
            self._seen[id(node)] = known
        if depth + known[1] - 1 > self.max_depth:
            self._refuse(node, f"nested deeper than {self.max_depth} levels once its "
                               "aliases are expanded")  # fmt: skip
        return known

    def _expand(self, node: Node, depth: int) -> tuple[int, int]:
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        nodes, height = 1, 0
        for child in children:
            if isinstance(child, ScalarNode):  # most nodes: no call, no memo
                nodes += 1
                height = max(height, 1)
                continue
            child_nodes, child_height = self._measure(child, depth + 1)
            nodes += child_nodes
            height = max(height, child_height)
            if nodes > self.max_nodes:
                self._refuse(node, f"more than {self.max_nodes:,} nodes once its aliases "
                                   "are expanded")  # fmt: skip
        return nodes, height + 1

    @staticmethod
    def _refuse(node: Node, problem: str) -> None:
        raise YamlLimitError(None, None, problem, node.start_mark)


def load_yaml(
    text: str, *, max_depth: int = MAX_YAML_DEPTH, max_nodes: int = MAX_YAML_NODES
) -> Any:
    """`yaml.safe_load` within bounds; anything past them is a `yaml.YAMLError`
    (a `YamlLimitError`) whose `problem_mark` is where it starts."""
    if len(text) > MAX_YAML_BYTES:
        mark = yaml.Mark("<text>", 0, 0, 0, None, 0)
        raise YamlLimitError(None, None, f"larger than {MAX_YAML_BYTES // 2**20} MiB", mark)
    loader = _LOADERS[0](text, max_depth, max_nodes)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _Expansion(max_depth, max_nodes).check(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
