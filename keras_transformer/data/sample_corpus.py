"""Build the bundled parallel corpus from the LibreOffice help pages.

The Debian packages `libreoffice-help-en-us`, `-de` and `-fr` ship the same help
pages in each language. Every paragraph carries an `id="par_id..."` that is
identical across languages, so `(page path, paragraph id)` aligns an English
paragraph with its German and French translation.

Pipeline: `apt-get download` -> `dpkg-deb -x` -> parse every page ->
align by `(page, id)` -> filter -> split by page -> write gzip TSV files.

The text is Mozilla Public License 2.0 material from The Document Foundation;
`write_notice` writes the notice that has to travel with the files.
"""

from __future__ import annotations

import gzip
import hashlib
import html.parser
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = {
    "en": "libreoffice-help-en-us",
    "de": "libreoffice-help-de",
    "fr": "libreoffice-help-fr",
}
HELP_LANG_DIRS = {"en": "en-US", "de": "de", "fr": "fr"}
HELP_ROOT = Path("usr/share/libreoffice/help")
TARGET_LANGS = ("de", "fr")
SPLITS = ("train", "dev", "test")

# Elements whose content is not part of the visible text of a paragraph.
_INVISIBLE_TAGS = frozenset({"script", "style", "template"})
_VOID_TAGS = frozenset({"br", "img", "hr", "input", "meta", "link", "wbr", "source"})
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Pair:
    """One aligned paragraph: `page` is the path relative to the language dir."""

    page: str
    source: str
    target: str


@dataclass
class SplitPairs:
    """The pairs of one language pair, split by help page."""

    train: list[Pair] = field(default_factory=list)
    dev: list[Pair] = field(default_factory=list)
    test: list[Pair] = field(default_factory=list)


class _ParagraphParser(html.parser.HTMLParser):
    """Collects the visible text of every element whose id starts with `par_id`.

    LibreOffice marks platform- and module-specific variants (macOS key names,
    Writer-only wording, ...) as `hidden` spans and lets JavaScript reveal one of
    them; the variant whose id starts with `default` is the one shown on a
    default system, so all other hidden content is skipped.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[tuple[str, str]] = []  # (par id, text)
        self._par_id: str | None = None
        self._par_tag = ""
        self._par_depth = 0  # open `_par_tag` elements inside the paragraph
        self._skip_depth = 0  # > 0 while inside hidden or invisible content
        self._chunks: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        element_id = attr.get("id") or ""
        if element_id.startswith("par_id"):
            self._finish()  # an unclosed previous paragraph ends here
            self._par_id, self._par_tag, self._par_depth = element_id, tag, 1
            self._skip_depth, self._chunks = 0, []
            return
        if self._par_id is None or tag in _VOID_TAGS:
            if tag == "br" and self._par_id is not None:
                self._chunks.append(" ")
            return
        if tag == self._par_tag:
            self._par_depth += 1
        hidden = "hidden" in attr and not element_id.startswith("default")
        if self._skip_depth or hidden or tag in _INVISIBLE_TAGS:
            self._skip_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if self._par_id is None or tag in _VOID_TAGS:
            return
        if tag == self._par_tag:
            self._par_depth -= 1
            if self._par_depth == 0:
                self._finish()
                return
        if self._skip_depth:
            self._skip_depth -= 1

    def handle_data(self, data: str) -> None:
        if self._par_id is not None and not self._skip_depth:
            self._chunks.append(data)

    def close(self) -> None:
        super().close()
        self._finish()

    def _finish(self) -> None:
        if self._par_id is not None:
            self.paragraphs.append((self._par_id, clean_text("".join(self._chunks))))
        self._par_id = None


def clean_text(text: str) -> str:
    """Collapses all whitespace (tabs and newlines included) to single spaces."""
    return _WHITESPACE.sub(" ", text).strip()


def extract_paragraphs(page: Path) -> dict[tuple[str, int], str]:
    """Maps `(par id, occurrence)` to the paragraph's visible text.

    An id may occur more than once in one page (shared snippets); the occurrence
    number keeps the n-th copy in one language aligned with the n-th in another.
    """
    parser = _ParagraphParser()
    parser.feed(page.read_text(encoding="utf-8"))
    parser.close()
    seen: dict[str, int] = {}
    result: dict[tuple[str, int], str] = {}
    for par_id, text in parser.paragraphs:
        occurrence = seen.get(par_id, 0)
        seen[par_id] = occurrence + 1
        result[(par_id, occurrence)] = text
    return result


def align_pages(source_dir: Path, target_dir: Path) -> Iterator[Pair]:
    """Yields every paragraph pair of the pages both language dirs have, in path order."""
    for source_page in sorted(source_dir.rglob("*.html")):
        relative = source_page.relative_to(source_dir)
        target_page = target_dir / relative
        if not target_page.is_file():
            continue
        target_paragraphs = extract_paragraphs(target_page)
        for key, source in extract_paragraphs(source_page).items():
            if key in target_paragraphs:
                yield Pair(relative.as_posix(), source, target_paragraphs[key])


def keep_pair(pair: Pair, max_chars: int) -> bool:
    """Drops empty, untranslated (target == source) and over-long pairs."""
    if not pair.source or not pair.target or pair.source == pair.target:
        return False
    return len(pair.source) <= max_chars and len(pair.target) <= max_chars


def page_split(page: str, dev_fraction: float, test_fraction: float) -> str:
    """Assigns a help page to a split from a hash of its path (deterministic)."""
    digest = hashlib.sha256(page.encode("utf-8")).digest()
    position = int.from_bytes(digest[:8], "big") / 2**64  # uniform in [0, 1)
    if position < dev_fraction:
        return "dev"
    if position < dev_fraction + test_fraction:
        return "test"
    return "train"


def split_pairs(pairs: Iterable[Pair], dev_fraction: float, test_fraction: float) -> SplitPairs:
    """Splits by page, drops exact duplicates, and keeps sources disjoint across splits.

    A dev pair whose source sentence occurs in train is dropped, and a test pair
    whose source occurs in train or dev, so no sentence leaks into evaluation.
    """
    if dev_fraction < 0 or test_fraction < 0 or dev_fraction + test_fraction >= 1:
        raise ValueError(
            "dev_fraction and test_fraction must be >= 0 and sum to < 1. "
            f"Received: dev_fraction={dev_fraction}, test_fraction={test_fraction}"
        )
    result = SplitPairs()
    seen: set[tuple[str, str]] = set()
    for pair in pairs:
        if (pair.source, pair.target) in seen:
            continue
        seen.add((pair.source, pair.target))
        getattr(result, page_split(pair.page, dev_fraction, test_fraction)).append(pair)
    train_sources = {pair.source for pair in result.train}
    result.dev = [pair for pair in result.dev if pair.source not in train_sources]
    dev_sources = {pair.source for pair in result.dev}
    result.test = [pair for pair in result.test if pair.source not in train_sources | dev_sources]
    return result


def write_tsv_gz(path: Path, pairs: Iterable[Pair]) -> int:
    """Writes `source<TAB>target` lines; mtime=0 makes reruns byte-identical."""
    lines = [f"{clean_text(p.source)}\t{clean_text(p.target)}\n" for p in pairs]
    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        open(path, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
    ):
        gz.write("".join(lines).encode("utf-8"))
    return len(lines)


def download_and_unpack(work_dir: Path, offline: bool = False) -> dict[str, str]:
    """Fetches the three help packages into `work_dir` and unpacks them there.

    Returns the Debian version of each package, keyed by package name. With
    `offline=True` the `.deb` files already in `work_dir` are used.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work_dir / "root", ignore_errors=True)  # no pages left from an older run
    versions = {}
    for package in PACKAGES.values():
        if not offline:
            for stale in work_dir.glob(f"{package}_*.deb"):
                stale.unlink()
            subprocess.run(["apt-get", "download", package], cwd=work_dir, check=True)
        debs = sorted(work_dir.glob(f"{package}_*.deb"))
        if len(debs) != 1:
            raise ValueError(
                f"Expected exactly one {package}_*.deb in {work_dir}. "
                f"Received: {[deb.name for deb in debs]}"
            )
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(work_dir / "root")], check=True)
        version = subprocess.run(
            ["dpkg-deb", "-f", str(debs[0]), "Version"],
            check=True,
            capture_output=True,
            text=True,
        )
        versions[package] = version.stdout.strip()
    return versions


def build_language_pair(
    help_dir: Path, target: str, max_chars: int, dev_fraction: float, test_fraction: float
) -> SplitPairs:
    """Aligns English with `target` under the unpacked `help_dir` and splits the pairs."""
    if target not in TARGET_LANGS:
        raise ValueError(f"target must be one of {TARGET_LANGS}. Received: target={target!r}")
    source_dir = help_dir / HELP_LANG_DIRS["en"] / "text"
    target_dir = help_dir / HELP_LANG_DIRS[target] / "text"
    for directory in (source_dir, target_dir):
        if not directory.is_dir():
            raise ValueError(f"Help pages not found. Received: directory={directory}")
    pairs = (p for p in align_pages(source_dir, target_dir) if keep_pair(p, max_chars))
    return split_pairs(pairs, dev_fraction, test_fraction)


def write_notice(path: Path, versions: dict[str, str], command: str) -> None:
    """Writes the MPL-2.0 notice that travels with the corpus files."""
    package_lines = "\n".join(f"- `{name}` {version}" for name, version in versions.items())
    path.write_text(_NOTICE.format(packages=package_lines, command=command), encoding="utf-8")


def build_sample_corpus(
    work_dir: Path,
    out_dir: Path,
    command: str,
    *,
    max_chars: int = 400,
    dev_fraction: float = 0.03,
    test_fraction: float = 0.05,
    offline: bool = False,
) -> dict[str, dict[str, int]]:
    """Runs the whole pipeline; returns the pair count per language pair and split."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1. Received: max_chars={max_chars}")
    versions = download_and_unpack(work_dir, offline=offline)
    help_dir = work_dir / "root" / HELP_ROOT
    counts: dict[str, dict[str, int]] = {}
    for target in TARGET_LANGS:
        splits = build_language_pair(help_dir, target, max_chars, dev_fraction, test_fraction)
        name = f"en_{target}"
        counts[name] = {
            split: write_tsv_gz(out_dir / f"{name}.{split}.tsv.gz", getattr(splits, split))
            for split in SPLITS
        }
        from keras_transformer.data.tagged_corpus import build_tagged_dev  # imports this module

        tagged = build_tagged_dev(help_dir, target, dev_fraction, test_fraction, max_chars,
                                  {pair.source for pair in splits.train})  # fmt: skip
        counts[name]["dev.tagged"] = write_tsv_gz(out_dir / f"{name}.dev.tagged.tsv.gz", tagged)
    write_notice(out_dir / "NOTICE.md", versions, command)
    return counts


_NOTICE = """\
# Notice: bundled sample corpus

The files `en_de.{{train,dev,test}}.tsv.gz` and `en_fr.{{train,dev,test}}.tsv.gz` in
this directory hold sentence pairs (`English<TAB>German` or `English<TAB>French`,
one pair per line, UTF-8) taken from the LibreOffice help pages.

The text is material from the LibreOffice help, Copyright The Document Foundation
and the LibreOffice contributors, and is subject to the terms of the
**Mozilla Public License, v. 2.0**. A copy of the MPL is available at
https://mozilla.org/MPL/2.0/.

The source form of this material is the HTML help as shipped in these Debian
packages (name and Debian version):

{packages}

## How the files were made

```
{command}
```

`keras_transformer/data/sample_corpus.py` downloads the packages with
`apt-get download`, unpacks them with `dpkg-deb -x`, and aligns each English
paragraph (`usr/share/libreoffice/help/en-US/text/**/*.html`, element
`id="par_id..."`) with the paragraph of the same page and id in the German (`de`)
and French (`fr`) help. It keeps the visible text (tags stripped, entities
unescaped, whitespace collapsed, default-platform variant of switched text),
drops empty pairs, untranslated pairs (target equal to source) and pairs with a
side longer than the `--max-chars` limit, and removes exact duplicates. The
split into train/dev/test is by help page (a SHA-256 hash of the page path),
and dev/test pairs whose English sentence also occurs in an earlier split
(train, then dev) are removed. The text was not otherwise modified.

`en_de.dev.tagged.tsv.gz` and `en_fr.dev.tagged.tsv.gz` hold paragraphs of the dev
split's pages with their inline markup kept (`<span class=...>`, `<a href=...>`,
`<strong>`, ...; `keras_transformer/data/tagged_corpus.py`), for the evaluation of
markup transfer; a paragraph whose text is a training source is left out.
"""
