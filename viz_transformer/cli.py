"""Command line: train, translate/generate, trace, info, evaluate."""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":
        from .train import main as train_main
        return train_main(argv[1:])
    print("usage: python -m viz_transformer {train,translate,generate,trace,info,evaluate} ...", file=sys.stderr)
    return 2
