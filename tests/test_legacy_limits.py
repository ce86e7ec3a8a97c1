"""Hostile legacy input (issue 11 item 6; docs/specification.md §8): each exact failing input is refused with
the file, line and field, without blocking, and `build --legacy` exits 2 without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.legacy import converter, gallery, limits

ROOT = Path(__file__).resolve().parent.parent
FSM = gallery.gallery_svg("fsm.svg")


def _record(**fields) -> dict:
    ids = gallery.parse_svg(FSM).order
    nodes = {n.title: n.id for n in gallery.parse_svg(FSM).nodes.values()}
    base = {"id": "r1", "source": "s", "task_type": "object", "instruction": 'Select the node named "LR_3".',
            "candidate_ids": ids, "gold": {"target_id": nodes["LR_3"]}, "cached_output": "{}",
            "output_provenance": {"predictor": "p"}, "svg_file": "fsm.svg"}
    base.update(fields)
    if "svg" in fields:
        del base["svg_file"]
    return base


def _jsonl(tmp_path: Path, *records: dict) -> Path:
    (tmp_path / "fsm.svg").write_text(FSM, encoding="utf-8")
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _refusal(path: Path) -> converter.LegacyRecordError:
    with pytest.raises(converter.LegacyRecordError) as info:
        converter.convert_file(path, render=False)
    return info.value


def _svg_with_canvas(width: int, height: int) -> str:
    return FSM.replace('width="803pt" height="348pt"', f'width="{width}px" height="{height}px"', 1)


def test_fsm_canvas_attributes_are_where_the_tests_edit_them():
    assert 'width="803pt" height="348pt"' in FSM


def test_internal_dtd_entity_is_refused(tmp_path):
    svg = ('<?xml version="1.0"?>\n<!DOCTYPE svg [<!ENTITY x "boom">]>\n'
           + FSM.split("?>", 1)[1].replace("<title>LR_3</title>", "<title>&x;</title>", 1))
    err = _refusal(_jsonl(tmp_path, _record(), _record(id="r2", svg=svg)))
    assert (err.line, err.field) == (2, "svg")
    assert "declares a DTD entity" in str(err) and str(err).startswith(f"{tmp_path / 'records.jsonl'}:2: field `svg`")


@pytest.mark.parametrize("width,height,message", [
    (100000, 100000, "100000 x 100000 px, over the 8192 px side limit"),
    (20000, 20000, "20000 x 20000 px, over the 8192 px side limit"),
    (8000, 8000, "8000 x 8000 = 64000000 px, over the 16000000 px limit"),
])
def test_huge_canvases_are_refused_before_rendering(tmp_path, width, height, message):
    (tmp_path / "big.svg").write_text(_svg_with_canvas(width, height), encoding="utf-8")
    start = time.perf_counter()
    err = _refusal(_jsonl(tmp_path, _record(svg_file="big.svg")))
    assert time.perf_counter() - start < 5  # refused from the root attributes, never rasterized
    assert (err.line, err.field) == (1, "svg_file") and message in str(err)


def test_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.svg")
    err = _refusal(_jsonl(tmp_path, _record(svg_file="pipe.svg")))
    assert (err.line, err.field) == (1, "svg_file")
    assert "is not a regular file" in str(err)


def test_dev_zero_is_refused(tmp_path):
    (tmp_path / "zero.svg").symlink_to("/dev/zero")
    err = _refusal(_jsonl(tmp_path, _record(svg_file="zero.svg")))
    assert "outside the JSONL file's folder" in str(err) and err.field == "svg_file"
    with pytest.raises(limits.LimitError, match="/dev/zero is not a regular file"):
        limits.read_confined(Path("/dev"), "zero")
    err = _refusal(_jsonl(tmp_path, _record(svg_file="/dev/zero")))
    assert "is an absolute path" in str(err)


@pytest.mark.parametrize("svg_file,message", [
    ("/etc/passwd", "'/etc/passwd' is an absolute path; give a path relative to the JSONL file's folder"),
    ("../outside.svg", "'../outside.svg' leaves the JSONL file's folder ('..')"),
    ("sub/../../outside.svg", "leaves the JSONL file's folder ('..')"),
])
def test_paths_are_confined_to_the_jsonl_folder(tmp_path, svg_file, message):
    inner = tmp_path / "in"
    inner.mkdir()
    (tmp_path / "outside.svg").write_text(FSM, encoding="utf-8")
    err = _refusal(_jsonl(inner, _record(svg_file=svg_file)))
    assert (err.line, err.field) == (1, "svg_file") and message in str(err)


def test_symlink_out_of_the_folder_is_refused(tmp_path):
    inner = tmp_path / "in"
    inner.mkdir()
    (tmp_path / "outside.svg").write_text(FSM, encoding="utf-8")
    (inner / "link.svg").symlink_to(tmp_path / "outside.svg")
    err = _refusal(_jsonl(inner, _record(svg_file="link.svg")))
    assert "outside the JSONL file's folder" in str(err)


def test_malformed_utf8_is_refused_with_line_and_field(tmp_path):
    (tmp_path / "bad.svg").write_bytes(FSM.encode().replace(b"LR_3", b"LR_\xff", 1))
    err = _refusal(_jsonl(tmp_path, _record(), _record(id="r2", svg_file="bad.svg")))
    assert (err.line, err.field) == (2, "svg_file") and "is not valid UTF-8" in str(err)
    path = tmp_path / "records.jsonl"
    path.write_bytes(json.dumps(_record()).encode() + b"\n" + b'{"id": "\xc3("}\n')
    err = _refusal(path)
    assert (err.line, err.field) == (2, "<line>") and "is not valid UTF-8 (byte 8: b'\\xc3')" in str(err)


def test_oversized_file_and_element_count_are_refused(tmp_path):
    (tmp_path / "fat.svg").write_text(FSM + " " * limits.MAX_SVG_BYTES, encoding="utf-8")
    err = _refusal(_jsonl(tmp_path, _record(svg_file="fat.svg")))
    assert f"over the {limits.MAX_SVG_BYTES}-byte limit" in str(err)
    many = FSM.replace("</svg>", "<g/>" * limits.MAX_ELEMENTS + "</svg>")
    err = _refusal(_jsonl(tmp_path, _record(svg=many)))
    assert err.field == "svg" and f"over the {limits.MAX_ELEMENTS}-element limit" in str(err)


def test_crop_measured_boxes_match_the_full_canvas_measurement():
    # The shipped boxes were measured on the full canvas, one element at a time.
    stored = json.loads(gallery.BOXES_FILE.read_text())["KW91.svg"]
    boxes, size = gallery.element_boxes(gallery.gallery_svg("KW91.svg"))
    assert list(size) == stored["image_size"] == [461, 639]
    assert boxes == stored["boxes"]


def test_build_cli_exits_2_without_traceback(tmp_path):
    os.mkfifo(tmp_path / "pipe.svg")
    path = _jsonl(tmp_path, _record(svg_file="pipe.svg"))
    proc = subprocess.run([sys.executable, "exbind.py", "build", "--legacy", str(path), "--out",
                           str(tmp_path / "out"), "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{path}:1: field `svg_file`: " in proc.stderr and "is not a regular file" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_jsonl_itself_must_be_a_regular_readable_file(tmp_path):
    os.mkfifo(tmp_path / "records.jsonl")
    for path, message in ((Path("/dev/zero"), "/dev/zero:0: field `<file>`: is not a regular file; give a JSONL file"),
                          (tmp_path / "records.jsonl", "records.jsonl:0: field `<file>`: is not a regular file"),
                          (tmp_path / "missing.jsonl", "missing.jsonl:0: field `<file>`: cannot read the file")):
        with pytest.raises(converter.LegacyRecordError) as info:
            converter.convert_file(path, render=False)
        assert message in str(info.value)


def test_an_empty_legacy_file_is_refused_before_generation(tmp_path, capsys):
    """A 0-byte legacy JSONL used to generate everything and then fail a suite check with a traceback."""
    from exbind import main

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["build", "--legacy", str(empty), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"build refused: {empty}") and "holds no legacy records" in err
    assert not (tmp_path / "out").exists()
