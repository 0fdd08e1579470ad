"""A phone (390 × 844, a phone's User-Agent) on a long text, in Chromium: the attention page's heatmaps are laid out
for the phone's narrow column (figure_rules.PHONE_PX, kit/screen.py), so every chart passes the legibility walk's
measurement (tests/legibility.js: plot sides, labels apart and inside the chart and clear of Plotly's toolbar, which a touch
screen shows all the time, colour bar no taller than its plot, every key of a heatmap with at most 24 named),
and the heatmap shows a narrower window of the text. The same page at the same size without a phone's User-Agent
(a narrow desktop window) keeps the desktop's layout. On the classic sentence, the cross-attention heatmap names every
key under its column and writes each weight in its cell (a phone has no hover). Screenshots under
test-artifacts/phone/ (look at them)."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest

from benchmarks import legibility
from browser_util import ARTIFACTS, CHROMIUM, settle, still
from viz_transformer.plots import figure_rules

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
PHONE_UA = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            "Version/17.5 Mobile/15E148 Safari/604.1")
TEXT = "我是一名工程师。今天天气很好，我们去公园散步吧。" * 5         # about 120 pieces: the page shows a window
SHOTS = ARTIFACTS / "phone"
SHOTS.mkdir(parents=True, exist_ok=True)


def _open(browser, url: str, lang: str, agent: str | None):
    touch = dict(is_mobile=True, has_touch=True) if agent else {}     # no hover: Plotly's toolbar is drawn all the time
    context = browser.new_context(viewport={"width": 390, "height": 844}, user_agent=agent, **touch)
    pg = context.new_page()
    pg.set_default_timeout(120_000)
    pg.goto(f"{url}/attention?checkpoint=zh-en&text={quote(TEXT)}" + ("&lang=zh" if lang == "zh" else ""))
    settle(pg)
    pg.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stPlotlyChart\"]')]"
                         ".every(c => c.querySelector('.main-svg'))")
    still(pg)
    return pg


def _heatmap_columns(pg) -> int:
    """How many key columns the page's first heatmap shows."""
    return pg.evaluate("() => { const p = document.querySelector('.js-plotly-plot'); return p.data[0].x.length; }")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_phone_gets_figures_laid_out_for_its_column(server, page, lang):     # noqa: F811
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the text is cut by the shipped zh-en")
    browser = page.context.browser
    phone = _open(browser, url, lang, PHONE_UA)
    charts = phone.evaluate(legibility.MEASURER, {})
    SHOTS.mkdir(parents=True, exist_ok=True)
    for i in range(phone.locator('[data-testid="stPlotlyChart"]').count()):
        phone.locator('[data-testid="stPlotlyChart"]').nth(i).scroll_into_view_if_needed()
        phone.screenshot(path=str(SHOTS / f"attention-{lang}-phone-{i}.png"))
    assert phone.locator('[data-testid="stException"]').count() == 0
    assert charts and not [c for c in charts if c["problems"]], [(c["title"], c["problems"]) for c in charts if c["problems"]]
    widths = phone.eval_on_selector_all('[data-testid="stPlotlyChart"] .main-svg',
                                        "els => els.map(e => e.getBoundingClientRect().right)")
    assert max(widths) <= 390, widths                                   # nothing runs off the screen
    shown = _heatmap_columns(phone)
    assert shown <= figure_rules.max_cells(figure_rules.PHONE_PX)       # a phone's window of readable cells
    narrow = _open(browser, url, lang, None)                            # a narrow desktop window: as before
    assert _heatmap_columns(narrow) == figure_rules.max_cells(figure_rules.FIGURE_PX) > shown
    phone.context.close()
    narrow.context.close()


@pytest.mark.parametrize("lang,length,ckpt", [pytest.param("en", 120, "zh-en", marks=pytest.mark.walk),
                                              pytest.param("zh", 30, "zh-en", marks=pytest.mark.walk),
                                              ("en", 120, "en-stories")])
def test_every_page_and_tab_is_legible_on_a_phone(server, page, lang, length, ckpt):     # noqa: F811
    """The legibility walk's measurement (benchmarks/legibility.py's Walker: every page, every tab, a student's first
    steps on the decoding page) on a phone, zh-en at a long and a middle length: every chart passes, and no page
    scrolls sideways, and the Overview's diagram is whole on the screen (an encoder-decoder's as two figures, its encoder
    and its decoder). On the story model, the attention page (a language model's long "piece → prediction" row
    labels) and the Overview, whose one-column diagram is fitted to the phone's column."""
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the walk's texts are cut by the shipped models")
    made = legibility.texts(root / ckpt, legibility.CHECKPOINTS[ckpt], (length,))
    text, pieces = made[length]
    context = page.context.browser.new_context(viewport={"width": 390, "height": 844}, user_agent=PHONE_UA,
                                               is_mobile=True, has_touch=True)
    walker = legibility.Walker(page.context.browser, url, root, out=SHOTS)
    walker.pg, walker.tok = context.new_page(), made["tok"]
    walker.pg.set_default_timeout(120_000)
    walker.traffic = legibility.Traffic(walker.pg)
    (SHOTS / "png").mkdir(parents=True, exist_ok=True)
    names = [n for n in registry_names() if n != "live_class"]          # a class needs a teacher: its own tests
    names = names if ckpt == "zh-en" else ["overview", "attention"]
    for name in names:
        walker.pg.goto(f"{url}/{'' if name == 'overview' else name}?checkpoint={ckpt}&text={quote(text)}&lang={lang}")
        settle(walker.pg)
        walker.here = name
        walker.page(name, {"checkpoint": ckpt, "lang": lang, "length": length, "pieces": pieces})
        assert walker.pg.evaluate("() => document.documentElement.scrollWidth") <= 390, name     # no sideways page
    if "overview" in names:
        walker.pg.goto(f"{url}/?checkpoint={ckpt}&text={quote(text)}&lang={lang}")
        settle(walker.pg)
        box = walker.pg.locator(".st-key-ov_diagram_box")       # an encoder-decoder: two figures, one a column
        figures = box.locator('[data-testid="stPlotlyChart"]').count()
        assert figures == (2 if ckpt == "zh-en" else 1), figures
        rights = box.locator(".main-svg").evaluate_all("es => es.map(e => e.getBoundingClientRect().right)")
        assert max(rights) <= 390 and box.evaluate("b => b.scrollWidth <= b.clientWidth"), rights   # whole on screen
    views = walker.views
    assert sum(len(v["charts"]) for v in views) >= (40 if ckpt == "zh-en" else 3), legibility.summary(views)
    assert not any(v["exceptions"] or v.get("error") for v in views), \
        legibility.summary(views)
    rows = legibility.problems(views)
    assert not rows, legibility.table(rows) + "\n" + legibility.summary(views)
    context.close()


CLASSIC = "我是一名工程师。"
# The first heatmap's keys in view (the x categories' indices), the tick label d3 drew for each, the text in its cells.
KEYS = """c => { const gd = c.querySelector('.js-plotly-plot'), xa = gd._fullLayout.xaxis;
  const ticks = {}; c.querySelectorAll('.xtick text').forEach(t => { if (t.__data__) ticks[Math.round(t.__data__.x)] = t.textContent; });
  return {cats: xa._categories, ticks, texts: [...c.querySelectorAll('.heatmaplayer text')].map(t => t.textContent)}; }"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_phone_names_every_key_of_the_cross_attention(server, page, lang):     # noqa: F811
    """attention?block=decoder.cross_attn&layer=1&head=2 on 我是一名工程师。 at 390 × 844: each key in view has its
    own tick label "i:piece", the pieces as the checkpoint's tokenizer cuts the text; each cell writes its weight (the
    run's, recomputed here); the legibility measurer (its phone rule among them) finds nothing wrong; a tap on a cell
    shows Plotly's hover with the cell's whole labels and weight."""
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the shipped zh-en's pieces")
    from viz_transformer import load_checkpoint
    model = load_checkpoint(root / "zh-en")
    pieces, run = model.tokenizer.pieces(model.tokenizer.encode(CLASSIC)), model.run(CLASSIC)
    context = page.context.browser.new_context(viewport={"width": 390, "height": 844}, user_agent=PHONE_UA,
                                               is_mobile=True, has_touch=True)
    pg = context.new_page()
    pg.set_default_timeout(120_000)
    pg.goto(f"{url}/attention?checkpoint=zh-en&block=decoder.cross_attn&layer=1&head=2&text={quote(CLASSIC)}"
            + ("&lang=zh" if lang == "zh" else ""))
    settle(pg)
    still(pg)
    chart = pg.locator('[data-testid="stPlotlyChart"]').first
    chart.scroll_into_view_if_needed()
    still(pg)
    chart.screenshot(path=str(SHOTS / f"cross-attention-{lang}.png"))
    seen = chart.evaluate(KEYS)
    keys = seen["cats"]
    assert 7 <= len(keys) <= 24, keys                       # the phone's window of the sentence's keys
    for i, piece in enumerate(pieces[:len(keys)]):
        shown = seen["ticks"].get(str(i))
        assert shown is not None, (i, piece, seen["ticks"])  # every key named, none skipped
        assert f"{i}:{piece}".startswith(shown.rstrip("…")), (shown, piece)
    values = [float(v) for v in seen["texts"]]              # the weights written in the cells, row by row ...
    rows = len(values) // len(keys)
    ref = run.cache["decoder.1.cross_attn.hook_pattern"][0, 2, :rows, :len(keys)].flatten().tolist()   # ... the run's
    assert rows >= 7 and len(values) == len(ref) and all(abs(a - b) <= 0.006 for a, b in zip(values, ref)), (values, ref)
    charts = pg.evaluate(legibility.MEASURER, {})
    assert not charts[0]["problems"], charts[0]["problems"]
    box = chart.locator(".nsewdrag").first.bounding_box()          # a tap on a cell: Plotly's hover names it whole
    pg.touchscreen.tap(box["x"] + box["width"] * (4.5 / len(keys) if len(keys) > 4 else 0.5), box["y"] + 5)
    said = chart.locator(".hoverlayer").first
    said.locator("text").first.wait_for()
    told = said.evaluate("e => e.textContent")
    assert re.search(r"\d\.\d{4}", told) and any(f"{i}:{p}" in told for i, p in enumerate(pieces)), told
    context.close()


def registry_names() -> list[str]:
    from viz_explorer.kit import registry
    return [spec.name for spec in registry.PAGES]

