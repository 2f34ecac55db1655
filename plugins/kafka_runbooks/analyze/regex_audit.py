"""Static audit of every regular expression of the analysis: no construct that can take super-linear time.

Python's ``re`` (and java.util.regex) backtrack. A pattern runs in linear time on any line when no repeat can
re-match what another repeat already tried. The rules enforced here, on the parsed pattern (``re._parser``):

1. no unbounded repeat (``*``, ``+``, ``{n,}``) inside another repeat (nested quantifiers);
2. no unbounded repeat directly followed (possibly through optional items) by another repeat whose character
   set overlaps its own (adjacent quantifiers over the same characters, e.g. ``.*?\\s*$``, ``\\s+\\S*\\s+``);
3. an unbounded repeat over "any character" (``.`` or a negated class) must be the last item of the pattern
   (trailing ``.*`` never fails, so it is tried once per start).

Bounded repeats ({0,300}) are allowed anywhere: they cap the work per start position at a constant.
The dynamic half of the guarantee is tests/analyze/test_analyze_linear_time.py (1-10 MB lines into every parser).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from types import ModuleType

try:  # Python 3.11+
    from re import _constants as C  # type: ignore[attr-defined]
    from re import _parser as P  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse as P  # type: ignore[no-redef]

MAXREPEAT = C.MAXREPEAT
_ANY = "any"


@dataclass(frozen=True)
class Problem:
    where: str
    pattern: str
    rule: str


def _charset(item) -> set | str | None:
    """The characters an item can start with: a set of codepoints, "any", or None (not a character)."""
    op, av = item
    if op is C.LITERAL:
        return {av}
    if op is C.NOT_LITERAL:
        return _ANY
    if op is C.ANY:
        return _ANY
    if op is C.IN:
        out: set = set()
        for o, a in av:
            if o is C.NEGATE:
                return _ANY
            if o is C.LITERAL:
                out.add(a)
            elif o is C.RANGE:
                lo, hi = a
                if hi - lo > 5000:
                    return _ANY
                out.update(range(lo, hi + 1))
            elif o is C.CATEGORY:
                out.update(_category(a))
        return out
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT if hasattr(C, "POSSESSIVE_REPEAT") else C.MAX_REPEAT):
        sub = av[2]
        return _charset(sub[0]) if len(sub) else None
    if op is C.SUBPATTERN:
        sub = av[-1]
        return _charset(sub[0]) if len(sub) else None
    if op is C.BRANCH:
        out = set()
        for alt in av[1]:
            if not len(alt):
                continue
            c = _charset(alt[0])
            if c == _ANY:
                return _ANY
            if c:
                out |= c
        return out
    return None


def _category(cat) -> set:
    import string

    m = {
        C.CATEGORY_DIGIT: set(map(ord, string.digits)),
        C.CATEGORY_SPACE: set(map(ord, " \t\n\r\f\v")),
        C.CATEGORY_WORD: set(map(ord, string.ascii_letters + string.digits + "_")),
    }
    if cat in m:
        return m[cat]
    return set(range(0, 128))  # negated categories: treat as (almost) anything


def _overlap(a, b) -> bool:
    if a is None or b is None:
        return False
    if a == _ANY or b == _ANY:
        return True
    return bool(a & b)


def _is_repeat(item) -> bool:
    return item[0] in (C.MAX_REPEAT, C.MIN_REPEAT)


def _unbounded(item) -> bool:
    return _is_repeat(item) and item[1][1] == MAXREPEAT


def _optional(item) -> bool:
    if _is_repeat(item) and item[1][0] == 0:
        return True
    return item[0] in (C.AT, C.ASSERT, C.ASSERT_NOT)


def _nullable(item) -> bool:
    op, av = item
    if _is_repeat(item):
        return av[0] == 0 or all(_nullable(x) for x in av[2])
    if op is C.SUBPATTERN:
        return all(_nullable(x) for x in av[-1])
    if op is C.BRANCH:
        return any(all(_nullable(x) for x in alt) for alt in av[1])
    return op in (C.AT, C.ASSERT, C.ASSERT_NOT)


def _leading_repeats(items) -> list:
    """Unbounded repeats that can match first in this sequence (looking through groups and nullable items)."""
    out = []
    for item in items:
        op, av = item
        if _is_repeat(item):
            if av[1] == MAXREPEAT:
                out.append(item)
            out.extend(_leading_repeats(list(av[2])))
        elif op is C.SUBPATTERN:
            out.extend(_leading_repeats(list(av[-1])))
        elif op is C.BRANCH:
            for alt in av[1]:
                out.extend(_leading_repeats(list(alt)))
        if not _nullable(item):
            break
    return out


def _walk(seq, problems: list[str], in_repeat: bool, tail: list) -> None:
    items = list(seq)
    for i, item in enumerate(items):
        op, av = item
        after = items[i + 1:] + tail
        if _is_repeat(item):
            if in_repeat and av[1] == MAXREPEAT:
                problems.append("nested unbounded repeat")
            _walk(av[2], problems, in_repeat or av[1] == MAXREPEAT, after)
            if av[1] == MAXREPEAT:
                mine = _charset(item)
                for nxt in _leading_repeats(after):
                    if _overlap(mine, _charset(nxt)):
                        problems.append("adjacent unbounded repeats over overlapping characters")
                        break
                rest = [x for x in after if x[0] is not C.AT]
                if mine == _ANY and rest:
                    problems.append("unbounded repeat over any character that is not the last item")
        elif op is C.SUBPATTERN:
            _walk(av[-1], problems, in_repeat, after)
        elif op is C.BRANCH:
            for alt in av[1]:
                _walk(alt, problems, in_repeat, after)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            _walk(av[1], problems, in_repeat, [])


def audit_pattern(pattern: str, flags: int = 0) -> list[str]:
    problems: list[str] = []
    _walk(P.parse(pattern, flags), problems, False, [])
    return sorted(set(problems))


def compiled_patterns(modules: list[ModuleType]) -> list[tuple[str, re.Pattern]]:
    """Every compiled regex held at module level (directly, in tuples/lists/dicts) by the given modules."""
    out: list[tuple[str, re.Pattern]] = []

    def visit(where: str, v, depth: int = 0) -> None:
        if isinstance(v, re.Pattern):
            out.append((where, v))
        elif depth < 3 and isinstance(v, (list, tuple)):
            for k, x in enumerate(v):
                visit(f"{where}[{k}]", x, depth + 1)
        elif depth < 3 and isinstance(v, dict):
            for k, x in v.items():
                visit(f"{where}[{k!r}]", x, depth + 1)
        elif depth < 2 and hasattr(v, "__dataclass_fields__") and hasattr(v, "pattern") and isinstance(getattr(v, "pattern"), str):
            out.append((where, re.compile(v.pattern, re.ASCII)))

    for m in modules:
        for name, v in vars(m).items():
            if not name.startswith("__"):
                visit(f"{m.__name__}.{name}", v)
    return out


def analysis_modules() -> list[ModuleType]:
    import importlib

    names = ["kafka_runbooks.analyze.signatures", "kafka_runbooks.analyze.parsers.base",
             "kafka_runbooks.analyze.parsers.layouts", "kafka_runbooks.analyze.parsers.logs",
             "kafka_runbooks.analyze.parsers.kafka_log", "kafka_runbooks.analyze.parsers.jstack",
             "kafka_runbooks.analyze.parsers.sockets", "kafka_runbooks.analyze.parsers.misc",
             "kafka_runbooks.analyze.parsers.gc_log", "kafka_runbooks.analyze.parsers.zookeeper",
             "kafka_runbooks.analyze.parsers.dumplog", "kafka_runbooks.analyze.parsers.listings",
             "kafka_runbooks.analyze.known_bugs"]
    return [importlib.import_module(n) for n in names]


def audit_all() -> list[Problem]:
    from . import signatures as S

    out = []
    seen = set()
    pats = compiled_patterns(analysis_modules())
    pats += [(f"signatures:{s.name}:{s.versions}", re.compile(s.pattern, re.ASCII)) for s in S.SIGNATURES]
    pats += [(f"signatures.EXCEPTION_ATTRS[{i}]", re.compile(p, re.ASCII)) for i, (_, _, p) in enumerate(S.EXCEPTION_ATTRS)]
    for where, rx in pats:
        key = (rx.pattern, rx.flags)
        if key in seen:
            continue
        seen.add(key)
        for rule in audit_pattern(rx.pattern, rx.flags & ~re.UNICODE if isinstance(rx.pattern, str) else rx.flags):
            out.append(Problem(where, rx.pattern, rule))
    return out


if __name__ == "__main__":  # pragma: no cover
    probs = audit_all()
    for p in probs:
        print(f"{p.where}: {p.rule}: {p.pattern}")
    sys.exit(1 if probs else 0)
