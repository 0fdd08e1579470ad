"""The live class's addresses (viz_explorer/server/class_address.py): join links and QR codes are built from
VIZ_PUBLIC_URL when it is set, else from the teacher's page; loopback pages are told apart; no link carries more
than the class code and the language. Expected strings are written out by hand."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from viz_explorer.server import class_address as ca

PAGE = "http://127.0.0.1:8501/live_class"
PUBLIC = {"VIZ_PUBLIC_URL": "http://192.168.1.20:8500"}


def test_the_public_address_wins_over_the_teachers_page():
    assert ca.public_base(PAGE, PUBLIC) == "http://192.168.1.20:8500"
    assert ca.join_link(ca.public_base(PAGE, PUBLIC), "ABCD2345", "zh") == \
        "http://192.168.1.20:8500/live_class?class=ABCD2345&lang=zh"


def test_a_public_address_under_a_path_and_with_a_trailing_slash():
    env = {"VIZ_PUBLIC_URL": " https://school.example.org/viz/ "}
    assert ca.join_link(ca.public_base(PAGE, env), "ABCD2345", "en") == \
        "https://school.example.org/viz/live_class?class=ABCD2345&lang=en"


@pytest.mark.parametrize("env", [{}, {"VIZ_PUBLIC_URL": ""}, {"VIZ_PUBLIC_URL": "   "}])
def test_unset_falls_back_to_the_teachers_page(env):
    assert ca.public_url(env) is None
    assert ca.public_base("http://10.0.0.5:8501/base/live_class/", env) == "http://10.0.0.5:8501/base"
    assert ca.public_base("http://10.0.0.5:8501/", env) == "http://10.0.0.5:8501"


@pytest.mark.parametrize("bad", ["192.168.1.20:8500", "ftp://host/", "http://", "http://h/?a=1", "http://h/#x",
                                 "javascript:alert(1)"])
def test_a_malformed_public_address_is_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="VIZ_PUBLIC_URL") as e:
        ca.public_url({"VIZ_PUBLIC_URL": bad})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("url,loop", [
    ("http://localhost:8501/live_class", True), ("http://LOCALHOST:8501", True), ("http://app.localhost/", True),
    ("http://127.0.0.1:8501/live_class", True), ("http://127.8.9.10/", True), ("http://[::1]:8501/", True),
    ("http://0.0.0.0:8501/", True), ("http://192.168.1.20:8501/", False), ("https://school.example.org/", False),
    ("http://[fe80::1]:8501/", False), ("http://localhost.example.org/", False), ("", False), (None, False)])
def test_loopback_addresses(url, loop):
    assert ca.is_loopback(url) is loop


def test_the_warning_only_when_unset_and_on_loopback():
    assert ca.needs_warning(PAGE, {})
    assert ca.needs_warning("http://localhost:8501/live_class", {"VIZ_PUBLIC_URL": ""})
    assert not ca.needs_warning(PAGE, PUBLIC)
    assert not ca.needs_warning("http://192.168.1.20:8501/live_class", {})


def test_the_teachers_page_and_links_carry_no_secret():
    teacher = ca.teacher_page("http://h:1", "ABCD2345", "en")
    assert teacher == "http://h:1/live_class?teach=ABCD2345&lang=en"
    assert set(parse_qs(urlsplit(teacher).query)) == {"teach", "lang"}
    assert set(parse_qs(urlsplit(ca.join_link("http://h:1", "ABCD2345", "en")).query)) == {"class", "lang"}
    assert ca.link("http://h:1/", "/", lesson="a b&c", step=2, me=None) == "http://h:1/?lesson=a+b%26c&step=2"
