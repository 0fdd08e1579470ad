"""Presenter mode (?present=1) in the app with AppTest, and the class banner's QR code.

The QR checks do not trust the code that makes the image: the PNG is read back pixel by pixel and compared
with segno's matrix for the address, and the code's size is checked against ISO/IEC 18004's capacity table
and the finder patterns every QR code has in three corners."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

from app_util import APP, ZH, by_key, texts
from viz_explorer.kit import presenter
from viz_explorer.classroom import qr


pytestmark = pytest.mark.usefixtures("env")      # tests/conftest.py: the tiny checkpoints


def _open(present: str | None, lesson: str | None = None, lang: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    for key, value in (("present", present), ("lesson", lesson), ("lang", lang)):
        if value is not None:
            at.query_params[key] = value
    at.session_state["ckpt"], at.session_state["text"] = "tiny-zh-en", ZH
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _style(at) -> str:
    return "\n".join(h.proto.body for h in at.get("html"))


def test_present_1_gives_large_type_collapsed_sidebar_and_arrow_keys_through_the_pages():
    at = _open("1")
    assert at.session_state["present"] is True and at.query_params["present"] in ("1", ["1"])
    style = _style(at)
    assert f"font-size: {presenter.FONT_PX}px" in style and presenter.FONT_PX >= 1.4 * 16     # Streamlit's 16 px, x1.5
    back, forward = by_key(at.button, "pr_back"), by_key(at.button, "pr_next")
    assert (back.proto.shortcut, forward.proto.shortcut) == ("left", "right")          # the arrow keys
    assert back.disabled and not forward.disabled                                       # the first page
    forward.click().run()
    assert not at.exception and at.title[0].value == "Attention: heads and layers"      # registry: overview, attention
    assert at.query_params["present"] in ("1", ["1"])                                   # kept while navigating
    by_key(at.button, "pr_back").click().run()
    assert at.title[0].value == "Overview" and by_key(at.button, "pr_back").disabled


def test_without_present_the_page_is_as_before_and_present_0_ends_it():
    at = _open(None)
    assert presenter.STYLE not in _style(at) and not [b for b in at.button if b.key in ("pr_back", "pr_next")]
    assert "present" not in at.query_params
    at = _open("1")
    at.query_params["present"] = "0"
    at.run()
    assert at.session_state["present"] is False and "present" not in at.query_params
    assert presenter.STYLE not in _style(at)


def test_a_zoomed_figure_is_the_same_figure_k_times_larger():
    from viz_transformer.plots import heatmaps, style
    fig = heatmaps.attention_heatmap(np.full((4, 4), 0.25), list("abcd"), list("abcd"), "one head")
    big = style.zoomed(fig, 2.5)
    assert (big.layout.width, big.layout.height) == (round(2.5 * fig.layout.width), round(2.5 * fig.layout.height))
    for side in "lrtb":
        assert getattr(big.layout.margin, side) == pytest.approx(2.5 * getattr(fig.layout.margin, side))
    assert big.layout.font.size == 2.5 * 12                                   # ticks and titles follow it
    assert big.data[0].textfont.size == 2.5 * fig.data[0].textfont.size        # the numbers in the cells
    bar, small = big.data[0].colorbar, fig.data[0].colorbar
    assert (bar.len, bar.thickness) == pytest.approx((2.5 * small.len, 2.5 * small.thickness))
    assert big.layout.xaxis.title.text == fig.layout.xaxis.title.text and style.zoomed(fig, 1) is fig


def test_presenting_draws_a_small_heatmap_larger():
    sizes = {}
    for present in (None, "1"):
        at = _open(present)
        at.switch_page("viz_explorer/pages/look/attention.py").run()
        fig = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if '"heatmap"' in c.proto.spec)
        sizes[present] = fig["layout"]["width"], fig["layout"]["font"]["size"] if present else 12
    (w, font), (w1, font1) = sizes[None], sizes["1"]
    assert w1 / w == pytest.approx(font1 / font, rel=0.01) and w1 / w >= 1.5


def test_presenting_a_lesson_puts_its_note_on_the_page_and_the_arrows_step_it(tmp_path, monkeypatch):
    steps = [{"page": "overview", "settings": {"checkpoint": "tiny-zh-en", "text": ZH}, "note": {"en": "First note."}},
             {"page": "masks", "settings": {}, "note": {"en": "Second note."}}]
    (tmp_path / "two.json").write_text(json.dumps({"title": {"en": "Two steps"}, "steps": steps}), encoding="utf-8")
    monkeypatch.setenv("VIZ_LESSONS", str(tmp_path))
    at = _open("1", lesson="two")
    assert "First note." in [m.value for m in at.main.markdown]                        # on the page, not the sidebar
    assert "First note." not in [m.value for m in at.sidebar.markdown]
    forward = by_key(at.button, "pr_next")
    assert forward.proto.shortcut == "right" and by_key(at.button, "pr_back").proto.shortcut == "left"
    forward.click().run()
    assert not at.exception and at.title[0].value == "Masks" and "Second note." in texts(at)
    assert at.query_params["step"] in ("2", ["2"]) and by_key(at.button, "pr_next").disabled


# -- the QR code and the class banner --------------------------------------------------------------------

URL = "https://class.example.org/live_class?class=K7Q2&lang=zh"       # 55 characters


def _modules(png: bytes, scale: int, border: int) -> np.ndarray:
    """The PNG read back as a matrix of dark (1) / light (0) modules, sampled at each module's centre."""
    img = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    assert img.shape[0] == img.shape[1] and img.shape[0] % scale == 0
    centres = np.arange(scale // 2, img.shape[0], scale)
    grid = (img[np.ix_(centres, centres)] < 128).astype(np.uint8)
    assert not grid[:border].any() and not grid[-border:].any() and not grid[:, :border].any()   # quiet zone
    return grid[border:-border, border:-border]


def _segno(url: str) -> np.ndarray:
    import segno
    return np.array([[1 if v else 0 for v in row] for row in segno.make(url, error="m", boost_error=False).matrix])


def test_the_png_shows_segnos_matrix_for_the_url_at_the_size_the_standard_gives():
    grid = _modules(qr.png(URL, scale=7, border=4), 7, 4)
    assert np.array_equal(grid, _segno(URL))
    # ISO/IEC 18004 table 7, level M, byte mode: version 3 holds 42 bytes, version 4 holds 62
    assert len(URL.encode()) > 42 and len(URL.encode()) <= 62 and grid.shape == (4 * 4 + 17, 4 * 4 + 17)
    finder = np.ones((7, 7), np.uint8)
    finder[1:6, 1:6], finder[2:5, 2:5] = 0, 1
    n = grid.shape[0]
    for r, c in ((0, 0), (0, n - 7), (n - 7, 0)):
        assert np.array_equal(grid[r:r + 7, c:c + 7], finder)


def test_bad_addresses_get_one_line():
    with pytest.raises(ValueError, match="empty"):
        qr.make("  ")
    with pytest.raises(ValueError, match="1001 characters"):
        qr.make("x" * 1001)


def _banner(code, url):
    from viz_explorer.classroom import qr as q
    q.class_banner(code, url)


def test_the_banner_shows_the_code_and_address_literally_and_the_qr_of_the_address(monkeypatch):
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
    sent = []                          # every file the page hands to the browser, as the browser gets it
    real = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        sent.append((path_or_data, mimetype))
        return real(self, path_or_data, mimetype, kind, filename)
    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    at = AppTest.from_function(_banner, args=("<b>K7*Q2</b>", URL), default_timeout=60).run()
    assert not at.exception
    assert r"\<b\>K7\*Q2\</b\>" in [m.value for m in at.markdown]          # markdown-escaped, never HTML
    assert at.code[0].value == URL and len(at.get("image")) == 1
    (data, mimetype), = sent
    assert mimetype == "image/png"                                            # lossless
    scale = qr.scale_for(URL)
    assert np.array_equal(_modules(data, scale, qr.BORDER), _segno(URL))          # sampled as sent
    at = AppTest.from_function(_banner, args=("K7Q2", ""), default_timeout=60).run()
    assert not at.exception and "empty" in at.warning[0].value and not at.get("image")
