// The legibility measurer: run in the page (Playwright's page.evaluate), it reads every drawn Plotly chart
// and returns what a reader could not read. Loaded by benchmarks/legibility.py.
//
// Kinds of problem, per chart:
//   squeezed  a subplot's plot area (its .nsewdrag rect) has a side under opts.min px
//   overlap   two visible text labels overlap (their ROTATED boxes, by the separating-axis theorem)
//   outside   a label's corner lies past the chart's edge (the .main-svg inside its stPlotlyChart) by > opts.edge px
//   toolbar   a label under Plotly's toolbar where the toolbar is drawn all the time (a device with no hover: a
//             phone, a tablet; elsewhere it shows only while the pointer is over the chart)
//   legend    a colour bar or legend much taller than the plot it explains (> opts.legendRatio x its height: a
//             default colour bar beside a square heatmap is 6-22% taller, and reads fine)
//   unlabelled on a phone's screen (window.innerWidth <= opts.phone), a heatmap showing at most opts.allKeys keys
//             (the categories of its x axis in view) where a key has no tick label: a phone has no hover to name
//             a column, and thinned labels leave every other key unnamed (a longer axis may thin them)
//
// A label's box: the glyphs' box in the text's own coordinates (getBBox() narrowed to the ink measured by
// canvas measureText, opts.ink), its four corners mapped by getScreenCTM() (so a tick label rotated by 30° is
// a slanted quadrilateral, not its axis-aligned bounds). A multi-line text is one box per line.
(opts) => {
  const o = Object.assign({min: 110, tol: 1, edge: 2, legendTol: 4, legendRatio: 1.0, ink: true, maxLabels: 6,
                          phone: 480, allKeys: 24}, opts || {});
  const clean = s => (s || '').replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
  const R = r => ({x0: r.left, y0: r.top, x1: r.right, y1: r.bottom, w: r.width, h: r.height});
  const round = v => Math.round(v * 10) / 10;

  function visible(el) {
    if (el.checkVisibility && !el.checkVisibility({opacityProperty: true, visibilityProperty: true})) return false;
    for (let e = el; e && e.tagName && e.tagName.toLowerCase() !== 'svg'; e = e.parentNode) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden' || parseFloat(cs.opacity) === 0) return false;
    }
    const cs = getComputedStyle(el);
    if (cs.fill === 'none' || parseFloat(cs.fillOpacity) === 0 || /rgba\([^)]*,\s*0\)$/.test(cs.fill)) return false;
    return true;
  }

  // The glyphs' own box (the ink), not the font's line box: canvas measureText gives, for the same string and
  // font (fallback fonts included), how far the glyphs reach above and below the baseline and left and right
  // of the start. The baseline is the element's y (+ dy); failing that, the line box's bottom less the font's
  // descent. Returns the four corners in screen pixels (mapped by getScreenCTM: rotations included).
  const ctx2d = document.createElement('canvas').getContext('2d');
  function emPx(v, fs) {
    if (!v) return 0;
    const n = parseFloat(v);
    return isNaN(n) ? 0 : (String(v).trim().endsWith('em') ? n * fs : n);
  }
  function quad(node, text) {
    let bb;
    try { bb = node.getBBox(); } catch (e) { return null; }
    if (!bb || bb.width <= 0 || bb.height <= 0) return null;
    const m = text.getScreenCTM();
    if (!m) return null;
    let x0 = bb.x, x1 = bb.x + bb.width, y0 = bb.y, y1 = bb.y + bb.height;
    if (o.ink) {
      const cs = getComputedStyle(node);
      const fs = parseFloat(cs.fontSize) || 12;
      ctx2d.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
      const mt = ctx2d.measureText(node.textContent);
      let base = null;
      if (node === text && !text.querySelector('tspan[y], tspan[dy]') && text.getAttribute('y') !== null)
        base = parseFloat(text.getAttribute('y')) + emPx(text.getAttribute('dy'), fs);
      if (base === null || isNaN(base) || base < bb.y || base > bb.y + bb.height)
        base = bb.y + bb.height - mt.fontBoundingBoxDescent;
      y0 = Math.max(bb.y, base - mt.actualBoundingBoxAscent);
      y1 = Math.min(bb.y + bb.height, base + mt.actualBoundingBoxDescent);
      if (Math.abs(mt.width - bb.width) < 0.1 * bb.width + 2) {     // the same font as drawn: its ink sides too
        x0 = Math.max(bb.x - 1, bb.x - mt.actualBoundingBoxLeft);
        x1 = Math.min(bb.x + bb.width + 1, bb.x + mt.actualBoundingBoxRight);
      }
      if (y1 - y0 < 1 || x1 - x0 < 1) return null;                  // blank (spaces only)
    }
    const pts = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]];
    return pts.map(([x, y]) => { const p = new DOMPoint(x, y).matrixTransform(m); return [p.x, p.y]; });
  }

  function aabb(q) {
    const xs = q.map(p => p[0]), ys = q.map(p => p[1]);
    return {x0: Math.min(...xs), y0: Math.min(...ys), x1: Math.max(...xs), y1: Math.max(...ys)};
  }

  // separating-axis theorem on two convex quadrilaterals: the smallest penetration over the 4 edge normals
  // of each (0 or less: separated)
  function penetration(a, b) {
    let least = Infinity;
    for (const poly of [a, b]) {
      for (let i = 0; i < poly.length; i++) {
        const p = poly[i], q = poly[(i + 1) % poly.length];
        let nx = q[1] - p[1], ny = p[0] - q[0];
        const len = Math.hypot(nx, ny);
        if (len < 1e-9) continue;
        nx /= len; ny /= len;
        let amin = Infinity, amax = -Infinity, bmin = Infinity, bmax = -Infinity;
        for (const v of a) { const d = v[0] * nx + v[1] * ny; amin = Math.min(amin, d); amax = Math.max(amax, d); }
        for (const v of b) { const d = v[0] * nx + v[1] * ny; bmin = Math.min(bmin, d); bmax = Math.max(bmax, d); }
        least = Math.min(least, Math.min(amax, bmax) - Math.max(amin, bmin));
        if (least <= 0) return least;
      }
    }
    return least;
  }

  function kindOf(el) {
    const c = el.closest('.xtick, .ytick, .legend, .colorbar, .annotation, .g-gtitle, .g-xtitle, .g-ytitle, ' +
                         '.heatmaplayer, .textpoint, .infolayer, .plot, .slider-container, .updatemenu-container');
    if (!c) return 'text';
    const cl = c.getAttribute('class') || '';
    if (cl.includes('xtick')) return 'xtick';
    if (cl.includes('ytick')) return 'ytick';
    if (cl.includes('legend')) return 'legend';
    if (cl.includes('colorbar')) return 'colorbar';
    if (cl.includes('annotation')) return 'annotation';
    if (cl.includes('gtitle')) return 'title';
    if (cl.includes('xtitle') || cl.includes('ytitle')) return 'axis-title';
    if (cl.includes('heatmaplayer') || el.closest('.heatmaplayer') || cl.includes('plot') || cl.includes('textpoint'))
      return 'cell';
    return cl.split(' ')[0] || 'text';
  }

  const out = [];
  document.querySelectorAll('[data-testid="stPlotlyChart"]').forEach((ch, index) => {
    const cr = ch.getBoundingClientRect();
    const svg = ch.querySelector('.main-svg');
    if (!svg || cr.width === 0 || cr.height === 0 || !ch.offsetParent) return;     // not drawn, or hidden
    const gd = ch.querySelector('.js-plotly-plot');
    const fl = (gd && gd._fullLayout) || {};
    const sr = svg.getBoundingClientRect();
    const edge = {x0: Math.max(sr.left, cr.left), y0: Math.max(sr.top, cr.top),
                  x1: Math.min(sr.right, cr.right), y1: Math.min(sr.bottom, cr.bottom)};
    const titleEl = ch.querySelector('.gtitle');
    let title = clean((fl.title && fl.title.text) || (titleEl && titleEl.textContent));
    if (!title) {
      const xt = ch.querySelector('.xtitle'), yt = ch.querySelector('.ytitle');
      title = '(untitled) ' + [xt && 'x: ' + xt.textContent, yt && 'y: ' + yt.textContent].filter(Boolean).join(', ');
    }
    const rec = {index, title, width: round(edge.x1 - edge.x0), height: round(edge.y1 - edge.y0),
                 top: round(cr.top + window.scrollY), plots: [], texts: 0, problems: []};

    // -- plot areas ----------------------------------------------------------------------------------------
    const plots = {};
    ch.querySelectorAll('.draglayer .nsewdrag').forEach(d => {
      const id = d.getAttribute('data-subplot') || String(Object.keys(plots).length);
      const r = R(d.getBoundingClientRect());
      plots[id] = r;
      rec.plots.push([id, round(r.w), round(r.h)]);
      if (r.w < o.min || r.h < o.min)
        rec.problems.push({kind: 'squeezed', detail: `plot ${id} is ${round(r.w)}×${round(r.h)} px (< ${o.min})`,
                           labels: []});
    });
    if (!Object.keys(plots).length && fl._plots) {      // no drag layer (a static plot): the axes' own lengths
      for (const [id, p] of Object.entries(fl._plots)) {
        const xa = p.xaxis, ya = p.yaxis;
        if (!xa || !ya || xa.overlaying || ya.overlaying) continue;
        const r = {x0: sr.left + xa._offset, y0: sr.top + ya._offset, w: xa._length, h: ya._length};
        r.x1 = r.x0 + r.w; r.y1 = r.y0 + r.h;
        plots[id] = r;
        rec.plots.push([id, round(r.w), round(r.h)]);
        if (r.w < o.min || r.h < o.min)
          rec.problems.push({kind: 'squeezed', detail: `plot ${id} is ${round(r.w)}×${round(r.h)} px (< ${o.min})`, labels: []});
      }
    }
    // a heatmap held to square cells by scaleanchor (constrain "range") draws in part of its plot area: the
    // drawn image is what the reader gets
    const drawn = {};
    ch.querySelectorAll('.cartesianlayer .subplot').forEach(g => {
      const id = [...g.classList].find(c => plots[c]);
      const imgs = [...g.querySelectorAll('.heatmaplayer image')].map(i => R(i.getBoundingClientRect())).filter(r => r.w > 0 && r.h > 0);
      if (!id || !imgs.length) return;
      const p = plots[id];
      const x0 = Math.max(p.x0, Math.min(...imgs.map(r => r.x0))), x1 = Math.min(p.x1, Math.max(...imgs.map(r => r.x1)));
      const y0 = Math.max(p.y0, Math.min(...imgs.map(r => r.y0))), y1 = Math.min(p.y1, Math.max(...imgs.map(r => r.y1)));
      const r = {x0, x1, y0, y1, w: Math.max(0, x1 - x0), h: Math.max(0, y1 - y0)};
      if (r.w >= p.w - 2 && r.h >= p.h - 2) return;
      drawn[id] = r;
      rec.plots.push([id + ' (heatmap drawn)', round(r.w), round(r.h)]);
      if ((r.w < o.min || r.h < o.min) && p.w >= o.min && p.h >= o.min)
        rec.problems.push({kind: 'squeezed', detail: `heatmap ${id} drawn ${round(r.w)}×${round(r.h)} px (< ${o.min}) ` +
                             `in a ${round(p.w)}×${round(p.h)} plot area`, labels: []});
    });
    const plotList = Object.values(plots);

    // -- labels --------------------------------------------------------------------------------------------
    const labels = [];
    ch.querySelectorAll('.main-svg text').forEach(el => {
      if (el.closest('.hoverlayer')) return;
      const s = clean(el.textContent);
      if (!s || !visible(el)) return;
      const lines = [...el.querySelectorAll('tspan.line')];
      const sub = el.closest('.subplot');
      let inPlot = null;
      if (sub && el.closest('.plot')) {            // drawn inside a subplot's clip: what lies outside is not seen
        const id = [...sub.classList].find(c => plots[c]);
        inPlot = id ? plots[id] : null;
      }
      for (const node of (lines.length > 1 ? lines : [el])) {
        if (!clean(node.textContent)) continue;
        const q = quad(node, el);
        if (!q) continue;
        const box = aabb(q);
        if (inPlot && (box.x1 <= inPlot.x0 || box.x0 >= inPlot.x1 || box.y1 <= inPlot.y0 || box.y0 >= inPlot.y1)) continue;
        labels.push({el, s: lines.length > 1 ? clean(node.textContent) : s, q, box, kind: kindOf(el), clipped: !!inPlot});
      }
    });
    rec.texts = labels.length;

    // text past the chart's edge
    const outside = labels.filter(l => !l.clipped && (l.box.x0 < edge.x0 - o.edge || l.box.y0 < edge.y0 - o.edge ||
                                                    l.box.x1 > edge.x1 + o.edge || l.box.y1 > edge.y1 + o.edge));
    if (outside.length) {
      const by = l => Math.max(edge.x0 - l.box.x0, edge.y0 - l.box.y0, l.box.x1 - edge.x1, l.box.y1 - edge.y1);
      rec.problems.push({kind: 'outside', detail: `${outside.length} label(s) past the chart's edge by up to ` +
                           `${round(Math.max(...outside.map(by)))} px`,
                         labels: outside.slice(0, o.maxLabels).map(l => `${l.kind}: ${l.s}`)});
    }

    // overlapping labels: a uniform grid over the boxes, then the separating-axis test on candidate pairs
    const G = 40, grid = new Map(), pairs = [];
    labels.forEach((l, i) => {
      for (let gx = Math.floor(l.box.x0 / G); gx <= Math.floor(l.box.x1 / G); gx++)
        for (let gy = Math.floor(l.box.y0 / G); gy <= Math.floor(l.box.y1 / G); gy++) {
          const k = gx + ',' + gy;
          if (!grid.has(k)) grid.set(k, []);
          grid.get(k).push(i);
        }
    });
    const seen = new Set();
    for (const cell of grid.values()) {
      for (let a = 0; a < cell.length; a++) for (let b = a + 1; b < cell.length; b++) {
        const i = cell[a], j = cell[b], key = i * 100003 + j;
        if (seen.has(key)) continue;
        seen.add(key);
        const A = labels[i], B = labels[j];
        if (A.el === B.el) continue;                   // the lines of one text
        if (A.box.x1 <= B.box.x0 || B.box.x1 <= A.box.x0 || A.box.y1 <= B.box.y0 || B.box.y1 <= A.box.y0) continue;
        const d = penetration(A.q, B.q);
        if (d > o.tol) pairs.push([A, B, d]);
      }
    }
    if (pairs.length) {
      pairs.sort((p, q) => q[2] - p[2]);
      const kinds = [...new Set(pairs.map(([a, b]) => [a.kind, b.kind].sort().join('/')))];
      rec.problems.push({kind: 'overlap', detail: `${pairs.length} overlapping pair(s) (${kinds.join(', ')}), ` +
                           `deepest ${round(pairs[0][2])} px`,
                         labels: pairs.slice(0, o.maxLabels).map(([a, b, d]) => `${a.s} ⟷ ${b.s} (${round(d)} px)`)});
    }

    // Plotly's toolbar, drawn all the time where there is no hover (modebar--hover is its class where there is)
    const bar = ch.querySelector('.modebar');
    if (bar && !bar.classList.contains('modebar--hover') && bar.checkVisibility({opacityProperty: true, visibilityProperty: true})) {
      const b = R(bar.getBoundingClientRect());
      const under = labels.filter(l => !(l.box.x1 <= b.x0 || b.x1 <= l.box.x0 || l.box.y1 <= b.y0 || b.y1 <= l.box.y0));
      if (under.length)
        rec.problems.push({kind: 'toolbar', detail: `${under.length} label(s) under the toolbar, always drawn here`,
                           labels: under.slice(0, o.maxLabels).map(l => `${l.kind}: ${l.s}`)});
    }

    // -- a colour bar or legend taller than its plot --------------------------------------------------------
    const traces = (gd && gd._fullData) || [];
    const subplotOf = t => (t.xaxis && t.yaxis) ? t.xaxis + t.yaxis : null;
    ch.querySelectorAll('.colorbar').forEach(cb => {
      const bar = cb.querySelector('.cbfills') || cb.querySelector('.cbbg');
      if (!bar) return;
      const r = R(bar.getBoundingClientRect());
      const cls = [...cb.classList].find(c => c.startsWith('cb') && c !== 'colorbar') || '';
      const id = cls.slice(2);
      const own = traces.filter(t => t.uid === id || t.coloraxis === id).map(subplotOf).filter(s => plots[s]);
      const ref = (own.length ? own : Object.keys(plots)).map(s => drawn[s] || plots[s]);
      if (!ref.length) return;
      const h = Math.max(...ref.map(p => p.h));
      if (r.h > h * o.legendRatio + o.legendTol)
        rec.problems.push({kind: 'legend', detail: `colour bar ${round(r.h)} px tall, its plot ${round(h)} px`,
                           labels: [clean(cb.querySelector('.cbtitle') && cb.querySelector('.cbtitle').textContent)]});
    });
    ch.querySelectorAll('.legend .bg').forEach(bg => {
      const r = R(bg.getBoundingClientRect());
      if (!plotList.length || r.h <= 0) return;
      const h = Math.max(...plotList.map(p => p.y1)) - Math.min(...plotList.map(p => p.y0));
      if (r.h > h * o.legendRatio + o.legendTol)
        rec.problems.push({kind: 'legend', detail: `legend ${round(r.h)} px tall, the plots ${round(h)} px`,
                           labels: [...ch.querySelectorAll('.legendtext')].slice(0, o.maxLabels).map(e => clean(e.textContent))});
    });
    // -- a phone: every key of a heatmap with few keys named ----------------------------------------------
    if (window.innerWidth <= o.phone) {
      const done = new Set();
      traces.filter(t => t.type === 'heatmap' && t.visible !== false).forEach(t => {
        const xa = fl[(t.xaxis || 'x').replace(/^x/, 'xaxis')];
        if (!xa || xa.type !== 'category' || done.has(xa._id)) return;
        done.add(xa._id);
        const cats = xa._categories || [], [r0, r1] = [Math.min(...xa.range), Math.max(...xa.range)];
        const inView = cats.map((c, i) => i).filter(i => i >= r0 && i <= r1);
        if (!inView.length || inView.length > o.allKeys) return;
        const named = new Set();          // the category index d3 bound to each drawn, visible tick label
        ch.querySelectorAll(`.${xa._id}tick text`).forEach(el => {
          const d = el.__data__;
          if (d && clean(el.textContent) && visible(el) && quad(el, el)) named.add(Math.round(d.x));
        });
        const missing = inView.filter(i => !named.has(i));
        if (missing.length)
          rec.problems.push({kind: 'unlabelled', detail: `${missing.length} of ${inView.length} keys without a tick ` +
                               `label on a ${window.innerWidth} px screen`,
                             labels: missing.slice(0, o.maxLabels).map(i => clean(String(cats[i])))});
      });
    }
    out.push(rec);
  });
  return out;
}
