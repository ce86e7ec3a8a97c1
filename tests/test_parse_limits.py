"""Parsing stays linear in the output's length (issue 11 item 2; docs/specification.md §4 step 1).

The exact inputs that stalled scoring for minutes become regression tests here. They
assert the status, parse path and reason of each output, never a time: the timings, next
to the ``json.loads`` floor, are printed by ``scripts/benchmark_scoring.py --worst-case``.
"""

from __future__ import annotations

import json

import pytest

from exbind_parse import BUDGET_REASON, FAILED_REASON, MAX_EXTRACT_STARTS, parse_prediction_with_reason
from exbind_scoring import load_reference, parse_prediction, score_prediction
from composition.release import broad_plans, generate_latent

TABLE_REFERENCE = next(generate_latent(plan).references[0] for plan in broad_plans() if plan.family == "table")
GOLD = load_reference(TABLE_REFERENCE)["gold"]["cell_id"]
ANSWER = json.dumps({"cell_id": GOLD})


def _nested_lists(total: int) -> str:
    """``'{"a":[' * 256 + '1,' * N`` of ``total`` characters (issue 11's stalling input)."""
    head = '{"a":[' * 256
    return head + "1," * ((total - len(head)) // 2)


@pytest.mark.parametrize("total", [1_000_000, 10_000_000], ids=["1MB", "10MB"])
def test_nested_unclosed_lists_are_unresolved_within_the_budget(total):
    text = _nested_lists(total)
    assert len(text) == total
    rec = score_prediction(text, TABLE_REFERENCE)
    assert (rec["status"], rec["parse_path"], rec["reason"]) == ("unresolved", "failed", BUDGET_REASON)
    assert rec["violations"] == ["candidate_valid"]


def test_answer_after_the_stalling_input_is_still_found():
    rec = score_prediction(_nested_lists(1_000_000) + " final: " + ANSWER, TABLE_REFERENCE)
    assert (rec["status"], rec["parse_path"], rec["first_violation"], rec["predicted"]) == (
        "valid", "extracted", "none", {"cell_id": GOLD})


@pytest.mark.parametrize("text", ["{" * 10_000_000, '{"' * 5_000_000, "```" + "a" * 1_000_000],
                         ids=["10MB-of-open-braces", "10MB-of-brace-quote", "unclosed-fence-long-tag"])
def test_brace_floods_fail_with_the_plain_reason(text):
    assert parse_prediction_with_reason(text, "table") == (None, "failed", FAILED_REASON)
    rec = score_prediction(text, TABLE_REFERENCE)
    assert (rec["status"], rec["parse_path"], rec["reason"]) == ("unresolved", "failed", FAILED_REASON)


def test_long_answer_object_past_the_decode_window_is_extracted():
    """An object longer than the 4096-character first window is decoded again over the rest."""
    padded = 'Answer: {"cell_id": "%s", "why": "%s"} done.' % (GOLD, "y" * 100_000)
    assert parse_prediction(padded, "table")[1] == "extracted"
    listed = 'Answer: {"cell_id": "%s", "scores": [%s]} done.' % (GOLD, "1," * 50_000 + "2")
    value, path = parse_prediction(listed, "table")
    assert (path, value["cell_id"], len(value["scores"])) == ("extracted", GOLD, 50_001)


def test_unterminated_prose_string_does_not_hide_a_later_answer():
    text = 'Note {"b": "' + "c" * 10_000 + " and then " + ANSWER
    assert parse_prediction(text, "table") == ({"cell_id": GOLD}, "extracted")


def test_only_the_last_starts_are_decoded():
    """The answer must be among the last MAX_EXTRACT_STARTS ``{"`` starts (256)."""
    assert MAX_EXTRACT_STARTS == 256
    noise = '{"x"' * MAX_EXTRACT_STARTS
    assert parse_prediction(ANSWER + noise, "table") == (None, "failed")
    assert parse_prediction(ANSWER + noise[4:], "table") == ({"cell_id": GOLD}, "extracted")


def test_nested_answer_deeper_than_the_scanner_recursion_limit():
    text = '{"a": ' * 3000 + ANSWER + "}" * 3000
    assert parse_prediction(text, "table") == ({"cell_id": GOLD}, "extracted")
    inner = 'Result: {"answer": {"note": {"cell_id": "x"}, "final": %s}} ok' % ANSWER
    assert parse_prediction(inner, "table") == ({"cell_id": GOLD}, "extracted")
