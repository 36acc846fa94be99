"""The risk detector as migration 0007 ran it (a frozen copy of `memory.risk` at that time), so
the migration flags the quarantined records of an older database the same way whatever the
detector becomes. Not a migration (the leading underscore keeps Django's loader away)."""

import re
import unicodedata
from urllib.parse import parse_qsl, urlsplit

# The flag codes, in their stored order.
RISK_FLAGS = ("override", "directive", "code", "secret", "exfil")

_I = re.IGNORECASE

# --- override ---------------------------------------------------------------------------------
_INSTRUCTION_WORDS = (
    r"(instructions?|prompts?|rules|directions|directives|guidelines|guidance|polic(y|ies)|"
    r"restrictions|safety|programming|anweisungen|instructions?|consignes)"
)
_OVERRIDE = [
    re.compile(r"\b(ignor\w*|disregard\w*|forget|overrid\w*|bypass\w*|set aside)\b[^.\n]{0,40}?\b" + _INSTRUCTION_WORDS, _I),
    re.compile(r"\bforget (everything|all)\b[^.\n]{0,40}\b(told|said|know|learned|before)\b", _I),
    re.compile(r"\byou are (now|no longer)\b", _I),
    re.compile(r"\byour new (system )?(prompt|instructions|rules|role|task)\b", _I),
    re.compile(
        r"\byour (system )?(prompt|instructions|rules|guidelines|policy) (is|are|has been|have been) "
        r"(now )?(replaced|changed|updated|void|cancel+ed|overridden)\b",
        _I,
    ),
    re.compile(r"\bnew (system )?(instructions|rules|prompt)\s*:", _I),
    re.compile(
        r"\b(previous|prior|earlier|above|old)\s+" + _INSTRUCTION_WORDS + r"\s+(is|are)\s+(now\s+)?"
        r"(void|cancel+ed|invalid|replaced|obsolete|revoked|suspended)",
        _I,
    ),
    re.compile(
        r"\b(print|reveal|show|output|repeat|leak)\b[^.\n]{0,20}\b(hidden|system|initial|secret)\s+(prompt|instructions)\b", _I
    ),
    re.compile(r"\b(developer|god|admin|debug) mode\b|\bjailbreak\w*\b|\bDAN\b|\bunrestricted (ai|model|assistant|mode)\b", _I),
    re.compile(
        r"\b(act|behave|respond|roleplay) as (an? |the )?(administrator|admin|operator|root|unrestricted|developer|system)\b", _I
    ),
    re.compile(r"\bpretend (you are|to be|that you)\b", _I),
    re.compile(r"(^|\n)\s*(system|assistant|developer)\s*:", _I),
    re.compile(
        r"\b(attention|note to|message (for|to)|update for|instructions for)\s+(the\s+)?"
        r"(ai|llm|language model|assistant|agent|bot)s?\b",
        _I,
    ),
]

# --- directive --------------------------------------------------------------------------------
# Verbs that open an order when a sentence starts with them (no subject): "Send ...", "Deploy ...".
_ORDER_VERBS = (
    "add|answer|approve|cancel|cc|bcc|change|click|close|copy|create|delete|deploy|disable|download|drop|"
    "email|e-mail|enable|escalate|execute|export|forward|give|grant|include|install|keep|leak|mail|mark|"
    "merge|open|pay|post|praise|print|publish|push|recommend|refund|remove|reply|reset|respond|reveal|"
    "run|say|send|set|share|skip|store|tell|transfer|update|upload|use|visit|waive|wire|write"
)
_LEADS = r"((please|kindly|also|then|now|just|and|first|finally|immediately)[,]?\s+)*"
_REMINDERS = r"((remember|be sure|don'?t forget|do not forget) to|make sure (to|that|you)?|you (can|may) now)\s+"
_NOT_AN_ORDER = r"(?!\s+(is|was|were|are|has|had|will|would|can|could|may|and|or)\b)(?!')"
# A sentence starts after . ! ? ; : a dash or a line break, or after "Assistant," addressing the agent;
# the text is split there once and each piece is matched from its start.
_SENTENCE_BREAK = re.compile(r"[.!?;:\n\u2014]+|\b(?:assistant|ai|agent|bot),", _I)
_OPENING = r"\s*[\"'(\[*\-\u2022]*\s*" + _LEADS
_ORDER_OPENINGS = [
    re.compile(_OPENING + r"(" + _REMINDERS + r")?(" + _ORDER_VERBS + r")(?=\s)" + _NOT_AN_ORDER, _I),
    re.compile(_OPENING + r"(always|never|do not|don'?t)\s+[a-z]", _I),
    re.compile(r"\s*bitte\s+\w+", _I),
]
_DIRECTIVE = [
    re.compile(r"\byou (must|should|shall|need to|have to|are required to|ought to|must not|may not|will now|are to)\b", _I),
    re.compile(r"\b(the )?(assistant|ai|agent|bot|model)\s+(must|should|shall|needs to|has to|is required to|is to)\b", _I),
    re.compile(
        r"\b(when|whenever|if)\b[^.\n]{0,80}\b(asks?|asked|mentions?|requests?|inquires?|calls?)\b[^.\n]{0,60},\s*"
        r"(just\s+)?(" + _ORDER_VERBS + r"|claim|deny|offer|refuse|do|give|call|praise)\b",
        _I,
    ),
    re.compile(r"\bkeep (this|these|it) (instructions?\s+)?(secret|hidden|private)\b", _I),
]


def _gives_orders(text: str) -> bool:
    text = _URL.sub(" link ", text)  # the dots and question marks of an address end no sentence
    if any(pattern.search(text) for pattern in _DIRECTIVE):
        return True
    return any(pattern.match(sentence) for sentence in _SENTENCE_BREAK.split(text) if sentence for pattern in _ORDER_OPENINGS)


# --- code -------------------------------------------------------------------------------------
_CODE = [
    re.compile(r"\{\s*\"(tool|tool_name|name|function|action|cmd|command|method)\"\s*:", _I),
    re.compile(r"\"(arguments|parameters|args|params|input)\"\s*:\s*\{", _I),
    re.compile(
        r"<\s*/?\s*(tool_call|tool_use|tool|function|invoke|script|iframe|img|svg|object|embed|form|input|"
        r"html|body|meta|link|style)\b",
        _I,
    ),
    re.compile(r"javascript:|\bon(error|load|click|mouseover)\s*=", _I),
    re.compile(r"```|`[^`\n]{2,}`"),
    re.compile(
        r"(^|[\s;|&(])(curl|wget|sudo|chmod|chown|rm\s+-\w*[rf]|mkfs|dd\s+if=|bash\s+-c|sh\s+-c|"
        r"powershell|pwsh|base64\s+-d|kubectl|nc\s+-?\S+\s+\d+)\b",
        _I,
    ),
    re.compile(r"\|\s*(sh|bash|zsh|python3?|perl)\b|&&\s*\w|\$\(\w|\$\{\w+\}", _I),
    re.compile(
        r"\b(select\s+[\w*,.\s]{1,120}?\s+from\s+\w|insert\s+into\s+\w|update\s+\w+\s+set\s+\w|delete\s+from\s+\w|"
        r"drop\s+(table|database|schema)\b|truncate\s+table\b|alter\s+table\b|union\s+select\b)",
        _I,
    ),
    re.compile(
        r"\b(os\.system|subprocess\.\w+|eval|exec|__import__|requests\.\w+|fetch|atob|btoa|alert|"
        r"document\.\w+|window\.\w+|open)\s*\(",
        _I,
    ),
    re.compile(r"\b[a-z_][a-z0-9]*(_[a-z0-9]+)+\s*\(\s*(\w+\s*=|['\"{\[])", _I),  # snake_case_call(arg=... / "...")
    re.compile(r"(^|;\s*)(import|from)\s+[a-z_][\w.]*(\s+import\s+\w+)?\s*(;|$)", _I | re.MULTILINE),
]

# --- secret -----------------------------------------------------------------------------------
_SECRET_WORDS = (
    r"(password|passwd|passwort|pwd|passcode|pass phrase|passphrase|secret|secret[_ ]key|api[_ -]?key|"
    r"access[_ ]key|auth[_ ]token|access[_ ]token|token|pin|credentials?)"
)
_SECRET = [
    re.compile(r"\b(sk|pk|rk)[-_]((live|test|proj)[-_])?[A-Za-z0-9]{16,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bgm[ar]_[A-Za-z0-9_-]{20,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\bbearer\s+[A-Za-z0-9._~+/-]{16,}", _I),
    re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", _I),  # scheme://user:password@host
    # "password: Tr0ub4dor&3", "pwd=Winter2026", "token is 9f8e...": a value with a digit or symbol
    re.compile(
        r"\b" + _SECRET_WORDS + r"\b(\s+(for|of|to) [^.,;:=\n]{1,40}?)?\s*(is|was|=|:)\s*['\"]?"
        r"(?=[^\s'\"]*[\d!@#$%^&*~?])[^\s'\",;]{4,}",
        _I,
    ),
    re.compile(r"\b" + _SECRET_WORDS + r"\b\s*(is|was|=|:)?\s*(['\"])[^'\"\n]{4,}\2", _I),  # password 'gate-keeper'
    # a lone token with lower and upper case, a digit and a symbol: a password more often than not
    re.compile(r"(?<![\w/.:@])(?=[^\s]*[a-z])(?=[^\s]*[A-Z])(?=[^\s]*\d)(?=[^\s]*[!@#$%^&*~?])[^\s/]{8,}"),
    re.compile(r"(?<![\w-])[a-f0-9]{32,}(?![\w-])"),  # a long hex secret
]

# --- exfil ------------------------------------------------------------------------------------
_URL = re.compile(r"(?:https?:)?//[^\s<>\"'`)\]]+", _I)
# Query parameters that navigate rather than carry data.
_NAVIGATION_PARAMS = frozenset(
    {
        "page",
        "lang",
        "hl",
        "locale",
        "language",
        "sort",
        "order",
        "tab",
        "view",
        "ref",
        "source",
        "start",
        "limit",
        "offset",
        "per_page",
        "page_size",
        "format",
        "v",
        "t",
        "version",
        "theme",
        "mode",
    }
)

_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u200e\u200f\u2060\ufeff\u00ad"))


def normalise(text: str) -> str:
    """What the patterns read: compatibility forms folded (full-width letters, ligatures) and
    invisible characters dropped, so "i\u200bgnore" reads as "ignore"."""
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


def _url_carries_data(url: str) -> bool:
    try:
        parts = urlsplit(url if not url.startswith("//") else "https:" + url)
    except ValueError:
        return False
    if not parts.query:
        return False
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if not value:
            continue
        if name.lower() in _NAVIGATION_PARAMS or name.lower().startswith("utm_"):
            continue
        return True
    return False


def detect_risk(content: str) -> list[str]:
    """The flags (codes of RISK_FLAGS, in that order) the content raises; [] when none."""
    text = normalise(content or "")
    found = {
        "override": any(pattern.search(text) for pattern in _OVERRIDE),
        "directive": _gives_orders(text),
        "code": any(pattern.search(text) for pattern in _CODE),
        "secret": any(pattern.search(text) for pattern in _SECRET),
        "exfil": any(_url_carries_data(match.group(0).rstrip(".,;:!?")) for match in _URL.finditer(text)),
    }
    return [code for code in RISK_FLAGS if found[code]]


def risk_flags_value(content: str) -> str:
    """The stored form: codes separated by spaces."""
    return " ".join(detect_risk(content))
