"""Pause pauses and Hide hides, however late the page hears back: the real server and chromium, with the server's
replies held back (a loaded laptop, a slow room network) while the page still shows the button it was drawn with.

Play and Pause were one button whose callback toggled: a second click on a Pause the page still showed (clicked
again because nothing seemed to happen) reached the server after the first had paused, and played again. The test
holds the server's websocket messages while it clicks Pause twice, the second time after the server has finished
the run the first click paused, then lets them through: the page must stay paused where the first click stopped it.
The live class's teacher key had the same toggle: a second click on Hide showed the key again, on the projector.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from browser_util import CHROMIUM, READY, click_once, unfold, no_exception, settle

SENTENCE = "他是我的朋友。"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)")]


class HeldReplies:
    """Between the page and the server's websocket: the page's messages go through at once; the server's wait
    while `hold` is set. Counts the runs the server finished (not the ones it cut short for a rerun) meanwhile."""

    def __init__(self):
        self.hold, self.held, self.finished, self.drawn = False, [], 0, []

    def route(self, ws) -> None:
        self.page_side = ws
        server = ws.connect_to_server()
        ws.on_message(server.send)
        server.on_message(self._reply)

    def _reply(self, message) -> None:
        if not self.hold:
            self.page_side.send(message)
            return
        self.held.append(message)
        msg = ForwardMsg.FromString(message if isinstance(message, bytes) else message.encode())
        if msg.WhichOneof("type") == "script_finished" and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
            self.finished += 1
        if msg.WhichOneof("type") == "delta" and msg.delta.new_element.WhichOneof("type") == "button":
            self.drawn.append((msg.delta.new_element.button.label, msg.delta.new_element.button.disabled))

    def wait_finished(self, pg, n: int, seconds: float = 90) -> None:
        """Until the server has finished n whole runs since the replies were first held (the live class's
        fragment runs are not counted)."""
        for _ in range(int(seconds * 10)):
            if self.finished >= n:
                return
            pg.wait_for_timeout(100)          # lets playwright deliver the websocket events
        raise AssertionError(f"the server finished {self.finished} runs in {seconds} s, not {n}")

    def release(self) -> None:
        self.hold = False
        for message in self.held:
            self.page_side.send(message)
        self.held = []


def test_a_late_second_pause_does_not_play_again(server, page):
    url, root = server
    name = "zh-en" if root.name == "checkpoints" else "tiny-zh-en"
    pg, replies = page, HeldReplies()
    pg.route_web_socket(re.compile(r"/_stcore/stream"), replies.route)
    pg.goto(f"{url}/decoding?checkpoint={name}&text={quote(SENTENCE)}")
    settle(pg)
    main = pg.locator('[data-testid="stMain"]')
    total = int(re.search(r"Step 0 of (\d+)", main.inner_text()).group(1))
    assert total >= 4

    pause = pg.get_by_role("button", name=re.compile("Pause"))
    for _ in range(3):          # under the suite's heaviest load a first Pause can be lost (Play then reaches the end):
        pg.get_by_role("button", name=re.compile("Play")).click()            # start again, at most three times
        pg.get_by_text(re.compile(rf"Step [1-9]\d* of {total}")).wait_for()      # playing, one step a run
        replies.hold, replies.finished, replies.drawn = True, 0, []
        pause.click()
        replies.wait_finished(pg, 1)    # the run the click paused has ended; the page has not heard of it
        if ("Play", False) in replies.drawn:          # paused before the end (the end draws Play disabled)
            break
        replies.release()
        settle(pg)
        pg.get_by_role("button", name=re.compile("Start")).click()
        pg.get_by_text(f"Step 0 of {total}").wait_for()
        settle(pg)
    else:
        raise AssertionError("three first Pauses were lost: Play ran to the end each time")
    pause.click()                       # still drawn: clicked again
    replies.wait_finished(pg, 2)
    replies.release()
    settle(pg)
    paused = int(re.search(rf"Step (\d+) of {total}", main.inner_text()).group(1))
    assert paused < total, "the second Pause played on to the end"
    assert pg.get_by_role("button", name=re.compile("Play")).is_visible()
    pg.wait_for_timeout(2500)           # more than two of Play's steps (0.8 s each)
    assert f"Step {paused} of {total}" in main.inner_text()
    no_exception(pg)


def test_a_late_second_hide_does_not_show_the_teacher_key_again(server, page):
    url, _ = server
    pg, replies = page.context.browser.new_page(viewport={"width": 1366, "height": 768}), HeldReplies()
    pg.route_web_socket(re.compile(r"/_stcore/stream"), replies.route)
    pg.goto(f"{url}/live_class?lang=en")
    pg.wait_for_function(READY)
    pg.get_by_role("button", name="Start a class").click()
    pg.wait_for_url(re.compile(r"teach="))
    pg.get_by_role("button", name="Next step").wait_for()
    unfold(pg, "Your teacher key")
    box = pg.locator('[data-testid="stExpander"]').filter(has_text="Your teacher key")
    key = box.locator('[data-testid="stCode"]')
    click_once(box.get_by_role("button", name="Show the key"), key.first)
    hide = box.get_by_role("button", name="Hide the key")
    replies.hold = True
    hide.click()
    replies.wait_finished(pg, 1)        # the server has hidden the key; the page still shows it, and Hide
    hide.click()
    replies.wait_finished(pg, 2)
    replies.release()
    box.get_by_role("button", name="Show the key").wait_for()
    pg.wait_for_function(READY)
    pg.wait_for_timeout(2500)           # two of the live chart's own reruns
    assert key.count() == 0, "the second Hide showed the key again"
    assert box.get_by_role("button", name="Show the key").is_visible()
    no_exception(pg)
    pg.close()
