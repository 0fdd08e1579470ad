"""Hostile inputs shared by the library, CLI, app and browser tests: name -> text. `REFUSED` names the
ones the library must refuse with a clear ValueError (and what the message says)."""
from __future__ import annotations

INJECT = {"script": "<script>window.__pwned_script = 1</script>",
          "img": '<img src=x onerror="window.__pwned_img = 1">'}

HOSTILE = {
    "empty": "",
    "whitespace": " \t\n\u3000 \n",
    "100k": "我是学生。" * 20_000,                               # 100,000 characters
    "word5k": "supercalifragilistic" * 250,                     # one 5,000-character word
    "punctuation": "!?.,;:…。，、「」『』—–-()[]{}" * 10,
    "cjk_ext_b": "\U00020000\U00020001\U0002A6D6\U0002B734 𠮷野家",
    "private_use": "\ue000\ue001\uf8ff\U000F0000\U0010FFFD",
    "emoji": "👍🏽 👩🏾‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇨🇳 😀",
    "rtl": "مرحبا بالعالم שלום עולם \u202eevil\u202c",
    "zero_width_control": "a\u200bb\u200c\u200dc\ufeffd\u2060e \x01\x07\x1b[31m\x7f\u0085",
    "nul": "我\x00是\x00学生\x00",
    "html": INJECT["script"] + " " + INJECT["img"],
    "markdown": "**bold** _it_ `code` $$x^2$$ $y$ :material/home: [link](javascript:alert(1)) # head\n---\n> q",
    "surrogates": "a\ud800b\udfffc",
}
REFUSED = {"empty": "empty", "whitespace": "empty", "100k": "20,000", "surrogates": "surrogate"}
