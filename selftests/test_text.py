"""A failure's texts are data (grader/text.py Phrase) rendered in a language where the grader scores
(grader/check_text.py render): never English read back."""
from __future__ import annotations

import json
import pickle

from grader.check_text import render
from grader.sandbox.protocol import StudentError, checked_reply
from grader.text import Phrase, data, from_data


def test_a_phrase_reads_as_its_english_and_keeps_its_template_and_fields():
    shape = Phrase("expected shape {expected}, got {got}", expected="(2, 3)", got=(3, 2))
    assert shape == "expected shape (2, 3), got (3, 2)" and isinstance(shape, str)
    assert shape.template == "expected shape {expected}, got {got}" and shape.fields["got"] == "(3, 2)"
    message = Phrase("{what}: {problem}", what="split_heads(x (2, 5, 8), 2)", problem=shape)
    assert data(message) == {"text": "{what}: {problem}", "fields": {
        "what": "split_heads(x (2, 5, 8), 2)",
        "problem": {"text": "expected shape {expected}, got {got}", "fields": {"expected": "(2, 3)", "got": "(3, 2)"}}}}
    again = from_data(json.loads(json.dumps(data(message))))
    assert again == message and data(again) == data(message)
    assert data(pickle.loads(pickle.dumps(message))) == data(message)


def test_composing_phrases_keeps_each_part():
    call = Phrase("x after {name}(x, -1)", name="softmax")
    for composed, parts in ((call + " (float64)", [call, " (float64)"]), ("in " + call, ["in ", call]),
                            (Phrase.joined("; ", [call, "other"]), [call, "other"])):
        assert isinstance(composed, Phrase) and list(composed.fields.values()) == parts
        assert composed == "".join(parts) if not composed.template.startswith("{i0}") else composed == "; ".join(parts)
    assert type(call.upper()) is str  # any other operation gives a plain string


def test_a_check_message_renders_in_chinese_part_by_part():
    problem = Phrase("expected shape {expected}, got {got}", expected="(2, 3)", got="(3, 2)")  # (compare.py's)
    message = Phrase("{what}: {problem}\n  hint: {hint}", what="split_heads(x (2, 5, 8), 2)", problem=problem,
                     hint="functions must not modify their inputs in place")
    assert render(message, "en") == message
    shown = render(data(message), "zh")
    assert shown.startswith("split_heads(x (2, 5, 8), 2)：") and "(2, 3)" in shown and "(3, 2)" in shown
    assert shown.split("\n")[1].startswith("  提示：") and "expected" not in shown and "hint" not in shown


def test_what_a_worker_forges_is_shown_never_formatted():
    """A worker's reply is untrusted: a template that reaches into its fields (an attribute, an index, a format
    spec that would pad to gigabytes) is shown as the text it is."""
    for template in ("{x.__class__}", "{x[0]}", "{x:>999999999}", "{x!r}", "{y}"):
        assert from_data({"text": template, "fields": {"x": "a"}}) == template
    assert from_data({"text": "{x}", "fields": {"x": {"text": "deep", "fields": {}}}}) == "deep"
    assert from_data(["not", "text"]) == "['not', 'text']"
    reply = checked_reply({"id": 1, "error": {"class": "StudentError", "type": "ValueError", "kinds": ["ValueError"],
                                              "message": {"text": "{a}", "fields": {"a": "x" * 10_000}},
                                              "where": [["f.py", 3, "g", "return 1 / 0"], "junk"]}}, "call", 1)
    error = reply["error"]
    assert len(error["message"]) == 2000  # each text cut as every text a worker sends
    raised = StudentError(error["type"], error["message"], error["where"], tuple(error["kinds"]), "attention.f")
    assert raised.where == "  at f.py:3 in g: return 1 / 0"
    assert "「ValueError: " in render(raised.describe(), "zh") and "位于 f.py:3" in render(raised.describe(), "zh")
