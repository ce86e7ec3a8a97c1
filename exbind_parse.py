"""Reading model outputs: JSON parsing, the alias table, prediction kinds (docs/specification.md §4 step 1, §9).

:func:`parse_prediction` finds the JSON value an output carries (strict, fenced, extracted
or failed) in time linear in the output's length; :func:`normalize_reference` maps it to a
format's output keys through the closed alias table; :func:`prediction_kind` tells
references, rankings and clicks apart from the value's shape.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

try:  # inside evaluate's module cache the evaluator files sit in one package
    from .exbind_vocabulary import GRAPH_ALIASES, SINGLE_KEY_ALIASES
except ImportError:  # imported from the repository root
    from exbind_vocabulary import GRAPH_ALIASES, SINGLE_KEY_ALIASES


class _Pairs(dict):
    """JSON object that remembers keys given twice with different values."""

    conflicts: frozenset = frozenset()


def _object_pairs(pairs):
    obj = _Pairs(pairs)
    if len(obj) == len(pairs):  # no key given twice: nothing can conflict (the common case)
        return obj
    obj = _Pairs()
    conflicts = set()
    for key, value in pairs:
        if key in obj and obj[key] != value:
            conflicts.add(key)
        obj[key] = value
    if conflicts:
        obj.conflicts = frozenset(conflicts)
    return obj


# One decoder for every parse (json.loads with a hook builds a new one per call). Its C
# scanner is what json.loads runs; ``_loads`` requires it to consume the whole text, which
# is json.loads' rule for text without surrounding whitespace (callers strip or slice it).
_SCAN = json.JSONDecoder(object_pairs_hook=_object_pairs).scan_once


# The last character of any JSON text: a closing brace, bracket or quote, a digit, or the
# end of true/false, null, NaN, Infinity. Text ending otherwise cannot be JSON, which
# spares the scanner (and its exception) on prose and truncated answers.
_JSON_LAST_CHARS = frozenset('}]"0123456789elNy')


def _loads(text: str):
    """json.loads (duplicate-aware objects) of whitespace-free-edged text that never raises: (ok, value)."""
    if not text or text[-1] not in _JSON_LAST_CHARS:
        return False, None
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError, TypeError, MemoryError):
        return False, None
    if end != len(text):
        return False, None
    return True, value


# A fence: three backticks, an optional language tag, the body up to the next three backticks.
# The tag and the blanks after it are possessive (``*+``): with plain ``*`` an unclosed fence
# followed by a long word backtracked quadratically (``"```" + "a" * 20000`` took 16 s).
_FENCE = re.compile(r"```[A-Za-z0-9_-]*+[ \t]*+\n?(.*?)```", re.DOTALL)

# Extraction limits (docs/specification.md §4 step 1; issue 11 item 2). Only an object with at least one key
# can carry an answer, so a start is a ``{`` followed (after JSON whitespace) by ``"``; the
# last MAX_EXTRACT_STARTS of them are decoded, right to left. Each decode costs the
# characters the JSON scanner read; the total may not exceed
# EXTRACT_BUDGET_FACTOR x len(text) + EXTRACT_BUDGET_EXTRA characters, so extraction is
# linear in the output length whatever its shape (one strict parse plus at most twice the
# length again). When the budget runs out, the objects decoded so far are used; if none
# has a recognised key the output is ``unresolved`` with :data:`BUDGET_REASON`.
MAX_EXTRACT_STARTS = 256
EXTRACT_BUDGET_FACTOR = 2
EXTRACT_BUDGET_EXTRA = 65_536
BUDGET_REASON = ("no JSON object with a recognised key before the extraction budget ran out "
                 f"({EXTRACT_BUDGET_FACTOR} x the output length + {EXTRACT_BUDGET_EXTRA} characters decoded); "
                 "return the answer as strict JSON")
FAILED_REASON = "no JSON object with a recognised key"
# A start read backwards: '"', JSON whitespace, '{' (the text is reversed once, so finding
# the last starts costs one C-speed scan, never one Python step per brace).
_REVERSED_START = re.compile(r'"[ \t\n\r]*\{')


def _object_starts(text: str) -> list[int]:
    """Positions of the last :data:`MAX_EXTRACT_STARTS` object starts, right to left."""
    n = len(text)
    starts = []
    for match in _REVERSED_START.finditer(text[::-1]):
        starts.append(n - match.end())
        if len(starts) == MAX_EXTRACT_STARTS:
            break
    return starts


# First decode of each start: a window of this many characters (an answer object is far
# smaller). Only an object still open at the window's end is decoded again from its start
# to the end of the text. A window keeps the JSON scanner's errors cheap: a JSONDecodeError
# counts the lines before its position, so on the whole text it costs O(position).
_WINDOW = 4096
_WINDOW_MARGIN = 16  # a literal, number or escape cut by the window fails this close to its end


def _scan_at(text: str, start: int, stop: int) -> tuple[Optional[tuple[int, Any]], int]:
    """Decode the JSON value at ``start`` reading only ``text[start:stop]``.

    Returns:
        ``((end, value) or None, reached)``: ``end`` is absolute; ``reached`` is how far
        (absolute) the scanner read before it failed (``stop`` when it ran out of text).
    """
    chunk = text[start:stop]
    try:
        value, end = _SCAN(chunk, 0)
    except StopIteration as exc:  # a value was expected where the chunk (or a non-value) is
        reached = exc.value if isinstance(exc.value, int) else len(chunk)
    except ValueError as exc:  # JSONDecodeError carries the failing position ...
        reached = exc.pos if isinstance(getattr(exc, "pos", None), int) else len(chunk)
        if str(getattr(exc, "msg", "")).startswith("Unterminated string"):
            reached = len(chunk)  # ... except here: the string's start, though it read to the end
    except (RecursionError, TypeError, MemoryError):
        reached = len(chunk)
    else:
        return (start + end, value), start + end
    return None, start + reached


def _decode_candidates(text: str) -> tuple[list[tuple[int, int, Any]], bool]:
    """Decode the object starts of ``text`` within the budget.

    Each start is decoded in a window of :data:`_WINDOW` characters, charged what the
    scanner read; an object still open at the window's end is decoded again over the rest
    of the text, charged twice the rest's length (its copy and its scan).

    Returns:
        ``([(start, end, value)], exhausted)``: every object the JSON scanner decoded
        (``end`` is just past its closing brace) in decoding order, and whether the budget
        ran out before every start was tried.
    """
    n = len(text)
    budget = EXTRACT_BUDGET_FACTOR * n + EXTRACT_BUDGET_EXTRA
    found = []
    for start in _object_starts(text):
        stop = min(n, start + _WINDOW)
        hit, reached = _scan_at(text, start, stop)
        cost = reached - start  # what the scanner read (the window's copy is a bounded constant)
        if hit is None and stop < n and reached >= stop - _WINDOW_MARGIN:
            budget -= cost
            if budget < 0:
                return found, True
            hit, reached = _scan_at(text, start, n)
            cost = 2 * (n - start)  # the copy of the rest, and the scan (at most as long)
        if hit is not None:
            found.append((start, hit[0], hit[1]))
        budget -= cost
        if budget < 0:
            return found, True
    return found, False


def _dicts_last_first(value: Any):
    """Every JSON object in ``value`` (itself included), in decreasing order of closing position.

    A parent closes after its children and a later sibling after an earlier one, so this is
    the reverse post-order: the node, then its children right to left (iterative, so the
    depth the JSON scanner accepts never exhausts the Python stack).
    """
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


_GRAPH_KEYS = frozenset(GRAPH_ALIASES)
_SINGLE_KEYS = frozenset(SINGLE_KEY_ALIASES)
_CLICK_KEYS = frozenset(("x", "y", "point"))
_KIND_KEYS = frozenset(("ranking",)) | _CLICK_KEYS


def recognised_keys(fmt: str) -> frozenset[str]:
    """Keys that make a JSON object count as an answer for format ``fmt``."""
    if fmt == "graph":
        return _GRAPH_KEYS
    return _SINGLE_KEYS


def _extract(text: str, keys: frozenset) -> tuple[Any, Optional[str]]:
    """The last balanced object of ``text`` with a key in ``keys`` (else a ranking/click key).

    Returns:
        ``(value, None)`` or ``(None, reason)``.
    """
    found, exhausted = _decode_candidates(text)
    found.sort(key=lambda item: item[1], reverse=True)
    ordered = []  # every decoded object and the objects inside it, last-closing first
    covered: list[tuple[int, int]] = []
    for start, end, value in found:
        if any(s <= start and end <= e for s, e in covered):
            continue  # nested in an object already walked (its dicts are listed)
        covered.append((start, end))
        ordered.extend(_dicts_last_first(value))
    for value in ordered:
        if not keys.isdisjoint(value):
            return value, None
    # Only when no object carries a reference key (so reference answers extract exactly as
    # before): the last object shaped as a ranking or a click.
    for value in ordered:
        if not _KIND_KEYS.isdisjoint(value):
            return value, None
    return None, BUDGET_REASON if exhausted else FAILED_REASON


def parse_prediction_with_reason(text: Any, fmt: str) -> tuple[Any, str, Optional[str]]:
    """:func:`parse_prediction` plus the reason when the parse path is ``"failed"``.

    Returns:
        ``(value, parse_path, reason)``; ``reason`` is None unless ``parse_path`` is
        ``"failed"`` (then :data:`FAILED_REASON`, or :data:`BUDGET_REASON` when the
        extraction budget ran out first).
    """
    if not isinstance(text, str):
        return None, "failed", FAILED_REASON
    ok, value = _loads(text.strip())
    if ok:
        return value, "strict", None
    if "```" in text:
        for body in _FENCE.findall(text):
            ok, value = _loads(body.strip())
            if ok:
                return value, "fenced", None
    if "{" not in text:
        return None, "failed", FAILED_REASON
    value, reason = _extract(text, _GRAPH_KEYS if fmt == "graph" else _SINGLE_KEYS)
    if reason is not None:
        return None, "failed", reason
    return value, "extracted", None


def parse_prediction(text: Any, fmt: str) -> tuple[Any, str]:
    """Find the JSON value a model output carries (docs/specification.md §4 step 1).

    Cost: linear in ``len(text)``: one strict parse, one scan of the fences, then
    extraction within a budget of :data:`EXTRACT_BUDGET_FACTOR` x the length plus
    :data:`EXTRACT_BUDGET_EXTRA` decoded characters (see the module constants).

    Args:
        text: raw model output (any value; non-strings parse as ``failed``).
        fmt: surface format, for the recognised keys of the extraction step.

    Returns:
        ``(value, parse_path)``: ``parse_path`` is ``"strict"`` (the whole text is JSON),
        ``"fenced"`` (the body of a code fence), ``"extracted"`` (the last-closing
        balanced object with a recognised key of ``fmt``, objects nested in other objects
        included; when there is none, the last one with a ``ranking``, ``x``, ``y`` or
        ``point`` key) or ``"failed"`` (``value`` is None). Objects are decoded from each of
        the last :data:`MAX_EXTRACT_STARTS` ``{"`` starts on its own, so a stray brace or
        an odd quote in the prose before an answer cannot hide it. A bare ``[x, y]``
        click is read only as strict or fenced JSON.
    """
    value, path, _reason = parse_prediction_with_reason(text, fmt)
    return value, path


# Alias table of each single-reference output key, built once (normalize_reference's hot path).
_SINGLE_ALIAS_TABLES = {key: {k: key for k in SINGLE_KEY_ALIASES} for key in ("target_id", "dom_id", "cell_id")}


def normalize_reference(value: Any, output_keys) -> tuple[Optional[dict], Optional[str]]:
    """Map a parsed JSON value to the format's output keys through the alias table.

    Args:
        value: what :func:`parse_prediction` returned.
        output_keys: the case's output keys, e.g. ``["cell_id"]`` or
            ``["source_id", "target_id"]``.

    Returns:
        ``(reference, None)`` with whitespace-stripped string ids, or ``(None, reason)``
        when the value is unresolved: not an object, a conflicting duplicate key, a
        required key missing, two aliases with different values, or a value that is not a
        non-empty string. Ids are case-sensitive and never repaired.
    """
    if not isinstance(value, dict):
        return None, f"expected a JSON object with {list(output_keys)}, got {type(value).__name__}"
    if len(output_keys) == 1:
        single = output_keys[0]
        if len(value) == 1 and not getattr(value, "conflicts", None):  # fast path: {"<alias>": "<id>"}
            ((key, raw),) = value.items()
            if key in _SINGLE_KEYS and isinstance(raw, str):
                ident = raw.strip()
                if ident:
                    return {single: ident}, None
        aliases = _SINGLE_ALIAS_TABLES.get(single) if isinstance(single, str) else None
        if aliases is None:
            aliases = {k: single for k in SINGLE_KEY_ALIASES}
    else:
        aliases = GRAPH_ALIASES
    conflicts = getattr(value, "conflicts", frozenset())
    found: dict[str, str] = {}
    for key, raw in value.items():
        target_key = aliases.get(key)
        if target_key is None:
            continue
        if key in conflicts:
            return None, f"conflicting duplicate key {key!r}"
        if not isinstance(raw, str) or not raw.strip():
            return None, f"{key!r} must be a non-empty string id"
        ident = raw.strip()
        if target_key in found and found[target_key] != ident:
            return None, f"conflicting values for {target_key!r}"
        found[target_key] = ident
    missing = [k for k in output_keys if k not in found]
    if missing:
        return None, f"missing key {missing[0]!r}"
    return {k: found[k] for k in output_keys}, None


def is_number(value: Any) -> bool:
    """A JSON number (int or float; a bool is not a number here)."""
    return type(value) is int or type(value) is float


def prediction_kind(value: Any, fmt: str) -> str:
    """The kind of a parsed prediction, from its JSON shape (the one place kinds are decided).

    Args:
        value: what :func:`parse_prediction` returned.
        fmt: the case's surface format.

    Returns:
        ``"reference"`` for an object with a recognised reference key of ``fmt``
        (:func:`recognised_keys`; such an object is a reference whatever else it holds, so
        reference scoring is unchanged); else ``"ranking"`` for an object with a
        ``ranking`` key; else ``"click"`` for an object with an ``x``, ``y`` or ``point``
        key, or a list of exactly two JSON numbers; else ``"reference"`` (which
        :func:`normalize_reference` then reads or declares unresolved).
    """
    if isinstance(value, dict):
        if not recognised_keys(fmt).isdisjoint(value):
            return "reference"
        if "ranking" in value:
            return "ranking"
        if not _CLICK_KEYS.isdisjoint(value):
            return "click"
        return "reference"
    if type(value) is list and len(value) == 2 and is_number(value[0]) and is_number(value[1]):
        return "click"
    return "reference"
