"""A rule-based English -> German toy corpus (numbers, dates, times, verb-second word order),
to check that a training recipe also learns outside the bundled LibreOffice domain.

    python benchmarks/run.py corpus toy --output-dir runs/toy --train 20000
    python pipelines/train_wmt.py --dataset tsv:runs/toy/toy.train.tsv --model-dir runs/toy_run

English writes numbers in digits ("On 3 May 2021 we buy 24 apples."); German spells them out
and puts the verb second ("Am dritten Mai zweitausendeinundzwanzig kaufen wir
vierundzwanzig Äpfel."). Writes `toy.{train,dev,test}.tsv` (no sentence in two splits), which
`--dataset tsv:DIR/toy.train.tsv` picks up as train/dev/test.
"""

from __future__ import annotations

import os
import random

from benchmarks import flags

ONES = "null eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn "
ONES += "fünfzehn sechzehn siebzehn achtzehn neunzehn"
ONES = ONES.split()
TENS = "_ _ zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig".split()
MONTHS = [
    ("January", "Januar"), ("February", "Februar"), ("March", "März"), ("April", "April"),
    ("May", "Mai"), ("June", "Juni"), ("July", "Juli"), ("August", "August"),
    ("September", "September"), ("October", "Oktober"), ("November", "November"),
    ("December", "Dezember"),
]  # fmt: skip
DAYS = [
    ("Monday", "Montag"), ("Tuesday", "Dienstag"), ("Wednesday", "Mittwoch"),
    ("Thursday", "Donnerstag"), ("Friday", "Freitag"), ("Saturday", "Samstag"),
    ("Sunday", "Sonntag"),
]  # fmt: skip
# English subject, German subject, German verb ending index (0 ich, 1 du, 2 er/sie, 3 wir/sie)
SUBJECTS = [
    ("I", "ich", 0), ("you", "du", 1), ("he", "er", 2), ("she", "sie", 2), ("we", "wir", 3),
    ("they", "sie", 3), ("the teacher", "der Lehrer", 2), ("my sister", "meine Schwester", 2),
    ("our neighbours", "unsere Nachbarn", 3), ("the children", "die Kinder", 3),
]  # fmt: skip
# English verb (base, 3rd person), German forms for ich, du, er, wir
VERBS = [
    ("buy", "buys", ("kaufe", "kaufst", "kauft", "kaufen")),
    ("sell", "sells", ("verkaufe", "verkaufst", "verkauft", "verkaufen")),
    ("see", "sees", ("sehe", "siehst", "sieht", "sehen")),
    ("need", "needs", ("brauche", "brauchst", "braucht", "brauchen")),
    ("find", "finds", ("finde", "findest", "findet", "finden")),
    ("order", "orders", ("bestelle", "bestellst", "bestellt", "bestellen")),
    ("count", "counts", ("zähle", "zählst", "zählt", "zählen")),
]
# English singular, plural; German accusative indefinite singular, plural
NOUNS = [
    ("apple", "apples", "einen Apfel", "Äpfel"), ("book", "books", "ein Buch", "Bücher"),
    ("chair", "chairs", "einen Stuhl", "Stühle"), ("car", "cars", "ein Auto", "Autos"),
    ("bottle", "bottles", "eine Flasche", "Flaschen"), ("ticket", "tickets", "ein Ticket",
    "Tickets"), ("flower", "flowers", "eine Blume", "Blumen"), ("egg", "eggs", "ein Ei", "Eier"),
    ("table", "tables", "einen Tisch", "Tische"), ("cup", "cups", "eine Tasse", "Tassen"),
    ("house", "houses", "ein Haus", "Häuser"), ("bird", "birds", "einen Vogel", "Vögel"),
]  # fmt: skip


def german_number(n: int) -> str:
    """0 <= n < 10000 in German words: 24 -> "vierundzwanzig", 1971 -> "eintausend..."."""
    if n < 20:
        return ONES[n]
    if n < 100:
        ones, tens = n % 10, TENS[n // 10]
        return tens if ones == 0 else ("ein" if ones == 1 else ONES[ones]) + "und" + tens
    if n < 1000:
        head = "ein" if n // 100 == 1 else ONES[n // 100]
        return head + "hundert" + (german_number(n % 100) if n % 100 else "")
    head = "ein" if n // 1000 == 1 else ONES[n // 1000]
    return head + "tausend" + (german_number(n % 1000) if n % 1000 else "")


def german_year(year: int) -> str:
    """1900-1999 as "neunzehnhundert...", other years as plain numbers."""
    if 1100 <= year < 2000:
        rest = year % 100
        return german_number(year // 100) + "hundert" + (german_number(rest) if rest else "")
    return german_number(year)


def german_ordinal_dative(day: int) -> str:
    """Day of month after "am": 1 -> "ersten", 3 -> "dritten", 20 -> "zwanzigsten"."""
    special = {1: "ers", 3: "drit", 7: "sieb", 8: "ach"}
    stem = special.get(day) or german_number(day)
    return stem + ("ten" if day < 20 else "sten")


def time_phrase(rng: random.Random) -> tuple[str, str]:
    kind = rng.randrange(4)
    if kind == 0:
        en, de = rng.choice(DAYS)
        return f"On {en}", f"Am {de}"
    if kind == 1:
        day, (en_m, de_m), year = rng.randint(1, 28), rng.choice(MONTHS), rng.randint(1950, 2030)
        return f"On {day} {en_m} {year}", f"Am {german_ordinal_dative(day)} {de_m} " + german_year(
            year
        )
    if kind == 2:
        hour, minute = rng.randint(0, 23), rng.randint(0, 59)
        de = f"Um {german_number(hour)} Uhr" + (f" {german_number(minute)}" if minute else "")
        return f"At {hour}:{minute:02d}", de
    en_m, de_m = rng.choice(MONTHS)
    return f"In {en_m}", f"Im {de_m}"


def make_pair(rng: random.Random) -> tuple[str, str]:
    en_subj, de_subj, person = rng.choice(SUBJECTS)
    base, third, forms = rng.choice(VERBS)
    en_one, en_many, de_one, de_many = rng.choice(NOUNS)
    count = rng.choice([1, rng.randint(2, 20), rng.randint(21, 999), rng.randint(1000, 9999)])
    en_obj = f"one {en_one}" if count == 1 else f"{count} {en_many}"
    de_obj = de_one if count == 1 else f"{german_number(count)} {de_many}"
    en_verb = third if person == 2 else base
    de_verb = forms[person]
    if rng.random() < 0.5:  # time first: German puts the verb second, before the subject
        en_time, de_time = time_phrase(rng)
        de = f"{de_time} {de_verb} {de_subj} {de_obj}."
        return f"{en_time} {en_subj} {en_verb} {en_obj}.", de
    en = f"{en_subj[0].upper()}{en_subj[1:]} {en_verb} {en_obj}."
    return en, f"{de_subj[0].upper()}{de_subj[1:]} {de_verb} {de_obj}."


def main(argv=None, prog: str = "python benchmarks/run.py corpus toy") -> None:
    parser = flags.parser(prog, __doc__)
    flags.add(parser, output_dir={"default": "runs/toy", "help": "where toy.*.tsv go"})
    parser.add_argument("--train", type=int, default=20000, help="training pairs")
    parser.add_argument("--dev", type=int, default=500, help="dev pairs")
    parser.add_argument("--test", type=int, default=1000, help="test pairs")
    parser.add_argument("--seed", type=int, default=7, help="random seed")
    args = parser.parse_args(argv)
    rng, seen = random.Random(args.seed), set()
    os.makedirs(args.output_dir, exist_ok=True)
    for split, size in (("test", args.test), ("dev", args.dev), ("train", args.train)):
        pairs = []
        while len(pairs) < size:
            pair = make_pair(rng)
            if pair[0] not in seen:
                seen.add(pair[0])
                pairs.append(pair)
        with open(os.path.join(args.output_dir, f"toy.{split}.tsv"), "w") as f:
            f.writelines(f"{en}\t{de}\n" for en, de in pairs)
        print(f"{split}: {len(pairs)} pairs")
