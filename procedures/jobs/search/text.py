"""How job text is read, on both sides of a search: folded (case, accents, Turkish letters), split into words,
English stop words dropped and the rest stemmed, so that `Mühendisler` and `muhendis` meet and so do
`engineers` and `engineer`. The same analyzer indexes the jobs and reads the typed query."""

from __future__ import annotations

import tantivy

ANALYZER = "job_text"
# Substring filters (`procedures.jobs.search.filters.contains`) read a folded value as its trigrams in order, each
# at its position (GRAMS: the document holds them run together, and this analyzer cuts every three characters), and
# as the set of its letters and pairs of letters (PAIRS), for the shorter texts.
GRAMS = "job_grams"
PAIRS = "job_pairs"

# Letters with marks and their base letters, as in schema.sql's job_fold (the search that answers from
# PostgreSQL while an index is being built folds exactly alike); Turkish dotless and dotted i become i before
# lower-casing, so no locale decides them.
_MARKED = (
    "ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜÝàáâãäåçèéêëìíîïñòóôõöøùúûüýÿĀāĂăĄąĆćĈĉĊċČčĎďĐđĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĦħĨĩĪīĬĭĮįİıĴĵĶķĹĺĻļĽľŁłŃń"
    "ŅņŇňŌōŎŏŐőŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŦŧŨũŪūŬŭŮůŰűŲųŴŵŶŷŸŹźŻżŽžƀƠơƯưǍǎǏǐǑǒǓǔǕǖǗǘǙǚǛǜǞǟǠǡǦǧǨǩǪǫǬǭǰǴǵǸǹǺǻȀȁȂȃȄȅȆȇȈȉȊȋȌȍȎȏȐȑȒȓȔȕȖȗȘș"
    "ȚțȞȟȦȧȨȩȪȫȬȭȮȯȰȱȲȳ"
)
_BASE = (
    "aaaaaaceeeeiiiinoooooouuuuyaaaaaaceeeeiiiinoooooouuuuyyaaaaaaccccccccddddeeeeeeeeeegggggggghhhhiiiiiiiiiijjkkll"
    "llllllnnnnnnoooooorrrrrrssssssssttttttuuuuuuuuuuuuwwyyyzzzzzzboouuaaiioouuuuuuuuuuaaaaggkkoooojggnnaaaaaaeeeeiiii"
    "oooorrrruuuusstthhaaeeooooooooyy"
)
_FOLD = str.maketrans(_MARKED, _BASE)
_LIGATURES = (("ß", "ss"), ("æ", "ae"), ("œ", "oe"))

# PostgreSQL's English stop words (its `english` text search configuration): not indexed, not asked.
STOP_WORDS = (  # noqa: SIM905 - a list of words reads best as the words
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers "
    "herself it its itself they them their theirs themselves what which who whom this that these those am is are "
    "was were be been being have has had having do does did doing a an the and but if or because as until while "
    "of at by for with about against between into through during before after above below to from up down in out "
    "on off over under again further then once here there when where why how all any both each few more most "
    "other some such no nor not only own same so than too very s t can will just don should now"
).split()


def fold(text: str) -> str:
    """Lower case without marks: `İzmir` → `izmir`, `Mühendis` → `muhendis`, `Straße` → `strasse`."""
    folded = text.translate(_FOLD).lower()
    for letter, spelled in _LIGATURES:
        folded = folded.replace(letter, spelled)
    return folded


def analyzer() -> tantivy.TextAnalyzer:
    """Words (runs of letters and digits) of folded text, stop words dropped, the rest reduced to their English
    stems (Snowball, as PostgreSQL's)."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.custom_stopword(STOP_WORDS))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def trigrams(folded: str) -> list[str]:
    """Every three characters in a row, in order: `izmir` → `izm`, `zmi`, `mir`."""
    return [folded[start : start + 3] for start in range(len(folded) - 2)]


def grams_analyzer() -> tantivy.TextAnalyzer:
    """The trigrams of a value, written run together, cut back apart: three characters a token, each at the next
    position, so that a phrase of trigrams is a substring (no character is special, no separator needed)."""
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(r"(?s).{3}")).build()


def pairs_analyzer() -> tantivy.TextAnalyzer:
    """Every letter and pair of letters of a value (positions unused): a substring of one or two characters."""
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.ngram(1, 2, False)).build()
