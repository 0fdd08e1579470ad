"""How long each shipped lesson question takes to compute the first time (the app then caches it per step),
beside the plain captured run of the same text: what a student waits for when a step with a question opens.

    python -m benchmarks.bench_questions                 # every question of the shipped lessons, 3 repeats
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from viz_explorer.lessons import lesson_file
from viz_transformer import load_checkpoint
from viz_transformer.analysis import claims, questions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    models: dict = {}
    print(f"{'lesson step':34} {'kind':18} {'run (s)':>8} {'question (s)':>13}")
    for name in lesson_file.list_lessons():
        lesson = lesson_file.load_lesson(name)
        for i, step in enumerate(lesson.steps):
            if not step.question:
                continue
            ckpt, text = lesson_file.model_and_text(lesson, i)
            hm = models.setdefault(ckpt, load_checkpoint(ROOT / "checkpoints" / ckpt))
            values = {k: claims.evaluate(v["kind"], hm, text, {a: b for a, b in v.items() if a != "kind"}).values
                      for k, v in step.facts.items()}
            qargs = lesson_file.question_args(step, values)
            run_s, ask_s = [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                hm.run(text)
                run_s.append(time.perf_counter() - t0)
                claims._RUNS.pop(hm, None)                      # no shared run: the question's own cost
                t0 = time.perf_counter()
                questions.ask(step.question["kind"], hm, text, qargs)
                ask_s.append(time.perf_counter() - t0)
            print(f"{name + ' ' + str(i + 1):34} {step.question['kind']:18} {min(run_s):8.3f} {min(ask_s):13.3f}")


if __name__ == "__main__":
    main()
