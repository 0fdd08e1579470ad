"""Server time to build the figures every page draws, with no page around them: the attention heatmap at 12 and 120
pieces (desktop and phone), the architecture diagram (the Overview's first figure), a loss curve, the layer x head
grid, the model view of 6 x 8 heads. Each tree in a process of its own (its library first on sys.path), the trees
alternating round by round; the median of each figure's build times, and the ratio now / before, in one run.

    python -m benchmarks.figure_build --before /tmp/old-main [--rounds 5] [--n 40]

Also checks that both trees built the same figures (the JSON of each, compared), so a faster build is the same
figure built another way.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(n: int) -> dict:
    """In this process: {figure: [seconds of each of n builds]} and {figure: its JSON}."""
    import time

    import numpy as np

    from viz_transformer.core.checkpoint import read_config
    from viz_transformer.plots import charts, diagram, heatmaps
    from viz_transformer.plots import figure_rules as rules
    rng = np.random.default_rng(0)
    cfg = read_config(ROOT / "checkpoints" / "zh-en")
    w12, w120 = rng.random((12, 12)), rng.random((120, 120))
    p12, p120 = [f"{i}:我{i}" for i in range(12)], [f"{i}:片{i}" for i in range(120)]
    grid, tiles = rng.normal(size=(6, 8)), [[rng.random((8, 8)) for _ in range(8)] for _ in range(6)]
    made = {
        "attention heatmap, 12 pieces": lambda: heatmaps.attention_heatmap(w12, p12, p12, "Layer 1 · head 2"),
        "attention heatmap, 120 pieces": lambda: heatmaps.attention_heatmap(w120, p120, p120, "Layer 1 · head 2"),
        "architecture diagram": lambda: diagram.architecture_diagram(cfg, 9, 8, {}, "Encoder-decoder, 3 + 3 layers"),
        "loss curve": lambda: charts.curves(list(range(60)), {"loss": np.linspace(5, 1, 60)}, "Loss", "step", "loss"),
        "layer x head grid": lambda: heatmaps.head_grid(grid, "Knock-out effect", marked=[(1, 2)]),
        "model view, 6 x 8 heads": lambda: heatmaps.model_view(tiles, "All heads", selected=(0, 0)),
    }
    times, shapes = {}, {}
    for px, screen in ((rules.FIGURE_PX, "desktop"), (rules.PHONE_PX, "phone")):
        with rules.screen(px):
            for name, make in made.items():
                make()                                           # its validators imported, its caches made
                key = f"{name} ({screen})"
                times[key] = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    fig = make()
                    times[key].append(time.perf_counter() - t0)
                shapes[key] = json.dumps(fig.to_plotly_json(), sort_keys=True, default=str)
    return {"times": times, "json": shapes}


def in_tree(root: Path, n: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--build", str(n)], cwd=root, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(root)), timeout=900)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--build"]:
        print(json.dumps(build(int(argv[1]))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="another checkout, alternated with this one")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=40, help="builds of each figure a round")
    p.add_argument("--json", help="also write the medians here")
    a = p.parse_args(argv)
    trees = {"before": Path(a.before).resolve(), "now": ROOT}
    times: dict = {side: {} for side in trees}
    same = True
    for r in range(a.rounds):
        got = {side: in_tree(root, a.n) for side, root in (trees.items() if r % 2 == 0 else reversed(trees.items()))}
        same &= got["before"]["json"] == got["now"]["json"]
        for side in trees:
            for k, v in got[side]["times"].items():
                times[side].setdefault(k, []).extend(v)
    med = {side: {k: statistics.median(v) for k, v in times[side].items()} for side in trees}
    print(f"| figure | before | now | now / before |\n|---|---|---|---|")
    for k in med["now"]:
        b, n = med["before"][k], med["now"][k]
        print(f"| {k} | {1e3 * b:.1f} ms | {1e3 * n:.1f} ms | {n / b:.2f} |")
    print(f"\nthe same figures in both trees (JSON): {'yes' if same else 'NO'}")
    if a.json:
        Path(a.json).write_text(json.dumps({"medians_s": med, "same_json": same}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
