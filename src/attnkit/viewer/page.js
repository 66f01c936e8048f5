"use strict";
// attnkit's attention page. One script draws both the static viewer (`attnkit view`: the
// sentences are in the page) and the live studio (`attnkit serve`: DATA.live lists the
// models, sentences come from /api/translate). No library, nothing fetched but our own API.
(function () {
  const DATA = JSON.parse(document.getElementById("attnkit-data").textContent);
  const LIVE = DATA.live;
  const KIND_LABEL = { encoder: "encoder self-attention", decoder: "decoder self-attention", cross: "cross-attention (output → source)" };
  const SPECIAL = new Set(DATA.special || []);  // data.tokenizer.SPECIAL_LABELS
  const HEAD_COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777",
                        "#4b5563", "#65a30d", "#7c3aed", "#0d9488", "#b45309", "#be123c", "#1d4ed8", "#15803d"];
  const SVG = "http://www.w3.org/2000/svg";
  const FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  const FONT = `13px ${FAMILY}`;
  const SMALL = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  const $ = (id) => document.getElementById(id);
  const state = { example: 0, kind: null, layer: 0, head: "mean", chips: new Set(), apart: false, scale: "abs",
                  hideSpecial: false, pinned: null, hover: null, tab: "head", model: null, allDims: false, zoom: null };
  const ONE_COLOUR = "#2563eb";  // lines of one head, or of the average: per-head colours only when heads are apart
  let examples = DATA.examples || [];
  let modelInfo = DATA.model || {};
  const explainCache = new Map();
  let neuronTicket = 0;  // a neuron view drawn for an older request is dropped

  // ---- small helpers -------------------------------------------------------------------
  const rgb = viridis;  // colours.js
  const colour = (x) => { const c = rgb(x); return `rgb(${c[0]},${c[1]},${c[2]})`; };
  function diverging(x) {  // -1 blue .. 0 white .. 1 red
    x = Math.max(-1, Math.min(1, x));
    const a = Math.abs(x), end = x < 0 ? [33, 102, 172] : [178, 24, 43];
    return `rgb(${end.map((v) => Math.round(255 + a * (v - 255))).join(",")})`;
  }
  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function html(tag, attrs, parent, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function option(select, value, text) { html("option", { value: value }, select, text); }
  const measurer = document.createElement("canvas").getContext("2d");
  function textWidth(tokens, font) {
    measurer.font = font;
    return Math.ceil(Math.max(0, ...tokens.map((t) => measurer.measureText(t).width)));
  }
  const fmt = (x, d = 3) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));
  const clamp = (x, lo, hi) => Math.max(lo, Math.min(hi, x));
  function area() {  // the room the view has: the main pane, less its padding
    const m = document.querySelector("main");
    return { w: Math.max(320, m.clientWidth - 32), h: Math.max(240, m.clientHeight - 24) };
  }
  function modelText(info) {  // what the model is, in words: never a class name
    if (!info) return "";
    const name = info.name ? `${info.name}: ` : "";
    if (info.arch === "rnn")
      return `${name}${String(info.cell || "rnn").toUpperCase()} ${info.hidden}, Luong ${info.attention} attention (${info.score} score` +
        (info.window !== undefined ? `, D = ${info.window})` : ")");
    const parts = [];
    if (info.arch === "transformer") parts.push("Transformer");
    else if (info.arch) parts.push(info.arch === "bert" ? "BERT-style encoder" : info.arch);
    if (info.layers !== undefined) parts.push(`${info.layers} layers`);
    if (info.d_model !== undefined) parts.push(`d_model ${info.d_model}`);
    if (info.heads !== undefined) parts.push(`${info.heads} heads`);
    if (info.positions) parts.push(`${info.positions} positions`);
    if (info.step !== undefined) parts.push(`step ${info.step}`);
    return name + parts.join(" · ");
  }

  // ---- packed maps (a static page): each layer unpacked when it is first shown ------------
  function heads16(fixed, H, Q, K) {  // uint16 weight x 65535 -> heads x rows (Float32Array views)
    const all = new Float32Array(fixed.length);
    for (let i = 0; i < fixed.length; i++) all[i] = fixed[i] / 65535;
    const heads = [];
    for (let h = 0; h < H; h++) {
      const rows = [];
      for (let q = 0; q < Q; q++) rows.push(all.subarray((h * Q + q) * K, (h * Q + q + 1) * K));
      heads.push(rows);
    }
    return heads;
  }
  function unpackLayer(b64, H, Q, K) {  // at once, when a layer is needed before it was unpacked ahead
    const bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return heads16(new Uint16Array(bytes.buffer), H, Q, K);
  }
  function unpack(ex) {
    if (ex.remote && !ex.headCount) {  // a long input: its maps stay on the server (long.js asks for views)
      ex.headCount = {}; ex.ahead = [];
      for (const kind in ex.remote) { ex.maps[kind] = new Array(ex.remote[kind][0]).fill(null); ex.headCount[kind] = ex.remote[kind][1]; }
    }
    if (!ex.packed || ex.layerIds) return ex;
    ex.layerIds = {}; ex.headCount = {}; ex.ahead = [];
    for (const kind in ex.packed) {
      const p = ex.packed[kind], [, H, Q, K] = p.shape, layers = [], done = [];
      p.data.forEach((b64, n) => {
        Object.defineProperty(layers, n, { enumerable: true, get() { return done[n] || (done[n] = unpackLayer(b64, H, Q, K)); } });
        // ahead of need: the browser decodes the base64 off the main thread (a data: URL fetched)
        ex.ahead.push(async () => {
          if (done[n]) return;
          const buffer = await (await fetch(`data:application/octet-stream;base64,${b64}`)).arrayBuffer();
          if (!done[n]) done[n] = heads16(new Uint16Array(buffer), H, Q, K);
        });
      });
      ex.maps[kind] = layers; ex.layerIds[kind] = p.layers; ex.headCount[kind] = H;
    }
    return ex;
  }
  async function unpackAhead() {  // after the first drawing, every layer of every sentence, one at a time
    for (const ex of examples) {
      unpack(ex);
      for (const job of ex.ahead || []) {
        try { await job(); } catch (err) { return; }  // unpacked when shown instead
      }
    }
  }
  function layerName(i, kind = state.kind) {  // a page may hold only some layers: their real indices
    const ids = example().layerIds;
    return ids && ids[kind] ? ids[kind][i] : i;
  }
  function layerCount(kind = state.kind) {  // of the model (a page may hold fewer)
    const p = example().packed;
    return p && p[kind] ? p[kind].shape[0] : example().maps[kind].length;
  }

  // ---- what is shown -------------------------------------------------------------------
  function example() { return unpack(examples[state.example]); }
  function queries(ex, kind) { return kind === "encoder" ? ex.src_tokens : kind === "decoder" ? ex.tgt_in_tokens : ex.tgt_out_tokens; }
  function keys(ex, kind) { return kind === "decoder" ? ex.tgt_in_tokens : ex.src_tokens; }
  function shown(tokens) {  // indices of the tokens drawn
    const all = tokens.map((_, i) => i);
    if (!state.hideSpecial) return all;
    const kept = all.filter((i) => !SPECIAL.has(tokens[i]));
    return kept.length ? kept : all;
  }
  function heads() {
    const ex = example();
    return ex.headCount ? ex.headCount[state.kind] : ex.maps[state.kind][state.layer].length;
  }
  const means = new WeakMap();  // a layer's heads -> their average, computed once
  function matrixOf(layer, head) {
    const maps = example().maps[state.kind][layer];
    if (head !== "mean") return maps[head];
    if (!means.has(maps)) means.set(maps, meanOf(maps));
    return means.get(maps);
  }
  function meanOf(maps) {
    const h = maps.length, n = maps[0][0].length, out = [];
    for (let i = 0; i < maps[0].length; i++) {
      const row = new Float32Array(n);
      for (const m of maps) { const src = m[i]; for (let j = 0; j < n; j++) row[j] += src[j]; }
      for (let j = 0; j < n; j++) row[j] /= h;
      out.push(row);
    }
    return out;
  }
  function rowMax(row, cols) { let m = 1e-9; for (const j of cols) if (row[j] > m) m = row[j]; return m; }
  function rowScale(W, rows, cols) {  // divisor per row: 1 (absolute) or the row's largest shown weight
    return rows.map((i) => (state.scale === "row" ? rowMax(W[i], cols) : 1));
  }
  const scaleNote = () => (state.scale === "row" ? "per-query scale: each row ÷ its largest weight" : "absolute scale: weight 0 to 1");

  // ---- selectors -----------------------------------------------------------------------
  function fillSelectors() {
    const ex = example(), kind = $("kind");
    kind.innerHTML = "";
    for (const k of ["encoder", "decoder", "cross"]) if (ex.maps[k]) option(kind, k, KIND_LABEL[k]);
    if (!ex.maps[state.kind]) {
      state.kind = ex.maps.cross ? "cross" : Object.keys(ex.maps)[0];
      state.layer = ex.maps[state.kind].length - 1;
    }
    kind.value = state.kind;
    fillLayerHead();
  }
  function fillLayerHead() {
    const maps = example().maps[state.kind], layer = $("layer"), head = $("head");
    layer.innerHTML = ""; head.innerHTML = "";
    const total = layerCount();
    for (let i = 0; i < maps.length; i++) {
      const name = layerName(i);
      option(layer, i, name === total - 1 && total > 1 ? `${name} (last)` : String(name));
    }
    state.layer = Math.min(state.layer, maps.length - 1);
    layer.value = state.layer;
    const h = heads();
    if (h > 1) option(head, "mean", "average of heads");
    for (let i = 0; i < h; i++) option(head, i, h === 1 ? "0 (the only head)" : String(i));
    if (h === 1) state.head = 0;
    else if (state.head !== "mean" && state.head >= h) state.head = "mean";
    head.value = state.head;
    state.chips = new Set(state.head === "mean" ? [...Array(h).keys()] : [state.head]);
  }

  // ---- head view -----------------------------------------------------------------------
  function drawChips() {
    const box = $("head-chips"); box.innerHTML = "";
    const h = heads(), nk = keys(example(), state.kind).length;
    if (nk > LONG) html("span", { class: "mode", id: "long-note" }, box, `a long input (${nk} keys): each query's ${LINES_PER_QUERY} strongest keys are drawn`);
    if (h === 1) return;
    const apart = html("button", { type: "button", id: "apart", title: "show the chosen heads apart, each in its colour" }, box,
                       state.apart ? "heads apart" : "average");
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
    if (ex.prompt_length != null && ex.tgt_in_tokens.length > ex.prompt_length)
      html("span", { class: "mode generated" }, box, `italic: the ${ex.tgt_in_tokens.length - ex.prompt_length} token(s) the model generated after the prompt`);
    html("span", { class: "mode" }, box, state.apart
      ? "each head in its colour; click heads to add or remove them"
      : state.head === "mean" ? `the average of ${h} heads; click a head to see it alone` : `head ${state.head} alone; click it again for the average`);
  }

  function drawLines() {
    const ex = example(), q = queries(ex, state.kind), k = keys(ex, state.kind);
    const rows = shown(q), cols = shown(k);
    const svg = $("lines"); svg.innerHTML = "";
    const room = area(), n = Math.max(rows.length, cols.length);
    const row = clamp(Math.floor((room.h - 90) / n), 16, 32), top = 10;
    const size = clamp(Math.round(row * 0.62), 11, 16), font = `${size}px ${FAMILY}`;
    const wq = textWidth(rows.map((i) => q[i]), font) + 18, wk = textWidth(cols.map((j) => k[j]), font) + 18;
    const gap = clamp(room.w - wq - wk - 8, 160, 720);
    svg.setAttribute("width", wq + gap + wk);
    svg.setAttribute("height", top * 2 + row * n);
    svg.style.fontSize = `${size}px`;
    const yq = (r) => top + row * (r + 0.5), yk = (c) => top + row * (c + 0.5);
    const g = el("g", {}, svg);
    const layers = state.apart && heads() > 1 ? [...state.chips].sort((a, b) => a - b) : [state.head];
    const colIndex = new Map(cols.map((j, c) => [j, c]));
    let held = 0, total = 0;  // the weight the drawn keys hold, of all (a long input draws only the strongest)
    // heads drawn apart fan out a few pixels each, so that two heads on the same pair show as two
    // parallel lines in their colours instead of blending into a third colour
    const fan = layers.length > 1 ? Math.min(3, row / (2 * layers.length)) : 0;
    for (const [slot, h] of layers.entries()) {
      const W = matrixOf(state.layer, h), div = rowScale(W, rows, cols);
      const stroke = state.apart && heads() > 1 ? HEAD_COLOURS[h % HEAD_COLOURS.length] : ONE_COLOUR;
      const dy = fan * (slot - (layers.length - 1) / 2);
      rows.forEach((i, r) => {
        const drawn = strongest(W[i], cols);
        if (cols.length > LONG) { for (const j of drawn) held += W[i][j]; for (const j of cols) total += W[i][j]; }
        drawn.forEach((j) => {
        const c = colIndex.get(j), o = W[i][j] / div[r];
        if (o < 0.03) return;
        const opacity = Math.min(1, 0.12 + (layers.length > 1 ? 0.8 : 0.95) * o);
        el("line", { x1: wq, y1: yq(r) + dy, x2: wq + gap, y2: yk(c) + dy, stroke: stroke, "stroke-width": (1 + 4 * o).toFixed(2),
                     "stroke-opacity": opacity.toFixed(3), "data-q": i, "data-k": j, "data-h": h,
                     "data-o": opacity.toFixed(3) }, g);
        });
      });
    }
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
    const note = $("long-note");
    if (note && total > 0) note.textContent += `: on average they hold ${(100 * held / total).toFixed(0)} % of a query's attention`;
    pane.onscroll = () => {
      if (state.tab === "head" && svg.band && svg.band[0] !== -Infinity) { drawLabels(); svg.focus = null; applyFocus(); }
    };
    svg.byToken = byToken; svg.focus = null;
    const target = (e) => (e.target.tagName === "text" ? { side: e.target.dataset.side, i: +e.target.dataset.i } : null);
    svg.onmouseover = (e) => { const t = target(e); if (t) { state.hover = t; applyFocus(); } };
    svg.onmouseout = (e) => { if (target(e)) { state.hover = null; applyFocus(); } };
    svg.onclick = (e) => {
      const t = target(e);
      if (!t) return;
      const same = state.pinned && state.pinned.side === t.side && state.pinned.i === t.i;
      state.pinned = same ? null : t;
      applyFocus();
      if (state.tab === "neuron") drawNeuron();
    };
    applyFocus();
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
  function applyFocus() {
    const svg = $("lines"), byToken = svg.byToken;
    if (!byToken) return;
    const f = state.hover || state.pinned, key = (p) => (p ? `${p.side}${p.i}` : null);
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
    const pin = state.pinned && f === state.pinned ? " (pinned; click again to release)" : "";
    const who = f.side === "q" ? `“${q[f.i]}” (query ${f.i}) looks at` : `who looks at “${k[f.i]}” (key ${f.i})`;
    if (state.apart && state.head === "mean" && chosen.length > 1) {  // what each drawn head does, in its colour's order
      const each = chosen.map((h) => `head ${h}: ${top(matrixOf(state.layer, h), 2, ", ")}`).join(" · ");
      return `${who}, per head: ${each} — layer ${layerName(state.layer)}${pin}`;
    }
    return `${who}: ${top(W, 4, " · ")} — ${which}, layer ${layerName(state.layer)}${pin}`;
  }

  // ---- matrix view ---------------------------------------------------------------------
  function setupCanvas(canvas, width, height) {
    const r = window.devicePixelRatio || 1;
    canvas.width = Math.ceil(width * r); canvas.height = Math.ceil(height * r);
    canvas.style.width = `${width}px`; canvas.style.height = `${height}px`;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(r, 0, 0, r, 0, 0);
    return ctx;
  }

  // Cells drawn as pixels: a pixel that covers several cells (a long input, zoomed out) shows the
  // largest of their weights, so a strong weight never disappears between pixels.
  const LUT = (() => { const t = new Uint8ClampedArray(256 * 3); for (let i = 0; i < 256; i++) t.set(rgb(i / 255), 3 * i); return t; })();
  function renderCells(ctx, W, rows, cols, div, view, x, y, w, h) {
    const r = window.devicePixelRatio || 1, pw = Math.max(1, Math.round(w * r)), ph = Math.max(1, Math.round(h * r));
    const img = ctx.createImageData(pw, ph), d = img.data, sy = view.nr / ph, sx = view.nc / pw;
    const c0 = new Int32Array(pw), c1 = new Int32Array(pw);
    for (let px = 0; px < pw; px++) {
      c0[px] = Math.floor(view.c + px * sx);
      c1[px] = Math.min(cols.length, Math.max(c0[px] + 1, Math.floor(view.c + (px + 1) * sx)));
    }
    for (let py = 0; py < ph; py++) {
      const r0 = Math.floor(view.r + py * sy), r1 = Math.min(rows.length, Math.max(r0 + 1, Math.floor(view.r + (py + 1) * sy)));
      for (let px = 0; px < pw; px++) {
        let m = 0;
        for (let rr = r0; rr < r1; rr++) {
          const row = W[rows[rr]], dv = div[rr];
          for (let cc = c0[px]; cc < c1[px]; cc++) { const v = row[cols[cc]] / dv; if (v > m) m = v; }
        }
        const t = 3 * Math.min(255, Math.round(m * 255)), p = 4 * (py * pw + px);
        d[p] = LUT[t]; d[p + 1] = LUT[t + 1]; d[p + 2] = LUT[t + 2]; d[p + 3] = 255;
      }
    }
    ctx.putImageData(img, Math.round(x * r), Math.round(y * r));
  }

  // The matrix: every cell in sight, or (wheel to zoom, drag to pan, double-click for all) a part of it.
  function drawMatrix() {
    const ex = example(), q = queries(ex, state.kind), k = keys(ex, state.kind);
    const rows = shown(q), cols = shown(k);
    const W = matrixOf(state.layer, state.head), div = rowScale(W, rows, cols);
    const room = area(), sin = Math.sin(Math.PI / 3), cos = Math.cos(Math.PI / 3);
    const guess = textWidth([...rows.map((i) => q[i]), ...cols.map((j) => k[j])], SMALL);  // labels at 11 px
    const full = Math.min((room.w - 1.5 * guess - 30) / cols.length, (room.h - guess * sin - 90) / rows.length);
    const view = state.zoom && state.zoom.rows === rows.length && state.zoom.cols === cols.length ? state.zoom
      : { r: 0, c: 0, nr: rows.length, nc: cols.length, rows: rows.length, cols: cols.length };
    state.zoom = view.nr === rows.length && view.nc === cols.length ? null : view;
    const base = Math.min(44, Math.max(full, Math.min(6, 640 / Math.max(rows.length, cols.length))));
    const cell = base * Math.min(rows.length / view.nr, cols.length / view.nc);  // px per cell, zoom included
    const labelled = cell >= 7;
    const font = cell >= 14 ? `${Math.min(14, Math.round(cell * 0.5) + 4)}px ${FAMILY}` : cell >= 10 ? SMALL : `9px ${FAMILY}`;
    const seenRows = rows.slice(view.r, view.r + view.nr), seenCols = cols.slice(view.c, view.c + view.nc);
    const lq = labelled ? textWidth(seenRows.map((i) => q[i]), font) : 0, lk = labelled ? textWidth(seenCols.map((j) => k[j]), font) : 0;
    const left = lq + 10, top = labelled ? Math.ceil(lk * sin + 16) : 8, right = labelled ? Math.ceil(lk * cos + 12) : 8;
    const plotW = cell * view.nc, plotH = cell * view.nr;
    state.pooled = cell < 1;  // a pixel covers several cells: the legend says so
    const width = left + plotW + right, height = top + plotH + 6;
    const canvas = $("matrix"), ctx = setupCanvas(canvas, width, height);
    renderCells(ctx, W, rows, cols, div, view, left, top, plotW, plotH);
    if (labelled) {
      ctx.fillStyle = "#1d2330"; ctx.font = font; ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      seenRows.forEach((i, r) => ctx.fillText(q[i], left - 5, top + (r + 0.5) * cell));
      ctx.textAlign = "left";
      seenCols.forEach((j, c) => {
        ctx.save(); ctx.translate(left + (c + 0.5) * cell, top - 5); ctx.rotate(-Math.PI / 3);
        ctx.fillText(k[j], 0, 0); ctx.restore();
      });
    }
    if (!state.zoom && state.kind === "cross" && ex.p_t && ex.window !== null && ex.window !== undefined) {
      // local attention: the window [p_t - D, p_t + D] of each row, drawn row by row, and p_t itself
      const x = (p) => left + (p - cols[0] + 0.5) * cell, last = cols[cols.length - 1];
      // orange window, white p_t: both stop at the matrix's edge (p_t = S * sigmoid(.) may pass the last key: a triangle);
      // a tick marks an end of the window that lies inside the matrix
      rows.forEach((i, r) => {
        const p = ex.p_t[i], y = top + (r + 0.5) * cell, edge = last + 0.5, start = cols[0] - 0.5;
        const lo = p - ex.window, hi = p + ex.window, tick = Math.max(3, cell / 3);
        const path = () => {
          ctx.beginPath(); ctx.moveTo(x(Math.max(start, lo)), y); ctx.lineTo(x(Math.min(edge, hi)), y);
          for (const end of [lo, hi]) if (end > start && end < edge) { ctx.moveTo(x(end), y - tick); ctx.lineTo(x(end), y + tick); }
          ctx.stroke();
        };
        ctx.strokeStyle = "#111"; ctx.lineWidth = 3.5; path();
        ctx.strokeStyle = "#ff9f1c"; ctx.lineWidth = 2; path();
        ctx.fillStyle = "white"; ctx.strokeStyle = "#111"; ctx.lineWidth = 1; ctx.beginPath();
        const rad = Math.max(2.5, cell / 5);
        if (p <= edge) ctx.arc(x(p), y, rad, 0, 2 * Math.PI);
        else { ctx.moveTo(x(edge), y - rad); ctx.lineTo(x(edge) + rad * 1.6, y); ctx.lineTo(x(edge), y + rad); ctx.closePath(); }
        ctx.fill(); ctx.stroke();
      });
    }
    const at = (e) => {  // the cell under the pointer: (row, column) in rows/cols, or null
      const b = canvas.getBoundingClientRect();
      const c = Math.floor((e.clientX - b.left - left) / cell), r = Math.floor((e.clientY - b.top - top) / cell);
      return r < 0 || c < 0 || r >= view.nr || c >= view.nc ? null : { r: view.r + r, c: view.c + c, fr: r, fc: c };
    };
    canvas.onmousemove = (e) => {
      if (drag) {  // pan by whole cells
        const dr = Math.round((drag.y - e.clientY) / cell), dc = Math.round((drag.x - e.clientX) / cell);
        if (dr || dc) {
          state.zoom = { ...view, r: clamp(drag.view.r + dr, 0, rows.length - view.nr), c: clamp(drag.view.c + dc, 0, cols.length - view.nc) };
          if (state.zoom.r !== view.r || state.zoom.c !== view.c) requestAnimationFrame(drawMatrix);
        }
        return;
      }
      const hit = at(e);
      if (!hit) { $("readout").textContent = ""; return; }
      const i = rows[hit.r], j = cols[hit.c];
      let text = `${q[i]} (${i}) → ${k[j]} (${j}): weight ${W[i][j].toFixed(3)}`;
      if (cell < 1) text += " (zoomed out: a pixel shows the largest weight of the cells it covers)";
      if (state.scale === "row") text += ` (${(W[i][j] / div[hit.r]).toFixed(2)} of its row's largest, ${div[hit.r].toFixed(3)})`;
      if (ex.p_t && state.kind === "cross") text += ` · p_t = ${ex.p_t[i].toFixed(2)}, window ±${ex.window}`;
      $("readout").textContent = text;
    };
    let drag = null;
    canvas.onmousedown = (e) => { if (state.zoom) drag = { x: e.clientX, y: e.clientY, view: view }; };
    canvas.onmouseup = () => { drag = null; };
    canvas.onmouseleave = () => { drag = null; $("readout").textContent = ""; };
    canvas.onwheel = (e) => {  // zoom about the cell under the pointer
      const hit = at(e);
      if (!hit) return;
      e.preventDefault();
      const f = e.deltaY < 0 ? 0.8 : 1.25, aspect = view.nc / view.nr;
      const nr = clamp(Math.round(view.nr * f), Math.min(4, rows.length), rows.length);
      const nc = clamp(Math.round(nr * aspect), Math.min(4, cols.length), cols.length);
      const r = clamp(Math.round(hit.r - (hit.fr / view.nr) * nr), 0, rows.length - nr);
      const c = clamp(Math.round(hit.c - (hit.fc / view.nc) * nc), 0, cols.length - nc);
      state.zoom = { ...view, r: r, c: c, nr: nr, nc: nc };
      drawMatrix();
    };
    canvas.ondblclick = () => { state.zoom = null; drawMatrix(); };
    drawLegend(ex);
  }

  // A colour bar from 0 to ``top`` (a label) with up to two lines of text beside it.
  const BAR = 260;
  function colourBar(canvas, width, top, lines) {
    const ctx = setupCanvas(canvas, width, 44);
    for (let x = 0; x < BAR; x++) { ctx.fillStyle = colour(x / (BAR - 1)); ctx.fillRect(x + 10, 4, 1, 14); }
    ctx.fillStyle = "#1d2330"; ctx.font = SMALL; ctx.textBaseline = "top";
    ctx.textAlign = "left"; ctx.fillText("0", 10, 22);
    ctx.textAlign = "right"; ctx.fillText(top, BAR + 10, 22);
    ctx.textAlign = "left";
    lines.filter((line) => line).slice(0, 2).forEach((line, i) => ctx.fillText(line, BAR + 22, 4 + 18 * i));
  }

  function drawLegend(ex) {
    const shownHead = state.head === "mean" ? (heads() > 1 ? "average of heads" : "one attention") : `head ${state.head}`;
    let text = `layer ${layerName(state.layer)}, ${shownHead}: ` +
      (state.scale === "row" ? "weight ÷ its row's largest (per-query scale)" : "attention weight (absolute)");
    if (state.hideSpecial) text += "; special tokens hidden, rows not renormalised";
    if (state.pooled) text += "; each pixel: the largest weight of the cells it covers";
    const q = queries(ex, state.kind), k = keys(ex, state.kind), z = state.zoom;
    const where = z ? `queries ${z.r}-${z.r + z.nr - 1} of ${z.rows}, keys ${z.c}-${z.c + z.nc - 1} of ${z.cols}: drag to move, wheel to zoom, double-click for all`
      : q.length * k.length > 400 ? "wheel to zoom in, drag to move" : "";
    const second = ex.p_t && state.kind === "cross" && !z ? `orange: the window p_t ± ${ex.window}; white dot: p_t (a triangle: past the last key)`
      : where || (state.head === "mean" && heads() > 1 ? `average of ${heads()} heads` : "");
    colourBar($("legend"), BAR + 640, state.scale === "row" ? "row's largest" : "1", [text, second]);
  }

  // ---- model view ----------------------------------------------------------------------
  function drawModelView() {
    const ex = example(), q = queries(ex, state.kind), k = keys(ex, state.kind);
    const rows = shown(q), cols = shown(k), maps = ex.maps[state.kind];
    const grid = $("model-grid"); grid.innerHTML = "";
    const h = heads(), room = area();
    // thumbnails as large as the pane allows: every head of a layer in one row, every layer in sight if it can be
    const side = clamp(Math.floor(Math.min((room.w - 70) / h, (room.h - 110) / maps.length)) - 8, 64, 200);
    grid.style.gridTemplateColumns = `auto repeat(${h}, ${side + 4}px)`;
    html("div", { class: "axis" }, grid, "");
    for (let j = 0; j < h; j++) html("div", { class: "axis" }, grid, h === 1 ? "the only head" : `head ${j}`);
    maps.forEach((layerMaps, l) => {
      html("div", { class: "axis" }, grid, `layer ${layerName(l)}`);
      layerMaps.forEach((W, j) => {
        const c = html("canvas", { "data-layer": l, "data-head": j, title: `layer ${layerName(l)}, head ${j}` }, grid);
        const div = rowScale(W, rows, cols);
        renderCells(setupCanvas(c, side, side), W, rows, cols, div, { r: 0, c: 0, nr: rows.length, nc: cols.length }, 0, 0, side, side);
        if (l === state.layer && String(j) === String(state.head)) c.classList.add("selected");
        c.addEventListener("mousemove", (e) => {  // the tokens under the pointer
          const b = c.getBoundingClientRect();
          const r = clamp(Math.floor((e.clientY - b.top) / b.height * rows.length), 0, rows.length - 1);
          const cc = clamp(Math.floor((e.clientX - b.left) / b.width * cols.length), 0, cols.length - 1);
          const i = rows[r], jj = cols[cc];
          $("readout").textContent = `layer ${layerName(l)}, head ${j}: ${q[i]} (query ${i}) → ${k[jj]} (key ${jj}): weight ${W[i][jj].toFixed(3)}`;
        });
        c.addEventListener("mouseleave", () => { $("readout").textContent = overview; });
        c.addEventListener("click", () => {
          state.layer = l; state.head = j; state.apart = false; $("layer").value = l; $("head").value = j; state.chips = new Set([j]);
          selectTab("head");
        });
      });
    });
    const held = maps.length < layerCount() ? ` (this page holds ${maps.length} of the model's ${layerCount()} layers)` : "";
    const overview = `${KIND_LABEL[state.kind]}: ${maps.length} layer(s) × ${h} head(s)${held}; ${scaleNote()}`;
    $("readout").textContent = overview;
    const w = 220, ctx = setupCanvas($("model-legend"), w + 420, 34);
    for (let x = 0; x < w; x++) { ctx.fillStyle = colour(x / (w - 1)); ctx.fillRect(x + 10, 2, 1, 12); }
    ctx.fillStyle = "#1d2330"; ctx.font = SMALL; ctx.textBaseline = "top";
    ctx.textAlign = "left"; ctx.fillText("0", 10, 17);
    ctx.textAlign = "right"; ctx.fillText(state.scale === "row" ? "row's largest" : "1", w + 10, 17);
    ctx.textAlign = "left";
    ctx.fillText(state.scale === "row" ? "weight ÷ its row's largest (per-query scale)" : "attention weight (absolute, every thumbnail)", w + 22, 2);
  }

  // ---- neuron view ---------------------------------------------------------------------
  function strip(values, lim, px, dims, what) {  // the chosen dims of one vector as coloured cells (blue < 0 < red)
    const c = document.createElement("canvas");
    c.width = dims.length; c.height = 1;
    c.style.width = `${dims.length * px}px`; c.style.height = "14px";
    const ctx = c.getContext("2d");
    dims.forEach((d, x) => { ctx.fillStyle = diverging(values[d] / lim); ctx.fillRect(x, 0, 1, 1); });
    c.addEventListener("mousemove", (e) => {
      const d = dims[clamp(Math.floor((e.clientX - c.getBoundingClientRect().left) / px), 0, dims.length - 1)];
      $("readout").textContent = `${what}, dimension ${d}: ${fmt(values[d])}`;
    });
    c.addEventListener("mouseleave", () => { $("readout").textContent = ""; });
    return c;
  }
  const TOP_DIMS = 32;  // at most this many dimensions of a vector are shown, unless all are asked for
  function topDims(rows, d) {  // indices of the d dims with the largest sum of |value| over rows, in index order
    const all = [...Array(rows[0].length).keys()];
    if (state.allDims || all.length <= d) return all;
    const weight = all.map((k) => rows.reduce((a, r) => a + Math.abs(r[k] || 0), 0));
    return all.sort((a, b) => weight[b] - weight[a]).slice(0, d).sort((a, b) => a - b);
  }
  const absMax = (rows) => Math.max(1e-9, ...rows.flat().filter((x) => x !== null).map(Math.abs));

  async function drawNeuron() {
    const box = $("neuron"); box.innerHTML = "";
    const ticket = ++neuronTicket;
    if (!LIVE) {
      html("p", { class: "note" }, box, "The neuron view recomputes q, k and v from the model's own weights, so it needs the model: " +
           "open this model with `attnkit serve MODEL`, or run `attnkit explain MODEL \"sentence\"` on the command line.");
      return;
    }
    const ex = example(), q = queries(ex, state.kind);
    const query = state.pinned && state.pinned.side === "q" ? state.pinned.i : 0;
    const head = state.head === "mean" ? Math.min(...state.chips) : state.head;
    const hints = [];  // the walk-through's own heading names the query: say only how to choose another
    if (!(state.pinned && state.pinned.side === "q")) hints.push("click a query token in the head view to choose another query");
    if (state.head === "mean") hints.push(`head ${head} shown: the neuron view shows one head, choose it on the left`);
    const note = html("p", { class: "note" }, box, hints.join("; "));
    const generated = LIVE && currentModel().capabilities.writes === "continuation";  // the prompt is continued again, not forced
    const request = { model: state.model, text: ex.source, target: generated ? null : ex.output || null, kind: state.kind,
                      layer: state.layer, head: head, query: query };
    if (generated) request.max_new_tokens = ex.tgt_in_tokens.length - ex.prompt_length;
    if (ex.image) request.image = ex.image;  // an image model: the image again, as the model saw it
    const key = JSON.stringify(request);
    let w = explainCache.get(key);
    if (!w) {
      try { w = await api("/api/explain", request); } catch (err) { note.textContent = String(err.message || err); note.classList.add("error"); return; }
      explainCache.set(key, w);
    }
    if (ticket !== neuronTicket) return;
    renderWalkthrough(box, w);
  }

  function renderWalkthrough(box, w) {
    const vecLim = absMax([w.q, ...w.k]), termLim = absMax(w.terms), vLim = absMax([...w.v, w.context]);
    // the vector columns get what the numeric columns leave of the pane: as many dimensions as fit at 4 px or more,
    // at most TOP_DIMS, those that decide the scores (largest Σ_j |term|; for the values, those of z)
    const strips = w.recurrent ? 2 : 3, room = area().w - (w.recurrent ? 700 : 560);
    const fit = clamp(Math.floor(room / strips / 4), 8, TOP_DIMS);
    const kd = topDims(w.terms, fit), vd = w.recurrent ? kd : topDims([w.context], fit);
    const px = clamp(Math.floor(room / strips / Math.max(kd.length, vd.length)), 2, 12);
    if (w.d_k > kd.length || state.allDims) {
      const bar = html("div", { class: "dims" }, box);
      html("span", {}, bar, kd.length < w.d_k
        ? `Showing ${kd.length} of ${w.d_k} dimensions: those with the largest Σ_j |${w.terms_formula}|, which decide the scores` +
          (w.recurrent ? "" : ` (values: the ${vd.length} largest |z|)`) + `. Dimensions: ${kd.join(", ")}.`
        : `Showing all ${w.d_k} dimensions.`);
      const toggle = html("button", { type: "button", id: "all-dims" }, bar, state.allDims ? `the top ${fit}` : `all ${w.d_k}`);
      toggle.addEventListener("click", () => { state.allDims = !state.allDims; box.innerHTML = ""; renderWalkthrough(box, w); });
    }
    const f = html("div", { class: "formula" }, box);
    if (w.recurrent) {
      f.textContent = `${w.query_label}. Score e_s = ${w.score}; weights = softmax(e)` +
        (w.gauss ? ` inside the window, × exp(−(s − p_t)² / 2(D/2)²) with p_t = ${fmt(w.p_t, 2)}, D = ${w.window}` :
         w.p_t !== null ? ` inside the window p_t ± D = ${fmt(w.p_t, 2)} ± ${w.window}` : "") +
        `; c_t = Σ a_s h̄_s. Recomputed weights match the model to ${w.max_error}.`;
    } else {
      f.textContent = `${w.query_label}, layer ${w.layer}, head ${w.head}. e_j = q·k_j / √${w.d_k}` +
        (w.bias ? " + positional bias" : "") + `; a = softmax(e); z = Σ a_j v_j. Recomputed weights match the model to ${w.max_error}.`;
    }
    const t = html("table", {}, box), head = html("tr", {}, t);
    const cols = w.recurrent
      ? ["key", "h̄_s (encoder state)", w.terms_formula, "score e_s", "in window", w.gauss ? "softmax" : "", w.gauss ? "Gaussian factor" : "", "weight a_s"]
      : ["key", "k", "q ⊙ k", "q · k", `÷ √${w.d_k}`, w.bias ? "+ bias" : "", "mask", "softmax a_j", "a_j v_j"];
    cols.forEach((c) => { if (c) html("th", {}, head, c); });
    const qrow = html("tr", { class: "query" }, t);
    html("td", { class: "token" }, qrow, w.recurrent ? `h_t: ${w.query_token}` : `q: ${w.query_token}`);
    html("td", {}, qrow).appendChild(strip(w.q, vecLim, px, kd, w.recurrent ? "h_t" : "q"));
    for (let c = 2; c < cols.filter(Boolean).length; c++) html("td", {}, qrow, "");
    const softmaxInWindow = w.gauss ? w.weights.map((a, j) => (w.gauss[j] > 0 ? a / w.gauss[j] : 0)) : null;
    w.key_tokens.forEach((tok, j) => {
      const r = html("tr", { class: w.allowed[j] ? "" : "masked" }, t);
      html("td", { class: "token" }, r, tok);
      html("td", {}, r).appendChild(strip(w.k[j], vecLim, px, kd, `${w.recurrent ? "h̄_s" : "k"} of “${tok}”`));
      html("td", {}, r).appendChild(strip(w.terms[j], termLim, px, kd, `${w.terms_formula} of “${tok}”`));
      html("td", {}, r, fmt(w.raw[j]));
      if (w.recurrent) {
        html("td", {}, r, w.allowed[j] ? "yes" : "no");
        if (w.gauss) { html("td", {}, r, w.allowed[j] ? fmt(softmaxInWindow[j]) : "–"); html("td", {}, r, fmt(w.gauss[j])); }
      } else {
        html("td", {}, r, fmt(w.raw[j] * w.scale));
        if (w.bias) html("td", {}, r, fmt(w.bias[j]));
        html("td", {}, r, w.allowed[j] ? "" : "masked (−∞)");
      }
      const cell = html("td", {}, r), bar = html("span", { class: "bar" }, cell);
      bar.style.width = `${Math.round(60 * w.weights[j])}px`;
      cell.appendChild(document.createTextNode(fmt(w.weights[j])));
      if (!w.recurrent) html("td", {}, r).appendChild(strip(w.v[j].map((v) => v * w.weights[j]), vLim, px, vd, `a_j v_j of “${tok}”`));
    });
    const z = html("tr", { class: "sum" }, t), n = cols.filter(Boolean).length;
    const total = fmt(w.weights.reduce((a, b) => a + b, 0));
    if (w.recurrent) {  // c_t lives in the encoder states' space: under them; the weights' sum under the weights
      html("td", { class: "token" }, z, "c_t = Σ a_s h̄_s");
      html("td", {}, z).appendChild(strip(w.context, vLim, px, kd, "c_t"));
      for (let c = 2; c < n - 1; c++) html("td", {}, z, "");
      html("td", {}, z, `Σ ${total}`);
    } else {
      html("td", { class: "token" }, z, "z = Σ a_j v_j");
      for (let c = 1; c < n - 1; c++) html("td", {}, z, c === n - 2 ? total : "");
      html("td", {}, z).appendChild(strip(w.context, vLim, px, vd, "z"));
    }
    const vectors = w.recurrent ? "h_t and the encoder states" : "q and the keys";
    const values = w.recurrent ? "c_t" : "the weighted values and z";
    html("p", { class: "hint" }, box, `Vectors are coloured blue (negative) to red (positive): ${vectors} on ±${vecLim.toFixed(2)}, ` +
      `the terms on ±${termLim.toFixed(2)}, ${values} on ±${vLim.toFixed(2)}. Each row of “${w.terms_formula}” sums to its score.` +
      (w.recurrent ? "" : " Without ÷ √d_k the softmax would saturate: its largest weight would be " +
        `${fmt(Math.max(...w.unscaled_weights.filter((x) => x !== null)))} instead of ${fmt(Math.max(...w.weights))}.`));
  }

  // ---- attribution (live): what each output token or encoder position draws on, by a method -----
  const attributionCache = new Map();
  async function drawAttribution() {
    const ex = example(), box = $("attribution"), method = $("attr-method").value, side = $("attr-side").value;
    const request = { model: state.model, text: ex.source, method: method, side: side };
    if (ex.image) request.image = ex.image;
    if (ex.prompt_length != null) request.max_new_tokens = ex.tgt_in_tokens.length - ex.prompt_length;
    const key = JSON.stringify(request);
    box.innerHTML = "";
    let r = attributionCache.get(key);
    if (!r) {
      const note = html("p", { class: "note" }, box, "computing…");
      try { r = await api("/api/attribute", request); } catch (err) { note.textContent = String(err.message || err); note.classList.add("error"); return; }
      attributionCache.set(key, r);
      if (state.tab !== "attribution" || $("attr-method").value !== method || $("attr-side").value !== side) return;
      box.innerHTML = "";
    }
    const nr = r.rows.length, nc = r.tokens.length, room = area();
    const rowIdx = [...Array(nr).keys()], colIdx = [...Array(nc).keys()], both = r.rows.concat(r.tokens);
    const cell = clamp(Math.floor(Math.min((room.w - 200) / nc, (room.h - 200) / nr)), 1, 36), labelled = cell >= 7;
    const font = cell >= 14 ? `13px ${FAMILY}` : SMALL, lw = labelled ? textWidth(both, font) + 10 : 6;
    const top = labelled ? Math.ceil(lw * Math.sin(Math.PI / 3)) + 10 : 6;
    const c = html("canvas", { id: "attr-matrix" }, box), ctx = setupCanvas(c, lw + cell * nc + 40, top + cell * nr + 6);
    const peak = Math.max(1e-9, ...r.scores.map((row) => Math.max(...row)));
    const W = r.scores.map((row) => row.map((v) => v / peak));
    renderCells(ctx, W, rowIdx, colIdx, colIdx.map(() => 1), { r: 0, c: 0, nr: nr, nc: nc }, lw, top, cell * nc, cell * nr);
    if (labelled) {
      ctx.fillStyle = "#1d2330"; ctx.font = font; ctx.textBaseline = "middle"; ctx.textAlign = "right";
      r.rows.forEach((t, i) => ctx.fillText(t, lw - 5, top + (i + 0.5) * cell));
      ctx.textAlign = "left";
      r.tokens.forEach((t, j) => { ctx.save(); ctx.translate(lw + (j + 0.5) * cell, top - 5); ctx.rotate(-Math.PI / 3); ctx.fillText(t, 0, 0); ctx.restore(); });
    }
    const row = { output: "output token", encoder: "top-layer position", sentence: "row" }[r.side];
    c.onmousemove = (e) => {
      const b = c.getBoundingClientRect(), j = Math.floor((e.clientX - b.left - lw) / cell), i = Math.floor((e.clientY - b.top - top) / cell);
      $("readout").textContent = i >= 0 && j >= 0 && i < nr && j < nc
        ? (r.side === "encoder" ? `${r.label}: position ${i} “${r.rows[i]}” draws ${r.scores[i][j].toFixed(3)} of itself from “${r.tokens[j]}” (${j})`
          : `${r.label}: ${row} ${i} “${r.rows[i]}” draws ${r.scores[i][j].toFixed(3)} from input token “${r.tokens[j]}” (${j})`) : "";
    };
    colourBar(html("canvas", {}, box), 960, peak.toFixed(3), [
      `${r.label}: share of each ${row} (0 to the largest share, ${peak.toFixed(3)})`,
      `computed in ${r.server_ms} ms (server)`]);
  }

  // ---- an image model: attention over the patches (a captioner: over the regions) ---------
  function drawImageView() {
    const ex = example(), box = $("image-view"); box.innerHTML = "";
    if (!ex.image || !ex.grid) return;
    const [gr, gc] = ex.grid, q = queries(ex, state.kind), k = keys(ex, state.kind);
    const overImage = k.length >= gr * gc && state.kind !== "decoder";  // keys: the patches, after any [CLS]
    if (!overImage) { html("p", { class: "note" }, box, "the decoder attends over the words it has written, not over the image: choose the cross kind"); return; }
    const first = k.length - gr * gc, selfOver = state.kind === "encoder";  // the patches' own attention: queries are patches too
    const query = state.pinned && state.pinned.side === "q" ? Math.min(state.pinned.i, q.length - 1) : 0;
    if (!selfOver) {  // the words of the output as the queries to choose from
      const words = html("div", { class: "chips" }, box);
      q.forEach((t, i) => {
        const b = html("button", { type: "button", class: i === query ? "chip on" : "chip" }, words, t);
        b.addEventListener("click", () => { state.pinned = { side: "q", i: i }; drawImageView(); });
      });
    }
    const row = matrixOf(state.layer, state.head)[query], patches = Array.from(row).slice(first);
    const top = Math.max(1e-9, ...patches), room = area();
    const side = clamp(Math.floor(Math.min((room.w - 80) / 2, room.h - 160)), 160, 520);
    const wrap = html("div", { class: "image-pair" }, box);
    const img = html("img", { src: ex.image, alt: "the image as the model saw it", width: side, height: side }, wrap);
    img.style.imageRendering = "pixelated";
    const c = html("canvas", { id: "patch-heat" }, wrap), ctx = setupCanvas(c, side, side), cell = side / gc, cellH = side / gr;
    patches.forEach((w, p) => {
      ctx.fillStyle = colour(w / top);
      ctx.fillRect((p % gc) * cell, Math.floor(p / gc) * cellH, Math.ceil(cell), Math.ceil(cellH));
    });
    if (selfOver && query >= first) {  // the query patch, outlined
      ctx.strokeStyle = "#ff5a5a"; ctx.lineWidth = 2;
      ctx.strokeRect(((query - first) % gc) * cell + 1, Math.floor((query - first) / gc) * cellH + 1, cell - 2, cellH - 2);
    }
    const at = (e) => {
      const b = c.getBoundingClientRect(), pc = clamp(Math.floor((e.clientX - b.left) / cell), 0, gc - 1);
      return [clamp(Math.floor((e.clientY - b.top) / cellH), 0, gr - 1), pc];
    };
    c.onmousemove = (e) => {
      const [pr, pc] = at(e);
      $("readout").textContent = `${q[query]} → ${selfOver ? "patch" : "region"} ${pr},${pc}: weight ${patches[pr * gc + pc].toFixed(4)}`;
    };
    if (selfOver) c.onclick = (e) => {
      const [pr, pc] = at(e);
      state.pinned = { side: "q", i: first + pr * gc + pc };
      drawImageView();
      $("readout").textContent = `query: patch ${pr},${pc} (pinned; it is the query of the head view and the neuron view too)`;
    };
    const which = state.head === "mean" ? "average of heads" : heads() === 1 ? "its one attention" : `head ${state.head}`;
    const rest = first ? `; its weight on ${k.slice(0, first).join(", ")}: ${Array.from(row).slice(0, first).reduce((x, y) => x + y, 0).toFixed(4)}` : "";
    colourBar(html("canvas", {}, box), 960, top.toFixed(4), [
      `${q[query]}'s attention over the ${gr} x ${gc} ${selfOver ? "patches" : "regions"}, layer ${layerName(state.layer)}, ${which}`,
      `scale: 0 to its largest weight${rest}`]);
  }

  // ---- positions and contextual vectors (live) -----------------------------------------
  function drawPositions() {
    const box = $("positions"); box.innerHTML = "";
    const img = html("img", { alt: `positional scheme of ${state.model}`, src: `/api/positions?model=${encodeURIComponent(state.model)}` }, box);
    img.addEventListener("error", () => { box.innerHTML = ""; html("p", { class: "note" }, box, "this model has no positional scheme to draw"); });
    $("readout").textContent = `positional scheme: ${modelInfo.positions || "none"}`;
  }

  async function drawEmbed() {
    const box = $("embed"); box.innerHTML = "";
    let r;
    try { r = await api("/api/embed", { model: state.model, text: example().source }); }
    catch (err) { html("p", { class: "note" }, box, String(err.message || err)); return; }
    html("div", { class: "formula" }, box, "Cosine similarity of the same word in two places: the token table gives both the same vector; " +
      "after self-attention each occurrence carries its own context.");
    if (!r.repeated.length) { html("p", { class: "note" }, box, "No word occurs twice in this sentence: repeat one to compare its two vectors."); return; }
    const t = html("table", {}, box), head = html("tr", {}, t);
    html("th", {}, head, "pair"); r.depths.forEach((d) => html("th", {}, head, d));
    for (const [i, j] of r.repeated) {
      const row = html("tr", {}, t);
      html("td", { class: "token" }, row, `${r.tokens[i]} (${i}) ~ ${r.tokens[j]} (${j})`);
      r.similarity.forEach((m) => html("td", {}, row, fmt(m[i][j])));
    }
  }

  // ---- tabs and drawing ----------------------------------------------------------------
  function selectTab(tab, redraw = true) {
    state.tab = tab;
    $("readout").textContent = "";
    for (const b of $("tabs").querySelectorAll("button")) b.classList.toggle("selected", b.dataset.tab === tab);
    for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== `tab-${tab}`;
    if (redraw) draw();
  }

  function draw() {
    if (!examples.length) return;
    const ex = example();
    $("src-text").textContent = ex.source;
    $("out-text").textContent = ex.output ? "→ " + ex.output : "";
    const info = modelInfo || {};
    $("model-info").textContent = modelText(info);
    if (ex.remote) { LONG_VIEWS.draw(ex, state.tab); return; }
    $("long-head").hidden = true; $("lines").style.display = "";
    if (state.tab === "head") { drawChips(); drawLines(); }
    else if (state.tab === "model") drawModelView();
    else if (state.tab === "matrix") drawMatrix();
    else if (state.tab === "neuron") drawNeuron();
    else if (state.tab === "positions") drawPositions();
    else if (state.tab === "embed") drawEmbed();
    else if (state.tab === "image") drawImageView();
    else if (state.tab === "attribution") drawAttribution();
  }

  function showExamples(list, info) {
    examples = list; modelInfo = info || {};
    state.example = 0; state.pinned = null; state.hover = null; state.zoom = null;
    $("example-box").hidden = examples.length < 2;
    $("example").innerHTML = "";
    examples.forEach((ex, i) => option($("example"), i, `${i + 1}: ${ex.source.slice(0, 60)}`));
    state.kind = null;
    $("tabs").querySelector("[data-tab=image]").hidden = !examples.some((ex) => ex.image);
    if (state.tab === "image" && !examples.some((ex) => ex.image)) state.tab = "head";
    const remote = examples.some((ex) => ex.remote);  // a long input: the views long.js draws (page.css: body.long)
    document.body.classList.toggle("long", remote);
    if (remote && !LONG_VIEWS.tabs.includes(state.tab)) state.tab = "matrix";
    if (!remote && state.tab === "heads") state.tab = "head";
    selectTab(state.tab, false);
    fillSelectors();
    draw();
  }

  // ---- live studio ---------------------------------------------------------------------
  async function api(path, body) {
    const response = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
    return data;
  }

  // what each kind of model is shown first, by what it writes (an encoder: nothing)
  const EXAMPLE_TEXT = { translation: "Two dogs are playing in the snow.", none: "The bank of the river is not the bank that holds my money.",
                        continuation: "Two dogs are playing in the" };
  const GO = { translation: "Translate", continuation: "Generate", caption: "Caption", none: "Show attention" };

  function currentModel() { return LIVE.models.find((m) => m.name === state.model); }

  function chooseModel(name) {
    state.model = name;
    const m = currentModel(), can = m.capabilities, image = can.reads === "image";
    $("go").textContent = GO[can.writes || "none"];
    for (const id of ["beam", "nbest"]) $(id).parentElement.hidden = can.writes !== "translation";
    $("target").parentElement.hidden = !can.forced || image;
    $("new-tokens").parentElement.hidden = can.writes !== "continuation";
    $("tabs").querySelector("[data-tab=positions]").hidden = !(m.info && m.info.positions) || image;
    $("tabs").querySelector("[data-tab=embed]").hidden = !can.contextual;
    $("tabs").querySelector("[data-tab=image]").hidden = !image;
    const kinds = can.kinds, hasOutput = can.writes !== null;
    $("tabs").querySelector("[data-tab=attribution]").hidden = !can.attributions.length;
    for (const o of $("attr-method").options) o.hidden = !can.attributions.includes(o.value);
    if (!can.attributions.includes($("attr-method").value) && can.attributions.length) $("attr-method").value = can.attributions[0];
    $("attr-side").value = hasOutput ? "output" : "encoder";
    $("attr-side").parentElement.hidden = !kinds.includes("encoder");
    $("attr-side").querySelector("[value=output]").hidden = !hasOutput;  // an encoder's sides: positions, sentence
    $("attr-side").querySelector("[value=sentence]").hidden = hasOutput;
    $("text").hidden = image; $("image-box").hidden = !image;
    $("text").placeholder = `Type a text (up to ${m.max_tokens.toLocaleString("en")} tokens: ${m.max_tokens_by}) and press Enter`;
    $("text").title = `${m.name} takes up to ${m.max_tokens.toLocaleString("en")} tokens here (${m.max_tokens_by} set the limit)`;
    if (["positions", "embed", "image", "attribution"].includes(state.tab)) selectTab("head");
    if (!$("text").value.trim() || Object.values(EXAMPLE_TEXT).includes($("text").value.trim())) $("text").value = EXAMPLE_TEXT[can.writes || "none"] || "";
    explainCache.clear();
  }

  async function submit(target) {
    const m = currentModel(), can = m.capabilities, status = $("status");
    const body = { model: state.model, text: $("text").value, packed: true };  // unpacked here, a layer at a time
    if (can.writes === "translation") { body.beam = +$("beam").value; body.nbest = +$("nbest").value; }
    if (can.forced) {
      const forced = target !== undefined ? target : $("target").value.trim();
      if (forced) body.target = forced;
    }
    if (can.writes === "continuation") body.max_new_tokens = +$("new-tokens").value;
    if (can.reads === "image") {
      const file = $("image-file").files[0];
      if (!file) { $("status").textContent = "choose an image file (PNG or JPEG)"; return; }
      body.text = file.name;
      body.image = await new Promise((resolve, reject) => {
        const reader = new FileReader();
        reader.onload = () => resolve(reader.result); reader.onerror = () => reject(reader.error);
        reader.readAsDataURL(file);
      });
    }
    status.textContent = "working…"; status.classList.remove("error");
    try {
      const r = await api("/api/translate", body);
      const made = r.example.tgt_in_tokens.length - r.example.prompt_length;
      const done = can.writes === "continuation" ? `${made} token(s) generated` + (made < body.max_new_tokens ? " (the model ended its text)" : "")
        : !can.writes ? "attention computed" : r.forced ? `forced ${can.writes} scored` : `${can.writes} found`;
      status.textContent = `${done} in ${r.server_ms} ms (server)`;
      const list = $("nbest-list"); list.innerHTML = "";
      r.nbest.forEach((h, i) => {
        const li = html("li", {}, list, h.text);
        html("span", { class: "score" }, li, `score ${fmt(h.score)}`);
        if (!r.forced && i === 0) li.classList.add("chosen");
        li.title = "show the attention of this translation";
        li.addEventListener("click", () => { $("target").value = h.text; submit(h.text); });
      });
      explainCache.clear();
      r.example.record = r.record;  // what the views of a long input name it by
      showExamples([r.example], m.info);
      unpackAhead();  // the other layers, off the main thread
    } catch (err) {
      status.textContent = String(err.message || err); status.classList.add("error");
    }
  }

  // the views of a long input (long.js), with what they need of this page
  const LONG_VIEWS = window.attnkitLong({ $, html, state, api, area, clamp, setupCanvas, rgb, colourBar, layerName, queries, keys, textWidth,
                                    KIND_LABEL, SMALL, selectTab, live: !!LIVE, example: () => example() });

  // ---- wiring --------------------------------------------------------------------------
  $("example").addEventListener("change", (e) => { state.example = +e.target.value; state.pinned = null; state.zoom = null; fillSelectors(); draw(); });
  $("kind").addEventListener("change", (e) => { state.kind = e.target.value; state.pinned = null; state.zoom = null; state.layer = example().maps[state.kind].length - 1; fillLayerHead(); draw(); });
  $("layer").addEventListener("change", (e) => { state.layer = +e.target.value; draw(); });
  $("head").addEventListener("change", (e) => {
    state.head = e.target.value === "mean" ? "mean" : +e.target.value;
    state.apart = false;
    state.chips = new Set(state.head === "mean" ? [...Array(heads()).keys()] : [state.head]);
    draw();
  });
  $("scale").addEventListener("change", (e) => { state.scale = e.target.value; draw(); });
  $("reduce").addEventListener("change", (e) => { state.reduce = e.target.value; draw(); });
  for (const id of ["attr-method", "attr-side"]) $(id).addEventListener("change", () => { if (state.tab === "attribution") drawAttribution(); });
  $("hide-special").addEventListener("change", (e) => { state.hideSpecial = e.target.checked; draw(); });
  for (const b of $("tabs").querySelectorAll("button")) b.addEventListener("click", () => selectTab(b.dataset.tab));

  if (DATA.steps) {  // training snapshots: the same sentences at every validation
    const slider = $("step"), last = DATA.steps.length - 1;
    const label = () => {
      const st = DATA.steps[+slider.value];
      $("step-label").textContent = `${st.step}` + (st.dev_loss !== undefined ? ` · dev loss ${st.dev_loss.toFixed(3)}` : "") +
        (st.dev_bleu !== undefined ? ` · dev BLEU ${st.dev_bleu.toFixed(1)}` : "") + ` (${+slider.value + 1} of ${last + 1})`;
    };
    $("step-box").hidden = false;
    slider.max = last; slider.value = last; label();
    slider.addEventListener("input", () => { examples = DATA.steps[+slider.value].examples; label(); draw(); });
  }
  if (LIVE) {
    $("live").hidden = false;
    $("tabs").querySelector("[data-tab=positions]").hidden = false;
    LIVE.models.forEach((m) => option($("model"), m.name, `${m.name} (${m.capabilities.summary})`));
    $("model").addEventListener("change", (e) => { chooseModel(e.target.value); submit(); });
    $("live").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
    $("text").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); submit(); } });
    $("example-box").hidden = true;
    chooseModel(LIVE.models[0].name);
    submit();
  } else {
    showExamples(examples, modelInfo);
  }
  // every packed layer unpacked once the first drawing is on screen (a promise, for whoever waits)
  const ahead = new Promise((resolve) => setTimeout(() => unpackAhead().then(resolve), 0));
  let resizing = 0;  // the views are sized to the window: drawn again when it changes size
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { if (["head", "model", "matrix"].includes(state.tab)) draw(); }, 120);
  });
  window.attnkit = { state: state, draw: draw, selectTab: selectTab, ahead: ahead, example: () => examples[state.example] };
})();
