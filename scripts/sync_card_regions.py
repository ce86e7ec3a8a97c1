"""Copy the generated regions (configs table, gate tables) of a fresh export's README.md into
the card template, so the repository's card shows what the build printed.

    python exbind.py build --out /tmp/exbind --no-report
    python scripts/sync_card_regions.py /tmp/exbind

Only the text between ``<!-- exbind:begin NAME -->`` / ``<!-- exbind:end NAME -->`` markers
changes (:func:`publishing.card.fill_regions`); ``tests/test_card_hub.py`` checks that the
template and a fresh export agree.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from publishing.card import fill_regions, regions  # noqa: E402
from publishing.export import CARD_TEMPLATE  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "README.md").is_file():
        print("usage: python scripts/sync_card_regions.py EXPORT_DIR (a folder written by `exbind build`)",
              file=sys.stderr)
        return 2
    bodies = regions((Path(argv[0]) / "README.md").read_text(encoding="utf-8"))
    text = CARD_TEMPLATE.read_text(encoding="utf-8")
    updated = fill_regions(text, bodies)
    CARD_TEMPLATE.write_text(updated, encoding="utf-8")
    print(f"{CARD_TEMPLATE}: {'updated' if updated != text else 'already current'} ({', '.join(sorted(bodies))})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
