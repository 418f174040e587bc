"""CloudWatch Logs Insights, the subset the docs' queries use, run on lines a gateway printed.

So a documented query is checked against what the gateway really writes, not against what the
docs say it writes. As in CloudWatch: a JSON line's fields are flattened into dotted paths
(`policy_actions.0.action`; an object or a list is not itself a field), `@message` is the line
as printed (so `like` sees the compact JSON, no spaces after colons) and `@timestamp` orders
the lines. Commands: `fields`, `filter` (`=`, `!=`, `<`, `<=`, `>`, `>=`, `like` and `not like`
with a string or a /regex/, `and`, `or`, `not`, parentheses), `parse @message /(?<name>...)/`,
`stats count(*) [as name] by ...`, `sort ... [asc|desc]`, `limit`. Anything else is refused, so
a query outside the subset fails loudly instead of passing unchecked.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .printed import json_objects

Record = dict[str, Any]
Scalar = str | int | float | bool | None

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<regex>/(?:[^/\\]|\\.)+/)
    | (?P<number>-?\d+(?:\.\d+)?)
    | (?P<op><=|>=|!=|=|<|>|\(|\)|,|\||\*)
    | (?P<word>[@A-Za-z_][\w.@]*)
    )""",
    re.VERBOSE,
)
_COMPARISONS = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class QueryError(ValueError):
    """The query is outside the subset, or wrong in it."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


def tokens(query: str) -> list[Token]:
    found, at = [], 0
    while query[at:].strip():
        match = _TOKEN.match(query, at)
        if not match or match.lastgroup is None:
            raise QueryError(f"cannot read the query at {query[at:]!r}")
        found.append(Token(match.lastgroup, match[match.lastgroup]))
        at = match.end()
    return found


def records(text: str) -> list[Record]:
    """The JSON-object lines of a process's output, each with `@message` and `@timestamp`."""
    return [
        {**value, "@message": line, "@timestamp": n}
        for n, (line, value) in enumerate(json_objects(text))
    ]


def value_of(record: Record, path: str) -> Scalar:
    """A field as Logs Insights sees it: a dotted path into the JSON, leaves only."""
    value: Any = record
    for part in [path] if path in record else path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return None if isinstance(value, dict | list) else value


def literal(token: Token) -> Scalar | re.Pattern[str]:
    if token.kind == "string":
        return re.sub(r"\\(.)", r"\1", token.text[1:-1])
    if token.kind == "number":
        return float(token.text)
    if token.kind == "regex":
        return re.compile(token.text[1:-1])
    raise QueryError(f"expected a value, got {token.text!r}")


def compare(value: Scalar, op: str, right: Scalar | re.Pattern[str]) -> bool:
    if isinstance(value, bool) or isinstance(right, bool | re.Pattern):
        # Logs Insights has no JSON boolean to compare with; a doc must not pretend it has.
        raise QueryError(f"{op} {right!r} on {value!r}: use like on @message instead")
    if value is None:
        return False
    if isinstance(right, float):
        if not isinstance(value, int | float):
            return False
        left: Any = float(value)
    else:
        left = str(value)
    compared: Any = _COMPARISONS[op]
    return bool(compared(left, right))


def like(value: Scalar, pattern: Scalar | re.Pattern[str]) -> bool:
    if value is None:
        return False
    if isinstance(pattern, re.Pattern):
        return pattern.search(str(value)) is not None
    if not isinstance(pattern, str):
        raise QueryError("like takes a string or a /regex/")
    return pattern in str(value)


class Condition:
    """A `filter` expression, parsed once, evaluated per record (or, and, not, comparisons)."""

    def __init__(self, words: Sequence[Token]) -> None:
        self._words = list(words)
        self._at = 0
        self.tree = self._either()
        if self._at != len(self._words):
            raise QueryError(f"unexpected {self._words[self._at].text!r} in filter")

    def _peek(self) -> str:
        return self._words[self._at].text if self._at < len(self._words) else ""

    def _take(self) -> Token:
        if self._at >= len(self._words):
            raise QueryError("the filter ends too early")
        self._at += 1
        return self._words[self._at - 1]

    def _either(self) -> Any:
        tree = self._both()
        while self._peek().lower() == "or":
            self._take()
            tree = ("or", tree, self._both())
        return tree

    def _both(self) -> Any:
        tree = self._negated()
        while self._peek().lower() == "and":
            self._take()
            tree = ("and", tree, self._negated())
        return tree

    def _negated(self) -> Any:
        if self._peek().lower() == "not":
            self._take()
            return ("not", self._negated())
        if self._peek() == "(":
            self._take()
            tree = self._either()
            if self._take().text != ")":
                raise QueryError("a parenthesis is not closed")
            return tree
        return self._test()

    def _test(self) -> Any:
        name = self._take()
        if name.kind != "word":
            raise QueryError(f"expected a field, got {name.text!r}")
        op = self._take().text.lower()
        if op == "not" and self._take().text.lower() == "like":
            return ("not", ("like", name.text, literal(self._take())))
        if op == "like" or op in _COMPARISONS:
            return (op, name.text, literal(self._take()))
        raise QueryError(f"unsupported operator {op!r}")

    def holds(self, record: Record, tree: Any = None) -> bool:
        tree = self.tree if tree is None else tree
        if tree[0] == "or":
            return self.holds(record, tree[1]) or self.holds(record, tree[2])
        if tree[0] == "and":
            return self.holds(record, tree[1]) and self.holds(record, tree[2])
        if tree[0] == "not":
            return not self.holds(record, tree[1])
        if tree[0] == "like":
            return like(value_of(record, tree[1]), tree[2])
        return compare(value_of(record, tree[1]), tree[0], tree[2])


def names(words: Sequence[Token]) -> list[str]:
    """A comma-separated list of fields."""
    listed = [word.text for word in words if word.text != ","]
    if any(word.kind != "word" for word in words if word.text != ","):
        raise QueryError(f"expected field names: {' '.join(w.text for w in words)}")
    return listed


@dataclass
class Query:
    """A parsed query; `run` gives its result rows, `unseen` the fields it shows that no
    matching line has (a documented field the gateway does not write)."""

    text: str
    shown: list[str] = field(default_factory=list)
    _steps: list[tuple[str, list[Token]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        command: list[Token] = []
        for token in [*tokens(self.text), Token("op", "|")]:
            if token.text != "|":
                command.append(token)
                continue
            if not command or command[0].kind != "word":
                raise QueryError(f"an empty or unnamed command in {self.text!r}")
            verb = command[0].text.lower()
            if verb not in {"fields", "filter", "parse", "stats", "sort", "limit"}:
                raise QueryError(f"the interpreter does not know {verb!r}")
            self._steps.append((verb, command[1:]))
            if verb == "fields":
                self.shown += names(command[1:])
            command = []

    def matched(self, lines: Iterable[Record]) -> list[Record]:
        """The records that pass every filter and parse, before stats, sort and limit."""
        found = [dict(record) for record in lines]
        for verb, words in self._steps:
            if verb == "filter":
                condition = Condition(words)
                found = [record for record in found if condition.holds(record)]
            elif verb == "parse":
                found = parsed(found, words)
        return found

    def run(self, lines: Iterable[Record]) -> list[Record]:
        found = self.matched(lines)
        rows = [{name: value_of(record, name) for name in self.shown} or record for record in found]
        for verb, words in self._steps:
            if verb == "stats":
                rows = counted(found, words)
            elif verb == "sort":
                key, *order = [word.text for word in words]
                rows.sort(key=lambda row: sort_key(row.get(key)), reverse=order == ["desc"])
            elif verb == "limit":
                rows = rows[: int(words[0].text)]
        return rows

    def unseen(self, lines: Iterable[Record]) -> list[str]:
        found = self.matched(lines)
        return [name for name in self.shown if all(value_of(r, name) is None for r in found)]


def parsed(found: list[Record], words: Sequence[Token]) -> list[Record]:
    """`parse FIELD /regex/`: the named groups become fields; a line it does not match keeps
    no new field (as in Logs Insights, it is not dropped)."""
    source, pattern = words
    if pattern.kind != "regex":
        raise QueryError("the interpreter parses with a /regex/ only")
    regex = re.compile(pattern.text[1:-1].replace("(?<", "(?P<"))
    for record in found:
        match = regex.search(str(value_of(record, source.text) or ""))
        record.update(match.groupdict() if match else {})
    return found


def counted(found: list[Record], words: Sequence[Token]) -> list[Record]:
    """`stats count(*)|sum(FIELD) [as NAME] [by FIELDS]`."""
    texts = [word.text for word in words]
    if texts[:4] == ["count", "(", "*", ")"]:
        label, summed = "count(*)", None
    elif texts[:2] == ["sum", "("] and texts[3:4] == [")"]:
        label, summed = f"sum({texts[2]})", texts[2]
    else:
        raise QueryError(f"the interpreter counts only count(*) and sum(): {' '.join(texts)}")
    rest = list(words[4:])
    if rest and rest[0].text.lower() == "as":
        label, rest = rest[1].text, rest[2:]
    by = names(rest[1:]) if rest and rest[0].text.lower() == "by" else []
    if rest and not by:
        raise QueryError(f"unexpected {' '.join(t.text for t in rest)!r} after {texts[0]}()")
    groups: dict[tuple[Scalar, ...], float] = {}
    for record in found:
        key = tuple(value_of(record, name) for name in by)
        value = 1 if summed is None else value_of(record, summed)
        # Logs Insights' sum() skips a line without a number in the field.
        groups[key] = groups.get(key, 0) + (value if isinstance(value, int | float) else 0)
    return [{**dict(zip(by, key, strict=True)), label: n} for key, n in groups.items()]


def sort_key(value: Scalar) -> tuple[int, Any]:
    if isinstance(value, int | float):
        return (0, value)
    return (1, "" if value is None else str(value))
