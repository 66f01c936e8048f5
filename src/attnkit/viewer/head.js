"use strict";
// The head view: queries on the left, keys on the right, a line per weight (bertviz's head view),
// each head in its colour when heads are compared; hover or click a token to follow its lines.
(window.attnkitViews = window.attnkitViews || {}).head = function (lib) {
  const {
    $, html, el, state, draw, example, queries, keys, shown, heads, matrixOf, rowScale, area, clamp, textWidth,
    layerName, FAMILY, HEAD_COLOURS, ONE_COLOUR
  } = lib;
  function drawChips() {
    const box = $("head-chips"); box.innerHTML = "";
    const mean = $("head").querySelector("option[value=mean]");  // the sidebar names what is drawn
    if (mean) mean.textContent = state.apart ? "the heads chosen, apart" : "average of heads";
    const h = heads(), nk = keys(example(), state.kind).length;
    if (nk > LONG) html("span", { class: "mode", id: "long-note" }, box, `a long input (${nk} keys): each query's ${LINES_PER_QUERY} strongest keys are drawn`);
    minimumControl(box);
    if (h === 1) return;
    // a toggle: filled when on (the chosen heads drawn apart), outlined when off (their average)
    const apart = html("button", { type: "button", id: "apart", "aria-pressed": String(!!state.apart),
                                   title: "draw the chosen heads apart, each in its colour; off: their average" }, box,
                       "heads apart");
    apart.style.borderColor = "#475467";
    if (state.apart) { apart.classList.add("on"); apart.style.background = "#475467"; }
    apart.addEventListener("click", () => {
      state.apart = !state.apart;
      if (!state.apart) { state.head = "mean"; state.chips = new Set([...Array(h).keys()]); }
      else if (state.head === "mean") state.chips = new Set([...Array(h).keys()]);
      $("head").value = state.head;
      draw();
    });
    for (let i = 0; i < h; i++) {
      const c = state.apart ? HEAD_COLOURS[i % HEAD_COLOURS.length] : ONE_COLOUR;
      const b = html("button", { type: "button", "data-head": i }, box, `head ${i}`);
      b.style.borderColor = c;
      if (state.chips.has(i)) { b.classList.add("on"); b.style.background = c; } else b.style.color = c;
      b.addEventListener("click", () => {
        if (state.apart) {  // toggle this head in or out of the comparison
          if (state.chips.has(i) && state.chips.size > 1) state.chips.delete(i); else state.chips.add(i);
          state.head = state.chips.size === 1 ? [...state.chips][0] : "mean";
        } else {  // one head, or (clicked again) back to the average
          state.head = state.head === i ? "mean" : i;
          state.chips = new Set(state.head === "mean" ? [...Array(h).keys()] : [i]);
        }
        $("head").value = state.head;
        draw();
      });
    }
    const ex = example();
    const made = ex.prompt_length != null ? ex.tgt_in_tokens.length - ex.prompt_length : 0;
    if (made > 0)
      html("span", { class: "mode generated" }, box, `italic, in orange: the ${made === 1 ? "token" : `${made} tokens`} the model generated after the prompt.`);
    html("span", { class: "mode" }, box, state.apart
      ? "each head in its colour; click heads to add or remove them"
      : state.head === "mean" ? `the average of ${h} heads; click a head to see it alone` : `head ${state.head} alone; click it again for the average`);
  }

  function minimumControl(box) {  // lines weaker than this are not drawn
    const label = html("label", { class: "mode", id: "min-weight-label", title: "lines of a smaller weight are not drawn" }, box,
                       "hide lines under ");
    const range = html("input", { type: "range", id: "min-weight", min: "0", max: "0.3", step: "0.01", value: String(state.minWeight) }, label);
    const value = html("span", {}, label, state.minWeight.toFixed(2));
    range.addEventListener("input", () => { state.minWeight = +range.value; value.textContent = state.minWeight.toFixed(2); drawLines(); });
  }

  function drawKey() {  // what a line's width and strength say, under the lines
    const svg = $("lines-key"), x = 8, y = 13, font = "12px";
    svg.innerHTML = "";
    const g = el("g", { class: "key" }, svg);
    const label = el("text", { x: x, y: y, "font-size": font, fill: "#667085", "dominant-baseline": "middle" }, g);
    label.textContent = state.scale === "row" ? "line: weight ÷ its query's largest" : "line: weight";
    let at = x + textWidth([label.textContent], `${font} ${FAMILY}`) + 14;
    for (const o of [0.1, 0.25, 0.5, 1]) {  // grey when each head has its own colour
      el("line", { x1: at, y1: y, x2: at + 44, y2: y, stroke: state.apart && heads() > 1 ? "#475467" : ONE_COLOUR, "stroke-width": lineWidth(o),
                   "stroke-opacity": lineOpacity(o, 1).toFixed(3) }, g);
      const t = el("text", { x: at + 50, y: y, "font-size": font, fill: "#667085", "dominant-baseline": "middle" }, g);
      t.textContent = String(o);
      at += 50 + textWidth([t.textContent], `${font} ${FAMILY}`) + 18;
    }
  }
  // a line's width and opacity grow with the square root of its weight: steep at small weights, so that a
  // weight of 0.05 reads clearly beside 0.01 and the faintest line drawn stays visible
  const lineOpacity = (o, heads) => Math.min(1, (heads > 1 ? 0.25 : 0.3) + (heads > 1 ? 0.65 : 0.7) * Math.sqrt(o));
  const lineWidth = (o) => (1 + 4 * Math.sqrt(o)).toFixed(2);

  function drawLines() {
    const ex = example(), q = queries(ex, state.kind), k = keys(ex, state.kind);
    const rows = shown(q), cols = shown(k);
    const svg = $("lines"); svg.innerHTML = "";
    const room = area(), n = Math.max(rows.length, cols.length);
    const row = clamp(Math.floor((room.h - 160) / n), 16, 56), top = 10;  // the rows share the pane's height
    const size = clamp(Math.round(row * 0.5), 11, 18), font = `${size}px ${FAMILY}`;
    const wq = textWidth(rows.map((i) => q[i]), font) + 18, wk = textWidth(cols.map((j) => k[j]), font) + 18;
    const gap = clamp(room.w - wq - wk - 8, 160, 1200);
    svg.setAttribute("width", Math.max(wq + gap + wk, 420));
    svg.setAttribute("height", top * 2 + row * n);
    svg.style.fontSize = `${size}px`;
    const yq = (r) => top + row * (r + 0.5), yk = (c) => top + row * (c + 0.5);
    const g = el("g", {}, svg);
    const layers = state.apart && heads() > 1 ? [...state.chips].sort((a, b) => a - b) : [state.head];
    const colIndex = new Map(cols.map((j, c) => [j, c]));
    let held = 0, total = 0;  // the weight the drawn keys hold, of all (a long input draws only the strongest)
    // heads drawn apart fan out a few pixels each, so that two heads on the same pair show as two
    // parallel lines in their colours instead of blending into a third colour
    const fan = layers.length > 1 ? Math.min(7, row / (2 * layers.length)) : 0;  // a strong line is 5 px wide
    for (const [slot, h] of layers.entries()) {
      const W = matrixOf(state.layer, h), div = rowScale(W, rows, cols);
      const stroke = state.apart && heads() > 1 ? HEAD_COLOURS[h % HEAD_COLOURS.length] : ONE_COLOUR;
      const dy = fan * (slot - (layers.length - 1) / 2);
      rows.forEach((i, r) => {
        const drawn = strongest(W[i], cols);
        if (cols.length > LONG) { for (const j of drawn) held += W[i][j]; for (const j of cols) total += W[i][j]; }
        drawn.forEach((j) => {
        const c = colIndex.get(j), o = W[i][j] / div[r];
        if (o < state.minWeight || o <= 0) return;
        const opacity = lineOpacity(o, layers.length);
        el("line", { x1: wq, y1: yq(r) + dy, x2: wq + gap, y2: yk(c) + dy, stroke: stroke, "stroke-width": lineWidth(o),
                     "stroke-opacity": opacity.toFixed(3), "data-q": i, "data-k": j, "data-h": h,
                     "data-o": opacity.toFixed(3) }, g);
        });
      });
    }
    drawKey();
    const { byToken, drawLabels } = labelTokens(svg, g, ex, { q, k, rows, cols, wq, gap, yq, yk, row, font });
    const pane = document.querySelector("main");
    const note = $("long-note");
    if (note && total > 0) note.textContent += `: on average they hold ${(100 * held / total).toFixed(0)} % of a query's attention`;
    pane.onscroll = () => {
      if (state.tab === "head" && svg.band && svg.band[0] !== -Infinity) { drawLabels(); svg.focus = null; applyFocus(); }
    };
    svg.byToken = byToken; svg.focus = null;
    focusOnHover(svg);
    applyFocus();
  }

  function labelTokens(svg, g, ex, m) {  // each token's label, and the lines that meet it (g's), by token
    const { q, k, rows, cols, wq, gap, yq, yk, row, font } = m;
    // Labels: every token's, or for a long input only those near the visible part of the pane (drawn
    // again as it scrolls), so that the page lays out a few hundred labels, not thousands.
    const byToken = new Map();  // "q3" / "k5" -> its lines, where its label goes, and the label once drawn
    const place = (tokens, idx, x, anchor, side, y) => idx.forEach((i, r) => {
      byToken.set(`${side}${i}`, { text: null, lines: [], x: x, y: y(r), anchor: anchor, row: row, font: font, token: tokens[i], i: i, side: side });
    });
    place(q, rows, wq - 8, "end", "q", yq);
    place(k, cols, wq + gap + 8, "start", "k", yk);
    for (const line of g.children) {
      byToken.get(`q${line.dataset.q}`).lines.push(line);
      byToken.get(`k${line.dataset.k}`).lines.push(line);
    }
    const labels = el("g", {}, svg), pane = document.querySelector("main"), all = [...byToken.values()];
    const drawLabels = () => {
      let lo = -Infinity, hi = Infinity;
      if (all.length > 2 * LONG) {
        const offset = svg.getBoundingClientRect().top - pane.getBoundingClientRect().top;
        lo = -offset - 600; hi = -offset + pane.clientHeight + 600;
        if (svg.band && lo >= svg.band[0] && hi <= svg.band[1]) return;  // what is in sight is drawn
        lo -= 1200; hi += 1200;
      }
      svg.band = [lo, hi];
      labels.innerHTML = "";
      for (const e of all) {
        e.text = null;
        if (e.y < lo || e.y > hi) continue;
        const t = el("text", { x: e.x, y: e.y, "text-anchor": e.anchor, "data-side": e.side, "data-i": e.i }, labels);
        t.textContent = e.token;
        if (ex.prompt_length != null && e.i >= ex.prompt_length) t.classList.add("generated");  // written by the model
        e.text = t;
      }
    };
    svg.band = null;
    drawLabels();
    return { byToken, drawLabels };
  }

  function focusOnHover(svg) {  // a token's lines in focus while the pointer is on its label; a click pins it
    const target = (e) => (e.target.tagName === "text" && e.target.dataset.side ? { side: e.target.dataset.side, i: +e.target.dataset.i } : null);
    svg.onmouseover = (e) => { const t = target(e); if (t) { state.hover = t; applyFocus(); } };
    svg.onmouseout = (e) => { if (target(e)) { state.hover = null; applyFocus(); } };
    svg.onclick = (e) => {
      const t = target(e);
      if (!t) return;
      const same = state.pinned && state.pinned.side === t.side && state.pinned.i === t.i;
      state.pinned = same ? null : t;
      applyFocus();
      if (state.tab === "neuron") lib.draw();
    };
  }

  // A long input's head view draws each query's strongest keys only: all its lines could not be read.
  const LONG = 128, LINES_PER_QUERY = 4;
  function strongest(row, cols) {
    if (cols.length <= LONG) return cols;
    const top = [];  // the LINES_PER_QUERY largest, kept sorted (descending)
    for (const j of cols) {
      const v = row[j];
      if (top.length < LINES_PER_QUERY || v > row[top[top.length - 1]]) {
        top.push(j); top.sort((a, b) => row[b] - row[a]);
        if (top.length > LINES_PER_QUERY) top.pop();
      }
    }
    return top;
  }

  // Focus changes attributes only: the drawing stays, so the pointer never loses its token. Only the
  // focused token's own lines and text change (the rest are dimmed by one class on the drawing), so
  // hovering costs the same with 20 tokens or 2,000.
  const key = (p) => (p ? `${p.side}${p.i}` : null);  // a token, whichever drawing's object stands for it
  function applyFocus() {
    const svg = $("lines"), byToken = svg.byToken;
    if (!byToken) return;
    const f = state.hover || state.pinned;
    const was = svg.focus ? byToken.get(svg.focus) : null, now = f ? byToken.get(key(f)) : null;
    if (was && svg.focus !== key(f)) { if (was.text) was.text.classList.remove("active"); for (const l of was.lines) l.classList.remove("active"); }
    if (now) { if (now.text) now.text.classList.add("active"); for (const l of now.lines) l.classList.add("active"); }
    svg.classList.toggle("focused", !!now);
    svg.focus = now ? key(f) : null;
    for (const t of svg.querySelectorAll("text.pinned")) t.classList.remove("pinned");
    let pin = svg.querySelector("rect.pin");
    const pinned = state.pinned ? byToken.get(key(state.pinned)) : null;
    if (pinned) {
      if (pinned.text) pinned.text.classList.add("pinned");
      const w = textWidth([pinned.token], pinned.font) + 8;
      if (!pin) { pin = el("rect", { class: "pin", rx: 3 }, null); svg.insertBefore(pin, svg.firstChild); }
      const attrs = { x: pinned.anchor === "end" ? pinned.x - w + 4 : pinned.x - 4, y: pinned.y - pinned.row / 2 + 1, width: w,
                      height: pinned.row - 2, "data-side": state.pinned.side, "data-i": state.pinned.i, visibility: "visible" };
      for (const a in attrs) pin.setAttribute(a, attrs[a]);
    } else if (pin) pin.remove();
    $("readout").textContent = f ? focusText(f) : "";
  }
  function focusText(f) {
    const ex = example(), q = queries(ex, state.kind), k = keys(ex, state.kind);
    const chosen = [...state.chips].sort((a, b) => a - b);
    const single = state.head !== "mean" ? state.head : state.apart && chosen.length === 1 ? chosen[0] : "mean";
    const W = matrixOf(state.layer, single);
    const which = single !== "mean" ? `head ${single}` : "average of heads";
    // the focused token's (other token, weight) pairs in matrix M, and the n strongest of them
    const pairs = (M) => (f.side === "q" ? Array.from(M[f.i], (w, j) => [`${k[j]} (${j})`, w]) : M.map((r, i) => [`${q[i]} (${i})`, r[f.i]]));
    const top = (M, n, sep) => pairs(M).sort((a, b) => b[1] - a[1]).slice(0, n).map(([t, w]) => `${t} ${w.toFixed(2)}`).join(sep);
    const pin = state.pinned && key(f) === key(state.pinned) ? " (pinned; click again to release)" : "";
    const who = f.side === "q" ? `“${q[f.i]}” (query ${f.i}) looks at` : `who looks at “${k[f.i]}” (key ${f.i})`;
    if (state.apart && state.head === "mean" && chosen.length > 1) {  // what each drawn head does, in its colour's order
      const each = chosen.map((h) => `head ${h}: ${top(matrixOf(state.layer, h), 2, ", ")}`).join(" · ");
      return `${who}, per head: ${each} — layer ${layerName(state.layer)}${pin}`;
    }
    return `${who}: ${top(W, 4, " · ")} — ${which}, layer ${layerName(state.layer)}${pin}`;
  }

  return { tabs: { head: () => { drawChips(); drawLines(); } } };
};
