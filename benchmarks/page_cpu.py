"""Server CPU of each page's first view after a new text, without a browser: the app under Streamlit's AppTest in
one process (the app's own thread policy: nothing in the environment sets the thread count, as with the README's
command), a new text of N pieces submitted on the Overview, then each page
opened once; the process's CPU seconds around each page run. Page times from outside (benchmarks/pixels.py) add the
browser's drawing and, on a busy machine, waiting for a core; CPU seconds show the server's own work.

    python -m benchmarks.page_cpu --pages positions architectures --tokens 128,512 [--before /tmp/old-main]

--pages: names from viz_explorer/kit/registry.py. --before: another checkout, each text's walk alternating between
the two (each tree in a process of its own, on the same texts, made here from ../shared/data).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEEDS = (1, 2, 3)


def text(n: int, seed: int) -> str:
    """The walk's new text, made here for both trees (a tree without ../shared beside it would make another)."""
    from benchmarks.texts import text_of
    from viz_transformer.core.checkpoint import load_tokenizer, read_config
    folder = ROOT / "checkpoints" / "zh-en"
    return text_of(load_tokenizer(folder, read_config(folder)), n, seed=n + seed)


def walk(root: Path, pages: list[str], new_text: str) -> dict[str, float]:
    """{"new text": s, page: s, ...}: CPU seconds of each run, in this process, of the app in `root`."""
    import time
    from streamlit.testing.v1 import AppTest
    from viz_explorer.kit.registry import PAGES, page_path
    path = {p.name: page_path(p) for p in PAGES}
    at = AppTest.from_file(str(root / "app.py"), default_timeout=600)
    at.session_state["ckpt"], at.session_state["text"] = "zh-en", "我是一名工程师。"
    at.run()
    for name in pages:                        # each page once on a short text: its imports and caches made
        at.switch_page(path[name])
        at.run()
    at.switch_page(path["overview"])
    at.run()
    at.session_state["text"] = new_text
    out = {}
    for name in ["overview", *pages]:
        at.switch_page(path[name])
        t0 = time.process_time()
        at.run()
        out["new text" if name == "overview" else name] = time.process_time() - t0
        if at.exception:
            raise RuntimeError(f"{name}: {at.exception[0].value}")
    return out


def in_tree(root: Path, pages: list[str], text_file: str) -> dict[str, float]:
    # the tree's own code (PYTHONPATH before the installed package), under the app's own thread policy
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "VIZ_THREADS")} | {"PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, __file__, "--walk", str(root), text_file, *pages], cwd=root, env=env,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--walk"]:                 # in_tree's process: root, the text's file, pages
        print(json.dumps(walk(Path(argv[1]), argv[3:], Path(argv[2]).read_text(encoding="utf-8"))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", nargs="+", required=True)
    p.add_argument("--tokens", default="128,512")
    p.add_argument("--before", help="another checkout, alternated with this one")
    p.add_argument("--json")
    a = p.parse_args(argv)
    trees = ({"before": Path(a.before).resolve()} if a.before else {}) | {"now": ROOT}
    got: dict = {side: {} for side in trees}
    for n in (int(x) for x in a.tokens.split(",")):
        for seed in SEEDS:
            with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt") as f:
                f.write(text(n, seed))
                f.flush()
                for side, root in (trees.items() if seed % 2 else reversed(trees.items())):
                    for page, s in in_tree(root, a.pages, f.name).items():
                        got[side].setdefault(f"{page} @{n}", []).append(round(s, 3))
    keys = list(got["now"])
    print("| page | " + " | ".join(trees) + " |\n" + "|---" * (len(trees) + 1) + "|")
    for k in keys:
        print(f"| {k} | " + " | ".join(f"{statistics.median(got[s][k]):.2f} s ({', '.join(map(str, got[s][k]))})"
                                       for s in trees) + " |")
    if a.json:
        Path(a.json).write_text(json.dumps(got, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
