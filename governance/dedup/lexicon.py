"""Small English word lists the duplicate/contradiction detector relies on: stopwords, synonyms,
negation markers, antonym pairs, mutually exclusive value classes and number words.

They are general English and general business vocabulary, written down once, not tuned to single
examples. Entries are surface words; `governance.dedup.detect` stems them with the same Snowball
stemmer it applies to content, so "enabled" and "enable" match one entry.
"""

# Function words that carry no claim. Negations, quantities and prepositions that change a claim
# ("before"/"after", "in"/"out", "on"/"off") are deliberately absent.
STOPWORDS = frozenset(
    """
    a an the this that these those it its itself there here
    i me my mine we us our ours you your yours he him his she her hers they them their theirs
    is are was were be been being am has have had having do does did doing will would shall
    should can could may might must going get gets got getting
    of to for by with via from as at into onto about per than then so and or but also too
    in on at just really actually currently now still already yet very quite please kindly
    which who whom whose what when where while
    all any each every some such own same other another
    located based
    """.split()
)

# Words that flip a claim. An odd number of them on one side and an even number on the other
# means the two texts disagree ("wants" / "does not want").
NEGATIONS = frozenset("not no never none nobody nothing nowhere neither nor without".split())

# Groups of words used interchangeably in short claims; the first word is the canonical form.
SYNONYM_GROUPS = (
    ("prefer", "like", "want", "wish", "favour", "favor", "love", "enjoy", "rather"),
    ("need", "require", "requirement", "necessary", "needed"),
    ("above", "over", "exceed", "exceeding", "beyond"),
    ("below", "under", "beneath"),
    ("receive", "get", "obtain"),
    ("use", "utilise", "utilize", "employ"),
    ("customer", "client"),
    ("begin", "start", "commence"),
    ("finish", "end", "complete"),
    ("large", "big", "huge"),
    ("small", "little", "tiny"),
    ("say", "said", "mention", "state", "tell", "told"),
    ("ask", "request"),
    ("quick", "fast", "rapid", "prompt"),
    ("additional", "extra", "further"),
    ("buy", "purchase"),
    ("show", "display"),
    ("fix", "repair", "resolve"),
    ("choose", "pick", "select"),
    ("contact", "reach", "reachable"),
    ("phone", "telephone"),
    ("document", "doc"),
    ("help", "assist", "assistance"),
    ("cancel", "terminate"),
    ("issue", "problem"),
    ("allergic", "allergy"),
    ("center", "centre"),
    ("retry", "reattempt"),
)

# Pairs of words whose swap reverses a claim. One word of a pair on one side only, the other on
# the other side only, is a contradiction.
ANTONYM_PAIRS = (
    ("enable", "disable"),
    ("include", "exclude"),
    ("allow", "deny"),
    ("allow", "forbid"),
    ("allow", "prohibit"),
    ("allow", "block"),
    ("permit", "forbid"),
    ("accept", "refuse"),
    ("accept", "reject"),
    ("accept", "decline"),
    ("agree", "refuse"),
    ("agree", "decline"),
    ("agree", "reject"),
    ("approve", "reject"),
    ("approve", "deny"),
    ("approve", "decline"),
    ("in", "out"),
    ("on", "off"),
    ("open", "closed"),
    ("open", "close"),
    ("public", "private"),
    ("automatic", "manual"),
    ("automatically", "manually"),
    ("required", "optional"),
    ("mandatory", "optional"),
    ("always", "sometimes"),
    ("increase", "decrease"),
    ("more", "less"),
    ("more", "fewer"),
    ("before", "after"),
    ("early", "late"),
    ("earlier", "later"),
    ("dark", "light"),
    ("remote", "onsite"),
    ("remotely", "onsite"),
    ("start", "stop"),
    ("add", "remove"),
    ("internal", "external"),
    ("success", "failure"),
    ("succeed", "fail"),
    ("pass", "fail"),
    ("true", "false"),
    ("yes", "no"),
    ("up", "down"),
    ("above", "below"),
    ("min", "max"),
    ("minimum", "maximum"),
    ("most", "least"),
    ("high", "low"),
    ("higher", "lower"),
    ("first", "last"),
    ("buy", "sell"),
    ("credit", "debit"),
    ("present", "absent"),
    ("online", "offline"),
    ("synchronous", "asynchronous"),
    ("upgrade", "downgrade"),
    ("hot", "cold"),
    ("cheap", "expensive"),
    ("fast", "slow"),
    ("new", "old"),
    ("long", "short"),
    ("large", "small"),
    ("like", "hate"),
    ("love", "hate"),
    ("win", "lose"),
    ("encrypted", "plaintext"),
    ("signed", "unsigned"),
    ("paid", "unpaid"),
    ("weekday", "weekend"),
)

# Prefixes that negate an adjective or verb ("available" / "unavailable", "likes" / "dislikes").
NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non")

# Classes of mutually exclusive values: a claim that names one member is contradicted by the same
# claim naming another ("prefers email" / "prefers phone").
EXCLUSIVE_CLASSES = {
    "channel": "email mail phone telephone call sms text whatsapp slack chat letter fax video zoom webex telegram",
    "language": "english french german spanish italian portuguese dutch polish swedish danish norwegian finnish "
    "japanese chinese mandarin cantonese korean arabic hindi russian turkish greek czech hungarian hebrew",
    "time_of_day": "morning afternoon evening night noon midnight lunchtime",
    "frequency": "hourly daily weekly biweekly fortnightly monthly quarterly yearly annually annual",
    "plan_tier": "starter professional premium enterprise gold silver bronze platinum",
    "payment": "card credit debit transfer paypal cash cheque voucher",
    "file_format": "pdf csv xlsx xls docx doc word json xml html markdown txt excel",
    "environment": "staging production prod development dev sandbox qa",
    "platform": "windows macos mac linux ios android iphone ipad",
    "cloud": "aws azure gcp",
    "diet": "vegetarian vegan pescatarian halal kosher omnivore",
    "seat": "aisle window middle",
    "colour": "red orange yellow green blue purple pink black white grey gray brown",
    "attendance": "remote remotely onsite office person",
    "pronoun": "he she they xe ze",
    "unit": "celsius fahrenheit metric imperial",
}

# Contrast and order: words that set one alternative against another. Order matters in these, so
# the detector reads which side each word is on ("email over phone" is not "phone over email").
# Markers inside a clause, longest first; the left side is the one chosen (or done first) unless the
# marker is in REVERSED_MARKERS ("tea less than coffee", "deploy after the tests").
# "after that" / "before that" point back at the clause before, so they read like "then".
CONTRAST_MARKERS = (
    ("in", "preference", "to"),
    ("in", "place", "of"),
    ("rather", "than"),
    ("instead", "of"),
    ("ahead", "of"),
    ("prior", "to"),
    ("more", "than"),
    ("better", "than"),
    ("sooner", "than"),
    ("less", "than"),
    ("fewer", "than"),
    ("worse", "than"),
    ("after", "that"),
    ("after", "this"),
    ("before", "that"),
    ("before", "this"),
    ("over",),
    ("above",),
    ("below",),
    ("than",),
    ("before",),
    ("after",),
    ("then",),
)
REVERSED_MARKERS = frozenset(
    {
        ("less", "than"),
        ("fewer", "than"),
        ("worse", "than"),
        ("below",),
        ("after",),
        ("before", "that"),
        ("before", "this"),
    }
)
# A bare "than" after one of these (within a few words: "less often than") is reversed too.
LESSER_COMPARATIVES = frozenset("less fewer worse".split())
# "prefers X to Y": "to" is a marker only after one of these, and not before a verb that makes it
# an infinitive ("prefers the report to be short").
PREFER_TO_VERBS = frozenset("prefer prefers preferred preferring".split())
INFINITIVE_VERBS = frozenset("be been being have has had having get gets got do does did go goes".split())
# Words that end the chosen side on the left ("prefers | email over phone"): the verb of choosing
# is context, not one of the alternatives.
CHOICE_VERBS = frozenset(
    "prefer prefers preferred choose chooses chose chosen pick picks picked use uses used select selects selected "
    "favour favours favoured favor favors favored prioritise prioritises prioritised prioritize prioritizes "
    "prioritized recommend recommends recommended opt opts opted want wants wanted like likes liked".split()
)
# "over" is not a contrast after a phrasal verb ("took over", "handed over") or before a span of
# time ("over the weekend"); "then" is not one in "since then", "by then".
OVER_PARTICLE_VERBS = frozenset(
    "take takes took taken hand hands handed carry carries carried turn turns turned think thinks thought look "
    "looks looked go goes went come comes came get gets got run runs ran roll rolls rolled move moves moved "
    "switch switches switched pass passes passed hold holds held sign signs signed fall falls fell stay stays stayed".split()
)
TIME_SPANS = frozenset(
    "weekend weekends time past last next coming years year months month weeks week days day nights night "
    "holidays holiday summer winter spring autumn period course decade hours hour".split()
)
NOT_A_SEQUENCE_BEFORE_THEN = frozenset("since by until till from back only even just".split())
# Words next to a marker that qualify the order rather than name an alternative ("and only after
# that", "first X, then Y"): a side skips them.
SIDE_FILLERS = frozenset("only also first always usually generally normally typically ideally preferably definitely".split())
# The right side of a marker ends at one of these: "email over phone | for invoices".
SIDE_ENDINGS = frozenset("for when whenever if unless because since during until so where while".split())
# Clause boundaries: besides punctuation, these conjunctions start a new clause that may say the
# opposite of the one before ("not email but phone", "email is fine, but do not call").
CONTRAST_CONJUNCTIONS = frozenset("but whereas however although though".split())
# Negations that can open a clause of their own ("email, not phone", "calls and never texts").
CLAUSE_NEGATIONS = frozenset("not never no".split())
# "instead" or "rather" on their own: this clause replaces the one before ("do not call, email instead").
REPLACING_ADVERBS = frozenset("instead rather".split())
# "not only X but also Y" negates nothing.
NOT_NEGATING_AFTER_NOT = frozenset("only just merely simply".split())

# "may" is left out: as a month it is capitalised, and capitalised words count as values anyway.
MONTHS = frozenset(
    "january february march april june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri".split())
# Currencies and time zones: a different one changes the claim like a different number.
CURRENCY_AND_ZONE_CODES = frozenset(
    "usd eur gbp chf jpy cad aud nzd sek nok dkk pln inr cny dollar dollars euro euros pound pounds "
    "utc gmt cet cest est edt pst pdt ist jst".split()
)

# "one" is left out on purpose: it is far more often a determiner than a count.
NUMBER_WORDS = {
    "zero": "0",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "thirteen": "13",
    "fourteen": "14",
    "fifteen": "15",
    "sixteen": "16",
    "seventeen": "17",
    "eighteen": "18",
    "nineteen": "19",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "seventy": "70",
    "eighty": "80",
    "ninety": "90",
    "hundred": "100",
    "thousand": "1000",
    "twice": "2x",
    "once": "1x",
}

# English contractions, expanded before tokenising so "doesn't" and "does not" compare equal.
CONTRACTIONS = (
    (r"\bwon't\b", "will not"),
    (r"\bcan't\b", "can not"),
    (r"\bcannot\b", "can not"),
    (r"\bshan't\b", "shall not"),
    (r"n't\b", " not"),
    (r"'re\b", " are"),
    (r"'ve\b", " have"),
    (r"'ll\b", " will"),
    (r"'m\b", " am"),
    (r"'d\b", " would"),
    (r"'s\b", ""),
    (r"s'(?=\s|$)", "s"),
)

# Irregular verb forms the stemmer cannot fold ("sent" / "send"), mapped before stemming.
IRREGULAR_FORMS = {
    "sent": "send",
    "paid": "pay",
    "made": "make",
    "told": "tell",
    "got": "get",
    "gotten": "get",
    "bought": "buy",
    "held": "hold",
    "ran": "run",
    "went": "go",
    "gone": "go",
    "written": "write",
    "wrote": "write",
    "took": "take",
    "taken": "take",
    "gave": "give",
    "given": "give",
    "kept": "keep",
    "left": "leave",
    "met": "meet",
    "brought": "bring",
    "thought": "think",
    "found": "find",
    "built": "build",
    "spent": "spend",
    "sold": "sell",
    "lost": "lose",
    "won": "win",
    "chose": "choose",
    "chosen": "choose",
    "began": "begin",
    "begun": "begin",
    "knew": "know",
    "known": "know",
    "shown": "show",
    "saw": "see",
    "seen": "see",
    "came": "come",
    "became": "become",
    "felt": "feel",
    "heard": "hear",
    "meant": "mean",
    "understood": "understand",
    "forgot": "forget",
    "forgotten": "forget",
    "broke": "break",
    "broken": "break",
    "drove": "drive",
    "driven": "drive",
    "flew": "fly",
    "flown": "fly",
    "fell": "fall",
    "fallen": "fall",
    "rang": "ring",
    "rung": "ring",
    "set": "set",
    "sat": "sit",
    "stood": "stand",
    "led": "lead",
    "read": "read",
}
