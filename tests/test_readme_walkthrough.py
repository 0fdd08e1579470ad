"""The READMEs' walk-through is what the default translator writes: the sentence and its output, quoted in each
README, are recomputed here from the shipped model (greedy, as the Overview shows it)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from viz_transformer import load_checkpoint
from viz_explorer.server.defaults import CHECKPOINT, SHIPPED

ROOT = Path(__file__).resolve().parents[1]
# "我是一名工程师。" → "[begin] I'm an engineer. [end]", in either language's quotation marks
PAIR = re.compile(r"[\"“]([^\"”]+)[\"”]\s*→\s*[\"“]\[begin\] ([^\"”]+) \[end\][\"”]")


@pytest.mark.parametrize("readme", ["README.md", "README.zh-CN.md"])
def test_the_readme_walk_through_is_what_the_default_translator_writes(readme):
    found = PAIR.findall((ROOT / readme).read_text(encoding="utf-8"))
    assert len(found) == 1, found
    text, output = found[0]
    hm = load_checkpoint(SHIPPED / CHECKPOINT)
    run = hm.run(text)
    assert run.output == output
    assert run.tgt_pieces[0] == "[begin]" and hm.tokenizer.decode(run.output_ids) == output
