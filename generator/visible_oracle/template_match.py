"""Reading an instruction back through the public instruction templates (visible oracle).

The instruction templates ship with the release (``generator/data/*.json``), so a careful
reader may use them: each template becomes a regular expression (compiled once) whose
placeholders match any text (names, labels) or what the public vocabulary lists (roles,
ordinals, numbers); the solver then keeps only readings whose values the observation shows.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Mapping, Optional

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def alternatives(values: Iterable[str]) -> str:
    """A regex alternation matching any of ``values`` literally (longest first); ``(?!)``
    (matches nothing) when ``values`` is empty."""
    vals = sorted({v for v in values if v}, key=lambda v: (-len(v), v))
    return "|".join(re.escape(v) for v in vals) if vals else "(?!)"


ANY_TEXT = r".+?"


def template_pattern(template: str, fields: Mapping[str, str]) -> Optional[re.Pattern]:
    """Compile ``template`` (``str.format`` placeholders such as ``{group}``) into an anchored
    regex with one named group per placeholder.

    Args:
        template: an instruction template from the public data.
        fields: placeholder name -> regex of the values it may take. A placeholder that occurs
            twice must repeat the same value (a backreference).

    Returns:
        The compiled pattern, or ``None`` when the template uses a placeholder that
        ``fields`` does not describe (that template cannot be read back). Compiled patterns
        are cached by (template, fields).
    """
    return _compiled(template, tuple(sorted(fields.items())))


@lru_cache(maxsize=1024)
def _compiled(template: str, fields_items: tuple) -> Optional[re.Pattern]:
    fields = dict(fields_items)
    parts: list[str] = []
    seen: set[str] = set()
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        name = m.group(1)
        if name not in fields:
            return None
        parts.append(re.escape(template[pos : m.start()]))
        parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>{fields[name]})")
        seen.add(name)
        pos = m.end()
    parts.append(re.escape(template[pos:]))
    return re.compile("".join(parts))


def read_instruction(instruction: str, templates: Iterable[tuple[object, str]], fields: Mapping[str, str]):
    """Every ``(tag, groupdict)`` for which a template matches the whole ``instruction``.

    Args:
        instruction: the case's instruction text (surrounding whitespace ignored).
        templates: ``(tag, template)`` pairs; ``tag`` is passed through (e.g. kind and depth).
        fields: see :func:`template_pattern`.
    """
    text = instruction.strip()
    out = []
    for tag, template in templates:
        pattern = template_pattern(template, fields)
        if pattern is None:
            continue
        m = pattern.fullmatch(text)
        if m is not None:
            out.append((tag, m.groupdict()))
    return out


def output_keys(view: Mapping) -> list[str]:
    """The answer keys the output schema of ``view`` asks for (e.g. ``["target_id"]``);
    ``[]`` when the schema is not a JSON object."""
    import json

    try:
        schema = json.loads(view.get("output_schema") or "")
    except (TypeError, ValueError):
        return []
    return list(schema) if isinstance(schema, dict) else []
