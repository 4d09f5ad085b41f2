"""jsonc: one top-level member of a JSON settings file changed, comments and layout kept."""

import json

import pytest

from vaultmem import jsonc

HOOKS = {"SessionStart": [{"hooks": [{"type": "command", "command": "vaultmem hook session-start"}]}]}


@pytest.mark.parametrize("text", [
    '{\n  "a": "// no comment /* here */ \\" //",\n  "b": [1,\n    2] /* end */\n}',
    '{\n\t"a": 1, // one\n\t/* two */ "b": {"c": [3]}\n}\n',
    '{ // empty\n}\n',
    '{}',
    '{"a": 1}',
    '{"a": [1, 2], // two\n"b": 2 /* last */}\n',
], ids=["comment-like-strings", "tabs", "empty-with-comment", "empty", "one-line", "closed-on-last-line"])
def test_a_member_added_then_taken_out_gives_back_every_byte(text):
    added = jsonc.with_member(text, "hooks", HOOKS)
    assert jsonc.loads(added) == {**jsonc.loads(text), "hooks": HOOKS}
    assert jsonc.with_member(added, "hooks") == text
    if not jsonc.loads(text) or text.rstrip().splitlines()[-1].strip() != "}":
        return  # an empty object opens up for its first member; a brace on the last value's line moves on
    for line in text.splitlines():  # every line is there, at most with a comma after its value
        assert any(line == got or line.replace(" //", ", //").replace(" /*", ", /*", 1) == got
                   or got == line + "," for got in added.splitlines()), (line, added)


def test_strings_are_not_comments_and_offsets_hold():
    text = '{"url": "http://x/*y*/", /* c */ "n": 1} // end'
    bare = jsonc.strip_comments(text)
    assert len(bare) == len(text) and json.loads(bare) == {"url": "http://x/*y*/", "n": 1}


def test_a_member_that_is_not_last_goes_with_its_comma_and_the_comments_after_it_stay():
    text = '{\n  "hooks": {"Stop": []}, // mine\n  "x": 1\n}\n'
    assert jsonc.loads(jsonc.with_member(text, "hooks")) == {"x": 1}
    assert "// mine" in jsonc.with_member(text, "hooks")
    assert jsonc.with_member('{"hooks": 1, "x": 2}', "hooks") == '{"x": 2}'
    replaced = jsonc.with_member(text, "hooks", {"A": []})
    assert replaced.endswith('}, // mine\n  "x": 1\n}\n') and jsonc.loads(replaced)["hooks"] == {"A": []}


def test_what_would_lose_a_comment_or_is_no_object_is_refused():
    with pytest.raises(jsonc.Unsafe):
        jsonc.with_member('{"hooks": {/* off */}}', "hooks", HOOKS)
    with pytest.raises(jsonc.Unsafe):
        jsonc.with_member('{"hooks": [1, // one\n 2]}', "hooks")
    with pytest.raises(jsonc.Unsafe):
        jsonc.with_member("// nothing yet\n", "hooks", HOOKS)
    with pytest.raises(ValueError):
        jsonc.with_member("[1, 2]", "hooks", HOOKS)
    assert jsonc.with_member("", "hooks", {}) == '{\n  "hooks": {}\n}\n'
