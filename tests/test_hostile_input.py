"""Hostile text through the library and the command line: a clear error or a correct result, never a
traceback. Correct = the captured run agrees with the step-by-step decoder (a different code path)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from hostile import HOSTILE, REFUSED
from viz_transformer import decode, DecodeSettings

ENV = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("which", ["tiny_translator", "tiny_lm"])
def test_library_refuses_clearly_or_runs_correctly(request, which, name):
    hm, text = request.getfixturevalue(which), HOSTILE[name]
    if name in REFUSED:
        for call in (lambda: hm.run(text), lambda: decode(hm, text, DecodeSettings(max_new_tokens=4))):
            with pytest.raises(ValueError, match=REFUSED[name]):
                call()
        return
    run = hm.run(text, max_new_tokens=6)
    trace = decode(hm, text, DecodeSettings("greedy", max_new_tokens=6))
    assert run.output_ids == trace.generated_ids                     # the capture is what was generated
    enc_ids = hm.tokenizer.encode(text)
    if hm.cfg.is_encoder_decoder:                                    # the source is the text's own pieces
        room = hm.cfg.max_len - 1
        assert run.src_ids == enc_ids[:room] + [hm.cfg.eos_id]
        assert run.n_cut == max(0, len(enc_ids) - room)
    for name_, t in run.cache.items():
        if name_.endswith("hook_pattern"):
            assert torch.isfinite(t).all()
            torch.testing.assert_close(t.sum(-1), torch.ones(t.shape[:-1]))


def cli(*args, stdin: bytes):
    return subprocess.run([sys.executable, "-m", "viz_transformer", *map(str, args)], input=stdin,
                          capture_output=True, env=ENV, cwd=ROOT, timeout=300)


@pytest.mark.slow          # a subprocess with a 10 MB line
def test_cli_stdin_with_invalid_utf8_a_10_MB_line_and_every_hostile_text(ckpt_root):
    ck = ckpt_root / "tiny-zh-en"
    lines = [b"\xe6\x88\x91\xe6\x98\xaf\xff\xfe\xc3", b"x" * 10_000_000]   # invalid UTF-8; a 10 MB line
    lines += [v.encode("utf-8", "surrogatepass") for v in HOSTILE.values() if "\n" not in v]
    r = cli("translate", "--checkpoint", ck, "--max-new-tokens", "4", stdin=b"\n".join(lines) + b"\n")
    err = r.stderr.decode()
    assert b"Traceback" not in r.stderr and r.returncode == 2, err
    out = r.stdout.decode().split("\n")[:-1]
    assert len(out) == len(lines), (len(out), len(lines))             # one output line per input line
    assert "line 1 is not valid UTF-8" in err
    assert "error: line 2: the line has 10,000,000 bytes; the text limit is 20,000 characters" in err
    assert out[1] == ""
    # a line that decodes: the same output as --text gives for the decoded line
    r1 = cli("translate", "--checkpoint", ck, "--max-new-tokens", "4", "--text",
             lines[0].decode("utf-8", "replace"), stdin=b"")
    assert r1.returncode == 0 and r1.stdout.decode().rstrip("\n") == out[0]
    names = [None, None] + [k for k, v in HOSTILE.items() if "\n" not in v]
    errors = {int(ln.split()[2].rstrip(":")) for ln in err.splitlines() if ln.startswith("error: line ")}
    notes = {int(ln.split()[2]) for ln in err.splitlines() if ln.startswith("note: line ")}
    assert errors == {2, names.index("100k") + 1}, err               # too long: refused, the rest go on
    assert notes == {1, names.index("surrogates") + 1}, err          # not UTF-8 on stdin: U+FFFD, with a note
    for i, name in enumerate(names):
        if name in ("empty", "100k"):
            assert out[i] == "", name


def test_cli_text_too_long_or_with_lone_surrogates(ckpt_root, tmp_path, capsys):
    """In-process: 100,000 characters do not fit in one argv entry (the kernel caps it at 128 KiB)."""
    from viz_transformer.cli import main
    args = ["trace", "--checkpoint", str(ckpt_root / "tiny-lm"), "--out", str(tmp_path / "t.npz"), "--text"]
    assert main(args + [HOSTILE["100k"]]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["error: the text has 100,000 characters; the limit is 20,000"], err
    assert main(args + [HOSTILE["surrogates"]]) == 0                 # argv's undecodable bytes: U+FFFD
    assert "not valid UTF-8" in capsys.readouterr().err and (tmp_path / "t.npz").exists()


@pytest.mark.slow          # a subprocess
def test_cli_text_argument_with_undecodable_bytes(ckpt_root):
    r = subprocess.run([sys.executable.encode(), b"-m", b"viz_transformer", b"generate", b"--checkpoint",
                        str(ckpt_root / "tiny-lm").encode(), b"--max-new-tokens", b"3", b"--text", b"Once \xff upon"],
                       capture_output=True, env=ENV, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and b"not valid UTF-8" in r.stderr, r.stderr
    assert r.stdout.decode().startswith("Once \ufffd upon") or r.stdout.decode().startswith("Once")
