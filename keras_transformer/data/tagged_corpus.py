"""A tagged dev set from the LibreOffice help pages: the dev split's paragraphs with their
inline markup kept (`<span class="emph">`, `<a href>`, `<strong>`, ...), English and German,
for the evaluation of markup transfer (`benchmarks/markup_benchmark.py`).

    pairs = build_tagged_dev(help_dir, "de")   # [Pair(page, tagged source, tagged target)]

The pages are the dev split's (`sample_corpus.page_split`, the same hash and fractions), so
nothing here is trained on; a pair is kept when its English paragraph holds an inline tag and
its text without tags is not a training source. `sample_corpus.build_sample_corpus` writes it
beside the splits as `en_<lang>.dev.tagged.tsv.gz` (`pipelines/prepare_sample_corpus.py`).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from keras_transformer.data import sample_corpus as sc

INLINE_TAGS = frozenset(
    {"span", "a", "strong", "emph", "b", "i", "em", "code", "kbd", "item", "link", "ahelp"}
)
_TAG = re.compile(r"<[^<>]+>")


class _TaggedParagraphParser(sc._ParagraphParser):
    """`_ParagraphParser` that keeps inline tags verbatim (and text escaped) in the text."""

    def __init__(self) -> None:
        super().__init__()
        self.convert_charrefs = True
        self._open: list[bool] = []  # per open inline element: whether its tag was written

    def handle_starttag(self, tag, attrs) -> None:
        skipping = self._skip_depth
        before = self._par_id
        super().handle_starttag(tag, attrs)
        keep = (
            before is not None and self._par_id == before and not skipping
            and not self._skip_depth and tag in INLINE_TAGS
        )  # fmt: skip
        if before is not None and tag in INLINE_TAGS:
            self._open.append(keep)
            if keep:
                self._chunks.append(self.get_starttag_text())

    def handle_endtag(self, tag) -> None:
        if self._par_id is not None and tag in INLINE_TAGS and self._open:
            if self._open.pop() and not self._skip_depth:
                self._chunks.append(f"</{tag}>")
        super().handle_endtag(tag)

    def handle_data(self, data) -> None:
        super().handle_data(html.escape(data, quote=False))

    def _finish(self) -> None:
        self._open = []
        super()._finish()


def tagged_paragraphs(page: Path) -> dict[tuple[str, int], str]:
    """`sample_corpus.extract_paragraphs` with inline tags kept."""
    parser = _TaggedParagraphParser()
    parser.feed(page.read_text(encoding="utf-8"))
    parser.close()
    seen: dict[str, int] = {}
    result = {}
    for par_id, text in parser.paragraphs:
        result[(par_id, seen.get(par_id, 0))] = text
        seen[par_id] = seen.get(par_id, 0) + 1
    return result


def strip_tags(text: str) -> str:
    return sc.clean_text(html.unescape(_TAG.sub("", text)))


def build_tagged_dev(
    help_dir: Path, target: str, dev_fraction: float = 0.03, test_fraction: float = 0.05,
    max_chars: int = 400, train_sources: set[str] | None = None,
) -> list[sc.Pair]:  # fmt: skip
    """Tagged (English, `target`) paragraph pairs of the dev pages under `help_dir` (the
    unpacked packages' help root) whose English holds a tag; `train_sources` (plain text)
    are left out."""
    source_dir = help_dir / sc.HELP_LANG_DIRS["en"] / "text"
    target_dir = help_dir / sc.HELP_LANG_DIRS[target] / "text"
    pairs = []
    for source_page in sorted(source_dir.rglob("*.html")):
        relative = source_page.relative_to(source_dir).as_posix()
        target_page = target_dir / relative
        if (
            sc.page_split(relative, dev_fraction, test_fraction) != "dev"
            or not target_page.is_file()
        ):
            continue
        targets = tagged_paragraphs(target_page)
        for key, source in tagged_paragraphs(source_page).items():
            target_text = targets.get(key, "")
            plain = sc.Pair(relative, strip_tags(source), strip_tags(target_text))
            if not _TAG.search(source) or not sc.keep_pair(plain, max_chars):
                continue
            if train_sources and plain.source in train_sources:
                continue
            pairs.append(sc.Pair(relative, sc.clean_text(source), sc.clean_text(target_text)))
    return pairs
