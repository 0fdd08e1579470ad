"""A page walk's server time, to compare two trees' caching: one real `streamlit run app.py` per tree, one
websocket session; after a warm-up, N distinct 512-piece texts on every page, then every page again for the last
text (what the caches kept), then one knock-out of a whole layer.

    python -m benchmarks.bench_walk                                 # this tree
    python -m benchmarks.bench_walk /tmp/before .                   # side by side (git archive a commit there)

Seconds are from the request to script_finished (stclient). Pause the background training for it (README).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from benchmarks.stclient import Server, Session
from benchmarks.texts import text_of

HERE = Path(__file__).resolve().parent


def walk(root: Path, n_texts: int = 3, pieces: int = 512) -> dict:
    """{"first": {page: [s per text]}, "again": {page: s}, "knockout": s} for the tree at root."""
    from benchmarks import bench_memory as bm
    from viz_explorer.kit.strings import EN
    tok, titles = bm._tokenizer(root / "checkpoints"), bm.page_titles()
    out = {"first": {t: [] for t in titles}, "again": {}, "knockout": 0.0}

    async def go(server: Server) -> None:
        s = await Session.open(server.url)
        try:
            await s.rerun()
            await bm._visit(s, titles, "我是一名工程师。")
            for i in range(1, n_texts + 1):
                await s.rerun({"text": text_of(tok, pieces, seed=100 + i)})
                for t in titles:
                    r = await s.goto(t)
                    if r.exceptions:
                        raise RuntimeError(f"{t}: {r.exceptions}")
                    out["first"][t].append(r.seconds)
            for t in titles:
                out["again"][t] = (await s.goto(t)).seconds
            await s.goto(EN["nav.knockout"])
            out["knockout"] = (await s.click(s.key_starting("ko_all_"))).seconds
        finally:
            await s.close()

    with Server(root, root / "checkpoints", log="/tmp/bench_walk_server.log") as server:
        asyncio.run(go(server))
    return out


def table(name: str, res: dict) -> str:
    first = {t: sum(v) / len(v) for t, v in res["first"].items()}
    lines = [f"{name}: {sum(first.values()):.1f} s per new text over {len(first)} pages, "
             f"{sum(res['again'].values()):.1f} s for all of them again, knock out a layer {res['knockout']:.2f} s"]
    lines += [f"  {t:32s} new text {s:6.2f} s   again {res['again'][t]:6.2f} s" for t, s in first.items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("roots", nargs="*", default=[str(HERE.parent)], help="app trees to walk, one after the other")
    p.add_argument("--texts", type=int, default=3, help="distinct texts, each on every page")
    p.add_argument("--pieces", type=int, default=512)
    a = p.parse_args(argv)
    for root in a.roots:
        print(table(root, walk(Path(root).resolve(), a.texts, a.pieces)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
