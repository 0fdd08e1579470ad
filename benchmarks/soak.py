"""Soak: many reruns with varied texts across every page in one process (AppTest, one session), and
whether memory, session_state, open files and threads stay flat after warm-up.

    python -m benchmarks.soak                    # 300 reruns on checkpoints/
    python -m benchmarks.soak --reruns 60 --checkpoints /path/to/checkpoints

Prints a line every --every reruns: RSS, Python heap (tracemalloc), session_state keys, open file
descriptors, threads; then the growth from the first sample after warm-up to the last.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["我", "是", "学生", "老师", "朋友", "今天", "天气", "很好", "喜欢", "喝茶", "北京", "工程师", "猫", "书", "学校"]


def pages() -> list[str]:
    """Every page script of the navigation, in order (viz_explorer/kit/registry.py, as app.py builds it)."""
    from viz_explorer.kit.registry import PAGES, page_path
    return [str(page_path(p)) for p in PAGES]


def sample() -> dict:
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return {"rss_mib": int(status["VmRSS"].split()[0]) / 1024, "heap_mib": tracemalloc.get_traced_memory()[0] / 2**20,
            "fds": len(os.listdir("/proc/self/fd")), "threads": int(status["Threads"])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reruns", type=int, default=300)
    p.add_argument("--every", type=int, default=30)
    p.add_argument("--warmup", type=int, default=60, help="reruns before the baseline sample")
    p.add_argument("--checkpoints", default=str(ROOT / "checkpoints"))
    a = p.parse_args(argv)
    os.environ.update(VIZ_CHECKPOINTS=a.checkpoints, VIZ_CHECKPOINTS_ONLY="1")     # that root alone
    from streamlit.testing.v1 import AppTest
    tracemalloc.start()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    page_list, t0, base, rows = pages(), time.time(), None, []
    print(f"{len(page_list)} pages; load average {os.getloadavg()}", flush=True)
    for i in range(a.reruns):
        n = i % len(page_list)
        if n == 0 or i == 0:          # a new text for every round of the pages
            at.session_state["text"] = "".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(2 + i % 5)) + "。"
        at.switch_page(page_list[n])
        at.run()
        if at.exception:
            print(f"rerun {i}: {page_list[n]}: {[e.value for e in at.exception]}", flush=True)
            return 1
        if (i + 1) % a.every == 0:
            gc.collect()
            s = sample() | {"state_keys": len(at.session_state), "rerun": i + 1}
            rows.append(s)
            print("  ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in s.items()),
                  f" ({time.time() - t0:.0f}s)", flush=True)
            if base is None and i + 1 >= a.warmup:
                base = s
    last = rows[-1]
    if base and base is not last:
        print("growth after warm-up: " + "  ".join(f"{k} {last[k] - base[k]:+.1f}" for k in base if k != "rerun"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
