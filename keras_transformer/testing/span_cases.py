"""The protected-span table's test cases, one or more per pattern of
`keras_transformer.data.protected_spans.PATTERNS`: `(pattern, text, expected spans)`, the
spans in word order (each word's first one, with the spans `JOINER` characters join to it)."""

from __future__ import annotations

SPAN_CASES = (
    ("url", "Open https://example.com/help and go.", ["https://example.com/help"]),
    (
        "url",
        "See (https://wiki.documentfoundation.org/Faq).",
        ["https://wiki.documentfoundation.org/Faq"],
    ),
    ("url", "Visit www.libreoffice.org.", ["www.libreoffice.org"]),
    ("email", "Write to user.name+help@example.co.uk today.", ["user.name+help@example.co.uk"]),
    ("printf_placeholder", "Saved %s of %1$d files (%.2f%%).", ["%s", "%1$d", "%.2f"]),
    ("brace_placeholder", "Page {0} of {name}.", ["{0}", "{name}"]),
    ("variable", "Set $(INSTDIR) and ${HOME}/bin.", ["$(INSTDIR)", "${HOME}"]),
    ("key_combination", "Press Ctrl+Shift+F5 or Alt+Enter.", ["Ctrl+Shift+F5", "Alt+Enter"]),
    ("key_combination", "Press Cmd+Z (Ctrl+Z).", ["Cmd+Z", "Ctrl+Z"]),
    ("number", "Refresh 3 cells of 1,234.56 at 06:29:41.", ["3", "1,234.56", "06:29:41"]),
    ("number", "Due 12/05/2024 or 2024-05-12 (p. 10–20).", ["12/05/2024", "2024-05-12", "10–20"]),
    ("number", "At -5 °C, (+4.3%) or +49 30 (not COVID-19).", ["-5", "+4.3", "+49", "30", "19"]),
    ("key_combination", "Copy and paste with Ctrl+C/Ctrl+V.", ["Ctrl+C/Ctrl+V"]),
    (
        "key_combination",
        "Drücken Sie Strg+Umschalt+Eingabetaste oder Maj+Entrée.",
        ["Strg+Umschalt+Eingabetaste", "Maj+Entrée"],
    ),
    (
        "key_combination",  # the last key ends its word: not "Alt+P", nor "Ctrl+c" of "click"
        "Press Alt+Page Up, Ctrl+minus or CTRL+ALT+DEL; Ctrl+click.",
        ["Alt+Page", "Ctrl+minus", "CTRL+ALT+DEL"],
    ),
    ("key_combination", "Press F5, F12 or Shift+F8.", ["F5", "F12", "Shift+F8"]),
    ("separator", "Home | Help › Tools / Options > Save a|b ||", ["|", "›", "/", ">", "||"]),
)
