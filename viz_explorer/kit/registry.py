"""The pages, in sidebar order, and the tabs of the pages that have them: the one list app.py builds the
navigation from, lessons name pages by, and lazy tabs are keyed by. No streamlit import, so the lesson
file format can check a lesson against it anywhere.

A page's name is its address (`/attention`) and what a lesson step's "page" says; its file lives in
viz_explorer/pages/<group>/. To add a page: write the script there, add one PageSpec here, add its title
string ("nav.NAME") to viz_explorer/kit/strings.py and strings_zh.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PAGES_DIR = Path(__file__).resolve().parents[1] / "pages"


@dataclass(frozen=True)
class PageSpec:
    name: str          # url path and lesson page name
    file: str          # the script, relative to viz_explorer/pages/
    title: str         # strings key of its title
    icon: str          # a material icon name
    keys: tuple[str, ...] = ()     # its own session-state keys' prefixes: what a failure of the page resets


SECTIONS: dict[str, tuple[PageSpec, ...]] = {        # strings key of the group -> its pages
    "nav.sec.look": (
        PageSpec("overview", "look/overview.py", "nav.overview", "info", ("ov_", "pc_")),
        PageSpec("attention", "look/attention.py", "nav.attention", "grid_view", ("at_",)),
        PageSpec("masks", "look/masks.py", "nav.masks", "visibility_off", ("mk_",)),
        PageSpec("positional", "look/positional_encoding.py", "nav.positional", "waves", ("pe_",))),
    "nav.sec.step": (
        PageSpec("step_by_step", "step/step_by_step.py", "nav.steps", "calculate", ("st_",)),
        PageSpec("why", "step/why_attention.py", "nav.why", "lightbulb", ("wy_",)),
        PageSpec("decoding", "step/decoding.py", "nav.decoding", "skip_next", ("dc_", "fb_")),
        PageSpec("lens", "step/logit_lens.py", "nav.lens", "layers", ("ln_", "dc_lens", "fb_"))),
    "nav.sec.experiment": (
        PageSpec("knockout", "experiment/knockout.py", "nav.knockout", "block", ("ko_",)),
        PageSpec("positions", "experiment/positions_on_off.py", "nav.positions", "swap_horiz", ("po_",)),
        PageSpec("compare", "experiment/compare_inputs.py", "nav.compare", "compare", ("cp_",)),
        PageSpec("patching", "experiment/patching.py", "nav.patching", "healing", ("pt_",)),
        PageSpec("architectures", "experiment/compare_architectures.py", "nav.architectures", "account_tree", ("ar_", "nt_")),
        PageSpec("rollout", "experiment/rollout.py", "nav.rollout", "stacked_line_chart", ("ro_",)),
        PageSpec("attribution", "experiment/attribution.py", "nav.attribution", "compare_arrows", ("ab_",)),
        PageSpec("head_stats", "experiment/head_stats.py", "nav.stats", "analytics", ("hs_",))),
    "nav.sec.train": (
        PageSpec("training", "train/attention_over_training.py", "nav.training", "movie", ("tr_",)),
        PageSpec("export", "train/export.py", "nav.export", "download", ("ex_",))),
    "nav.sec.class": (
        PageSpec("lessons", "class/lessons.py", "nav.lessons", "menu_book", ("sh_",)),
        PageSpec("live_class", "class/live_class.py", "nav.live_class", "groups",     # its form: the class survives
                 ("lc_code", "lc_join", "lc_lesson", "lc_start", "lc_nick", "lc_key", "bw_")),),
}
PAGES: tuple[PageSpec, ...] = tuple(p for group in SECTIONS.values() for p in group)
DEFAULT = "overview"

# pages with lazy tabs: page name -> (the tabs' key prefix, the tab names in order)
TABBED: dict[str, tuple[str, tuple[str, ...]]] = {
    "step_by_step": ("st", ("qkv", "scores", "output", "why")),
    "why": ("wy", ("score", "logit", "circuits")),
    "masks": ("mk", ("padding", "causal", "applied")),
    "architectures": ("ar", ("reads", "masks", "rank", "norm")),
}


def spec(name: str) -> PageSpec:
    """A page's spec from its name in the navigation ("attention")."""
    return next(p for p in PAGES if p.name == name)


def page_path(spec: PageSpec) -> str:
    """The script's path as app.py hands it to st.Page: absolute, since an installed app.py is not beside
    viz_explorer/ (viz_explorer/launch.py)."""
    return str(PAGES_DIR / spec.file)
