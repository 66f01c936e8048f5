"use strict";
// The neuron view (live): one query's scores taken apart, q, each key, q ⊙ k, the scaling, the
// mask, the softmax and the weighted values, recomputed on the server from the model's weights.
(window.attnkitViews = window.attnkitViews || {}).neuron = function (lib) {
  const { $, html, state, example, area, clamp, fmt, diverging, api, live, currentModel } = lib;
  const explainCache = new Map();  // request -> walk-through
  let neuronTicket = 0;  // a neuron view drawn for an older request is dropped
  // a formula's subscripts (h_t, Σ_s, W_aᵀ) set as subscripts, not as underscores; a token is never typeset
  function typeset(el, formula, rest = "") {
    formula.split(/_([A-Za-z0-9]+)/).forEach((part, i) => { if (i % 2) html("sub", {}, el, part); else if (part) el.append(part); });
    if (rest) el.append(rest);
    return el;
  }
  function strip(values, lim, px, dims, what, of = "") {  // the chosen dims of one vector as coloured cells (blue < 0 < red)
    const c = document.createElement("canvas");
    c.width = dims.length; c.height = 1;
    c.style.width = `${dims.length * px}px`; c.style.height = `${stripHeight}px`;
    const ctx = c.getContext("2d");
    dims.forEach((d, x) => { ctx.fillStyle = diverging(values[d] / lim); ctx.fillRect(x, 0, 1, 1); });
    c.addEventListener("mousemove", (e) => {
      const d = dims[clamp(Math.floor((e.clientX - c.getBoundingClientRect().left) / px), 0, dims.length - 1)];
      const readout = $("readout"); readout.textContent = "";
      typeset(readout, what, `${of}, dimension ${d}: ${fmt(values[d])}`);
    });
    c.addEventListener("mouseleave", () => { $("readout").textContent = ""; });
    return c;
  }
  const TOP_DIMS = 32;  // at most this many dimensions of a vector are shown, unless all are asked for
  const MIN_CELL = 11;  // px: a dimension's cell in a strip is at least this wide, to be read ("all" shows every one)
  let stripHeight = 14;  // a vector's cells, px high: set from the pane's height for each walk-through
  function topDims(rows, d) {  // indices of the d dims with the largest sum of |value| over rows, in index order
    const all = [...Array(rows[0].length).keys()];
    if (state.allDims || all.length <= d) return all;
    const weight = all.map((k) => rows.reduce((a, r) => a + Math.abs(r[k] || 0), 0));
    return all.sort((a, b) => weight[b] - weight[a]).slice(0, d).sort((a, b) => a - b);
  }
  const LONE_MARK = /^[,.;:'`"‘’‚“”„\-‐–—|]$/;
  const NEGLIGIBLE = 0.0005, NEGLIGIBLE_RUN = 3;  // a weight below NEGLIGIBLE reads 0.000
  function foldKeys(allowed, weights) {  // which keys keep a row of their own: in the window, and not in a negligible run
    const shown = allowed.slice();
    for (let j = 0; j < shown.length;) {
      let end = j;
      while (shown[end] && weights[end] < NEGLIGIBLE) end++;
      if (end - j >= NEGLIGIBLE_RUN) shown.fill(false, j, end);
      j = Math.max(end, j + 1);
    }
    return shown;
  }
  const named = (tok) => (LONE_MARK.test(tok) ? `“${tok}”` : tok);  // a lone mark quoted, seen as a token
  // a weight to three decimals; one under 0.01 to two significant digits, so that a product of two reads right
  const weight = (x) => (x > 0 && x < 0.01 ? x.toPrecision(2) : fmt(x));
  const absMax = (rows) => Math.max(1e-9, ...rows.flat().filter((x) => x !== null).map(Math.abs));

  async function drawNeuron() {
    const box = $("neuron"); box.innerHTML = "";
    const ticket = ++neuronTicket;
    if (!live) {
      html("p", { class: "note" }, box, "The neuron view recomputes q, k and v from the model's own weights, so it needs the model: " +
           "open this model with `attnkit serve MODEL`, or run `attnkit explain MODEL \"sentence\"` on the command line.");
      return;
    }
    const ex = example();
    const query = state.pinned && state.pinned.side === "q" ? state.pinned.i : 0;
    const head = state.head === "mean" ? Math.min(...state.chips) : state.head;
    const hints = [];  // the walk-through's own heading names the query: say only how to choose another
    if (!(state.pinned && state.pinned.side === "q")) hints.push("click a query token in the head view to choose another query");
    if (state.head === "mean") hints.push(`head ${head} shown: the neuron view shows one head, choose it on the left`);
    const note = html("p", { class: "note" }, box, hints.join("; "));
    const generated = live && currentModel().capabilities.writes === "continuation";  // the prompt is continued again, not forced
    const request = { model: state.model, text: ex.source, target: generated ? null : ex.output || null, kind: state.kind,
                      layer: state.layer, head: head, query: query };
    if (generated) request.max_new_tokens = ex.tgt_in_tokens.length - ex.prompt_length;
    if (ex.image) request.image = ex.image;  // an image model: the image again, as the model saw it
    if (ex.audio) request.audio = ex.audio;  // a speech model: its sound again
    const key = JSON.stringify(request);
    let w = explainCache.get(key);
    if (!w) {
      try { w = await api("/api/explain", request); } catch (err) { note.textContent = String(err.message || err); note.classList.add("error"); return; }
      explainCache.set(key, w);
    }
    if (ticket !== neuronTicket) return;
    renderWalkthrough(box, w);
  }

  function renderWalkthrough(box, w, measured = null) {  // measured: the px the vectors have, once the table is drawn
    const v = layout(box, w, measured), redraw = () => { box.innerHTML = ""; renderWalkthrough(box, w); };
    if (w.d_k > v.kd.length || state.allDims) dimensions(box, w, v, redraw);
    formula(box, w);
    if (w.recurrent && w.p_t !== null && state.showOutside && w.allowed.some((a) => !a)) {
      const fold = html("button", { type: "button", class: "fold" }, box, "fold the keys of weight 0.000");
      fold.addEventListener("click", () => { state.showOutside = false; redraw(); });
    }
    const t = keyTable(box, w, v, () => { state.showOutside = true; redraw(); });
    if (measured === null && t.offsetWidth > 0) {  // the strips take what the numeric columns leave of the pane
      const keyRow = [...t.rows].find((r) => r.querySelectorAll("td.vec canvas").length === v.strips);
      const vectors = keyRow ? [...keyRow.querySelectorAll("td.vec canvas")].reduce((sum, c) => sum + c.offsetWidth, 0) : 0;
      const left = v.pane.w - 8 - (t.offsetWidth - vectors);  // measured before the table is taken down
      box.innerHTML = "";
      renderWalkthrough(box, w, Math.max(v.strips * 8 * 2, left));
      return;
    }
    hint(box, w, v);
  }

  function layout(box, w, measured) {  // which rows, how large their type, which dimensions at how many px each
    // the weighted values a_j v_j on their own scale (with z, their sum): on v's they would be near white
    const weighted = w.recurrent ? w.v : w.v.map((v, j) => v.map((x) => x * w.weights[j]));
    // a local window's keys are the rows that matter: those outside it (weight exactly 0) fold into one row a side,
    // and so does each run of NEGLIGIBLE_RUN or more keys inside it whose weight reads 0.000
    const fold = w.recurrent && w.p_t !== null && !state.showOutside && w.allowed.some((a) => !a);
    const shown = fold ? foldKeys(w.allowed, w.weights) : w.key_tokens.map(() => true);
    const runStart = (j) => !shown[j] && (j === 0 || shown[j - 1] || w.allowed[j] !== w.allowed[j - 1]);
    const rows = shown.filter(Boolean).length + shown.filter((_, j) => runStart(j)).length;
    // the table's rows share the pane's height (a row 19 to 46 px, its text and strips growing with it)
    const pane = area(), rowH = clamp(Math.floor((pane.h - 250) / (rows + 2)), 19, 46);
    // larger type would leave the vectors no room (an RNN's walk-through has two more numeric columns)
    const fontPx = clamp(Math.round(rowH * 0.5), 11, w.recurrent ? 13 : 15);
    stripHeight = rowH - 8;
    box.style.setProperty("--neuron-font", `${fontPx}px`);
    // the vector columns get what the numeric columns leave of the pane: as many dimensions as fit at 11 px or more,
    // at most TOP_DIMS, those of the largest terms (largest Σ_j |term|; for the values, those of z). The numeric
    // columns' width is a guess on the first drawing (less than they take, so that the strips fit); the table is
    // then drawn again with the room it left
    const strips = w.recurrent ? 2 : 3, room = measured ?? pane.w - (w.recurrent ? 40 : 30) * fontPx;
    const fit = clamp(Math.floor(room / strips / MIN_CELL), 8, TOP_DIMS);
    const kd = topDims(w.terms, fit), vd = w.recurrent ? kd : topDims([w.context], fit);
    const px = clamp(Math.floor(room / strips / Math.max(kd.length, vd.length)), 2, 16);
    // the query on its own scale; the keys (an RNN: with c_t, their weighted average) on theirs
    return { weighted, fold, shown, runStart, pane, fontPx, strips, fit, kd, vd, px, qLim: absMax([w.factor ?? w.q]),
             vecLim: absMax(w.k), termLim: absMax(w.terms), vLim: absMax([...weighted, w.context]) };
  }

  function dimensions(box, w, v, redraw) {  // how many dimensions the strips show, and a button for all of them
    const bar = html("div", { class: "dims" }, box);
    // the dimensions' numbers on hover (of the sentence, and of each cell): in full they would take two lines
    const which = `dimensions ${v.kd.join(", ")}` + (w.recurrent ? "" : `; values: dimensions ${v.vd.join(", ")}`);
    // how much of the terms' magnitude the dimensions shown hold: measured, not assumed
    const abs = (rows, dims) => rows.reduce((a, r) => a + dims.reduce((b, d) => b + Math.abs(r[d] || 0), 0), 0);
    const share = Math.round((100 * abs(w.terms, v.kd)) / (abs(w.terms, [...Array(w.d_k).keys()]) || 1));
    const terms = w.recurrent ? w.terms_formula : "q ⊙ k_j";
    typeset(html("span", { title: which }, bar), v.kd.length < w.d_k
      ? `Showing ${v.kd.length} of ${w.d_k} dimensions: those with the largest ${w.recurrent ? "Σ_s" : "Σ_j"} |${terms}| (${share}% of the sum over all ${w.d_k})` +
        (w.recurrent ? "" : `; for the values, the ${v.vd.length} largest |z|`) + ". Hover a cell for its dimension."
      : `Showing all ${w.d_k} dimensions.`);
    const toggle = html("button", { type: "button", id: "all-dims" }, bar, state.allDims ? `the top ${v.fit}` : `all ${w.d_k}`);
    toggle.addEventListener("click", () => { state.allDims = !state.allDims; redraw(); });
  }

  function formula(box, w) {  // the query, and how its weights are computed
    const f = html("div", { class: "formula" }, box);
    f.append(`${w.query_label}`);  // the query's name holds a token: never typeset
    if (w.recurrent) {
      const keys = w.allowed.flatMap((a, j) => (a ? [j] : [])), span = `s ∈ [${keys[0]}, ${keys[keys.length - 1]}]`;
      typeset(f, `. Score e_s = ${w.score}; weights = softmax(e)` +
        (w.gauss ? ` inside the window (${span}) × exp(−(s − p_t)² / (2σ²)) with σ = D/2, p_t = ${fmt(w.p_t, 2)}, D = ${w.window}` :
         w.p_t !== null ? ` inside the window p_t ± D = ${fmt(w.p_t, 2)} ± ${w.window} (${span})` : "") +
        `; c_t = Σ a_s h̄_s. Recomputed weights match the model to ${w.max_error}.`);
    } else {
      typeset(f, `, layer ${w.layer}, head ${w.head}. e_j = q·k_j / √${w.d_k}` +
        (w.bias ? " + positional bias" : "") + `; a = softmax(e); z = Σ a_j v_j. Recomputed weights match the model to ${w.max_error}.`);
    }
  }

  // the query's row: what the score multiplies each key by (an RNN's general score: W_aᵀ h_t, the decoder state
  // through W_a), so that each row of the terms is that strip times the key's
  function queryName(w) { return w.factor ? w.factor_formula : w.recurrent ? "h_t" : "q"; }

  function keyTable(box, w, v, unfold) {  // the query's row, a row per key (or per folded run), the weighted sum's
    const t = html("table", {}, box), head = html("tr", {}, t);
    const masked = w.allowed.some((a) => !a);  // a mask column only where the mask hides a key
    const cols = (w.recurrent
      ? ["key", "s", `${queryName(w)}, h̄_s (encoder states)`, w.terms_formula, "score e_s", v.fold ? "" : "in window", w.gauss ? "softmax (window)" : "", w.gauss ? "Gaussian" : "", "weight a_s"]
      : ["key", "q, k", "q ⊙ k", "q · k", `÷ √${w.d_k}`, w.bias ? "+ bias" : "", masked ? "mask" : "", "softmax a_j",
         v.vd.join() === v.kd.join() ? "a_j v_j" : "a_j v_j (top |z|)"]);
    const vectorColumns = new Set(w.recurrent ? [2, 3] : [1, 2, 8]);  // strips: headed in their middle, set apart
    cols.forEach((c, i) => { if (c) typeset(html("th", vectorColumns.has(i) ? { class: "vec" } : {}, head), c); });
    const n = cols.filter(Boolean).length;
    const qrow = html("tr", { class: "query" }, t);
    // a cross-attention query is the state that predicts its token, not the token's own vector
    typeset(html("td", { class: "token" }, qrow), queryName(w), w.kind === "cross" ? ` (→ ${w.query_token})` : `: ${w.query_token}`);
    if (w.recurrent) html("td", {}, qrow, "");  // the query has no position among the keys
    // the query on its own scale (its size often differs greatly from its keys'), as in `attnkit explain`
    html("td", { class: "vec" }, qrow).appendChild(strip(w.factor ?? w.q, v.qLim, v.px, v.kd, queryName(w)));
    for (let c = w.recurrent ? 3 : 2; c < n; c++) html("td", {}, qrow, "");
    w.key_tokens.forEach((tok, j) => {
      if (v.runStart(j)) foldedRow(t, w, v, j, n, unfold);
      if (v.shown[j]) keyRow(t, w, v, j, masked);
    });
    sumRow(t, w, v, n);
    return t;
  }

  function foldedRow(t, w, v, j, n, unfold) {  // the first key of a folded run: one row that names the run and unfolds it
    let end = j; while (end + 1 < v.shown.length && !v.shown[end + 1] && w.allowed[end + 1] === w.allowed[j]) end++;
    const r = html("tr", { class: "masked folded" }, t), cell = html("td", { colspan: String(n) }, r);
    const names = w.key_tokens.slice(j, end + 1).map(named).join(" "), count = `${end - j + 1} ${end === j ? "key" : "keys"}`;
    const where = !w.allowed[j] ? `${j === 0 ? "before" : "after"} the window` : "in the window";
    cell.append(`${count} ${where} (${names.length > 40 ? names.slice(0, 39) + "…" : names}): ` +
                (w.allowed[j] ? `weights below ${NEGLIGIBLE} ` : "weight 0 "));
    html("button", { type: "button" }, cell, "show them").addEventListener("click", unfold);
  }

  function keyRow(t, w, v, j, masked) {  // one key: its vectors, its score taken apart, its weight
    const tok = w.key_tokens[j], r = html("tr", { class: w.allowed[j] ? "" : "masked" }, t);
    html("td", { class: "token" }, r, named(tok));  // a lone mark quoted: a bare full stop is hardly seen
    if (w.recurrent) html("td", {}, r, String(j));  // its position s: the Gaussian's distance from p_t
    html("td", { class: "vec" }, r).appendChild(strip(w.k[j], v.vecLim, v.px, v.kd, w.recurrent ? "h̄_s" : "k", ` of “${tok}”`));
    html("td", { class: "vec" }, r).appendChild(strip(w.terms[j], v.termLim, v.px, v.kd, w.terms_formula, ` of “${tok}”`));
    html("td", {}, r, fmt(w.raw[j]));
    if (w.recurrent) {
      if (!v.fold) html("td", {}, r, w.allowed[j] ? "yes" : "no");  // folded: every row shown is in the window
      if (w.gauss) {  // the softmax inside the window, before the Gaussian
        html("td", {}, r, w.allowed[j] ? weight(w.in_window[j]) : "–");
        html("td", {}, r, fmt(w.gauss[j]));
      }
    } else {
      html("td", {}, r, fmt(w.raw[j] * w.scale));
      if (w.bias) html("td", {}, r, fmt(w.bias[j]));
      if (masked) html("td", {}, r, w.allowed[j] ? "" : "masked (−∞)");
    }
    const cell = html("td", {}, r), bar = html("span", { class: "bar" }, cell);
    bar.style.width = `${Math.round(5 * v.fontPx * w.weights[j])}px`;
    cell.appendChild(document.createTextNode(weight(w.weights[j])));
    if (!w.recurrent) html("td", { class: "vec" }, r).appendChild(strip(v.weighted[j], v.vLim, v.px, v.vd, "a_j v_j", ` of “${tok}”`));
  }

  function sumRow(t, w, v, n) {  // the weighted sum of the values (c_t or z), and the weights' sum
    const z = html("tr", { class: "sum" }, t), total = fmt(w.weights.reduce((a, b) => a + b, 0));
    if (w.recurrent) {  // c_t lives in the encoder states' space: under them; the weights' sum under the weights
      typeset(html("td", { class: "token" }, z), "c_t = Σ a_s h̄_s");
      html("td", {}, z, "");
      // c_t, a weighted average of the encoder states, on their scale
      html("td", { class: "vec" }, z).appendChild(strip(w.context, v.vecLim, v.px, v.kd, "c_t"));
      for (let c = 3; c < n - 1; c++) html("td", {}, z, "");
      html("td", {}, z, `Σ ${total}`);
    } else {
      typeset(html("td", { class: "token" }, z), "z = Σ a_j v_j");
      for (let c = 1; c < n - 1; c++) html("td", {}, z, c === n - 2 ? `Σ ${total}` : "");
      html("td", { class: "vec" }, z).appendChild(strip(w.context, v.vLim, v.px, v.vd, "z"));
    }
  }

  function hint(box, w, v) {  // the colour scales, what the scaling does, why local-p's weights sum below 1
    const query = queryName(w), keys = w.recurrent ? "the encoder states and c_t (their weighted sum, under them)" : "the keys";
    const values = w.recurrent ? "" : `, the weighted values and z on ±${v.vLim.toFixed(2)}`;
    const p = html("p", { class: "hint" }, box);  // names no token: typeset whole
    typeset(p, `Vectors are coloured blue (negative) to red (positive): ${query} on ±${v.qLim.toFixed(2)} (its own scale), ` +
      `${keys} on ±${v.vecLim.toFixed(2)}, the terms on ±${v.termLim.toFixed(2)}${values}. Each row of “${w.recurrent ? w.terms_formula : "q ⊙ k_j"}” sums` +
      (v.kd.length < w.d_k ? `, over all ${w.d_k} dimensions (${v.kd.length}\u00a0shown),` : "") + " to its score.");
    if (w.gauss) typeset(p, ` The weights are the softmax inside the window times the Gaussian factor, not renormalised, so they sum to ${fmt(w.weights.reduce((a, b) => a + b, 0))}, not 1.`);
    if (!w.recurrent) typeset(p, " Without ÷ √d_k the softmax would saturate: its largest weight would be " +
        `${fmt(Math.max(...w.unscaled_weights.filter((x) => x !== null)))} instead of ${fmt(Math.max(...w.weights))}.`);
  }

  return { tabs: { neuron: drawNeuron }, clear: () => explainCache.clear(), foldKeys };
};
