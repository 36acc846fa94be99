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

The lexical recipe also holds recall's second stage (`memory.search.rerank`), fitted on the dev part
of the recall evaluation (`bench/recall_eval/fit.py`), since the lexical index serves every recall:
- `rerank_depth` (1 to 500): the first stage's rows the second stage re-ranks.
- `neighbour_window` (0 to 5 records; 0: off) and `neighbour_weight` (0 to 1): how far along its
  session a record looks for a strongly matching neighbour, and the share of that neighbour's match
  it gains.
- `time_weight` (0 to 2): what a record observed or valid in a period the query names gains, as a
  share of the best match; `strip_periods` (true/false): whether those date words leave the lexical
  query.
- `brevity_weight` (0 to 1; 0: off): what a short turn of a session (an acknowledgement such as
  "Wow, nice!") loses, as a share of the best match, by how short it is.
- `semantic_common_share` (0 to 1; 0: off): the query's words found in at least this share of the
  scope's records (and in at least 20 of them) are left out of what the semantic index embeds
  (`memory.search.ranking.common_words`): in a conversation, its speakers' names.
- `relevance`: the calibration of each item's `relevance`, per mode ("lexical", "hybrid"): a
  logistic function's bias and one weight per feature (coverage, cosine, neighbour); and
  `min_relevance`, the floor a recall applies unless it names its own, per mode (0 to 1; one number
  sets both).
An index stored before these keys existed reads the defaults for them (`second_stage`).

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
BM25_DEFAULTS: dict[str, Any] = {"stemmer": "english", "stop_words": "english", "k1": 1.2, "b": 0.0}

# The second stage's defaults: what `bench/recall_eval/fit.py` chose on the dev part (docs/recall.md).
RELEVANCE_FEATURES = ("coverage", "cosine", "neighbour")
SECOND_STAGE_DEFAULTS: dict[str, Any] = {
    "rerank_depth": 50,
    "neighbour_window": 3,
    "neighbour_weight": 0.5,
    "time_weight": 0.3,
    "brevity_weight": 0.2,
    "strip_periods": False,
    "semantic_common_share": 0.25,
    "min_relevance": {"lexical": 0.0026, "hybrid": 0.0048},
    "relevance": {
        "lexical": {"bias": -6.036, "coverage": 8.181, "neighbour": 4.416},
        "hybrid": {"bias": -8.819, "coverage": 1.522, "cosine": 16.254, "neighbour": 4.715},
    },
}
LEXICAL_DEFAULTS: dict[str, Any] = {**BM25_DEFAULTS, **SECOND_STAGE_DEFAULTS}
LEXICAL_KEYS = frozenset(LEXICAL_DEFAULTS)
BOUNDS = {
    "k1": (0.0, 5.0),
    "b": (0.0, 1.0),
    "neighbour_weight": (0.0, 1.0),
    "time_weight": (0.0, 2.0),
    "brevity_weight": (0.0, 1.0),
    "semantic_common_share": (0.0, 1.0),
}
INTEGER_BOUNDS = {"rerank_depth": (1, 500), "neighbour_window": (0, 5)}
RELEVANCE_MODES = ("lexical", "hybrid")
COEFFICIENT_MAX = 100.0


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
    for key, (low, high) in INTEGER_BOUNDS.items():
        value = recipe[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors[key] = [f"A whole number from {low} to {high}."]
    if not isinstance(recipe["strip_periods"], bool):
        errors["strip_periods"] = ["true or false."]
    floors, problem = _floors(recipe["min_relevance"])
    if problem:
        errors["min_relevance"] = [problem]
    recipe["min_relevance"] = floors
    relevance, problem = _relevance(recipe["relevance"])
    if problem:
        errors["relevance"] = [problem]
    recipe["relevance"] = relevance
    if errors:
        raise ValidationFailed("The index recipe is invalid.", errors=errors)
    recipe["analyser"] = dict(ANALYSERS[recipe["stemmer"]])
    return recipe


def _floors(given: Any) -> tuple[dict[str, float], str | None]:
    """The floor per mode given (one number: both), or why it is invalid."""
    if not isinstance(given, dict):
        given = dict.fromkeys(RELEVANCE_MODES, given)
    if set(given) != set(RELEVANCE_MODES):
        return {}, f"A number from 0 to 1, or one per mode ({', '.join(RELEVANCE_MODES)})."
    for value in given.values():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            return {}, "A number from 0 to 1, or one per mode."
    return {mode: float(given[mode]) for mode in RELEVANCE_MODES}, None


def _relevance(given: Any) -> tuple[dict[str, dict[str, float]], str | None]:
    """The relevance calibration given (a mode missing takes its default), or why it is invalid."""
    if not isinstance(given, dict) or set(given) - set(RELEVANCE_MODES):
        return {}, f"An object with the modes {', '.join(RELEVANCE_MODES)}."
    complete = {}
    for mode in RELEVANCE_MODES:
        coefficients = given.get(mode, SECOND_STAGE_DEFAULTS["relevance"][mode])
        allowed = {"bias", *RELEVANCE_FEATURES}
        if not isinstance(coefficients, dict) or set(coefficients) - allowed or "bias" not in coefficients:
            return {}, f"{mode}: an object with a bias and weights for {', '.join(RELEVANCE_FEATURES)}."
        for value in coefficients.values():
            if isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) <= COEFFICIENT_MAX:
                return {}, f"{mode}: numbers from {-COEFFICIENT_MAX:g} to {COEFFICIENT_MAX:g}."
        complete[mode] = {name: float(value) for name, value in coefficients.items()}
    return complete, None


def second_stage(recipe: dict[str, Any]) -> dict[str, Any]:
    """The second stage's settings of a stored recipe: an index built before they existed reads
    the defaults for the keys it lacks."""
    return {key: recipe.get(key, default) for key, default in SECOND_STAGE_DEFAULTS.items()}


def stop_words(recipe: dict[str, Any]) -> frozenset[str]:
    return STOP_WORD_LISTS[recipe.get("stop_words", LEXICAL_DEFAULTS["stop_words"])]
