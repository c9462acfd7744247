"""Request rows as written and as packed for the trip from the host."""

from __future__ import annotations

import base64
import gzip
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sglbench.hostlib import request_rows

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**62), max_value=2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
_rows = st.lists(
    st.dictionaries(st.text(min_size=1, max_size=12), st.one_of(_scalars, st.lists(st.integers(0, 10**6)))),
    max_size=20,
)


@given(_rows)
def test_packed_rows_unpack_to_the_same_rows_and_text(rows):
    text, back = request_rows.unpack(request_rows.pack(rows))
    assert back == rows and text == request_rows.jsonl(rows)
    assert text.count("\n") == len(rows)


def test_rows_of_token_ids_pack_far_smaller_than_their_json():
    rows = [
        {"idx": i, "output_ids": list(range(1000 + i, 1256 + i)), "chunk_t": [0.001 * k for k in range(64)]}
        for i in range(200)
    ]
    packed = request_rows.pack(rows)
    assert len(packed) < len(json.dumps(rows)) / 2


def test_a_nan_is_refused_where_it_is_written():
    with pytest.raises(ValueError):
        request_rows.jsonl([{"ttft_s": math.nan}])


@pytest.mark.parametrize(
    ("packed", "needle"),
    [
        (None, "must be a base64 string"),
        ("not base64!", "not gzip-compressed base64"),
        (base64.b64encode(b"plain text").decode(), "not gzip-compressed base64"),
        (base64.b64encode(gzip.compress(b'{"a": 1}\n[1]\n')).decode(), "line 2: a JSON object per line"),
        (base64.b64encode(gzip.compress(b'{"a": 1\n')).decode(), "line 1"),
    ],
)
def test_unreadable_packed_rows_say_what_is_wrong(packed, needle):
    with pytest.raises(request_rows.RowsError, match=needle):
        request_rows.unpack(packed)
