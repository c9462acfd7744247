"""Multi-turn sessions turn by turn (sglbench.turns), from request rows as the load generator writes them."""

from __future__ import annotations

import math
from pathlib import Path

import recordfactory as rf

from sglbench import report, results, summarize, turns


def _turn(conc: int, session: int, turn: int, ttft_s: float, prompt: int, cached: int | None) -> dict:
    row = rf.request(conc, 0, session * 10 + turn, 8)
    first = row["sent_s"] + ttft_s
    row.update(
        session=f"mt-s{session}",
        turn=turn,
        prompt_tokens=prompt,
        cached_tokens=cached,
        chunk_t=[first, first + 0.1, first + 0.2],
        end_s=first + 0.2,
    )
    return row


def _campaign(root: Path) -> Path:
    # two sessions of three turns at c1: turn 0 cold (0.4 s, nothing cached), later turns from the cache
    rows = [
        _turn(1, s, t, 0.4 if t == 0 else 0.05 + 0.01 * s, 1000 + 100 * t, 0 if t == 0 else 990 + 100 * t)
        for s in (0, 1)
        for t in (0, 1, 2)
    ]
    rows.append({**_turn(1, 2, 0, 0.5, 1000, None), "error": "cut", "end_s": None})  # failed: not counted
    rows.append({**rf.request(1, 0, 99, 8)})  # a one-shot row of another source: no turn
    rec = rf.record(benchmark=rf.bench([rf.point(1, 0, 100.0)]))
    rf.write(root, rec, requests=rows)
    return root


def test_each_turn_index_gets_its_ttft_and_cached_share(tmp_path: Path) -> None:
    table = turns.turn_table(results.load(_campaign(tmp_path)))
    assert list(table["turn"]) == [0, 1, 2] and list(table["turns"]) == [2, 2, 2]
    first, second, third = table.to_dict("records")
    assert math.isclose(first["ttft_p50_ms"], 400.0) and first["cached_share"] == 0.0
    assert second["ttft_p50_ms"] < first["ttft_p50_ms"] / 4
    assert math.isclose(second["cached_share"], 2 * 1090 / (2 * 1100))
    assert math.isclose(third["prompt_tokens_mean"], 1200.0) and third["cached_tokens_mean"] == 1190.0
    shown = turns.display_rows(table)
    assert shown[0]["cached"] == "0.0%" and shown[1]["turn"] == "1" and shown[1]["TTFT p50 ms"] == "55.0"


def test_a_campaign_without_sessions_has_no_table(tmp_path: Path) -> None:
    rec = rf.record(benchmark=rf.bench([rf.point(1, 0, 100.0)]))
    rf.write(tmp_path, rec, requests=[rf.request(1, 0, i, 8) for i in range(3)])
    assert turns.turn_table(results.load(tmp_path)).empty


def test_no_cached_count_reads_as_unknown_not_zero(tmp_path: Path) -> None:
    rows = [_turn(1, 0, t, 0.1, 500, None) for t in (0, 1)]
    rf.write(tmp_path, rf.record(benchmark=rf.bench([rf.point(1, 0, 100.0)])), requests=rows)
    shown = turns.display_rows(turns.turn_table(results.load(tmp_path)))
    assert [r["cached"] for r in shown] == ["-", "-"] and [r["cached tokens"] for r in shown] == ["-", "-"]


def test_summary_and_report_show_the_turns(tmp_path: Path) -> None:
    res = results.load(_campaign(tmp_path / "a"))
    text = summarize.to_markdown(summarize.summary_table(res, n_boot=20), res)
    assert f"## {turns.HEADING}" in text and "| 99.1% |" in text  # turn 1: 1090 of 1100 prompt tokens
    html = "\n".join(report._turns(res))
    assert f"<h2>{turns.HEADING}</h2>" in html and ">99.1%</td>" in html
    rf.write(tmp_path / "b", rf.record(benchmark=rf.bench([rf.point(1, 0, 100.0)])), [rf.request(1, 0, 0, 8)])
    plain = results.load(tmp_path / "b")
    assert turns.HEADING not in summarize.to_markdown(summarize.summary_table(plain, n_boot=20), plain)
    assert report._turns(plain) == []
