"""JSON settings files as people keep them: with `//` and `/* */` comments (Gemini CLI reads
its settings.json through strip-json-comments, so its users write them) and in their own layout.

`loads` reads one. `with_member` changes one top-level member of such a file's text and leaves
every other byte as it was: other members, comments, indentation, lists kept on one line. It
only edits text; agent.py's hook install and uninstall are what write it, atomically.
"""

from __future__ import annotations

import json
import re
from typing import Any

DROP = object()  # with_member's value that takes the member out

_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)
_WS = re.compile(r"\s*")


class Unsafe(ValueError):
    """The change cannot be made without losing a comment of the file."""


def strip_comments(text: str) -> str:
    """`text` with every comment outside a string turned into spaces (newlines kept), so that
    offsets and line numbers in it are the original's."""
    return _TOKEN.sub(lambda m: m[0] if m[0][0] == '"' else re.sub(r"[^\n]", " ", m[0]), text)


def loads(text: str) -> Any:
    """The value of a JSON text that may hold comments (ValueError when it is no JSON)."""
    return json.loads(strip_comments(text))


def with_member(text: str, key: str, value: Any = DROP) -> str:
    """`text` (a JSON object, comments allowed) with its top-level member `key` set to `value`,
    or taken out when `value` is DROP; every byte outside that member stays. A new member goes
    last, on its own line, in the file's indentation. Raises Unsafe when a comment would be lost
    (one inside the member's old value), ValueError when `text` is no JSON object."""
    bare = strip_comments(text)
    found = re.search(r'^([ \t]+)"', text, re.M)
    indent = found.group(1) if found else "  "
    if not bare.strip():
        if text.strip():
            raise Unsafe("the file holds comments alone")
        return json.dumps({} if value is DROP else {key: value}, ensure_ascii=False, indent=indent) + "\n"
    opening, closing, members = _members(bare)
    shown = "" if value is DROP else json.dumps(value, ensure_ascii=False, indent=indent).replace("\n", "\n" + indent)
    rendered = f"{json.dumps(key, ensure_ascii=False)}: {shown}"
    at = max((i for i, m in enumerate(members) if m[0] == key), default=None)
    if at is None:
        if value is DROP:
            return text
        if not members:
            rest = text[opening + 1:]
            if "\n" not in bare[opening + 1:closing]:
                rest = "\n" + rest.lstrip(" \t")
            return text[: opening + 1] + "\n" + indent + rendered + rest
        end = members[-1][3]
        eol = bare.find("\n", end, closing)
        if eol != -1 and not bare[end:eol].strip():  # the last member's line ends there (a comment may follow it)
            return text[:end] + "," + text[end:eol] + "\n" + indent + rendered + text[eol:]
        # the brace closes on the last value's line (`{"a": 1}`): it closes this one's as well,
        # so that dropping the member again gives back the same bytes
        return text[:end] + ",\n" + indent + rendered + text[end:]
    _, start, vstart, vend = members[at]
    if value is not DROP:
        if bare[vstart:vend] != text[vstart:vend]:
            raise Unsafe(f'"{key}" holds comments')
        return text[:vstart] + shown + text[vend:]
    if bare[start:vend] != text[start:vend]:
        raise Unsafe(f'"{key}" holds comments')
    if at + 1 < len(members):  # another member follows: take this one and its comma
        nxt = members[at + 1][1]
        if bare[vend:nxt] == text[vend:nxt]:
            return text[:start] + text[nxt:]
        return text[:start] + text[bare.index(",", vend) + 1:]  # the comments after it stay
    before = members[at - 1][3] if at else opening + 1
    if bare[before:vend] == text[before:vend]:  # no comment between: the comma before goes with it
        if len(members) == 1 and bare == text:
            return "{}" + text[len(text.rstrip()):]
        return text[:before] + text[vend:]
    line = bare.rfind("\n", before, start)
    cut = line if line != -1 and not bare[line:start].strip() else start
    if at:
        comma = bare.index(",", before)
        return text[:comma] + text[comma + 1:cut] + text[vend:]
    return text[:cut] + text[vend:]


def _members(bare: str) -> tuple[int, int, list[tuple[str, int, int, int]]]:
    """Where a JSON object's braces are and, for each top-level member in order, its key, where
    the key starts and where its value starts and ends. `bare` holds no comments."""
    decode = json.JSONDecoder().raw_decode
    i = _WS.match(bare).end()
    if bare[i:i + 1] != "{":
        raise ValueError("not a JSON object")
    opening = i
    i = _WS.match(bare, i + 1).end()
    members: list[tuple[str, int, int, int]] = []
    if bare[i:i + 1] == "}":
        return opening, i, members
    while True:
        start = i
        key, i = decode(bare, i)
        i = _WS.match(bare, i).end()
        if not isinstance(key, str) or bare[i:i + 1] != ":":
            raise ValueError(f"no member at offset {start}")
        vstart = _WS.match(bare, i + 1).end()
        _, vend = decode(bare, vstart)
        members.append((key, start, vstart, vend))
        i = _WS.match(bare, vend).end()
        if bare[i:i + 1] == "}":
            return opening, i, members
        if bare[i:i + 1] != ",":
            raise ValueError(f"no comma at offset {i}")
        i = _WS.match(bare, i + 1).end()
