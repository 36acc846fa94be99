"""Index recipes: what builds an index, as data. A recipe is validated and completed here, once,
so the index row stores the full recipe it was built with (defaults written out) and both
databases read the same settings from it.

Lexical recipe (BM25):
- `stemmer`: "english" (PostgreSQL: the `english` text search configuration, Snowball stemmer;
  SQLite: the FTS5 `porter` tokenizer over `unicode61`) or "none" (words only lower-cased).
- `stop_words`: "english" (PostgreSQL's english.stop list, the same on both databases) or "none".
  With the english stemmer PostgreSQL always applies the list, so "none" needs stemmer "none".
- `k1` (term-frequency saturation, 0 to 5) and `b` (length normalisation, 0 to 1).
The derived `analyser` names what each database runs for that choice.

Semantic recipe: model, version, dims and normalisation of the packaged embedding model
(`memory.search.semantic.semantic_recipe`).
"""

from typing import Any

from memory.errors import ValidationFailed

# PostgreSQL's /usr/share/postgresql/*/tsearch_data/english.stop (the Snowball English list), so a
# query loses the same words on SQLite as the `english` configuration drops on PostgreSQL.
ENGLISH_STOP_WORDS = frozenset(
    """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves what which who whom this that these
those am is are was were be been being have has had having do does did doing a an the and but if or
because as until while of at by for with about against between into through during before after
above below to from up down in out on off over under again further then once here there when where
why how all any both each few more most other some such no nor not only own same so than too very s
t can will just don should now
""".split()
)

STOP_WORD_LISTS = {"english": ENGLISH_STOP_WORDS, "none": frozenset()}

# stemmer -> what each database runs
ANALYSERS = {
    "english": {"postgresql": "english", "sqlite": "porter unicode61 remove_diacritics 2"},
    "none": {"postgresql": "simple", "sqlite": "unicode61 remove_diacritics 2"},
}

# b = 0: no length normalisation. Memories are short notes and conversation turns (a few to a few
# dozen words), where a shorter text is not a more focused one: with b = 0.75 a filler turn
# ("Wow, that's huge, Rafael!") outranked the turn that answered, on the strength of a speaker's
# name and its shortness alone. As with tweets (TREC Microblog), b near 0 ranks such texts best: on
# the dev part of the recall evaluation, b 0.75 -> 0 took lexical hit@5/hit@10 from 52.6/59.5 to
# 59.5/61.9 and hybrid from 63.7/69.8 to 68.8/76.3, better both where the question shares words
# with its answer and where it does not (docs/recall-eval.md). With b = 0 and most terms occurring
# once, k1 hardly matters; it still saturates repeats.
LEXICAL_DEFAULTS: dict[str, Any] = {"stemmer": "english", "stop_words": "english", "k1": 1.2, "b": 0.0}
LEXICAL_KEYS = frozenset(LEXICAL_DEFAULTS)
BOUNDS = {"k1": (0.0, 5.0), "b": (0.0, 1.0)}


def lexical_recipe(given: dict[str, Any] | None = None) -> dict[str, Any]:
    """The complete lexical recipe for `given` (missing keys take the defaults; the derived
    `analyser` is recomputed). Raises ValidationFailed naming every bad key."""
    given = dict(given or {})
    given.pop("analyser", None)  # derived, never chosen
    errors: dict[str, list[str]] = {}
    for key in sorted(set(given) - LEXICAL_KEYS):
        errors[key] = [f"Unknown recipe key; a lexical recipe has {', '.join(sorted(LEXICAL_KEYS))}."]
    recipe = {**LEXICAL_DEFAULTS, **{k: v for k, v in given.items() if k in LEXICAL_KEYS}}
    if recipe["stemmer"] not in ANALYSERS:
        errors["stemmer"] = [f"One of {', '.join(sorted(ANALYSERS))}."]
    if recipe["stop_words"] not in STOP_WORD_LISTS:
        errors["stop_words"] = [f"One of {', '.join(sorted(STOP_WORD_LISTS))}."]
    elif recipe["stemmer"] == "english" and recipe["stop_words"] == "none":
        errors["stop_words"] = ["The english stemmer always drops the english stop words; use stemmer 'none' to keep them."]
    for key, (low, high) in BOUNDS.items():
        value = recipe[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            errors[key] = [f"A number from {low:g} to {high:g}."]
        else:
            recipe[key] = float(value)
    if errors:
        raise ValidationFailed("The index recipe is invalid.", errors=errors)
    recipe["analyser"] = dict(ANALYSERS[recipe["stemmer"]])
    return recipe


def stop_words(recipe: dict[str, Any]) -> frozenset[str]:
    return STOP_WORD_LISTS[recipe.get("stop_words", LEXICAL_DEFAULTS["stop_words"])]
