"""Two small English -> German corpora of other domains than the bundled LibreOffice help, made
from the gettext catalogs (`.mo` files) that Debian packages install: the English message of a
program and its German translation.

    python benchmarks/run.py corpus gettext --output-dir runs/gettext
    python pipelines/train_wmt.py --dataset tsv:runs/gettext/db.train.tsv --model-dir runs/db

- `db`: the messages of the PostgreSQL server and its tools (errors, hints, help texts), about
  9,000 pairs.
- `names`: names and labels: languages (ISO 639-3), countries and regions (ISO 3166),
  currencies (ISO 4217), scripts (ISO 15924), keyboard layouts and file types, about 5,700
  pairs of a few words each.

Each message is one line (whitespace collapsed); a source seen twice keeps its first
translation; messages without a letter, or translated as themselves, are left out. Dev and
test get `--held-out` pairs each, chosen by a hash of the normalized source (no dev or test
source is in train). Writes `DOMAIN.{train,dev,test}.tsv`, which `--dataset
tsv:DIR/DOMAIN.train.tsv` picks up as train/dev/test. Needs the catalogs under
/usr/share/locale/de/LC_MESSAGES (Debian's packages of postgresql, iso-codes,
xkeyboard-config, shared-mime-info).
"""

from __future__ import annotations

import gettext
import glob
import hashlib
import os
import re

from benchmarks import flags

LOCALE_DIR = "/usr/share/locale/de/LC_MESSAGES"
DOMAINS = {
    "db": (
        "postgres-*",
        "psql-*",
        "pg_*",
        "initdb-*",
        "libpq*",
        "plpgsql-*",
        "pgscripts-*",
        "ecpg*",
    ),  # fmt: skip
    "names": (
        "iso_639-3",
        "iso_3166-1",
        "iso_3166-2",
        "iso_3166-3",
        "iso_4217",
        "iso_15924",
        "xkeyboard-config",
        "shared-mime-info",
    ),  # fmt: skip
}
LETTER = re.compile(r"[^\W\d_]")


def catalog_pairs(path: str) -> list[tuple[str, str]]:
    """`(English, German)` messages of one `.mo` file, one line each (plural forms skipped)."""
    with open(path, "rb") as f:
        catalog = gettext.GNUTranslations(f)._catalog
    pairs = []
    for source, target in catalog.items():
        if not isinstance(source, str) or not source or not target:
            continue
        source, target = " ".join(source.split()), " ".join(target.split())
        if source and target and source != target and LETTER.search(source):
            pairs.append((source, target))
    return sorted(pairs)


def domain_pairs(patterns, locale_dir: str = LOCALE_DIR) -> list[tuple[str, str]]:
    """Every catalog of `patterns`, a source kept once (the first file's translation)."""
    seen, pairs = set(), []
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(locale_dir, pattern + ".mo"))):
            for source, target in catalog_pairs(path):
                if source.lower() not in seen:
                    seen.add(source.lower())
                    pairs.append((source, target))
    return pairs


def _bucket(source: str) -> int:
    """A stable number 0..9999 from the source without case, digits or punctuation."""
    key = re.sub(r"[\W\d_]+", " ", source.lower()).strip()
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % 10_000


def split(pairs, held_out: int):
    """(train, dev, test): the pairs with the lowest hash buckets go to dev, then test."""
    ranked = sorted(pairs, key=lambda pair: (_bucket(pair[0]), pair))
    dev, test = ranked[:held_out], ranked[held_out : 2 * held_out]
    held = {pair[0] for pair in dev + test}
    train = [pair for pair in pairs if pair[0] not in held]
    return train, dev, test


def main(argv=None, prog: str = "python benchmarks/run.py corpus gettext") -> None:
    parser = flags.parser(prog, __doc__)
    flags.add(parser, output_dir={"default": "runs/gettext", "help": "where the TSVs go"})
    parser.add_argument("--held-out", type=int, default=400, help="dev and test pairs each")
    parser.add_argument("--locale-dir", default=LOCALE_DIR, help="German .mo catalogs")
    args = parser.parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    for domain, patterns in DOMAINS.items():
        pairs = domain_pairs(patterns, args.locale_dir)
        if len(pairs) < 4 * args.held_out:
            raise ValueError(
                f"Too few {domain} messages in {args.locale_dir} ({len(pairs)}): install the "
                "Debian packages named in this script's docstring"
            )
        for name, part in zip(("train", "dev", "test"), split(pairs, args.held_out)):
            path = os.path.join(args.output_dir, f"{domain}.{name}.tsv")
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(f"{s}\t{t}\n" for s, t in part)
            print(f"{path}: {len(part)} pairs")
