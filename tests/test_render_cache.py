"""The PNG disk cache of :func:`generator.render.rasterize` and the pooled
:func:`generator.render.rasterize_many` (issue 13 item 3): the bytes are cairosvg's own
with the cache cold, warm or off; bad entries are re-rendered; an unwritable cache never
fails; the legacy bridge gives the same records whatever ``processes`` is."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
from pathlib import Path

import cairocffi
import cairosvg
import PIL.Image
import pytest

import generator.render as render
from generator.compilers.canvas import compile_canvas
from generator.compilers.svg import compile_svg
from generator.families import relational as rel
from generator.legacy import converter
from generator.legacy.gallery import gallery_svg
from generator.legacy.tasks import BRIDGE_FILE


def _generated(fmt: str, seed: int = 7, slot: int = 5) -> str:
    rng = random.Random(seed)
    latent = rel.sample(rng, f"rel_{seed:04d}", None, slot)
    return (compile_svg if fmt == "svg" else compile_canvas)(latent, rng).render_svg


SVGS = {"svg row": lambda: _generated("svg"), "canvas row": lambda: _generated("canvas"),
        "legacy": lambda: gallery_svg("structs.svg")}
SIZES = {"svg row": (440, 360), "canvas row": (440, 360), "legacy": (395, 201)}


def _floor(svg: str) -> bytes:
    """cairosvg alone, as rasterize called it before the cache."""
    return cairosvg.svg2png(bytestring=svg.encode("utf-8"), unsafe=False)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache root of this test, cache on; returns the PNG folder."""
    monkeypatch.setenv("EXBIND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EXBIND_RENDER_CACHE", raising=False)
    return tmp_path / "cache" / "png"


@pytest.fixture
def renders(monkeypatch) -> list[str]:
    """The SVGs that reach cairosvg (in this process) from now on."""
    seen: list[str] = []
    real = render.rasterize_uncached

    def counting(svg):
        seen.append(svg)
        return real(svg)

    monkeypatch.setattr(render, "rasterize_uncached", counting)
    return seen


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", list(SVGS))
def test_cold_warm_and_off_give_cairosvgs_bytes(name, cache, renders, monkeypatch):
    svg = SVGS[name]()
    expected = (_floor(svg), SIZES[name])
    with PIL.Image.open(io.BytesIO(expected[0])) as im:
        assert im.size == SIZES[name]
    assert render.rasterize(svg) == expected  # cold: rendered, then stored
    path = render.cache_path(render.cache_key(svg))
    assert _entries(cache) == [path]
    assert path.relative_to(cache).parts == (path.name[:2], path.name[2:4], path.name)
    data = path.read_bytes()
    assert data[:32] == hashlib.sha256(expected[0]).digest() and data[32:] == expected[0]
    assert renders == [svg]
    assert render.rasterize(svg) == expected  # warm: read back, not rendered
    assert renders == [svg]
    monkeypatch.setenv("EXBIND_RENDER_CACHE", "0")
    path.unlink()
    assert render.rasterize(svg) == expected  # off: rendered, nothing stored
    assert renders == [svg, svg] and _entries(cache) == []


def test_cache_key_covers_renderer_cairosvg_and_cairo_versions(cache, monkeypatch):
    svg = SVGS["svg row"]()
    prefix = f"exbind-png\0renderer 1\0cairosvg {cairosvg.__version__}\0cairo {cairocffi.cairo_version_string()}\0"
    assert render.RENDERER_VERSION == "1"
    assert render.cache_key(svg) == hashlib.sha256(prefix.encode() + svg.encode()).hexdigest()
    old = render.cache_key(svg)
    monkeypatch.setattr(render, "RENDERER_VERSION", "2")
    render._key_prefix.cache_clear()
    try:
        assert render.cache_key(svg) == hashlib.sha256(prefix.replace("renderer 1", "renderer 2").encode()
                                                       + svg.encode()).hexdigest() != old
    finally:
        monkeypatch.undo()
        render._key_prefix.cache_clear()


def test_cache_folder_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("EXBIND_CACHE_DIR", str(tmp_path / "a"))
    assert render.cache_dir() == tmp_path / "a" / "png"
    monkeypatch.delenv("EXBIND_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert render.cache_dir() == tmp_path / "xdg" / "exbind" / "png"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert render.cache_dir() == tmp_path / "home" / ".cache" / "exbind" / "png"


@pytest.mark.parametrize("value, on", [("0", False), ("off", False), ("False", False), ("no", False),
                                       ("1", True), ("", True), ("yes", True), ("ON", True)])
def test_cache_switch_values(value, on, monkeypatch):
    monkeypatch.setenv("EXBIND_RENDER_CACHE", value)
    assert render.cache_enabled() is on


def test_bad_cache_switch_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv("EXBIND_RENDER_CACHE", "maybe")
    with pytest.raises(ValueError) as info:
        render.rasterize(SVGS["svg row"]())
    assert str(info.value) == ("EXBIND_RENDER_CACHE='maybe': set it to 0 to turn the PNG cache off, "
                               "or 1 (or unset it) to keep it on")


CORRUPTIONS = {
    "flipped PNG byte": lambda d: d[:100] + bytes([d[100] ^ 1]) + d[101:],
    "flipped digest byte": lambda d: bytes([d[0] ^ 1]) + d[1:],
    "truncated": lambda d: d[: len(d) // 2],
    "empty": lambda d: b"",
    "digest only": lambda d: d[:32],
    "not a PNG, digest right": lambda d: hashlib.sha256(b"x" * 40).digest() + b"x" * 40,
    "PNG without digest": lambda d: d[32:],
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_corrupt_entry_is_detected_rerendered_and_replaced(kind, cache, renders):
    svg = SVGS["legacy"]()
    expected = render.rasterize(svg)
    path = render.cache_path(render.cache_key(svg))
    good = path.read_bytes()
    path.write_bytes(CORRUPTIONS[kind](good))
    assert render.read_entry(path) is None
    assert render.rasterize(svg) == expected
    assert renders == [svg, svg]
    assert path.read_bytes() == good  # overwritten with a whole, checked entry
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_entry_over_the_size_limit_is_not_read(cache, monkeypatch):
    svg = SVGS["svg row"]()
    png, _ = render.rasterize(svg)
    path = render.cache_path(render.cache_key(svg))
    monkeypatch.setattr(render, "MAX_CACHED_PNG_BYTES", len(png) - 1)
    assert render.read_entry(path) is None
    assert render.write_entry(path, png) is False
    monkeypatch.setattr(render, "MAX_CACHED_PNG_BYTES", len(png))
    assert render.read_entry(path) == png


def test_entry_that_is_a_folder_is_rendered_around(cache, renders):
    svg = SVGS["svg row"]()
    path = render.cache_path(render.cache_key(svg))
    path.mkdir(parents=True)
    assert render.rasterize(svg) == (_floor(svg), (440, 360))
    assert path.is_dir() and renders == [svg]


def test_unwritable_cache_folder_still_renders(tmp_path, monkeypatch, renders):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("EXBIND_CACHE_DIR", str(blocker / "cache"))  # mkdir fails: NotADirectoryError
    monkeypatch.delenv("EXBIND_RENDER_CACHE", raising=False)
    svgs = [SVGS["svg row"](), SVGS["canvas row"]()]
    assert render.rasterize(svgs[0]) == (_floor(svgs[0]), (440, 360))
    assert render.rasterize_many(svgs, processes=1) == [(_floor(s), (440, 360)) for s in svgs]
    assert blocker.read_text() == "not a folder" and len(renders) == 3


def test_rasterize_many_keeps_order_and_equals_serial(cache, renders, monkeypatch):
    a, b, c = SVGS["svg row"](), SVGS["canvas row"](), SVGS["legacy"]()
    svgs = [a, b, a, c, b]
    serial = [(_floor(s), SIZES[n]) for s, n in zip(svgs, ["svg row", "canvas row", "svg row", "legacy", "canvas row"])]
    assert render.rasterize_many(svgs, processes=2) == serial  # cold: rendered in 2 workers
    assert renders == []  # nothing rendered in this process
    assert _entries(cache) == sorted(render.cache_path(render.cache_key(s)) for s in (a, b, c))

    def no_pool(*args, **kwargs):
        raise AssertionError("a warm run must start no pool")

    monkeypatch.setattr(render, "ProcessPoolExecutor", no_pool)
    assert render.rasterize_many(svgs, processes=2) == serial  # warm
    monkeypatch.setenv("EXBIND_RENDER_CACHE", "0")
    assert render.rasterize_many(svgs, processes=1) == serial  # off, in this process, each distinct once
    assert renders == [a, b, c]
    assert render.rasterize_many([]) == []


@pytest.mark.parametrize("processes", [1, 2])
def test_rasterize_many_unrenderable_document(processes, cache):
    good = SVGS["svg row"]()
    bad = "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'><rect"
    svgs = [good, bad, bad]
    with pytest.raises(render.RasterizeError, match=r"^svgs\[1\]: cannot be rendered \(\w+: .*\)$"):
        render.rasterize_many(svgs, processes=processes)
    assert render.rasterize_many(svgs, processes=processes, skip_errors=True) == [(_floor(good), (440, 360)), None, None]
    assert _entries(cache) == [render.cache_path(render.cache_key(good))]


@pytest.mark.parametrize("processes", [0, -1, 1.5, True, "2"])
def test_rasterize_many_bad_processes(processes):
    with pytest.raises(ValueError, match=rf"^processes must be a positive integer or None, got {processes!r}$"):
        render.rasterize_many([SVGS["svg row"]()], processes=processes)


def _subset_inputs() -> list[converter.LegacyInput]:
    """The shipped bridge lines on its four smallest SVGs, with the SVG text inline."""
    small = {"gallery/longflat.svg", "gallery/large/states.svg", "gallery/structs.svg", "gallery/nhg.svg"}
    out = []
    for line, text in enumerate(BRIDGE_FILE.read_text(encoding="utf-8").splitlines(), start=1):
        obj = json.loads(text)
        if obj.get("svg_file") in small:
            obj["svg"] = (BRIDGE_FILE.parent / obj.pop("svg_file")).read_text(encoding="utf-8")
            out.append(converter.parse_record(obj, line))
    return out


def _rows(pairs) -> list:
    return [(rec.to_row(), score) for rec, score in pairs]


def test_legacy_conversion_is_the_same_cold_warm_off_and_pooled(cache, monkeypatch):
    inputs = _subset_inputs()
    assert len(inputs) == 19 and len({i.svg for i in inputs}) == 4
    monkeypatch.setenv("EXBIND_RENDER_CACHE", "0")
    off_pairs, off_counts = converter.convert_inputs(inputs, processes=1)
    off = _rows(off_pairs)
    assert off_counts["eligible"] == 19 and all(row["image"]["bytes"] for row, _ in off)
    monkeypatch.delenv("EXBIND_RENDER_CACHE")
    cold_pairs, cold_counts = converter.convert_inputs(inputs, processes=2)
    assert len(_entries(cache)) == 4
    warm_pairs, warm_counts = converter.convert_inputs(inputs, processes=1)
    assert _rows(cold_pairs) == off == _rows(warm_pairs)
    assert cold_counts == off_counts == warm_counts
    single = [converter.build_record(inp) for inp in inputs]
    assert [r.to_row() for r in single] == [row for row, _ in off]
    assert [converter.score_cached(r) for r in single] == [score for _, score in off]


def test_rasterize_many_worker_death_is_one_clear_error(cache, monkeypatch):
    real = render.rasterize_uncached

    def dies_on_marker(svg):
        if svg == "die":
            os._exit(3)  # what an OOM kill or a crash in cairo looks like to the pool
        return real(svg)

    monkeypatch.setattr(render, "rasterize_uncached", dies_on_marker)  # forked workers inherit it
    with pytest.raises(RuntimeError) as info:
        render.rasterize_many([SVGS["svg row"](), "die"], processes=2)
    assert str(info.value) == ("a rendering worker died while rendering 2 SVG documents (killed by the OS, e.g. "
                               "out of memory, or crashed in cairo); rerun with processes=1 to see which")


def _store(args) -> bool:
    path, png = args
    return render.write_entry(Path(path), png)


def test_concurrent_writers_of_one_entry_leave_one_whole_entry(cache):
    from multiprocessing import get_context

    svg = SVGS["svg row"]()
    png = _floor(svg)
    path = render.cache_path(render.cache_key(svg))
    with get_context("fork").Pool(4) as pool:
        assert pool.map(_store, [(str(path), png)] * 16) == [True] * 16
    assert render.read_entry(path) == png
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_iter_rasterized_yields_in_order_and_checks_arguments_eagerly(cache, monkeypatch):
    a, b = SVGS["svg row"](), SVGS["canvas row"]()
    stream = render.iter_rasterized([b, a, b], processes=2)
    assert next(stream) == (_floor(b), (440, 360))
    stream.close()  # stops the pool; the rest is not needed
    assert list(render.iter_rasterized([a, b, a], processes=2)) == [(_floor(s), (440, 360)) for s in (a, b, a)]
    with pytest.raises(ValueError, match=r"^processes must be a positive integer or None, got 0$"):
        render.iter_rasterized([a], processes=0)  # before any next()
    monkeypatch.setenv("EXBIND_RENDER_CACHE", "sometimes")
    with pytest.raises(ValueError, match=r"^EXBIND_RENDER_CACHE='sometimes': "):
        render.iter_rasterized([a])


def test_failed_store_leaves_no_temporary_file(cache, monkeypatch):
    svg = SVGS["svg row"]()
    path = render.cache_path(render.cache_key(svg))

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(render.os, "replace", full_disk)
    assert render.rasterize(svg) == (_floor(svg), (440, 360))
    assert render.write_entry(path, _floor(svg)) is False
    assert list(path.parent.iterdir()) == []
