"""Per-case writers survive a lone surrogate; writes are atomic (issue 11 item 7).

``{"cell_id": "\\ud800x"}`` parses to an id holding a lone surrogate, which UTF-8 cannot
encode. The runner's score writer (``predictors.runner.write_scores``) and the JSONL writer
behind ``exbind.py score --per-case`` (``predictors.io.write_jsonl``) must write it as an
ASCII escape, leave no temporary file, and read back to the same record.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

import generator.files
from generator.render import write_entry
from predictors.embedding_cache import _atomic_write

from exbind_scoring import score_prediction
from composition.release import broad_plans, generate_latent
from predictors.io import json_line, per_case_row, read_jsonl, write_jsonl
from predictors.runner import PREDICTIONS_FILE, SCORES_FILE, write_scores

TABLE_REFERENCES = generate_latent(next(p for p in broad_plans() if p.family == "table")).references
SURROGATE_OUTPUT = '{"cell_id": "\\ud800x"}'  # the model output text, as issue 11 reported it


def test_surrogate_output_parses_to_a_lone_surrogate_id():
    rec = score_prediction(SURROGATE_OUTPUT, TABLE_REFERENCES[0])
    assert (rec["status"], rec["predicted"]) == ("invalid", {"cell_id": "\ud800x"})
    with pytest.raises(UnicodeEncodeError):
        json.dumps(rec, ensure_ascii=False).encode("utf-8")  # what the old writers did


def test_json_line_escapes_only_lines_utf8_cannot_encode():
    assert json_line({"a": "é"}) == '{"a": "é"}\n'
    assert json_line({"a": "\ud800x"}) == '{"a": "\\ud800x"}\n'
    with pytest.raises(ValueError):
        json_line({"a": float("nan")})


def test_runner_score_writer_survives_a_lone_surrogate(tmp_path):
    case_id = json.loads(TABLE_REFERENCES[0])["case_id"]
    (tmp_path / PREDICTIONS_FILE).write_text(json.dumps({"case_id": case_id, "output": SURROGATE_OUTPUT}) + "\n",
                                            encoding="utf-8")
    assert write_scores(tmp_path, [case_id], TABLE_REFERENCES[:1]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [PREDICTIONS_FILE, SCORES_FILE]  # no .tmp left
    (back,) = read_jsonl(tmp_path / SCORES_FILE)
    assert back == per_case_row(score_prediction(SURROGATE_OUTPUT, TABLE_REFERENCES[0]), SURROGATE_OUTPUT,
                                TABLE_REFERENCES[0])
    assert back["predicted"] == {"cell_id": "\ud800x"}
    assert "\\ud800x" in (tmp_path / SCORES_FILE).read_text(encoding="utf-8")


def test_write_jsonl_is_atomic_on_failure(tmp_path):
    dest = tmp_path / "scores.jsonl"
    write_jsonl(dest, [{"n": 1}])
    with pytest.raises(ValueError):
        write_jsonl(dest, [{"n": 2}, {"n": float("nan")}])
    assert dest.read_text(encoding="utf-8") == '{"n": 1}\n'  # the previous file, untouched
    assert [p.name for p in tmp_path.iterdir()] == ["scores.jsonl"]


def test_temp_file_writers_give_the_umask_mode(tmp_path, monkeypatch):
    """mkstemp creates 0600; every atomic writer chmods to ``0o666 & ~umask`` like ``open`` (0644 under 022)."""
    old = os.umask(0o022)
    try:
        monkeypatch.setattr(generator.files, "_UMASK", generator.files._read_umask())
        assert generator.files._UMASK == 0o022 and os.umask(0o022) == 0o022  # read and set back
        write_jsonl(tmp_path / "a.jsonl", [{"n": 1}])
        assert write_entry(tmp_path / "b.bin", b"png")
        _atomic_write(tmp_path / "c.part", b"shard")
        assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()} == {
            "a.jsonl": 0o644, "b.bin": 0o644, "c.part": 0o644}
        monkeypatch.setattr(generator.files, "_UMASK", 0o077)
        write_jsonl(tmp_path / "a.jsonl", [{"n": 2}])
        assert stat.S_IMODE((tmp_path / "a.jsonl").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_atomic_writers_never_replace_a_link_device_or_fifo(tmp_path):
    from generator.files import OutputPathError, check_output_path, write_bytes_atomic

    target = tmp_path / "target.jsonl"
    target.write_text("kept\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for dest, node in ((link, "a symbolic link"), (fifo, "a FIFO"), ("/dev/null", "a device")):
        with pytest.raises(OSError, match=f"is {node}; an output replaces its path, so choose a regular file path"):
            write_jsonl(dest, [{"case_id": "c", "output": ""}])
        with pytest.raises(OSError, match=f"is {node}"):
            write_bytes_atomic(dest, b"x")
        with pytest.raises(OutputPathError) as info:
            check_output_path("--per-case", dest)
        assert str(info.value) == (f"--per-case {dest} is {node}; choose a regular file path "
                                   "(an output is written to a new file that replaces the path)")
    assert link.is_symlink() and target.read_text() == "kept\n"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    assert check_output_path("--plots", tmp_path, folder=True) == tmp_path  # an existing folder is fine
