"""End-to-end: on every page, change the view, take the sidebar's "Copy link", open it in a fresh browser
context (a new session: nothing shared but the server) and check that the same view is shown: the
widgets' values, the open tab, the figures' titles. A screenshot of each reopened page under
test-artifacts/links-*.png (look at them)."""
from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

import pytest

from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS, no_exception, settle
from viz_explorer.kit import registry

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]

TEXT = {"checkpoints": "他是我的朋友。", "tiny": "我爱你。"}
# page -> (what the address sets, an action in the page: "tab:LABEL", "click:BUTTON" or "") — every page changes
# something away from its defaults, through the address (the app writes it back) or through a click
CHANGES = {
    "overview": ({}, ""),
    "attention": ({"block": "decoder.cross_attn", "layer": "1", "head": "2", "words": "1"}, ""),
    "masks": ({"block": "decoder.cross_attn", "layer": "1", "head": "3"}, "tab:What each head applied"),
    "positional": ({"positions": "40"}, ""),
    "step_by_step": ({"layer": "2", "head": "1"}, "tab:2 · Scores, mask, softmax"),
    "why": ({"layer": "1", "head": "5", "row": "2", "key": "3"}, "tab:2 · Which heads write the word"),
    "decoding": ({"strategy": "beam", "beam_width": "2"}, "click:Next"),
    "lens": ({"lens_step": "2"}, ""),
    "knockout": ({"ablate": "decoder.0.cross_attn:1", "ablate_mode": "mean", "layer": "1"}, ""),
    "positions": ({"permutation": "swap", "head": "3"}, ""),
    "compare": ({"other_text": "她是我的朋友。", "layer": "2"}, ""),
    "patching": ({"over": "blocks"}, ""),
    "architectures": ({"depth": "first"}, "tab:Masks"),
    "rollout": ({}, ""),
    "attribution": ({}, ""),
    "head_stats": ({"stat": "self", "threshold": "0.7"}, ""),
    "training": ({}, ""),
    "export": ({}, ""),
    "lessons": ({}, ""),                 # the shelf: its view is the list; a lesson lives in its own link
    "live_class": ({}, ""),              # its view is the class start page; a class lives in its own link
}

VIEW = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const side = document.querySelector('[data-testid="stSidebar"]');
  const all = (root, sel, f) => Array.from(root.querySelectorAll(sel)).map(f);
  return {
    title: all(main, 'h1', e => e.innerText.trim()),
    selects: all(main, '[data-testid="stSelectbox"]', e => e.innerText.trim()),
    sliders: all(main, '[data-testid="stSlider"] [role="slider"]', e => e.getAttribute('aria-valuenow')),
    toggles: all(main, '[data-testid="stCheckbox"] input', e => e.checked),
    inputs: all(main, '[data-testid="stTextInput"] input', e => e.value),
    chosen: all(main, 'button[kind$="Active"]', e => e.innerText.trim()),
    tab: all(main, '[role="tab"][aria-selected="true"]', e => e.innerText.trim()),
    figures: all(main, '.js-plotly-plot .gtitle', e => e.textContent.trim()),
    progress: all(main, '[data-testid="stProgress"]', e => e.innerText.trim()),
    checkpoint: all(side, '[data-testid="stSelectbox"]', e => e.innerText.trim()).slice(0, 1),
    text: all(side, 'textarea', e => e.value).slice(0, 1),
  };
}"""


def _copied_link(pg) -> str:
    """The address in the sidebar's "Copy link" box (what its copy button puts on the clipboard)."""
    side = pg.locator('[data-testid="stSidebar"]')
    side.get_by_role("button", name=re.compile("Copy link")).click()
    code = pg.locator('[data-testid="stPopoverBody"] [data-testid="stCode"]')
    code.wait_for()
    link = code.inner_text().strip()
    pg.keyboard.press("Escape")
    return link


@pytest.fixture(scope="module")
def browser(server):       # noqa: F811
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _fresh(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 1800})
    context.set_default_timeout(TIMEOUT_MS)
    return context, context.new_page()


@pytest.fixture(scope="module")
def sender(browser):
    """The context each view is made and its link copied in: one for the module (its cache keeps the app's scripts
    between pages; each goto still starts a session of its own). The link is opened in a _fresh context."""
    context, _ = _fresh(browser)
    yield context
    context.close()


@pytest.mark.parametrize("spec", registry.PAGES, ids=[p.name for p in registry.PAGES])
def test_the_copied_link_opens_the_same_view(server, browser, sender, spec):      # noqa: F811
    url, root = server
    text = TEXT["checkpoints" if root.name == "checkpoints" else "tiny"]
    query, action = CHANGES[spec.name]
    if root.name != "checkpoints":
        query = {k: v for k, v in query.items() if k not in ("layer", "head")}      # tiny models: 2 layers
    path = "" if spec.name == registry.DEFAULT else spec.name
    pg = sender.new_page()
    pg.goto(f"{url}/{path}?" + "&".join(f"{k}={v}" for k, v in {"text": text, **query}.items()))
    settle(pg)
    if action.startswith("tab:"):
        pg.get_by_role("tab", name=action[4:]).click()
        settle(pg)
    elif action.startswith("click:"):
        for _ in range(2):
            pg.get_by_role("button", name=re.compile(action[6:])).click()
            settle(pg)
    no_exception(pg)
    before = pg.evaluate(VIEW)
    link = _copied_link(pg)
    pg.close()

    shared = dict(parse_qsl(urlsplit(link).query))
    assert urlsplit(link).path.rstrip("/") == f"/{path}".rstrip("/")
    assert {k: shared.get(k) for k in query} == query, shared          # the change is in the link
    assert shared.get("text") == text and "checkpoint" in shared
    if action.startswith("tab:"):
        assert "tab" in shared
    if action.startswith("click:"):
        assert shared.get("decode_step") == "2"

    second, pg = _fresh(browser)
    pg.goto(link)
    settle(pg)
    no_exception(pg)
    after = pg.evaluate(VIEW)
    pg.screenshot(path=str(ARTIFACTS / f"links-{spec.name}.png"))
    assert pg.locator('[data-testid="stAlert"]', has_text="link").count() == 0      # nothing was ignored
    second.close()
    assert after == before
    assert before["title"] and before["text"] == [text]


def test_a_long_text_goes_in_a_link_only_when_asked(server, browser, sender):      # noqa: F811
    """A long text stays out of the address as it is typed; "Make the link" stores it and the link opens it."""
    url, _ = server
    text = "今天天气很好，我们去公园散步吧。" * 12 + " <b>不是标签</b>"
    pg = sender.new_page()
    pg.goto(f"{url}/attention")
    settle(pg)
    box = pg.locator('[data-testid="stSidebar"] textarea')
    box.fill(text)
    box.press("Control+Enter")
    settle(pg)
    assert "text=" not in pg.url and "tid=" not in pg.url                 # typed: not in the address
    side = pg.locator('[data-testid="stSidebar"]')
    side.get_by_role("button", name=re.compile("Copy link")).click()
    body = pg.locator('[data-testid="stPopoverBody"]')
    assert body.locator('[data-testid="stCode"]').count() == 0 and "too long for an address" in body.inner_text()
    body.get_by_role("button", name="Make the link").click()
    settle(pg)
    code = body.locator('[data-testid="stCode"]')
    code.wait_for()
    link = code.inner_text().strip()
    tid = dict(parse_qsl(urlsplit(link).query)).get("tid")
    assert tid and f"tid={tid}" in pg.url and "kept on this server for 30 days" in body.inner_text()
    before = pg.evaluate(VIEW)
    pg.close()
    second, pg = _fresh(browser)
    pg.goto(link)
    settle(pg)
    no_exception(pg)
    assert pg.locator('[data-testid="stSidebar"] textarea').input_value() == text
    assert pg.evaluate(VIEW) == before
    second.close()
