// A student's answer box watcher (class_watch.py): asks the server for the class's stamp every `every` seconds and
// reruns the box (a trigger) when it differs from the stamp the box drew; counts the box's countdown down each
// second and reruns the box when it ends. Each render replaces the previous render's timers, but the asks keep the
// page's first render's beat: a render (a vote, a redraw that ended after the teacher moved) never puts the next
// ask further than `every` seconds from the last one, so the box follows a move within `every` seconds and its run.
export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  const host = parentElement;
  for (const t of host.__vizTimers || []) clearInterval(t);   // clears a pending setTimeout too
  const timers = (host.__vizTimers = []);
  const line = host.querySelector(".left");
  const asked = new Set();           // what this render has asked a rerun for: each at most once
  const rerun = (why) => {
    if (!asked.has(why)) {
      asked.add(why);
      setTriggerValue("changed", why);
    }
  };
  const url = new URL(data.url, window.location.href);
  url.searchParams.set("code", data.code);
  url.searchParams.set("q", data.q);
  const ask = async () => {
    try {
      const r = await fetch(url, { cache: "no-store", credentials: "same-origin" });
      if (!r.ok) return;
      const got = await r.json();
      if (got.stamp !== data.stamp) rerun(got.stamp);
    } catch (e) {
      // the server is restarting or the network dropped: the next ask tries again
    }
  };
  const every = data.every * 1000;
  const beat = (window.__vizWatchBeat ??= performance.now());     // one box a page: its first render's time
  const first = setTimeout(() => {
    ask();
    timers.push(setInterval(ask, every));
  }, every - ((performance.now() - beat) % every));
  timers.push(first);
  if (line) line.textContent = "";
  if (data.left !== null && data.left !== undefined) {
    const end = performance.now() + data.left * 1000;
    const show = () => {
      const sec = Math.max(0, Math.ceil((end - performance.now()) / 1000));
      if (line) line.textContent = sec === 1 ? data.one : data.other.replace("{sec}", String(sec));
      if (sec === 0) rerun("countdown");
    };
    show();
    timers.push(setInterval(show, 250));
  }
  return () => {
    for (const t of timers) clearInterval(t);
  };
}
