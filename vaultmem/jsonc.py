"""JSON settings files as people keep them: with `//` and `/* */` comments (Gemini CLI reads
its settings.json through strip-json-comments, so its users write them) and in their own layout.

`loads` reads one. `with_member` (and `with_member_at`, one level down) changes one member of such
a file's text, `appended` adds an element to a list and `without_element` takes one out, each
leaving every other byte as it was: other members, comments, indentation, lists kept on one
line. It only edits text; hooks.py's hook install and uninstall are what write it, atomically.
"""

from __future__ import annotations

import json
import re
from typing import Any

DROP = object()  # with_member's value that takes the member out

_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)
_WS = re.compile(r"\s*")


def _skip(bare: str, i: int) -> int:
    """Where the white space that starts at `i` ends."""
    space = _WS.match(bare, i)
    assert space is not None  # \s* matches everywhere
    return space.end()


class Unsafe(ValueError):
    """The change cannot be made without losing a comment of the file."""


def strip_comments(text: str) -> str:
    """`text` with every comment outside a string turned into spaces (newlines kept), so that
    offsets and line numbers in it are the original's."""
    return _TOKEN.sub(lambda m: m[0] if m[0][0] == '"' else re.sub(r"[^\n]", " ", m[0]), text)


def loads(text: str) -> Any:
    """The value of a JSON text that may hold comments (ValueError when it is no JSON)."""
    return json.loads(strip_comments(text))


def with_member(text: str, key: str, value: Any = DROP, prefix: str = "", unit: str | None = None) -> str:
    """`text` (a JSON object, comments allowed) with its top-level member `key` set to `value`,
    or taken out when `value` is DROP; every byte outside that member stays. A new member goes
    last, on its own line, in the file's indentation. Raises Unsafe when a comment would be lost
    (one inside the member's old value), ValueError when `text` is no JSON object. `prefix` and
    `unit`: where `text` is an object inside a file (with_member_at), the white space its line
    begins with and the file's step of indentation."""
    bare = strip_comments(text)
    found = re.search(r'^([ \t]+)"', text, re.M)
    unit = unit or (found.group(1) if found else "  ")
    indent = (found.group(1) if found and prefix else prefix + unit)
    if not bare.strip():
        if text.strip():
            raise Unsafe("the file holds comments alone")
        return json.dumps({} if value is DROP else {key: value}, ensure_ascii=False, indent=unit) + "\n"
    opening, closing, members = _members(bare)
    shown = "" if value is DROP else json.dumps(value, ensure_ascii=False, indent=unit).replace("\n", "\n" + indent)
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
        if prefix and "\n" not in bare[opening:closing]:  # an object inside kept on one line: so is the new member
            return text[:end] + f", {json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}" \
                + text[end:]
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


def _members(bare: str, at: int = 0) -> tuple[int, int, list[tuple[str, int, int, int]]]:
    """Where a JSON object's braces are and, for each top-level member in order, its key, where
    the key starts and where its value starts and ends; the object begins at or after `at`.
    `bare` holds no comments."""
    decode = json.JSONDecoder().raw_decode
    i = _skip(bare, at)
    if bare[i:i + 1] != "{":
        raise ValueError("not a JSON object")
    opening = i
    i = _skip(bare, i + 1)
    members: list[tuple[str, int, int, int]] = []
    if bare[i:i + 1] == "}":
        return opening, i, members
    while True:
        start = i
        key, i = decode(bare, i)
        i = _skip(bare, i)
        if not isinstance(key, str) or bare[i:i + 1] != ":":
            raise ValueError(f"no member at offset {start}")
        vstart = _skip(bare, i + 1)
        _, vend = decode(bare, vstart)
        members.append((key, start, vstart, vend))
        i = _skip(bare, vend)
        if bare[i:i + 1] == "}":
            return opening, i, members
        if bare[i:i + 1] != ",":
            raise ValueError(f"no comma at offset {i}")
        i = _skip(bare, i + 1)


def _elements(bare: str, opening: int) -> tuple[int, list[tuple[int, int]]]:
    """Where a JSON array's closing bracket is, and each element's start and end; the array's
    `[` is at `opening`. `bare` holds no comments."""
    decode = json.JSONDecoder().raw_decode
    i = _skip(bare, opening + 1)
    out: list[tuple[int, int]] = []
    if bare[i:i + 1] == "]":
        return i, out
    while True:
        _, end = decode(bare, i)
        out.append((i, end))
        i = _skip(bare, end)
        if bare[i:i + 1] == "]":
            return i, out
        if bare[i:i + 1] != ",":
            raise ValueError(f"no comma at offset {i}")
        i = _skip(bare, i + 1)


def _span(bare: str, path: tuple) -> tuple[int, int]:
    """Where the value at `path` (object keys and array indexes, from the top) starts and ends."""
    start = _skip(bare, 0)
    end = json.JSONDecoder().raw_decode(bare, start)[1]
    for step in path:
        if isinstance(step, str):
            _, _, members = _members(bare, start)
            found = [(vs, ve) for key, _, vs, ve in members if key == step]
            if not found:
                raise KeyError(step)
            start, end = found[-1]
        else:
            _, elements = _elements(bare, start)
            start, end = elements[step]
    return start, end


def _line_indent(text: str, at: int) -> str:
    """The white space that begins the line `at` is on."""
    rest = text[text.rfind("\n", 0, at) + 1:]
    return rest[:len(rest) - len(rest.lstrip(" \t"))]


def _unit(text: str) -> str:
    found = re.search(r'^([ \t]+)["{\[]', text, re.M)
    return found.group(1) if found else "  "


def with_member_at(text: str, path: tuple, key: str, value: Any = DROP) -> str:
    """`text` with the member `key` of the object at `path` set to `value` (or taken out: DROP),
    every byte outside that member kept (with_member, one level down)."""
    if not path:
        return with_member(text, key, value)
    bare = strip_comments(text)
    start, end = _span(bare, path)
    inner = with_member(text[start:end], key, value, prefix=_line_indent(text, start), unit=_unit(text))
    return text[:start] + inner + text[end:]


def appended(text: str, path: tuple, value: Any) -> str:
    """`text` with `value` added last to the array at `path`; every byte of the elements there
    stays (a one-line array gets a one-line element, as its others are)."""
    bare = strip_comments(text)
    start, end = _span(bare, path)
    closing, elements = _elements(bare, start)
    unit = _unit(text)
    if not elements:
        base = _line_indent(text, start)
        shown = json.dumps(value, ensure_ascii=False, indent=unit).replace("\n", "\n" + base + unit)
        return text[:start] + "[\n" + base + unit + shown + "\n" + base + "]" + text[end:]
    last_start, last_end = elements[-1]
    if "\n" not in bare[start:end]:  # kept on one line: so is the new element
        return text[:last_end] + ", " + json.dumps(value, ensure_ascii=False) + text[last_end:]
    base = _line_indent(text, last_start)
    shown = json.dumps(value, ensure_ascii=False, indent=unit).replace("\n", "\n" + base)
    return text[:last_end] + ",\n" + base + shown + text[last_end:]


def without_element(text: str, path: tuple, index: int) -> str:
    """`text` with the element `index` of the array at `path` taken out, with its comma; every
    other byte stays. Raises Unsafe when a comment would go with it."""
    bare = strip_comments(text)
    start, _ = _span(bare, path)
    _, elements = _elements(bare, start)
    s, e = elements[index]
    if index + 1 < len(elements):
        cut_from, cut_to = s, elements[index + 1][0]
    elif index:
        cut_from, cut_to = elements[index - 1][1], e
    else:
        cut_from, cut_to = s, e
    if bare[cut_from:cut_to] != text[cut_from:cut_to]:
        raise Unsafe("the hook entry holds comments")
    return text[:cut_from] + text[cut_to:]
