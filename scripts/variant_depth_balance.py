"""Print the suite check ``hierarchy_depth_balance`` of variant builds, one line per (seed,
scale), generating only the hierarchy latents (about 0.5 s per seed at scale 1 on 2 cores).

    python scripts/variant_depth_balance.py [--scale K] [SEED ...]

``SEED`` is a ``build --seed`` value or ``default`` (the release's own seeds); with no seed,
0-20. Each line: seed, scale, PASS/FAIL, median candidates per depth, the max/min median
ratio (limit 1.2), distinct skeletons per depth (at least 3). Exit status 1 if any fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from composition.release import (BROAD_SEED, TARGETED_SEED, broad_plans, generate_all,  # noqa: E402
                                 hierarchy_depth_balance, targeted_plans, variant_seeds)


def depth_balance(seed, scale: int, processes: int = 2) -> dict:
    """``hierarchy_depth_balance`` of the hierarchy latents of ``build --seed seed --scale scale``
    (``seed`` None: the default release's suite seeds)."""
    seeds = {"broad": BROAD_SEED, "targeted": TARGETED_SEED} if seed is None else variant_seeds(seed)
    broad = generate_all([p for p in broad_plans(seeds["broad"], scale) if p.family == "hierarchy"], processes)
    targeted = generate_all([p for p in targeted_plans(seeds["targeted"], scale) if p.family == "hierarchy"],
                            processes)
    return hierarchy_depth_balance(broad, targeted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", nargs="*", default=[str(s) for s in range(21)])
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    failed = 0
    for text in args.seeds:
        if text != "default" and not text.lstrip("-").isdigit():
            parser.error(f"SEED must be an integer or 'default', got {text!r}")
        check = depth_balance(None if text == "default" else int(text), args.scale, args.processes)
        failed += not check["passed"]
        medians = "/".join(f"{m:g}" for m in check["median_candidates"].values())
        skeletons = "/".join(str(n) for n in check["skeletons"].values())
        print(f"seed {text:>7} scale {args.scale}  {'PASS' if check['passed'] else 'FAIL'}  medians {medians}  "
              f"ratio {check['median_ratio']}  skeletons {skeletons}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
