"""How facts are worded, and how "remember …" / "forget …" requests are recognized. Pure.

Facts are sentences about "the user" in the third person: `third_person` rewrites the user's own
words (I'm/I am → the user is, I <verb> → the user <verb>s, my/mine → the user's, me/myself →
the user). `normalize` decides when two facts are the same, `subject` when one updates another
(see elara.memory.facts), `significant_words` what a "forget …" query must match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# -- text rules (pure) -------------------------------------------------------------------------

# Modal and past-tense words that follow "I" unchanged in the third person.
_UNCHANGED_AFTER_I = frozenset(
    ["can", "could", "will", "would", "should", "shall", "must", "might", "may", "was", "had", "did", "didn't", "can't", "cannot", "won't", "wouldn't", "couldn't", "shouldn't", "wasn't", "hadn't", "grew", "went", "got", "made", "said", "met", "ran", "began", "became", "came", "knew", "took", "left", "lost", "bought", "saw", "wrote", "thought", "felt", "found", "gave", "kept", "told", "used"])
_IRREGULAR_AFTER_I = {"have": "has", "do": "does", "go": "goes", "am": "is", "don't": "doesn't",
                      "haven't": "hasn't", "'m": "is", "are": "is", "aren't": "isn't"}
_ADVERBS = frozenset(["also", "really", "usually", "never", "always", "often", "just", "still", "actually", "only", "sometimes", "mostly", "generally", "rarely", "currently", "now"])
_I_CONTRACTIONS = {"i'm": "the user is", "i've": "the user has", "i'll": "the user will",
                   "i'd": "the user would"}
_OBJECT_PRONOUNS = {"my": "the user's", "mine": "the user's", "me": "the user",
                    "myself": "the user"}


def third_person(text: str) -> str:
    """The user's first-person words as a sentence about the user: "I'm vegetarian" →
    "The user is vegetarian."; capitalised, ending with a full stop."""
    text = " ".join(text.replace("\u2019", "'").split())
    if not text:
        return ""
    text = re.sub(r"(?<![\w'])[Ii] am(?![\w'])", "the user is", text)
    text = re.sub(r"(?<![\w'])[Ii] do not(?![\w'])", "the user does not", text)
    text = re.sub(r"(?<![\w'])[Ii]('m|'ve|'ll|'d)(?![\w'])",
                  lambda m: _I_CONTRACTIONS["i" + m[1].lower()], text)
    text = re.sub(r"(?<![\w'])[Ii] (?:(\w+) )?([\w']+)", _conjugate_after_i, text)
    text = re.sub(r"(?<![\w'])[Ii](?![\w'])", "the user", text)  # a lone "I" left over
    text = re.sub(r"(?<![\w'])(my|mine|me|myself)(?![\w'])",
                  lambda m: _OBJECT_PRONOUNS[m[1].lower()], text, flags=re.IGNORECASE)
    text = text[0].upper() + text[1:]
    if text[-1] not in ".!?":
        text += "."
    return text


def _conjugate_after_i(match: re.Match[str]) -> str:
    adverb, verb = match[1], match[2]
    if adverb is not None and adverb.lower() not in _ADVERBS:
        # "I <word> <word>": the first word is the verb; conjugate it, keep the second.
        return f"the user {_third_person_verb(adverb)} {verb}"
    prefix = f"the user {adverb} " if adverb else "the user "
    return prefix + _third_person_verb(verb)


def _third_person_verb(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR_AFTER_I:
        return _IRREGULAR_AFTER_I[lower]
    if lower in _UNCHANGED_AFTER_I or lower.endswith("ed") or not lower.isalpha():
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


_CONTRACTIONS = ((r"n't\b", " not"), (r"'re\b", " are"), (r"'ve\b", " have"), (r"'ll\b", " will"),
                 (r"'m\b", " am"), (r"'d\b", " would"))


def normalize(text: str) -> str:
    """The comparable form of a fact: third person, lower case, contractions expanded, no
    punctuation or articles, single spaces ("I'm vegetarian!" → "user is vegetarian")."""
    text = third_person(text).lower() if text.strip() else ""
    text = text.replace("can't", "can not").replace("won't", "will not")
    for pattern, replacement in _CONTRACTIONS:
        text = re.sub(pattern, replacement, text)
    text = re.sub(r"[^\w\s']", " ", text)
    text = re.sub(r"(?<!\w)'|'(?!\w)", " ", text)  # quotes, not apostrophes inside words
    return " ".join(word for word in text.split() if word not in ("a", "an", "the"))


_LINK_VERBS = r"is called|is named|are called|are named|is|are|was|were"
_OWN_VERBS = (r"is called|is named|goes by|is from|comes from|lives in|lives at|lives near|"
              r"works at|works as|works for|works in|was born in|was born on")
_POSSESSIVE_SUBJECT = re.compile(rf"^(user's(?: \S+){{0,5}}?) ({_LINK_VERBS})(?: |$)")
_USER_SUBJECT = re.compile(rf"^user ({_OWN_VERBS})(?: |$)")


def subject(text: str) -> str | None:
    """What a fact is about, when it can hold only one value ("user's name is", "user lives in"),
    or None; two facts with the same subject are versions of one fact."""
    normalized = normalize(text)
    match = _POSSESSIVE_SUBJECT.match(normalized)
    if match:
        return f"{match[1]} {match[2]}"
    match = _USER_SUBJECT.match(normalized)
    if match:
        return f"user {match[1]}"
    return None


_STOP_WORDS = frozenset(
    ["a", "an", "the", "that", "this", "these", "those", "user", "i", "me", "my", "mine", "myself", "you", "your", "is", "am", "are", "was", "were", "be", "been", "being", "do", "does", "did", "has", "have", "had", "about", "of", "to", "in", "on", "at", "for", "and", "or", "what", "where", "when", "who", "whom", "how", "which", "whether", "it", "its", "fact", "facts", "thing", "things", "know", "remember", "forget", "please", "all", "everything", "anything", "something"])


def significant_words(text: str) -> set[str]:
    """The words of text that identify a fact: normalized, stemmed crudely ("sister's" →
    "sister", "lives" → "live"), without stop words."""
    words = set()
    for word in normalize(text).split():
        if word.endswith("'s"):
            word = word[:-2]
        if word in _STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    return words


# -- explicit requests (pure) ------------------------------------------------------------------


@dataclass(frozen=True)
class Remember:
    """The user asked Elara to remember this fact (already in the third person)."""

    text: str


@dataclass(frozen=True)
class Forget:
    """The user asked Elara to forget the facts matching this query (in the third person)."""

    query: str


@dataclass(frozen=True)
class ForgetAll:
    """The user asked Elara to forget every fact about them."""


#: What `parse_memory_request` finds in an explicit request.
MemoryRequest = Remember | Forget | ForgetAll

_ADDRESS = re.compile(r"^(?:(?:hey|hi|ok|okay|oh)\s+)?elara\b[\s,:;.!-]*", re.IGNORECASE)
_POLITE = re.compile(
    r"^(?:(?:please|kindly|can you|could you|would you|will you|i want you to|"
    r"i'd like you to|i would like you to)\s+)+", re.IGNORECASE)
_TRAILING = re.compile(r"(?:[\s,]+please)?[\s.!]*$", re.IGNORECASE)
_FORGET_ALL = re.compile(
    r"^(?:forget\s+(?:everything|all)(?:\s+(?:that\s+)?you(?:'ve|\s+have)?\s+"
    r"(?:know|remember|learned|learnt)(?:\s+about\s+me)?|\s+about\s+me|"
    r"\s+(?:of\s+)?(?:the\s+|my\s+|your\s+)?(?:facts|memories)(?:\s+about\s+me)?)?"
    r"|(?:erase|delete|clear|wipe|remove)\s+(?:all\s+(?:of\s+)?)?(?:the\s+|my\s+|your\s+)?"
    r"(?:facts|memories|memory)(?:\s+(?:about|of)\s+me)?)$", re.IGNORECASE)
# "that", ":" or "," make the rest a statement; without them only "remember" introduces a fact.
_SEPARATOR = r"(?:\s+that\b|\s+this\s*:|\s*[:,])"
_REMEMBER = re.compile(rf"^(?:remember|memori[sz]e)(?P<sep>{_SEPARATOR})?\s*(?P<rest>.+)$",
                       re.IGNORECASE | re.DOTALL)
_REMEMBER_WITH_THAT = re.compile(
    rf"^(?:note|keep\s+in\s+mind|make\s+a\s+note|don't\s+forget|do\s+not\s+forget)"
    rf"(?P<sep>{_SEPARATOR})\s*(?P<rest>.+)$", re.IGNORECASE | re.DOTALL)
_FORGET = re.compile(rf"^forget(?:\s+all\b)?(?:\s+about\b)?(?P<sep>{_SEPARATOR})?\s*(?P<rest>.+)$",
                     re.IGNORECASE | re.DOTALL)
# "remember when we…", "remember to buy milk", "forget it": recollection, reminders, "never mind".
_NOT_A_FACT = re.compile(
    r"^(?:when|the\s+time|how|what|who|where|why|if|whether|to|me|us|it|this|that)\b",
    re.IGNORECASE)
_DISMISSAL = re.compile(
    r"^(?:it|that|this|about\s+(?:it|that)|(?:what\s+)?i\s+(?:just\s+)?(?:said|asked)\b.*)$",
    re.IGNORECASE)


def parse_memory_request(text: str) -> MemoryRequest | None:
    """The explicit memory request in what the user said, or None for anything else.

    Recognised: "[Elara,] [please] remember [that|:] <fact>", "note/keep in mind/don't forget
    that <fact>", "forget [about] [that] <fact or words>", "forget everything [you know about
    me]", "forget all facts", "clear your memory". Not requests: "I remember when…", "remember
    when/to…", "don't forget the milk" (a reminder, not a fact), "forget it". A question
    ("can you remember my name?") counts only with "that" or ":" before the fact."""
    text = " ".join(text.replace("\u2019", "'").split())
    text = _ADDRESS.sub("", text)
    text = _POLITE.sub("", text)
    question = text.endswith("?")
    text = _TRAILING.sub("", text.rstrip("?"))
    if not text:
        return None
    if _FORGET_ALL.match(text):
        return ForgetAll()
    patterns = ((_REMEMBER, Remember), (_REMEMBER_WITH_THAT, Remember), (_FORGET, Forget))
    for pattern, kind in patterns:
        match = pattern.match(text)
        if match is None:
            continue
        separated = match["sep"] is not None and match["sep"].strip() in ("that", ":")
        if question and not separated:
            return None
        rest = match["rest"].strip(" ,:;.")
        if not rest:
            return None
        if kind is Forget:
            # "forget where I live" is a request; "forget it" is "never mind".
            return None if _DISMISSAL.match(rest) else Forget(third_person(rest).rstrip(".!?"))
        if match["sep"] is None and _NOT_A_FACT.match(rest):
            return None
        return Remember(third_person(rest))
    return None


