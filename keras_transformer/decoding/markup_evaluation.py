"""Scores of markup transfer (`evaluate.py --markup`, `benchmarks/markup_benchmark.py`):

    scores = tag_scores(tagged_sources, tagged_references, tagged_outputs)
    # {"well_formed", "tags_equal", "chrf_inside_tags", "bleu_stripped", "sentences"}

- well_formed: the share of outputs that parse as XML (inside one root element);
- tags_equal: the share whose tags (names, attributes, order, hence nesting) are the
  source's, byte for byte;
- chrf_inside_tags: sacrebleu chrF of the text inside each element of the output against the
  text inside the same element (document order) of the reference; an output whose tags
  differ counts as empty text there;
- bleu_stripped: sacrebleu BLEU of the outputs without tags (entities decoded) against the
  references without tags.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

from keras_transformer.data.markup import TAG


def strip_tags(text: str) -> str:
    """`text` without tags, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(TAG, "", text)).split())


def element_texts(text: str) -> list[str] | None:
    """The text inside each element of `text`, in document order; None if not well-formed."""
    try:
        root = ET.fromstring(f"<root>{text}</root>")
    except ET.ParseError:
        return None
    return [" ".join("".join(e.itertext()).split()) for e in list(root.iter())[1:]]


def tag_scores(sources, references, outputs) -> dict:
    """See the module docstring; all three are lists of tagged strings, in the same order."""
    import sacrebleu

    well_formed = equal = 0
    hypotheses, wanted = [], []
    for source, reference, output in zip(sources, references, outputs):
        inside, expected = element_texts(output), element_texts(reference) or []
        well_formed += inside is not None
        same = re.findall(TAG, output) == re.findall(TAG, source)
        equal += same
        hypotheses += inside if same and inside is not None else [""] * len(expected)
        wanted += expected
    count = max(len(outputs), 1)
    return {
        "sentences": len(outputs),
        "well_formed": well_formed / count,
        "tags_equal": equal / count,
        "chrf_inside_tags": sacrebleu.corpus_chrf(hypotheses, [wanted]).score if wanted else 0.0,
        "bleu_stripped": sacrebleu.corpus_bleu(
            [strip_tags(o) for o in outputs], [[strip_tags(r) for r in references]]
        ).score,
    }
