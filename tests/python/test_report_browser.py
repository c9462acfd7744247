"""sglbench report in a real browser: headless Chromium (tests/python/headless.py) opens the page.

Every image loads and is shown inside the page, nothing logs an error or fetches anything but the file
itself, the page does not scroll sideways, the banners the data calls for head it (and none when the data
is real GPU figures). The full-page screenshot is kept in build/test-artifacts/report.png, written before
the checks so that a failing run leaves it too (report-acceptance.png for the speculative run whose
acceptance-by-position tables and losslessness verdicts are checked as shown). Skipped when Chromium is
not installed.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import recordfactory as rf
from headless import Chromium, Page, find_chromium
from matplotlib import image

from sglbench import acceptance, lossless, report, results

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "build" / "test-artifacts"
NO_BROWSER = "Chromium is not installed (Debian package chromium; `make test` installs it when run as root)"
WIDTH = 1280
BANNER_RGB = (0xB3, 0x26, 0x1E)  # .banner background in report.CSS
CPU_ARGV = ["/opt/sglang-0.5.23-cpu/bin/python", "-m", "sglang.launch_server", "--device", "cpu"]
# What the page looks like once every image has decoded; boxes are in page coordinates (CSS px).
FACTS = """(async () => {
  await Promise.all([...document.images].map((i) => i.decode().catch(() => null)));
  const box = (e) => {
    const r = e.getBoundingClientRect();
    return {x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height};
  };
  return {
    readyState: document.readyState,
    images: [...document.images].map((i) => ({
      alt: i.alt, complete: i.complete, naturalWidth: i.naturalWidth, ...box(i)})),
    banners: [...document.querySelectorAll(".banner")].map((b) => ({text: b.innerText, ...box(b)})),
    title: box(document.querySelector("h1")),
    sections: [...document.querySelectorAll("h2")].map((h) => h.textContent),
    // Every table under the h2 and h3 it follows: header, rows (class and cells) and its box on the page.
    tables: (() => {
      const out = [];
      let h2 = null, h3 = null;
      for (const el of document.querySelectorAll("h2, h3, table")) {
        if (el.tagName === "H2") { h2 = el.textContent; h3 = null; continue; }
        if (el.tagName === "H3") { h3 = el.textContent; continue; }
        out.push({
          h2, h3,
          head: [...el.querySelectorAll("thead th")].map((th) => th.textContent),
          rows: [...el.querySelectorAll("tbody tr")].map((tr) => ({
            cls: tr.className, cells: [...tr.cells].map((td) => td.textContent)})),
          ...box(el.closest(".wide") || el),
        });
      }
      return out;
    })(),
    clientWidth: document.documentElement.clientWidth,
    scrollWidth: document.documentElement.scrollWidth,
    scrollHeight: document.documentElement.scrollHeight,
  };
})()"""


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    executable = find_chromium()
    if executable is None:
        pytest.skip(NO_BROWSER)
    with Chromium(executable, tmp_path_factory.mktemp("chromium")) as browser:
        yield browser


def _open(browser: Chromium, html: Path, screenshot: str) -> Page:
    page = browser.open(html.as_uri(), FACTS, width=WIDTH)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    part = ARTIFACTS / f".{screenshot}.part"
    part.write_bytes(page.screenshot)
    part.replace(ARTIFACTS / screenshot)
    return page


def _assert_renders(page: Page, html: Path) -> dict[str, Any]:
    """The checks every report must pass; returns the page's facts for the caller's own."""
    facts = page.facts
    assert facts["readyState"] == "complete"
    assert page.console_errors == []
    assert {url.split(":", 1)[0] for url in page.request_urls} <= {"file", "data"}
    assert html.as_uri() in page.request_urls
    for img in facts["images"]:
        assert img["complete"] and img["naturalWidth"] > 0, f"image not loaded: {img['alt']}"
        assert img["w"] > 0 and img["h"] > 0, f"image not shown: {img['alt']}"
        assert img["x"] >= 0 and img["x"] + img["w"] <= WIDTH, f"image outside the page: {img['alt']}"
    assert facts["scrollWidth"] <= facts["clientWidth"] == WIDTH  # nothing makes the page scroll sideways
    assert facts["sections"] == list(report.SECTIONS)
    width, height = struct.unpack(">II", page.screenshot[16:24])  # the PNG's IHDR
    assert page.screenshot[:8] == b"\x89PNG\r\n\x1a\n"
    assert width == WIDTH and abs(height - facts["scrollHeight"]) <= 1  # the whole page, not one screen
    return facts


def _pixel(png: bytes, x: float, y: float) -> tuple[int, ...]:
    pixels = image.imread(io.BytesIO(png), format="png")
    return tuple(round(float(v) * 255) for v in pixels[int(y), int(x)][:3])


@pytest.fixture(scope="module")
def mixed_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The demo campaign (simulated) plus one attempt on the real SGLang's CPU engine: both banners."""
    root = tmp_path_factory.mktemp("campaign")
    run = rf.demo_campaign(root, tps=(1, 8), concurrencies=(1, 4))
    pts = [rf.point(1, r, tok_s) for r, tok_s in enumerate([100.0, 110.0])]
    cpu = rf.record(run_id=run.name, config="qwen3-tiny-cpu", benchmark=rf.bench(pts, simulated=False))
    cpu["simulated"], cpu["argv"] = False, CPU_ARGV
    rf.write(root, cpu)
    res = results.load(run)
    out = root / "out" / "report.html"
    report.render(res, out)
    return out, len(res.attempts)


def test_report_renders_in_chromium(chromium: Chromium, mixed_report: tuple[Path, int]) -> None:
    html, n_attempts = mixed_report
    page = _open(chromium, html, "report.png")
    facts = _assert_renders(page, html)
    alts = [img["alt"] for img in facts["images"]]
    assert len(alts) == 8 and len(set(alts)) == 8  # every plot of the campaign, each once
    assert [b["text"].split(" — ")[0] for b in facts["banners"]] == ["SIMULATED DATA", "CPU ENGINE"]
    sim, cpu = (b["text"] for b in facts["banners"])
    assert f"{n_attempts - 1} of {n_attempts} attempts (marked SIM)" in sim
    assert f"1 of {n_attempts} attempts (marked CPU)" in cpu
    for banner in facts["banners"]:
        assert banner["y"] + banner["h"] <= facts["title"]["y"]  # above the title, on the first screen
        # What was drawn is the page laid out: the banner's padding is its red in the screenshot.
        assert _pixel(page.screenshot, banner["x"] + 10, banner["y"] + 6) == BANNER_RGB


def test_real_gpu_report_has_no_banner(chromium: Chromium, tmp_path: Path) -> None:
    pts = [rf.point(c, r, 40.0 * c + r) for c in (1, 4) for r in range(2)]
    rf.write(tmp_path, rf.record(config="ar", simulated=False, benchmark=rf.bench(pts, simulated=False)))
    out = tmp_path / "report.html"
    report.render(results.load(tmp_path / "run1"), out)
    page = _open(chromium, out, "report-gpu.png")
    facts = _assert_renders(page, out)
    assert facts["banners"] == []
    assert len(facts["images"]) >= 1


def test_telemetry_report_renders_in_chromium(chromium: Chromium, tmp_path: Path) -> None:
    """Energy bars and each attempt's series load and show; the simulated banner still heads the page."""
    out = tmp_path / "report.html"
    report.render(results.load(rf.telemetry_campaign(tmp_path)), out)
    page = _open(chromium, out, "report-telemetry.png")
    facts = _assert_renders(page, out)
    alts = [img["alt"] for img in facts["images"]]
    assert "Energy per output token" in alts
    assert "Telemetry of ar-tp1" in alts and "Telemetry of dflash-tp1" in alts
    assert [b["text"].split(" — ")[0] for b in facts["banners"]] == ["SIMULATED DATA"]


def _tables(facts: dict[str, Any], h2: str, h3: str | None = None) -> list[dict[str, Any]]:
    return [t for t in facts["tables"] if t["h2"] == h2 and (h3 is None or t["h3"] == h3)]


def test_acceptance_and_losslessness_render_in_chromium(chromium: Chromium, tmp_path: Path) -> None:
    """Speculative configs with per-request acceptance histograms and output token ids: the acceptance
    plot, the per-position table (per point and per category) and the losslessness verdicts are on the
    page as a reader sees it, the diverging config's row marked."""
    out = tmp_path / "report.html"
    res = results.load(rf.speculative_campaign(tmp_path))
    report.render(res, out)
    page = _open(chromium, out, "report-acceptance.png")
    facts = _assert_renders(page, out)
    assert "Acceptance length by prompt category" in [img["alt"] for img in facts["images"]]
    for t in facts["tables"]:
        assert t["w"] > 0 and t["h"] > 0 and t["x"] >= 0 and t["x"] + t["w"] <= WIDTH, (t["h2"], t["h3"])

    (positions,) = _tables(facts, report.ACCEPTANCE, acceptance.HEADING)
    head = positions["head"]
    assert head[:3] == ["config", "point", "category"] and {"p1", "p2", "accepted drafts / step"} <= set(head)
    rows = [dict(zip(head, r["cells"], strict=True)) for r in positions["rows"]]
    expected = acceptance.display_rows(acceptance.position_table(acceptance.histograms(res)))
    assert sorted(tuple(r.items()) for r in rows) == sorted(tuple(r.items()) for r in expected)  # as computed
    cats = {r["category"] for r in rows if r["point"] == acceptance.ALL}
    assert cats == {"math", "code", "chat"} and {r["point"] for r in rows} == {"c1", "c4", acceptance.ALL}
    assert all(0 <= float(r["p1"]) <= 1 for r in rows)

    (verdicts,) = _tables(facts, report.LOSSLESS)
    head = verdicts["head"]
    shown = {r["cells"][head.index("config")]: r for r in verdicts["rows"]}
    assert set(shown) == {"dflash", "ddtree-b16"}
    gate = lossless.gate(res).set_index("config")
    assert gate.loc["ddtree-b16", lossless.COLUMN] == lossless.FAIL
    assert gate.loc["dflash", lossless.COLUMN] == lossless.PASS
    ok, bad = shown["dflash"], shown["ddtree-b16"]
    assert ok["cells"][head.index(lossless.HEADER)] == "yes" and ok["cls"] == ""
    assert bad["cells"][head.index(lossless.HEADER)] == "NO" and bad["cls"] == "failed"
    n = int(gate.loc["ddtree-b16", "n_compared"])
    assert bad["cells"][head.index("exact")] == f"{n - 1}/{n}"
