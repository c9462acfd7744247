"""Deterministic tokenizer and text generator of the stand-in.

Tokenizer: text is split into words and single punctuation marks (regex ``\\w+|[^\\w\\s]``); words
longer than 6 characters are cut into 6-character pieces. Each piece is one token whose id is a
CRC32 of the piece folded into the model's vocabulary (ids below 1000 are left for specials).
That gives roughly 1.2-1.4 tokens per English word, close enough to a BPE tokenizer for load
shapes. ``input_ids`` are taken as given.

Generator: output tokens come from a fixed 256-word list, drawn by a PRNG seeded with
``SGLBENCH_SIM_SEED`` and the request content (prompt ids + sampling seed), so the same request
always produces the same text, independent of batching, timing and time scale. The natural
output length (before EOS, when ``ignore_eos`` is false) is drawn the same way.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
import zlib
from collections.abc import Sequence

_PIECE = re.compile(r"\w+|[^\w\s]")
WORD_BASE = 1000

WORDS: tuple[str, ...] = tuple(
    [
        "the",
        "of",
        "and",
        "to",
        "in",
        "a",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "he",
        "this",
        "are",
        "or",
        "his",
        "from",
        "at",
        "which",
        "but",
        "have",
        "an",
        "they",
        "you",
        "were",
        "her",
        "she",
        "there",
        "been",
        "one",
        "all",
        "we",
        "their",
        "has",
        "would",
        "when",
        "if",
        "so",
        "no",
        "will",
        "what",
        "more",
        "about",
        "up",
        "out",
        "them",
        "some",
        "could",
        "into",
        "than",
        "other",
        "time",
        "only",
        "new",
        "these",
        "two",
        "may",
        "first",
        "then",
        "do",
        "any",
        "like",
        "my",
        "now",
        "over",
        "such",
        "our",
        "man",
        "me",
        "even",
        "most",
        "made",
        "after",
        "also",
        "did",
        "many",
        "before",
        "must",
        "through",
        "back",
        "years",
        "where",
        "much",
        "your",
        "way",
        "well",
        "down",
        "should",
        "because",
        "each",
        "just",
        "those",
        "people",
        "how",
        "too",
        "little",
        "state",
        "good",
        "very",
        "make",
        "world",
        "still",
        "own",
        "see",
        "men",
        "work",
        "long",
        "get",
        "here",
        "between",
        "both",
        "life",
        "being",
        "under",
        "never",
        "day",
        "same",
        "another",
        "know",
        "while",
        "last",
        "might",
        "us",
        "great",
        "old",
        "year",
        "off",
        "come",
        "since",
        "against",
        "go",
        "came",
        "right",
        "used",
        "take",
        "three",
        "system",
        "model",
        "token",
        "memory",
        "cache",
        "server",
        "request",
        "batch",
        "decode",
        "prefill",
        "tensor",
        "graph",
        "kernel",
        "stream",
        "latency",
        "throughput",
        "queue",
        "worker",
        "parallel",
        "context",
        "window",
        "draft",
        "verify",
        "accept",
        "length",
        "sample",
        "result",
        "value",
        "number",
        "point",
        "data",
        "level",
        "order",
        "group",
        "case",
        "part",
        "place",
        "problem",
        "fact",
        "hand",
        "week",
        "company",
        "week",
        "water",
        "room",
        "mother",
        "area",
        "money",
        "story",
        "month",
        "lot",
        "study",
        "book",
        "eye",
        "job",
        "word",
        "business",
        "issue",
        "side",
        "kind",
        "head",
        "house",
        "service",
        "friend",
        "father",
        "power",
        "hour",
        "game",
        "line",
        "end",
        "member",
        "law",
        "car",
        "city",
        "community",
        "name",
        "president",
        "team",
        "minute",
        "idea",
        "kid",
        "body",
        "information",
        "nothing",
        "ago",
        "lead",
        "social",
        "understand",
        "whether",
        "watch",
        "together",
        "follow",
        "around",
        "parent",
        "stop",
        "face",
        "anything",
        "create",
        "public",
        "already",
        "speak",
        "others",
        "read",
    ]
)[:256]


def _fold(piece: str, vocab_size: int) -> int:
    span = max(1, vocab_size - WORD_BASE - len(WORDS) - 1)
    return WORD_BASE + len(WORDS) + zlib.crc32(piece.encode("utf-8")) % span


def encode(text: str, vocab_size: int) -> list[int]:
    ids: list[int] = []
    for match in _PIECE.finditer(text):
        piece = match.group(0)
        for start in range(0, len(piece), 6):
            ids.append(_fold(piece[start : start + 6], vocab_size))
    return ids


def decode_token(token_id: int) -> str:
    """Text of one generated token (generated ids map to the word list)."""
    index = token_id - WORD_BASE
    if 0 <= index < len(WORDS):
        return " " + WORDS[index]
    return ""


def decode(ids: Sequence[int]) -> str:
    return "".join(decode_token(i) for i in ids)


class DecodedText:
    """The text of one request's growing output, each id decoded once: ``of(ids)`` equals
    ``decode(ids)`` for a list that only ever grows at its end (a request's ``output_ids``), since the
    text is the concatenation of the tokens' texts."""

    __slots__ = ("_n", "_text")

    def __init__(self) -> None:
        self._n = 0
        self._text = ""

    def of(self, ids: Sequence[int]) -> str:
        if len(ids) < self._n:  # not the list this memo followed: start over
            self._n, self._text = 0, ""
        if len(ids) > self._n:
            self._text += decode(ids[self._n :])
            self._n = len(ids)
        return self._text


def request_key(prompt_ids: Sequence[int], sampling_seed: object = None) -> str:
    h = hashlib.sha256()
    h.update(repr(sampling_seed).encode())
    h.update(b"|")
    h.update(",".join(str(i) for i in prompt_ids).encode())
    return h.hexdigest()[:32]


class Generator:
    """Deterministic stream of output token ids for one request."""

    def __init__(self, seed: int, key: str, mean_output_len: int, diverge_at: int | None = None) -> None:
        self._rng = random.Random(f"{seed}:{key}:text")
        length_rng = random.Random(f"{seed}:{key}:len")
        # Natural length: geometric-like with the configured mean, at least 1.
        self.natural_len = max(1, int(length_rng.expovariate(1.0 / max(1, mean_output_len))) + 1)
        # Output position whose token differs from the undisturbed stream (an injected lossy output).
        self.diverge_at = diverge_at
        self._pos = 0

    def next_ids(self, count: int) -> list[int]:
        ids = [WORD_BASE + self._rng.randrange(len(WORDS)) for _ in range(count)]
        at = self.diverge_at
        if at is not None and self._pos <= at < self._pos + count:
            i = at - self._pos
            ids[i] = WORD_BASE + (ids[i] - WORD_BASE + 1) % len(WORDS)
        self._pos += count
        return ids


def diverges(seed: int, key: str, share: float) -> bool:
    """Whether the request ``key`` is one of the ``share`` whose speculative output is made to diverge
    (deterministic per request, independent of the text and acceptance streams)."""
    return share > 0 and random.Random(f"{seed}:{key}:diverge").random() < share


@functools.lru_cache(maxsize=64)
def geometric_accept_probability(mean: float, max_len: int) -> float:
    """Per-draft-token acceptance ``a`` so that E[min(1 + Geom(a), max_len)] = mean (bisection; a server
    asks with the same two numbers for every request, so the answer is kept)."""
    mean = min(max(1.0, mean), float(max_len))
    if max_len <= 1 or mean <= 1.0:
        return 0.0
    if mean >= max_len:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        expected = sum(mid**k for k in range(max_len))
        if expected < mean:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


class AcceptSampler:
    """Accept length per verify step (tokens emitted incl. the bonus token), deterministic per request."""

    def __init__(
        self, seed: int, key: str, max_len: int, mean: float, weights: Sequence[float] | None = None
    ) -> None:
        self._rng = random.Random(f"{seed}:{key}:accept")
        self.max_len = max(1, max_len)
        self._weights = None
        if weights:
            trimmed = list(weights[: self.max_len])
            if sum(trimmed) > 0:
                self._weights = trimmed
        self._a = geometric_accept_probability(mean, self.max_len)

    def draw(self) -> int:
        if self._weights is not None:
            return self._rng.choices(range(1, len(self._weights) + 1), weights=self._weights)[0]
        length = 1
        while length < self.max_len and self._rng.random() < self._a:
            length += 1
        return length


SIMULATED_ACC_METHODS = ("match-expected", "multinomial")
SIMULATED_ACC_TOKEN_MODES = ("fixed", "real-draft-token")
SIMULATED_FIXED_TOKEN = (
    100  # token mode `fixed`: every verified token becomes this id (SGLang: "some legit id")
)


class SimulatedAcceptSampler(AcceptSampler):
    """SGLang's own ``SGLANG_SIMULATE_ACC_LEN`` (srt/speculative/spec_utils.py, sample_simulated_acc_len):
    tokens per verify step incl. the bonus token, clamped to [1, max_len] (max_len: the verify tree's depth,
    the draft token count for NGRAM, num_steps + 1 for the EAGLE family). ``match-expected`` draws the floor
    or the ceiling with the fractional part as the ceiling's weight (the mean is met), ``multinomial`` a
    normal of sd 1 around the value, clamped, then rounded. SGLang draws once per batch step with torch's
    generator; the stand-in once per request step from the request's own stream (same distribution)."""

    def __init__(self, seed: int, key: str, max_len: int, value: float, method: str) -> None:
        super().__init__(seed, key, max_len, max(1.0, min(value, float(max(1, max_len)))))
        if method not in SIMULATED_ACC_METHODS:
            raise ValueError(f"Invalid simulate_acc_method: {method}")
        self.value = value
        self.method = method

    def draw(self) -> int:
        if self.method == "multinomial":
            sampled = min(max(self._rng.gauss(self.value, 1.0), 1.0), float(self.max_len))
            return round(sampled)
        value = max(1.0, min(float(self.max_len), self.value))
        lower = int(value // 1)
        upper = lower + 1 if lower < self.max_len else lower
        if lower == upper:
            return lower
        return upper if self._rng.random() < value - lower else lower
