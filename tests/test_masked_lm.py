"""The masked LM (BERT) our training code makes: its tokenizer's [MASK], [CLS] and [SEP], BERT's masking counted
against its definition, the fill-in score against a full recompute, and a tiny run end to end (trains, resumes,
records its playback, loads, fills a blank)."""
from __future__ import annotations

import json

import pytest
import torch

import viz_transformer.training.train as T
from viz_transformer import load_checkpoint
from viz_transformer.cli import main as cli_main
from viz_transformer.core.tokenizer import Tokenizer, one_piece_per_cjk_character
from viz_transformer.run.fill_mask import fill_blanks
from viz_transformer.training import masked_lm as M
from viz_transformer.training.snapshots import load_training_snapshots

from test_core_train import OBJ, SUBJ, VERB, cpu_only, pairs_tsv  # noqa: F401  (fixtures)

SENTENCES = [f"{s}{v}{o}。" for s, _, _ in SUBJ for v, _ in VERB for o, _ in OBJ] + \
    [f"{se} {ve}{agr} {oe}." for _, se, agr in SUBJ for _, ve in VERB for _, oe in OBJ]


@pytest.fixture(scope="module")
def tok():
    t = Tokenizer.train(SENTENCES * 3, 300, masked_lm=True)
    return Tokenizer(one_piece_per_cjk_character(t.model_proto))


def test_the_tokenizer_names_bert_pieces_and_masks_take_the_space_before_them(tok):
    assert [tok.sp.id_to_piece(i) for i in range(5)] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert tok.mask_id == 4 and tok.mask_token == "[MASK]" and tok.sep_token == "[SEP]"
    plain = tok.encode("He likes cats.")
    masked = tok.encode("He likes [MASK].")
    # the blank stands where "▁cats" stood: no lone ▁ before it, the full stop after it untouched
    assert masked[:-2] == plain[: len(masked) - 2] and masked[-2] == tok.mask_id and masked[-1] == plain[-1]
    assert tok.encode("[MASK] likes cats.")[0] == tok.mask_id
    ids, types = tok.encode_pair("我喜欢茶。", "I like tea.")
    a, b = tok.encode("我喜欢茶。"), tok.encode("I like tea.")
    assert ids == [tok.bos_id] + a + [tok.eos_id] + b + [tok.eos_id]
    assert types == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert tok.split_pair("我喜欢茶。 [SEP] I like tea.") == ("我喜欢茶。", "I like tea.")
    assert tok.split_pair("[SEP] alone") == ("[SEP] alone", None)


def test_a_translation_tokenizer_has_no_mask(tok):
    plain = Tokenizer.train(SENTENCES * 3, 300, sep=True)
    assert plain.mask_id is None and plain.sep_token is None
    assert plain.split_pair("a [SEP] b") == ("a [SEP] b", None)


def test_masking_follows_bert(tok):
    g = torch.Generator().manual_seed(0)
    rows = [[tok.bos_id] + tok.encode(s) + [tok.eos_id] for s in SENTENCES] * 40
    x, y = M.mask_rows(rows, tok, g)
    orig = torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows], batch_first=True,
                                           padding_value=tok.pad_id)
    chosen = y != tok.pad_id
    special = torch.isin(orig, torch.tensor(sorted(tok.specials)))
    assert not (chosen & special).any()                           # [CLS], [SEP] and padding are never chosen
    assert chosen.any(1).all()                                    # every row scores at least one piece
    assert torch.equal(y[chosen], orig[chosen])                   # the target is the piece that stood there
    assert torch.equal(x[~chosen], orig[~chosen])                 # nothing else changes
    n = (~special).sum(1).double()            # a row where the 15% draw picks nothing gets one piece
    expected = (M.RATE * n + (1 - M.RATE) ** n).sum() / n.sum()
    assert abs(float(chosen.sum() / n.sum()) - float(expected)) < 0.01
    as_mask = (x[chosen] == tok.mask_id).float().mean()
    kept = (x[chosen] == orig[chosen]).float().mean()
    assert abs(float(as_mask) - 0.8) < 0.04 and abs(float(kept) - 0.1) < 0.04


def test_the_blank_is_a_word_piece_and_the_same_every_time(tok):
    for s in SENTENCES:
        ids, pos, hidden = M.blank(tok, s)
        assert ids[pos] == tok.mask_id and ids[0] == tok.bos_id and ids[-1] == tok.eos_id
        assert [i for k, i in enumerate(ids) if k != pos] == [tok.bos_id] + \
            [i for k, i in enumerate(tok.encode(s)) if k != pos - 1] + [tok.eos_id]
        assert tok.encode(s)[pos - 1] == hidden
        assert tok.sp.id_to_piece(hidden).strip("\u2581") not in ("", ".", "。")
        assert M.blank(tok, s) == (ids, pos, hidden)
    assert M.blank(tok, "。。。") is None


def test_fill_accuracy_equals_a_full_recompute(tok):
    from viz_transformer.core.config import ModelConfig
    from viz_transformer.core.model import Transformer
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=tok.vocab_size, architecture="encoder_only", n_encoder_layers=1,
                      n_decoder_layers=0, d_model=32, n_heads=2, d_ff=64, head="mlm", norm="post",
                      positional="learned", embed_norm=True, type_vocab_size=2, scale_embeddings=False, max_len=64)
    model = Transformer(cfg).eval()
    got = M.fill_accuracy(model, tok, SENTENCES, batch_size=7)          # batches pad rows of different lengths
    top1 = top5 = 0
    for s in SENTENCES:                                                 # one sentence at a time, every logit
        ids, pos, hidden = M.blank(tok, s)
        with torch.no_grad():
            logits = model(torch.tensor([ids]))[0, pos]
        order = logits.argsort(descending=True)[:5].tolist()
        top1 += order[0] == hidden
        top5 += hidden in order
    assert got == {"top1": round(top1 / len(SENTENCES), 4), "top5": round(top5 / len(SENTENCES), 4),
                   "n": len(SENTENCES)}


def mlm_args(data, root, epochs=3):
    return ["--task", "mlm", "--data", str(data), "--out", str(root / "out"), "--work", str(root / "work"),
            "--vocab-size", "300", "--cjk-chars", "--architecture", "encoder_only", "--n-encoder-layers", "2",
            "--head", "mlm", "--norm", "post", "--positional", "learned", "--embed-norm", "--type-vocab-size", "2",
            "--activation", "gelu", "--no-scale-embeddings", "--d-model", "32", "--n-heads", "2", "--d-ff", "64",
            "--max-len", "48", "--dropout", "0", "--epochs", str(epochs), "--batch-size", "8", "--n-test", "6",
            "--n-val", "6", "--warmup", "5", "--lr", "3e-3", "--label-smoothing", "0", "--threads", "1",
            "--snapshot-bleu-n", "6"]


@pytest.mark.train
def test_a_masked_lm_trains_resumes_records_and_fills_blanks(tmp_path, pairs_tsv, capsys):
    assert T.main(mlm_args(pairs_tsv, tmp_path, epochs=2)) == 0
    capsys.readouterr()
    assert T.main(mlm_args(pairs_tsv, tmp_path, epochs=5)) == 0        # more epochs: continue, not restart
    assert "after epoch 2" in capsys.readouterr().err
    info = json.loads((tmp_path / "work" / "state.json").read_text())
    hist = info["history"]
    assert [h["epoch"] for h in hist] == [1, 2, 3, 4, 5]
    assert hist[-1]["train_loss"] < hist[0]["train_loss"]
    assert set(hist[0]) >= {"top1_zh", "top5_zh", "top1_en", "top5_en", "top5"}
    hm = load_checkpoint(tmp_path / "out")
    assert hm.cfg.architecture == "encoder_only" and hm.cfg.head == "mlm" and hm.cfg.n_decoder_layers == 0
    assert hm.meta["val"] == info["best"] and hm.meta["task"] == "mlm"
    assert set(hm.meta["test"]) >= {"top5_zh", "top5_en"} and hm.meta["plateau"]["metric"] == "top5"
    assert hm.meta["test"] == M.fill_scores(hm.model, hm.tokenizer, T.TASKS["mlm"](
        T.TrainConfig(data=str(pairs_tsv), n_test=6, n_val=6), {}).test)
    capsys.readouterr()
    assert cli_main(["evaluate", "--checkpoint", str(tmp_path / "out")]) == 0     # the command docs/models.md gives
    printed = json.loads(capsys.readouterr().out)
    assert printed == {**hm.meta["test"], "split": "test"}
    run = hm.run("我喜欢[MASK]。")
    assert run.src_pieces[0] == "[CLS]" and run.src_pieces[-1] == "[SEP]"
    blanks = fill_blanks(hm, run)
    assert len(blanks) == 1 and len(blanks[0].top) == 5
    assert " ".join(hm.tokenizer.pieces([blanks[0].top_ids[0]])) == hm.meta["demo"].get("我喜欢[MASK]。",
                                                                                       " ".join(blanks[0].top[0][:1]))
    snaps = load_training_snapshots(tmp_path / "out")
    assert snaps.metric == "fill_top5" and snaps.steps[0] == 0 and snaps.architecture == "encoder_only"
    assert snaps.texts == M.SNAPSHOT_TEXTS and all(0 <= b <= 100 for b in snaps.bleu)
    assert snaps.src_pieces[0][0] == "[CLS]"
    pattern = snaps.pattern(-1, 0, "encoder.0.self_attn.hook_pattern")
    assert pattern.shape[0] == 2 and torch.allclose(pattern.sum(-1), torch.ones(pattern.shape[:-1]), atol=1e-2)
