"""Prompts as token ids built from named blocks: shared prefixes of a trace, long synthetic contexts.

Stdlib only; ships as ``ansible.module_utils.sglbench_hostlib.token_blocks``. A prompt record may carry
``"token_blocks": {"blocks": [46, 47], "length": 1000, "salt": "trace:3"}`` instead of its token ids: the
ids are ``block(46) + block(47) + filler(salt)``, cut to ``length``. The same block id gives the same
:data:`BLOCK_TOKENS` token ids in every prompt (the server's prefix cache sees the sharing a Mooncake
trace's ``hash_ids`` describe); the filler after the blocks is the prompt's own (its ``salt``). The record
stays a few numbers on its way from the controller to the host; the ids are built on the host as each
request's body is built (a few microseconds per block: a slice of one seeded pool and two header ids).

A block's two header ids and its offset into the pool come from a 64-bit hash of its key, so two
different blocks share a header and an offset with a probability of about 2**-60.
"""

from __future__ import annotations

import functools
import hashlib
import random
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Token ids drawn for generated prompts: well inside any modern vocabulary and above the usual
# special-token range, so a generated prompt never contains BOS/EOS/pad ids.
TOKEN_ID_RANGE = (1000, 30000)
# Longest generated prompt: above any context SGLang serves (prompts.MAX_SYNTHETIC_INPUT_LEN is this).
MAX_TOKENS = 1 << 20
# Tokens per block: the Mooncake trace's block size (its hash_ids name blocks of 512 tokens).
BLOCK_TOKENS = 512
_HEADER = 2  # ids at the head of every block, from the block's key
_POOL_LEN = 1 << 16  # block bodies are slices of one pool of this many ids (plus one block)


@functools.cache
def _pool() -> tuple[int, ...]:
    """The seeded pool every block body is a slice of (built once per process, about 5 ms)."""
    lo, hi = TOKEN_ID_RANGE
    raw = array("H")
    raw.frombytes(random.Random("sglbench-token-blocks").randbytes(2 * (_POOL_LEN + BLOCK_TOKENS)))
    return tuple(lo + v % (hi - lo) for v in raw)


def _block(key: str) -> tuple[int, ...]:
    """The BLOCK_TOKENS ids of the block named ``key``."""
    h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    lo, hi = TOKEN_ID_RANGE
    span = hi - lo
    head = (lo + h % span, lo + (h // span) % span)
    off = (h >> 40) % _POOL_LEN
    return head + _pool()[off : off + BLOCK_TOKENS - _HEADER]


def _check_int(value: Any, what: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ValueError(f"{what} must be an integer from {minimum} to {maximum}, got {value!r}")
    return value


@dataclass(frozen=True)
class TokenBlocks:
    """The token ids of one prompt, by name: shared blocks, then the prompt's own filler."""

    blocks: tuple[int, ...]  # block ids (a trace's hash_ids): the same id, the same ids everywhere
    length: int  # token ids in all
    salt: str  # names the filler after the blocks; a different salt, different filler

    def __post_init__(self) -> None:
        _pool()  # built now, with the prompts, not while the first request is due

    def token_ids(self) -> tuple[int, ...]:
        out: list[int] = []
        for b in self.blocks:
            if len(out) >= self.length:
                break
            out.extend(_block(f"b{b}"))
        j = 0
        while len(out) < self.length:
            out.extend(_block(f"s{self.salt}:{j}"))
            j += 1
        return tuple(out[: self.length])

    def to_param(self) -> dict[str, Any]:
        return {"blocks": list(self.blocks), "length": self.length, "salt": self.salt}

    @classmethod
    def from_param(cls, obj: Any) -> TokenBlocks:
        """The blocks of a record's ``token_blocks``; ValueError naming the field when it is not one."""
        if not isinstance(obj, Mapping):
            raise ValueError("'token_blocks' must be an object {'blocks': [...], 'length': N, 'salt': '...'}")
        length = _check_int(obj.get("length"), "'token_blocks.length'", 1, MAX_TOKENS)
        blocks = obj.get("blocks", [])
        if not isinstance(blocks, list):
            raise ValueError("'token_blocks.blocks' must be a list of block ids (integers >= 0)")
        ids = tuple(_check_int(b, "'token_blocks.blocks' entries", 0, 2**63 - 1) for b in blocks)
        salt = obj.get("salt", "")
        if not isinstance(salt, str):
            raise ValueError("'token_blocks.salt' must be a string")
        return cls(ids, length, salt)
