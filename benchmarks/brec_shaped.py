"""A pair file of BREC's shape for timing `rpfast pairs` without BREC's own file (which is kept out
of this repository: it is the held-out test).

BREC's 400 pairs by category (Wang & Zhang 2023): 60 basic, 50 simple regular, 50 strongly
regular, 20 4-vertex condition, 20 distance regular, 100 extension and 100 CFI pairs. This
writes as many pairs of each from the built-in families, repeating a family's pairs where it
has fewer (`basic` stands in for the 10-vertex extension pairs, `regular` for the simple
regular ones, `srg` pairs up to 36 vertices for the strongly regular ones, `cfi` and
`cfi-large` for the CFI ones). The time of a pair depends on its size and degree, not on
which pair it is, so the file times a run of BREC's shape; its score means nothing (pairs
repeat). Its 4-vertex-condition pairs have 40 vertices where BREC's have 63, so that category
costs less here than there (its rooted part: C(40, 2) * 40 = 31,200 rows an embedding against
C(63, 2) * 63 = 123,039).

    python benchmarks/brec_shaped.py brec_shaped.txt [--every K]

``--every K`` keeps every K-th pair of each category (a tenth of the file with K = 10, to time
ten seeds in the time of one seed of the whole).
"""
import argparse
import itertools
from dataclasses import replace

from rpfast.datasets.pair_families import family_pairs
from rpfast.datasets.pairs import write_pairs

#: BREC's category -> (its pair count, the families that stand in for it)
SHAPE = {"basic": (60, ("basic",)), "regular": (50, ("regular",)), "srg": (50, ("srg",)), "4vtx": (20, ("4vtx",)),
         "dr": (20, ("dr",)), "extension": (100, ("basic",)), "cfi": (100, ("cfi", "cfi-large"))}
#: the largest strongly regular pair BREC holds (its "strongly regular" graphs have 16 to 35 vertices)
SRG_MAX_VERTICES = 36


def brec_shaped(every: int = 1):
    """The pairs of the file (module docstring), categories named as BREC names them."""
    pairs = []
    for category, (count, families) in SHAPE.items():
        pool = [p for family in families for p in family_pairs(family)
                if category != "srg" or p.n <= SRG_MAX_VERTICES]
        chosen = list(itertools.islice(itertools.cycle(pool), count))[::every]
        pairs += [replace(p, category=category, index=i) for i, p in enumerate(chosen)]
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the pair file to write")
    parser.add_argument("--every", type=int, default=1, help="keep every K-th pair of each category")
    args = parser.parse_args()
    if args.every < 1:
        parser.error(f"--every must be a positive integer, got {args.every}")
    pairs = brec_shaped(args.every)
    write_pairs(pairs, args.out)
    print(f"wrote {len(pairs)} pairs to {args.out}")


if __name__ == "__main__":
    main()
