"""The README's screenshots of an imported (Hugging Face llama-format) model: the attention page (and its
"without the sink column, renormalised" redraw), the sink shares (head statistics), the positional page (RoPE on
the model's own q/k) and step-through decoding, in English and Chinese. Written to docs/hf/ as optimised
1280-wide PNGs; look at each one.

    python -m benchmarks.hf_shots --checkpoints /tmp/llama/root --checkpoint stories-llama-hf
    python -m benchmarks.hf_shots --checkpoints /tmp/llama/root --langs zh --shots attention

Each page is opened from the sidebar (the text stays), and shot once the script has finished, no skeleton is
left and every chart has drawn (benchmarks/pixels.settle). A shot is the page's main area down to the end of
the part it names (a `stop` element's top), not the whole page.
"""
from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.pixels import launch, settle
from benchmarks.stclient import Server

TEXT = "Once upon a time, there was a little girl named Lily. She loved to play in the park with her dog."
WIDTH, HEIGHT = 1280, 2600     # a tall window: Streamlit scrolls its main area, not the page, so what is shot must fit
# name -> (page, what to click there (a label's key in strings, how many times), the heading whose top ends the shot)
SHOTS = {
    "attention": ("attention", (), "at.model_view"),
    "attention-no-sink": ("attention", (("at.no_sink", 1),), "at.model_view"),
    "sinks": ("head_stats", (), None),
    "positional": ("positional", (), None),
    "decoding": ("decoding", (("dc.next", 6),), None),
}


def optimise(png: bytes) -> bytes:
    """Width WIDTH, 256 colours (the app's flat colours and text survive), PNG optimised."""
    from PIL import Image
    im = Image.open(io.BytesIO(png)).convert("RGB")
    if im.width != WIDTH:
        im = im.resize((WIDTH, round(im.height * WIDTH / im.width)), Image.LANCZOS)
    out = io.BytesIO()
    im.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out, "PNG", optimize=True)
    return out.getvalue()


def shoot(page, url: str, lang: str, names: list[str], out: Path, t) -> list[Path]:
    page.goto(f"{url}/?lang={lang}")
    settle(page)
    box = page.locator('[data-testid="stSidebar"] textarea').first
    box.fill(TEXT)
    box.press("Control+Enter")
    page.wait_for_timeout(500)
    settle(page)
    written = []
    for name in names:
        target, toggles, stop = SHOTS[name]
        page.locator(f'[data-testid="stSidebarNav"] a[href$="/{target}"]').first.click()
        page.wait_for_timeout(500)
        settle(page)
        for key, times in toggles:
            for _ in range(times):
                page.get_by_text(t(key, lang), exact=True).first.click()
                page.wait_for_timeout(500)
                settle(page)
        page.wait_for_timeout(800)
        main = page.locator('[data-testid="stMain"] [data-testid="stMainBlockContainer"]').first
        box = main.bounding_box()
        height = box["height"]
        if stop is not None:
            head = page.get_by_role("heading", name=t(stop, lang)).first
            height = head.bounding_box()["y"] - box["y"]
        png = page.screenshot(clip={"x": 0, "y": 0, "width": WIDTH, "height": min(box["y"] + height, HEIGHT)})
        path = out / f"{name}-{lang}.png"
        path.write_bytes(optimise(png))
        written.append(path)
        print(f"{path}  {path.stat().st_size / 1e3:.0f} kB  exceptions: "
              f"{page.locator('[data-testid=stException]').count()}", flush=True)
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoints", default="/tmp/llama/root")
    p.add_argument("--checkpoint", default="stories-llama-hf", help="the folder the sidebar should open")
    p.add_argument("--langs", default="en,zh")
    p.add_argument("--shots", default=",".join(SHOTS))
    p.add_argument("--out", default=str(ROOT / "docs" / "hf"))
    a = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from viz_explorer.kit import strings, strings_zh

    def t(key, lang):
        return (strings_zh.ZH if lang == "zh" else strings.EN)[key]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with Server(ROOT, a.checkpoints, log="/tmp/hf_shots_server.log") as server, sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1)
        page.set_default_timeout(600_000)
        for lang in a.langs.split(","):
            shoot(page, server.url, lang, a.shots.split(","), out, t)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
