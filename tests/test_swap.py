"""Replacing an export never loses data (issue 11 items 3, 4 and 10): only exact previous
exports are replaced, one build per output holds a lock, the exchange leaves the old or the
new export at every instant (also under SIGKILL), dead builds' leftovers are cleaned,
Ctrl-C is one line and exit 130, unwritable paths fail before generation, umask is kept.

Most tests write a small fake export (``_write_fake``) instead of the release, so the
replacement logic is tested in milliseconds; the refusal of a real export with user files
uses the session export."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import inspect
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

import publishing.export as export_mod
from exbind import main
from publishing import swap
from publishing.export import BuildInterrupted, export_release, verify_manifest
from publishing.swap import (MANIFEST_NAME, ExportBusyError, ExportPathError, check_export_target, clean_stale,
                            export_lock, install)

REPO = Path(__file__).resolve().parent.parent


def _write_fake(folder: Path, label: str) -> dict:
    """A minimal export: two files and a manifest listing their SHA-256."""
    (folder / "data" / "broad").mkdir(parents=True, exist_ok=True)
    files = {"README.md": f"card {label}\n", "data/broad/test-00000-of-00001.parquet": f"rows {label}\n"}
    for rel, text in files.items():
        (folder / rel).write_text(text)
    manifest = {"label": label, "files": {rel: hashlib.sha256(t.encode()).hexdigest() for rel, t in files.items()}}
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest))
    return manifest


def _label(folder: Path) -> str:
    assert verify_manifest(folder) == []
    return json.loads((folder / MANIFEST_NAME).read_text())["label"]


@pytest.fixture
def fake_writer(monkeypatch):
    """Make export_release write a fake export labelled by ``labels`` (one per build)."""
    labels = []

    def write(tmp, out_dir, get_release, show_progress):
        get_release()
        return _write_fake(tmp, labels.pop(0))

    monkeypatch.setattr(export_mod, "_write_export", write)
    return labels


@contextlib.contextmanager
def _foreign_lock(out: Path):
    """The export lock held through another open file description, as a second process holds
    it (``export_lock`` itself is re-entrant within a process)."""
    fd = os.open(swap.lock_path(out), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


class _NoRun:
    """Stands in for a ReleaseRun under ``fake_writer`` (which never reads its rows)."""

    def __init__(self, *args, **kwargs):
        pass

    def start(self):
        return self

    def close(self):
        pass


def _siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir())


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# --------------------------------------------------------------------------- 11.3 never delete user files


def test_empty_manifest_in_a_folder_with_user_files_is_refused(tmp_path, capsys, monkeypatch):
    own = tmp_path / "mydata"
    own.mkdir()
    (own / "thesis.tex").write_text("hi")
    (own / MANIFEST_NAME).write_text("")
    monkeypatch.setattr("composition.release.ReleaseRun", lambda *a, **k: pytest.fail("generation must not start"))
    assert main(["build", "--out", str(own), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"build refused: --out {own} is not an ExBind export: {MANIFEST_NAME} does not parse")
    assert sorted(p.name for p in own.iterdir()) == [MANIFEST_NAME, "thesis.tex"]
    (own / MANIFEST_NAME).write_text('{"files": ["thesis.tex"]}')  # parses, but not an export manifest
    with pytest.raises(ExportPathError, match='expected an object with a "files" object'):
        check_export_target(own)
    assert (own / "thesis.tex").read_text() == "hi"


def test_a_folder_without_a_manifest_is_refused_naming_what_it_holds(tmp_path):
    own = tmp_path / "mydata"
    own.mkdir()
    for k in range(12):
        (own / f"f{k:02d}.txt").write_text("mine")
    with pytest.raises(ExportPathError) as info:
        check_export_target(own)
    assert str(info.value) == (
        f"--out {own} is a non-empty folder that is not an ExBind export (no {MANIFEST_NAME}; it holds f00.txt, "
        "f01.txt, f02.txt, f03.txt, f04.txt, f05.txt, f06.txt, f07.txt, f08.txt, f09.txt and 2 more); refusing to "
        "replace it. Choose an empty or new folder")
    assert len(list(own.iterdir())) == 12


def test_real_export_with_extra_user_files_is_refused_naming_them(export_dir, tmp_path, capsys):
    out = tmp_path / "exbind"
    shutil.copytree(export_dir, out)
    (out / "NOTES.md").write_text("my notes")
    (out / "data" / "broad" / "predictions.jsonl").write_text('{"case_id": "x", "output": ""}\n')
    assert main(["build", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (f"build refused: --out {out} holds 2 file(s) its {MANIFEST_NAME} does not list: "
            "NOTES.md, data/broad/predictions.jsonl; refusing to replace the folder") in err
    assert (out / "NOTES.md").read_text() == "my notes"
    (out / "NOTES.md").unlink()
    (out / "data" / "broad" / "predictions.jsonl").unlink()
    (out / "README.md").unlink()  # a listed file missing: still exactly an export, replaceable
    assert check_export_target(out) == out


def test_symlinks_and_fifos_in_an_export_are_unexpected(tmp_path):
    out = tmp_path / "exbind"
    out.mkdir()
    _write_fake(out, "old")
    (out / "link").symlink_to(tmp_path)
    os.mkfifo(out / "data" / "fifo")
    with pytest.raises(ExportPathError, match=r"holds 2 file\(s\) .* data/fifo, link;"):
        check_export_target(out)


# --------------------------------------------------------------------------- 11.4 lock, exchange, leftovers


def test_overlapping_build_is_refused_before_generation(tmp_path, capsys, monkeypatch, fake_writer):
    out = tmp_path / "exbind"
    fake_writer.append("first")
    export_release(out, lambda: None, show_progress=False)
    monkeypatch.setattr("composition.release.ReleaseRun", lambda *a, **k: pytest.fail("generation must not start"))
    with _foreign_lock(swap.resolve_out(out)):
        with pytest.raises(ExportBusyError, match=f"another build holds the lock on {out} \\(pid {os.getpid()},"):
            export_release(out, lambda: pytest.fail("no generation"), show_progress=False)
        assert main(["build", "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith(f"build refused: another build holds the lock on {out}")
    assert _label(out) == "first"
    fake_writer.append("second")  # lock released: the next build proceeds
    export_release(out, lambda: None, show_progress=False)
    assert _label(out) == "second"
    assert _siblings(out) == [".exbind.lock", "exbind"]


def test_export_lock_is_reentrant_in_a_process_and_exclusive_across(tmp_path):
    """The build command holds the lock while it plans and starts its workers; export_release
    then takes it again. Another holder is still refused, before and after."""
    out = tmp_path / "exbind"
    with export_lock(out) as path:
        with export_lock(out) as again:
            assert again == path and path.read_text() == f"{os.getpid()}\n"
        fd = os.open(path, os.O_RDWR)
        try:  # still held after the nested block
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    with _foreign_lock(out):
        with pytest.raises(ExportBusyError, match="another build holds the lock"):
            with export_lock(out):
                pass
    with export_lock(out):  # released
        pass


@pytest.mark.parametrize("fallback", [False, True])
def test_exchange_replaces_the_export_and_leaves_nothing_behind(tmp_path, monkeypatch, fallback):
    if fallback:
        monkeypatch.setattr(swap, "exchange", lambda a, b: False)
    out = tmp_path / "exbind"
    out.mkdir()
    _write_fake(out, "old")
    staged = swap.staging_path(out)
    staged.mkdir()
    _write_fake(staged, "new")
    state = {}
    install(staged, out, state)
    assert state == {"installed": True} and _label(out) == "new"
    assert _siblings(out) == ["exbind"]


def test_exchange_is_one_system_call_on_linux(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    assert swap.exchange(a, b) is True  # renameat2(RENAME_EXCHANGE) is available here
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


def test_failure_after_the_exchange_leaves_the_new_export(tmp_path, monkeypatch, fake_writer):
    out = tmp_path / "exbind"
    fake_writer.extend(["old", "new"])
    export_release(out, lambda: None, show_progress=False)

    def boom(step):
        if step == "exchanged":
            raise RuntimeError("crash after the exchange")

    monkeypatch.setattr(swap, "_AFTER_STEP", boom)
    with pytest.raises(RuntimeError, match="crash after the exchange"):
        export_release(out, lambda: None, show_progress=False)
    assert _label(out) == "new"
    assert _siblings(out) == [".exbind.lock", "exbind"]  # the old tree (at the staging name) was removed


_KILL_SCRIPT = textwrap.dedent("""
    import hashlib, json, os, signal, sys
    sys.path.insert(0, {repo!r})
    from pathlib import Path
    from publishing import swap
    from publishing.swap import MANIFEST_NAME
    out, step, fallback = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    print(os.getpid(), flush=True)
    if fallback:
        swap.exchange = lambda a, b: False
    swap._AFTER_STEP = lambda s: os.kill(os.getpid(), signal.SIGKILL) if s == step else None
""")
_KILL_SCRIPT_MAIN = textwrap.dedent("""
    with swap.export_lock(out):
        staged = swap.staging_path(out)
        staged.mkdir()
        _write_fake(staged, "new")
        swap.install(staged, out)
""")


@pytest.mark.parametrize("step,fallback,expected", [
    ("staged", False, "old"), ("exchanged", False, "new"),
    ("moved_old", True, "old"), ("exchanged", True, "new"),
])
def test_sigkill_between_steps_leaves_a_valid_export(tmp_path, step, fallback, expected):
    out = tmp_path / "out" / "exbind"
    out.mkdir(parents=True)
    _write_fake(out, "old")
    (tmp_path / "script").mkdir()
    script = tmp_path / "script" / "kill.py"
    script.write_text(_KILL_SCRIPT.format(repo=str(REPO)) + textwrap.dedent(inspect.getsource(_write_fake))
                      + _KILL_SCRIPT_MAIN)
    proc = subprocess.run([sys.executable, str(script), str(out), step, "1" if fallback else "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    leftovers = [n for n in _siblings(out) if n not in ("exbind", ".exbind.lock")]
    pid = int(proc.stdout.split()[0])
    assert leftovers and all(f"-{pid}-" in n for n in leftovers)
    if step == "moved_old":  # the one non-atomic window of the fallback: the next build restores
        assert not out.exists()
        old, staged = sorted(leftovers, key=lambda n: ".old-" not in n)
        assert clean_stale(out) == [staged, f"restored {old}"]
    else:
        assert len(leftovers) == 1
        assert _label(out) == expected
        assert clean_stale(out) == leftovers
    assert _label(out) == expected
    assert _siblings(out) == [".exbind.lock", "exbind"]


def test_stale_leftovers_of_dead_pids_are_cleaned_live_ones_kept(tmp_path, monkeypatch, fake_writer):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    out = tmp_path / "exbind"
    dead = _dead_pid()
    names = [f".exbind.tmp-{dead}-0a1b", f".exbind.old-{dead}-0a1c", f".exbind.tmp-{os.getpid()}-0a1d",
             f".other.tmp-{dead}-0a1e"]
    for name in names:
        (tmp_path / name).mkdir()
        _write_fake(tmp_path / name, name)
    (tmp_path / "tmp" / f"exbind-cache-{dead}-77").mkdir()
    (tmp_path / "tmp" / f"exbind-cache-{os.getpid()}-78").mkdir()
    fake_writer.append("new")
    export_release(out, lambda: None, show_progress=False)
    # out was missing and a dead build left an old export: restored, then replaced by the build
    assert _label(out) == "new"
    assert _siblings(out) == [".exbind.lock", f".exbind.tmp-{os.getpid()}-0a1d", f".other.tmp-{dead}-0a1e",
                              "exbind", "tmp"]
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == [f"exbind-cache-{os.getpid()}-78"]


def test_out_as_a_symlink_is_refused_and_its_target_kept(tmp_path, capsys):
    target = tmp_path / "real"
    target.mkdir()
    (target / "mine.txt").write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert main(["build", "--out", str(link), "--quiet"]) == 2
    assert capsys.readouterr().err == f"build refused: --out {link} is a symbolic link (to {target}); pass the folder itself\n"
    assert link.is_symlink() and (target / "mine.txt").read_text() == "mine"


def test_a_planted_lock_symlink_is_refused_and_its_target_kept(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / ".exbind.lock").symlink_to(victim)
    with pytest.raises(ExportPathError, match="is a symbolic link; refusing to use it as the lock file"):
        with export_lock(tmp_path / "exbind"):
            pass
    assert victim.read_text() == "precious"


# --------------------------------------------------------------------------- 11.10 interrupt, writability, umask


def test_ctrl_c_is_one_line_exit_130_and_keeps_the_previous_export(tmp_path, capsys, monkeypatch, fake_writer):
    out = tmp_path / "exbind"
    fake_writer.append("old")
    export_release(out, lambda: None, show_progress=False)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("composition.release.ReleaseRun", interrupted)
    assert main(["build", "--out", str(out), "--quiet"]) == 130
    captured = capsys.readouterr()
    assert captured.err == f"build interrupted; the previous export at {out} is untouched\n"
    assert captured.out == ""
    assert _label(out) == "old" and _siblings(out) == [".exbind.lock", "exbind"]
    assert BuildInterrupted(out, True).message() == f"build interrupted after the new export was installed at {out}"


def test_ctrl_c_during_the_report_says_the_export_is_in_place(tmp_path, capsys, monkeypatch, fake_writer):
    out = tmp_path / "exbind"
    fake_writer.append("new")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("composition.release.ReleaseRun", _NoRun)
    monkeypatch.setattr("reports.report.print_release_report", interrupted)
    assert main(["build", "--out", str(out)]) == 130
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == f"report interrupted; the export at {out} is complete and in place"
    assert _label(out) == "new"


def test_sigint_during_a_pooled_build_prints_one_line(tmp_path, capsys, monkeypatch):
    """Also the two-process overlap: a second build while the first generates is refused."""
    out = tmp_path / "exbind"
    proc = subprocess.Popen([sys.executable, "exbind.py", "build", "--out", str(out), "--processes", "2", "--quiet"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not any(p.name.startswith(".exbind.tmp-") for p in tmp_path.iterdir()):  # lock taken, generating
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.1)
    monkeypatch.setattr("composition.release.ReleaseRun", lambda *a, **k: pytest.fail("generation must not start"))
    assert main(["build", "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith(
        f"build refused: another build holds the lock on {out} (pid {proc.pid}, lock file {tmp_path / '.exbind.lock'})")
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr == f"build interrupted; nothing was written to {out}\n"
    assert not out.exists() and _siblings(out) == [".exbind.lock"]


def test_unwritable_out_fails_before_generation(capsys, monkeypatch):
    monkeypatch.setattr("composition.release.ReleaseRun", lambda *a, **k: pytest.fail("generation must not start"))
    assert main(["build", "--out", "/proc/exbind", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("build refused: cannot write the export at /proc/exbind: ")
    assert err.rstrip().endswith("choose a writable --out")


def test_out_under_a_file_names_the_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("composition.release.ReleaseRun", lambda *a, **k: pytest.fail("generation must not start"))
    afile = tmp_path / "somefile.txt"
    afile.write_text("x")
    assert main(["build", "--out", str(afile / "sub"), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"build refused: --out {afile}/sub: cannot write there ({afile} is not a "
                                       "directory); choose a writable path\n")


def test_export_folder_follows_the_umask(tmp_path, fake_writer):
    old = os.umask(0o022)
    try:
        fake_writer.extend(["a", "b"])
        out = tmp_path / "exbind"
        export_release(out, lambda: None, show_progress=False)
        assert stat.S_IMODE(out.stat().st_mode) == 0o755
        os.umask(0o027)
        export_release(out, lambda: None, show_progress=False)
        assert stat.S_IMODE(out.stat().st_mode) == 0o750
    finally:
        os.umask(old)


# --------------------------------------------------------------------------- places a build cannot replace


@pytest.mark.skipif(not os.path.ismount("/proc"), reason="needs /proc mounted")
def test_a_mount_point_is_refused_before_generation():
    with pytest.raises(ExportPathError, match=r"^--out /proc is a mount point, which a build cannot replace .*"
                                              r"choose a folder inside it, e\.g\. /proc/exbind$"):
        check_export_target("/proc")


def test_an_out_inside_another_export_is_refused(tmp_path, capsys, monkeypatch):
    outer = tmp_path / "exbind"
    outer.mkdir()
    _write_fake(outer, "outer")
    monkeypatch.setattr("composition.release.ReleaseRun", lambda *a, **k: pytest.fail("generation must not start"))
    assert main(["build", "--out", str(outer / "data" / "nested"), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"build refused: --out {outer}/data/nested is inside the ExBind export "
                                       f"{outer}; choose a folder outside it\n")
    assert _label(outer) == "outer" and sorted(p.name for p in outer.iterdir()) == ["README.md", "data",
                                                                                  MANIFEST_NAME]


def test_an_export_that_cannot_be_renamed_into_place_is_one_line_and_discarded(tmp_path, capsys, monkeypatch,
                                                                               fake_writer):
    out = tmp_path / "exbind"
    out.mkdir()  # empty, as an empty volume or an immutable folder
    fake_writer.append("new")

    def busy(staged, target, state=None):
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(staged))

    monkeypatch.setattr(export_mod, "install", busy)
    monkeypatch.setattr("composition.release.ReleaseRun", _NoRun)
    assert main(["build", "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"build refused: cannot put the new export at {out} (Device or resource "
                                       "busy); the new export was discarded; choose another --out\n")
    assert list(out.iterdir()) == [] and _siblings(out) == [".exbind.lock", "exbind"]


def test_ctrl_c_right_after_the_staging_folder_is_made_leaves_no_folder(tmp_path, monkeypatch):
    out = tmp_path / "exbind"

    real_mkdir = os.mkdir

    def made_then_interrupted(path, *args, **kwargs):
        real_mkdir(path, *args, **kwargs)
        if Path(path).name.startswith(".exbind.tmp-"):  # the staging folder, just made
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "mkdir", made_then_interrupted)
    with pytest.raises(BuildInterrupted):
        export_release(out, lambda: pytest.fail("no generation"), show_progress=False)
    assert _siblings(out) == [".exbind.lock"]


def test_an_unknown_build_option_shows_the_build_usage(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["build", "--bogus"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("usage: exbind.py build [-h] [--out OUT]")
    assert err.rstrip().endswith("exbind.py build: error: unrecognized arguments: --bogus")


def test_sigterm_stops_a_build_like_ctrl_c_and_removes_its_staging_folder(tmp_path):
    """`timeout`, a batch scheduler's time limit or a closed terminal: status 128 + signal."""
    out = tmp_path / "exbind"
    proc = subprocess.Popen([sys.executable, "exbind.py", "build", "--out", str(out), "--processes", "2", "--quiet"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not any(p.name.startswith(".exbind.tmp-") for p in tmp_path.iterdir()):  # generating
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert (proc.returncode, stdout, stderr) == (143, "", f"build interrupted by SIGTERM; nothing was written to {out}\n")
    assert _siblings(out) == [".exbind.lock"]


def test_a_full_disk_is_one_line_and_keeps_the_previous_export(tmp_path, capsys, monkeypatch, fake_writer):
    out = tmp_path / "exbind"
    fake_writer.append("old")
    export_release(out, lambda: None, show_progress=False)
    monkeypatch.undo()  # the real writer again
    import publishing.shards as shards

    calls = []

    def add(self, row, canonical=None):
        calls.append(1)
        if len(calls) == 50:
            raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")
        return original(self, row, canonical)

    original = shards.ConfigShardWriter.add
    monkeypatch.setattr(shards.ConfigShardWriter, "add", add)
    assert main(["build", "--out", str(out), "--configs", "targeted_hierarchy", "--processes", "1", "--quiet"]) == 2
    assert capsys.readouterr().err == (f"build refused: cannot write the export at {out}: No space left on device; "
                                       f"the previous export at {out} is untouched; free some space or choose "
                                       "another --out\n")
    assert _label(out) == "old" and _siblings(out) == [".exbind.lock", "exbind"]


def test_an_empty_folder_of_the_user_inside_an_export_is_not_deleted(tmp_path, capsys, monkeypatch):
    out = tmp_path / "exbind"
    out.mkdir()
    _write_fake(out, "old")
    (out / "notes").mkdir()
    with pytest.raises(ExportPathError, match=r"holds 1 file\(s\) its exbind_manifest.json does not list: notes/;"):
        check_export_target(out)
    (out / "notes").rmdir()
    (out / "data" / "extra").mkdir()  # inside the export's own folders too
    with pytest.raises(ExportPathError, match=r"does not list: data/extra/;"):
        check_export_target(out)
    (out / "data" / "extra").rmdir()
    assert check_export_target(out) == out  # the export's own folders are not flagged
