"""Every page on an encoder-only model: a tiny random BERT with a masked-LM head, saved by
transformers (tests/hf_bert_util.py), run on a sentence pair typed as "A [SEP] B", in English and in Chinese.
No page raises; the attention page draws the encoder's self-attention over the pair's pieces; a page that needs
generation says so in one line; the masks page says attention runs both ways."""
from __future__ import annotations

import html

import pytest

import hf_bert_util as B
from app_util import array, figure, figures, open_app, open_tab, tables
from viz_explorer.kit.registry import PAGES, page_path
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH
from viz_transformer import load_checkpoint

pytestmark = pytest.mark.slow          # transformers builds the model folder

NAME = "tiny-bert"
TEXT = f"{B.PAIR[0]} [SEP] {B.PAIR[1]}"
GENERATING = {"decoding", "positions"}
BLANK = {"knockout": "ko.blank_none", "patching": "pt.blank_none"}       # measured at a [MASK]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert-checkpoints")
    B.build(B.SHAPE_BY_ID["bert-mlm"], root / NAME)
    return root


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_opens_on_a_bert_pair(env, lang):
    table = ZH if lang == "zh" else EN
    for spec in PAGES:
        at = open_app(page_path(spec), ckpt=NAME, text=TEXT, lang=lang)       # asserts no exception
        infos = " ".join(i.value for i in at.info)
        if spec.name in GENERATING:
            needs = table["msg.needs_decoder"].split("{page}")[-1][:12]
            assert needs in infos, (spec.name, infos)
        if spec.name == "lens":                      # the pair has no [MASK]: the page says how to make a blank
            assert table["fb.no_mask"].split("{mask}")[-1][:8] in infos, infos
        if spec.name in BLANK:                       # it measures the prediction at a [MASK]: none here
            assert table[BLANK[spec.name]].format(mask="[MASK]") in infos, infos


def test_attention_page_shows_the_pair_both_ways(env):
    run = load_checkpoint(env / NAME).run(B.PAIR[0], pair=B.PAIR[1])
    assert 1 in run.segments
    at = open_app("viz_explorer/pages/look/attention.py", ckpt=NAME, text=TEXT)
    f = figure(at, "encoder self-attention, layer 0, head 0")
    assert f["data"][0]["x"] == [html.escape(f"{i}:{p}", quote=False) for i, p in enumerate(run.src_pieces)]
    assert EN["rows.encoder_only"] in [c.value for c in at.caption]


def test_masks_page_says_attention_runs_both_ways(env):
    at = open_app("viz_explorer/pages/look/masks.py", ckpt=NAME, text=TEXT)
    open_tab(at, "mk", "causal")
    assert EN["mk.both_ways"] in [i.value for i in at.info]


def test_hiding_the_special_tokens_renormalises_each_row(env):
    """The switch drops [CLS] and [SEP]: each row is the model's weights on the other pieces divided by their sum
    (computed here from the run itself), and the title says these are not the model's own weights."""
    hm = load_checkpoint(env / NAME)
    run = hm.run(B.PAIR[0], pair=B.PAIR[1])
    at = open_app("viz_explorer/pages/look/attention.py", ckpt=NAME, text=TEXT)
    assert "sentence B" in [a["text"] for a in figure(at, "encoder self-attention, layer 0, head 0")["layout"]["annotations"]]
    at.toggle(key="at_no_special").set_value(True).run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    f = figure(at, "encoder self-attention, layer 0, head 0: renormalised without the special tokens — not the "
                   "model's own weights")
    keep = [i for i, p in enumerate(run.src_pieces) if p not in ("[CLS]", "[SEP]")]
    assert f["data"][0]["x"] == [html.escape(f"{i}:{run.src_pieces[k]}", quote=False) for i, k in enumerate(keep)]
    w = run.cache["encoder.0.self_attn.hook_pattern"][0, 0][keep][:, keep].double()
    want = (w / w.sum(-1, keepdim=True)).numpy()
    assert abs(array(f["data"][0]["z"]) - want).max() < 1e-4
    # the line view below draws the same renormalised weights between the same pieces: its links are those of
    # `want` at or above the page's default threshold (the row and column of a link read back from its ends)
    lines = figure(at, "lines from queries (left) to keys (right)")
    queries = next(d["text"] for d in lines["data"] if d.get("mode") == "text")
    assert len(queries) == len(keep)
    n, drawn = len(keep), set()
    for d in lines["data"]:
        if d.get("mode") == "lines":
            drawn |= {(round((1 - d["y"][a]) * (n - 1)), round((1 - d["y"][a + 1]) * (n - 1)))
                      for a in range(0, len(d["y"]), 3)}
    assert drawn == {(i, j) for i in range(n) for j in range(n) if want[i, j] >= 0.05}


def test_lens_page_fills_in_the_blank_layer_by_layer(env):
    from viz_transformer.run.fill_mask import fill_blanks
    hm = load_checkpoint(env / NAME)
    text = "The cat sat on the [MASK]. [SEP] 我爱你。"
    (blank,) = fill_blanks(hm, hm.run(text))
    at = open_app(page_path(next(p for p in PAGES if p.name == "lens")), ckpt=NAME, text=text)
    top, lens = at.dataframe[0].value, at.dataframe[1].value       # the output's best pieces, then every layer
    assert list(top.iloc[:, 0]) == [p for p, _ in blank.top]
    assert len(lens) == hm.cfg.n_encoder_layers + 1 and lens.iloc[0, 1].startswith(blank.top[0][0])



@pytest.mark.parametrize("lang", ["en", "zh"])
def test_overview_draws_an_encoder_alone(env, lang):
    """No decoder: the segment embeddings, the norm over the embeddings, post-norm blocks and the masked-LM head."""
    at = open_app(ckpt=NAME, text=TEXT, lang=lang)
    f = next(f for f in figures(at) if "blocks" in (f["layout"].get("meta") or {}))
    blocks = f["layout"]["meta"]["blocks"]
    assert blocks == ["encoder:" + k for k in ("input", "tok_embed", "pos", "seg", "emb_norm", "self_attn", "add_norm",
                                               "ffn", "add_norm", "mlm_head", "linear", "softmax")]
    table = ZH if lang == "zh" else EN
    texts = {a.get("text") for a in f["layout"]["annotations"]}
    assert f"<b>{table['dg.encoder_only']}</b>" in texts and table["dg.seg"] in texts


def test_compare_page_shows_the_similarity_and_the_heads_that_move(env):
    """The metric is the cosine of transformers' mean-pooled last hidden states (no pooling module: the mean);
    the first row of the heads table is the head whose share of attention on the first piece, the last, itself,
    the previous piece or punctuation moves most, recomputed here from transformers' own attention weights."""
    import torch
    from transformers import AutoTokenizer
    from viz_transformer.analysis.summaries import is_punctuation
    at = open_app(page_path(next(p for p in PAGES if p.name == "compare")), ckpt=NAME, text=TEXT)
    other = at.text_input(key="cp_text_lm").value
    tok, model = AutoTokenizer.from_pretrained(str(env / NAME)), B.load_hf(env / NAME, True)
    outs, pieces = [], []
    for a, b in (B.PAIR, (other, None)):
        enc = tok(a, b) if b else tok(a)
        with torch.no_grad():
            outs.append(model(**{k: torch.tensor([v]) for k, v in enc.items()}, output_attentions=True,
                              output_hidden_states=True))
        pieces.append(tok.convert_ids_to_tokens(enc.input_ids))
    emb = [o.hidden_states[-1][0].mean(0) for o in outs]
    want = float(torch.nn.functional.cosine_similarity(emb[0], emb[1], dim=0))
    assert at.metric[0].value == f"{want:.3f}" and at.metric[0].label == EN["cp.cosine"]
    assert any("mean over the pieces" in c.value for c in at.caption)

    def shares(o, p, layer, head):
        w = o.attentions[layer][0, head].double()                      # [q, k]
        T = w.shape[0]
        punct = torch.tensor([is_punctuation(x) for x in p])
        return {"first_token": w[:, 0].mean(), "last_token": w[:, -1].mean(), "self": w.diagonal().mean(),
                "prev_token": w.diagonal(-1).mean(), "punctuation": w[:, punct].sum(-1).mean() if T else 0}
    best = max(((abs(float(shares(outs[1], pieces[1], l, h)[s] - shares(outs[0], pieces[0], l, h)[s])), l, h)
                for l in range(len(outs[0].attentions)) for h in range(outs[0].attentions[0].shape[1])
                for s in ("first_token", "last_token", "self", "prev_token", "punctuation")))
    table = tables(at)[0]
    assert table.iloc[0, 0] == EN["cp.head_at"].format(layer=best[1], head=best[2])
    assert abs(abs(float(table.iloc[0, 4])) - best[0]) < 0.006


def test_positional_page_shows_the_segment_embeddings(env):
    from safetensors import safe_open
    with safe_open(str(env / NAME / "model.safetensors"), "pt") as f:
        want = f.get_tensor("bert.embeddings.token_type_embeddings.weight")
    at = open_app(page_path(next(p for p in PAGES if p.name == "positional")), ckpt=NAME, text=TEXT)
    f = figure(at, "Segment (token_type) embeddings")
    assert abs(array(f["data"][0]["z"]) - want.numpy()).max() < 1e-6
    assert f["data"][0]["y"] == ["sentence A", "sentence B"]


def test_head_statistics_show_each_head_s_share_on_sep(env):
    """The [SEP] grid: each head's mean weight on the two [SEP] keys, computed here from the run's patterns."""
    hm = load_checkpoint(env / NAME)
    run = hm.run(B.PAIR[0], pair=B.PAIR[1])
    seps = [i for i, p in enumerate(run.src_pieces) if p == "[SEP]"]
    at = open_app(page_path(next(p for p in PAGES if p.name == "head_stats")), ckpt=NAME, text=TEXT)
    f = figure(at, "Each head's share on the closing special pieces ([SEP], 2 in this text)")
    want = [[float(run.cache[f"encoder.{layer}.self_attn.hook_pattern"][0, h][:, seps].sum(-1).mean())
             for h in range(hm.cfg.n_heads)] for layer in range(hm.cfg.n_encoder_layers)]
    assert abs(array(f["data"][0]["z"]) - array(want)).max() < 1e-5


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_overview_fits_an_encoder_only_model(env, lang):
    """Its layers counted in the title, no decoder table, no decoding link, and in place of a continuation the
    masked-LM head's best pieces at the [MASK], equal to transformers' own top 3 there."""
    import torch
    from transformers import AutoTokenizer
    table = ZH if lang == "zh" else EN
    text = "The cat sat on the [MASK]."
    at = open_app(page_path(next(p for p in PAGES if p.name == "overview")), ckpt=NAME, text=text, lang=lang)
    n = B.SHAPE_BY_ID["bert-mlm"].config["num_hidden_layers"]
    layers = table["sidebar.layers_e"].replace("{enc:layer|layers}", "layers").format(enc=n)
    titles = [html.unescape(f["layout"]["title"]["text"].replace("<br>", " ")) for f in figures(at)
              if f["layout"].get("title")]
    assert any(layers in x for x in titles), (layers, titles)
    assert not any("0 layers" in x or "0 层" in x for x in titles)
    assert table["ov.tgt"] not in [m.value.strip("*") for m in at.markdown]
    links = [e.proto.label for e in at.get("page_link")]
    assert not any(table["nav.decoding"] in x for x in links) and any(table["nav.lens"] in x for x in links), links
    assert table["ov.output.encoder_only"] in [h.value for h in at.subheader]
    tok, model = AutoTokenizer.from_pretrained(str(env / NAME)), B.load_hf(env / NAME, True)
    ids = tok(text).input_ids
    with torch.no_grad():
        probs = model(torch.tensor([ids])).logits[0, ids.index(tok.mask_token_id)].softmax(-1)
    p, top = probs.topk(3)
    want = [f"{x:.2f}" for x in p.tolist()]
    shown = [x.value for x in at.text]
    assert any(all(w in line for w in want) for line in shown), (shown, want)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_overview_checks_the_folder_against_transformers_and_keeps_the_badge(env, lang):
    """The button runs run.parity.check; its verdict is the badge, kept for the session's later visits."""
    from viz_transformer.run import parity
    table = ZH if lang == "zh" else EN
    at = open_app(page_path(next(p for p in PAGES if p.name == "overview")), ckpt=NAME, text=TEXT, lang=lang)
    def badges():                                   # st.badge is drawn as Markdown: :green-badge[…]
        return [m.value for m in at.markdown if "-badge[" in m.value]
    assert not badges()
    at.button(key="pc_run").click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    want = parity.check(load_checkpoint(env / NAME))
    assert want.ok and any(":green-badge[" in b and table["pc.ok"] in b for b in badges()), badges()
    numbers = " ".join(c.value for c in at.caption)
    assert f"{want.worst_pattern:.1e}"[-3:] in numbers and str(len(parity.TEXTS)) in numbers, numbers
    at.run()                                          # a later visit: the badge, no button
    assert any(table["pc.ok"] in b for b in badges()) and not [b for b in at.button if b.key == "pc_run"]
