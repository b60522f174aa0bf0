"""The segmenter's table test cases, one or more per rule of
`keras_transformer.data.segmenter.RULES`: `(rule, text, expected segments)`. Shared by the
segmenter's tests (eager and traced) and the export's (the same cases in a SavedModel)."""

from __future__ import annotations

SEGMENTER_CASES = (
    ("start_of_input", "  Indented. Text.", ["", "Indented.", "Text."]),
    ("end_of_input", "No period at the end  ", ["No period at the end", ""]),
    ("line_break", "First line\nsecond line", ["First line", "second line"]),
    ("line_break", "Title\n\n- one item\n- two items", ["Title", "- one item", "- two items"]),
    (
        "abbreviation",
        "Use e.g. the menu. Dr. Smith came.",
        ["Use e.g. the menu.", "Dr. Smith came."],
    ),
    (
        "abbreviation",
        "Das geht z.B. so. Vgl. Abschnitt 2.",
        ["Das geht z.B. so.", "Vgl. Abschnitt 2."],
    ),
    ("abbreviation", "It works (cf. Fig. 2). Next.", ["It works (cf. Fig. 2).", "Next."]),
    (
        "initial",
        "Das ist z. B. gut. J. R. R. Tolkien wrote it.",
        ["Das ist z. B. gut.", "J. R. R. Tolkien wrote it."],
    ),
    (
        "number_label",
        "See No. 5 now. No. That is wrong.",
        ["See No. 5 now.", "No.", "That is wrong."],
    ),
    ("list_item", "1. Open the file. 2. Save it.", ["1. Open the file.", "2. Save it."]),
    ("list_item", "Steps:\n  3. Click OK.", ["Steps:", "3. Click OK."]),
    (
        "ordinal",
        "Am 3. Mai kam er. Im 19. Jahrhundert nicht.",
        ["Am 3. Mai kam er.", "Im 19. Jahrhundert nicht."],
    ),
    ("sentence_end", "Open number 7. Der Hund schläft.", ["Open number 7.", "Der Hund schläft."]),
    (
        "lowercase_next",
        "Wait... what? Apples, pears etc. and more.",
        ["Wait... what?", "Apples, pears etc. and more."],
    ),
    (
        "sentence_end",
        "Version 4.0.1 is out. Pi is 3.14. Next!",
        ["Version 4.0.1 is out.", "Pi is 3.14.", "Next!"],
    ),
    (
        "sentence_end",
        'He said "Stop." Then left. (See above.) Next one?',
        ['He said "Stop."', "Then left.", "(See above.)", "Next one?"],
    ),
    (
        "sentence_end",
        "Go to %APPDATA%\\LibreOffice\\4\\user now. Then https://example.org/a.b. Done.",
        ["Go to %APPDATA%\\LibreOffice\\4\\user now.", "Then https://example.org/a.b.", "Done."],
    ),
    (
        "sentence_end",
        "Choose Tools - Options - LibreOffice - Paths. Click OK.",
        ["Choose Tools - Options - LibreOffice - Paths.", "Click OK."],
    ),
    ("sentence_end", "Wait… Then go!! Really?!", ["Wait…", "Then go!!", "Really?!"]),
)
