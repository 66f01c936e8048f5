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
  const SMALL = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  const LEGEND = "13.5px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";  // a colour bar's words
  const $ = (id) => document.getElementById(id);
  const state = { example: 0, kind: null, layer: 0, head: "mean", chips: new Set(), apart: false, scale: "abs",
                  hideSpecial: false, pinned: null, hover: null, tab: "head", model: null, allDims: false, showOutside: false, zoom: null,
                  minWeight: 0.03 };  // the head view's faintest line
  const ONE_COLOUR = "#2563eb";  // lines of one head, or of the average: per-head colours only when heads are apart
  let examples = DATA.examples || [];
  let modelInfo = DATA.model || {};

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
  function option(select, value, text) { return html("option", { value: value }, select, text); }
  const measurer = document.createElement("canvas").getContext("2d");
  function textWidth(tokens, font) {
    measurer.font = font;
    return Math.ceil(Math.max(0, ...tokens.map((t) => measurer.measureText(t).width)));
  }
  const fmt = (x, d = 3) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));
  const clamp = (x, lo, hi) => Math.max(lo, Math.min(hi, x));
  // cells as wide and as tall as the room allows (fitW x fitH px each), one at most 1.6 times as wide as it is
  // tall or the other way round, so that rows and columns read alike: every grid of cells is sized here
  const CELL_RATIO = 1.6;
  const fitCells = (fitW, fitH) => ({ w: Math.min(fitW, CELL_RATIO * fitH), h: Math.min(fitH, CELL_RATIO * fitW) });
  function area() {  // the room the view has: the main pane, less its padding
    const m = document.querySelector("main");
    return { w: Math.max(320, m.clientWidth - 32), h: Math.max(240, m.clientHeight - 24) };
  }
  function modelText(info) {  // what the model is, in words: never a class name
    if (!info) return "";
    const name = info.name ? `${info.name}: ` : "";
    if (info.arch === "rnn")
      return `${name}${String(info.cell || "rnn").toUpperCase()} ${info.hidden}, Luong ${info.attention} attention (${info.score} score` +
        (info.window !== undefined ? `, D\u00a0=\u00a0${info.window})` : ")");
    const parts = [];
    if (info.arch === "transformer") parts.push("Transformer");
    else if (info.arch) parts.push(info.arch === "bert" ? "BERT-style encoder" : info.arch);
    if (info.layers !== undefined) parts.push(`${info.layers} layers`);
    if (info.d_model !== undefined) parts.push(`d_model ${info.d_model}`);
    if (info.heads !== undefined) parts.push(`${info.heads} heads`);
    if (info.positions) parts.push(`${info.positions} positions`);
    if (info.step !== undefined) parts.push(`step ${info.step}`);
    return name + parts.map((part) => part.replaceAll(" ", "\u00a0")).join(" · ");  // lines break between the parts only
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

  // ---- drawing on a canvas, for every view ----------------------------------------------
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

  // A colour bar from 0 to ``top`` (a label) with its words beside it.
  const BAR = 260;
  function wrapped(lines, font, room) {  // each line broken at spaces to fit ``room`` px
    measurer.font = font;
    return lines.filter((line) => line).flatMap((line) => {
      const out = [];
      for (const word of line.split(" ")) {
        const last = out.length ? `${out[out.length - 1]} ${word}` : null;
        if (last !== null && measurer.measureText(last).width <= room) out[out.length - 1] = last;
        else out.push(word);
      }
      const n = out.length, prev = n > 1 && !out[n - 1].includes(" ") ? out[n - 2].split(" ") : [];
      const moved = prev.length > 2 ? `${prev[prev.length - 1]} ${out[n - 1]}` : null;
      if (moved !== null && measurer.measureText(moved).width <= room) {  // no lone word on a line of its own
        out[n - 1] = moved;
        out[n - 2] = prev.slice(0, -1).join(" ");
      }
      return out;
    });
  }
  // its lines beside the bar, wrapped to fit (under it where the canvas is too narrow); ``ticks``: [fraction of the bar, label] between its ends
  function colourBar(canvas, width, top, lines, bottom = "0", ticks = []) {
    width = Math.min(width, area().w);  // never past the pane's edge
    const under = width - BAR - 28 < 220;  // too narrow for the words beside the bar: under it
    canvas.setAttribute("aria-label", lines.filter(Boolean).join("\n"));  // the legend's words, for a reader (and the tests)
    lines = wrapped(lines, LEGEND, under ? width - 12 : width - BAR - 28);  // every line, the canvas as tall as they need
    const ctx = setupCanvas(canvas, width, under ? 48 + 18 * lines.length : Math.max(44, 8 + 18 * lines.length));
    for (let x = 0; x < BAR; x++) { ctx.fillStyle = colour(x / (BAR - 1)); ctx.fillRect(x + 10, 4, 1, 14); }
    ctx.fillStyle = "#1d2330"; ctx.font = LEGEND; ctx.textBaseline = "top";
    ctx.textAlign = "left"; ctx.fillText(bottom, 10, 22);
    ctx.textAlign = "right"; ctx.fillText(top, BAR + 10, 22);
    ctx.textAlign = "center";
    for (const [f, label] of ticks) {
      const x = 10 + f * (BAR - 1);
      ctx.fillRect(x - 0.5, 14, 1, 6);
      ctx.fillText(label, x, 22);
    }
    ctx.textAlign = "left";
    lines.forEach((line, i) => ctx.fillText(line, under ? 10 : BAR + 22, (under ? 46 : 4) + 18 * i));
  }

  // ---- tabs and drawing ----------------------------------------------------------------
  function selectTab(tab, redraw = true) {
    state.tab = tab;
    // the layer, head and scale choices apply to the maps: not to the atlas (every head), an attribution
    // (each method its own layers and scale) or the positions
    document.body.classList.toggle("atlas", ["atlas", "attribution", "positions", "heads"].includes(tab));
    document.body.classList.toggle("pooled", ["matrix", "model"].includes(tab));  // a long input's pixels pool cells
    document.body.classList.toggle("own-scale", ["image", "audio"].includes(tab));  // 0 to the largest weight drawn
    document.body.classList.remove("exact-cells");  // until a long matrix says every cell is exact
    document.body.classList.toggle("every-map", tab === "model");  // every layer and head at once
    document.body.classList.toggle("no-attention", tab === "positions");  // the scheme alone, no input's attention
    const mean = $("head").querySelector("option[value=mean]");  // the head view names heads drawn apart itself
    if (mean && tab !== "head") mean.textContent = "average of heads";
    $("readout").textContent = "";
    for (const b of $("tabs").querySelectorAll("button")) b.classList.toggle("selected", b.dataset.tab === tab);
    for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== `tab-${tab}`;
    if (redraw) draw();
  }

  function draw() {
    if (!examples.length) return;
    const ex = example();
    $("src-text").textContent = $("src-text").title = ex.source;  // a few lines shown, all of it on hover
    $("wide-source").textContent = $("wide-source").title = ex.source;  // the same, when the controls are hidden
    $("out-text").textContent = $("out-text").title = ex.output ? "→ " + ex.output : "";
    const info = modelInfo || {};
    $("model-info").textContent = modelText(info);
    if (ex.remote && state.tab !== "atlas") { VIEWS.long.draw(ex, state.tab); return; }
    $("long-head").hidden = true; $("lines").style.display = "";
    if (TABS[state.tab]) TABS[state.tab]();
  }

  function showExamples(list, info) {
    examples = list; modelInfo = info || {};
    state.example = 0; state.pinned = null; state.hover = null; state.zoom = null;
    $("example-box").hidden = examples.length < 2;
    $("example").innerHTML = "";
    // a label that fits the sidebar (the whole sentence is below it, and in the option's title)
    examples.forEach((ex, i) => {
      const cut = ex.source.slice(0, 27), space = cut.lastIndexOf(" ");  // cut at a word's end where one is near
      const text = ex.source.length > 28 ? `${space > 12 ? cut.slice(0, space) : cut}…` : ex.source;
      option($("example"), i, `${i + 1}: ${text}`).title = ex.source;
    });
    state.kind = null;
    $("tabs").querySelector("[data-tab=image]").hidden = !examples.some((ex) => ex.image);
    if (state.tab === "image" && !examples.some((ex) => ex.image)) state.tab = "head";
    const sound = examples.some((ex) => ex.spectrogram && !ex.remote);  // a speech model's: its alignment over time
    $("tabs").querySelector("[data-tab=audio]").hidden = !sound;
    if (state.tab === "audio" && !sound) state.tab = "head";
    const remote = examples.some((ex) => ex.remote);  // a long input: the views long.js draws (page.css: body.long)
    document.body.classList.toggle("long", remote);
    if (!remote && state.scale === "log") { state.scale = "abs"; $("scale").value = "abs"; }  // a long map's scale only
    if (remote && !VIEWS.long.tabs.includes(state.tab) && !["atlas", "circuits"].includes(state.tab)) state.tab = "matrix";
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
    const m = currentModel(), can = m.capabilities, image = can.reads === "image", sound = can.reads === "audio";
    $("go").textContent = sound ? "Transcribe" : GO[can.writes || "none"];
    for (const id of ["beam", "nbest"]) $(id).parentElement.hidden = can.writes !== "translation";
    $("target").parentElement.hidden = !can.forced || image;
    $("target-label").textContent = sound ? "force a transcript" : "force a translation";
    $("new-tokens").parentElement.hidden = can.writes !== "continuation";
    $("tabs").querySelector("[data-tab=positions]").hidden = !(m.info && m.info.positions) || image;
    $("tabs").querySelector("[data-tab=embed]").hidden = !can.contextual;
    $("tabs").querySelector("[data-tab=image]").hidden = !image;  // a vision-language model's: once it has read one
    const kinds = can.kinds, hasOutput = can.writes !== null;
    $("tabs").querySelector("[data-tab=attribution]").hidden = !can.attributions.length;
    $("tabs").querySelector("[data-tab=circuits]").hidden = !can.circuits;
    document.body.classList.toggle("circuits", !!can.circuits);  // a click on a map's cell asks why it is bright
    for (const o of $("attr-method").options) o.hidden = !can.attributions.includes(o.value);
    if (!can.attributions.includes($("attr-method").value) && can.attributions.length) $("attr-method").value = can.attributions[0];
    $("attr-side").value = hasOutput ? "output" : "encoder";
    $("attr-side").parentElement.hidden = !kinds.includes("encoder");
    $("attr-side").querySelector("[value=output]").hidden = !hasOutput;  // an encoder's sides: positions, sentence
    $("attr-side").querySelector("[value=sentence]").hidden = hasOutput;
    $("text").hidden = image || sound; $("image-box").hidden = !image && !can.images;  // its text, and an image beside it
    $("audio-box").hidden = !sound;
    $("tabs").querySelector("[data-tab=audio]").hidden = true;  // once it has heard a sound
    $("text").placeholder = `Type a text (up to ${m.max_tokens.toLocaleString("en")} tokens: ${m.max_tokens_by}) and press Enter`;
    $("text").title = `${m.name} takes up to ${m.max_tokens.toLocaleString("en")} tokens here (${m.max_tokens_by} set the limit)`;
    if (["positions", "embed", "image", "audio", "attribution", "circuits"].includes(state.tab)) selectTab("head");
    if (!$("text").value.trim() || Object.values(EXAMPLE_TEXT).includes($("text").value.trim())) $("text").value = EXAMPLE_TEXT[can.writes || "none"] || "";
    $("text").dispatchEvent(new Event("input"));  // the box fits its text
    VIEWS.neuron.clear();
  }

  function dataURL(file) {  // a chosen file as base64, what the API takes
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result); reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
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
    if (can.reads === "image" || (can.images && $("image-file").files[0])) {  // a vision-language model: optional
      const file = $("image-file").files[0];
      if (!file) { $("status").textContent = "choose an image file (PNG or JPEG)"; return; }
      if (can.reads === "image") body.text = file.name;
      body.image = await dataURL(file);
    }
    if (can.reads === "audio") {
      const file = $("audio-file").files[0];
      if (!file) { $("status").textContent = "choose a sound file (WAV)"; return; }
      body.text = file.name;
      body.audio = await dataURL(file);
    }
    status.textContent = "working…"; status.classList.remove("error");
    try {
      const r = await api("/api/translate", body);
      const made = r.example.tgt_in_tokens.length - r.example.prompt_length;
      const read = `${(r.example.prompt_length || 0).toLocaleString("en")} tokens read`;  // a continuation's prompt
      const done = can.writes === "continuation" && !body.max_new_tokens ? `${read}, none generated (new tokens: 0)`
        : can.writes === "continuation" ? `${read}, ${made} generated` + (made < body.max_new_tokens ? " (the model ended its text)" : "")
        : !can.writes ? "attention computed" : r.forced ? `forced ${can.reads === "audio" ? "transcript" : can.writes} scored` : `${can.reads === "audio" ? "transcript" : can.writes} found`;
      status.textContent = `${done} in ${r.server_ms} ms (server)`;
      const list = $("nbest-list"); list.innerHTML = "";
      r.nbest.forEach((h, i) => {
        const li = html("li", {}, list, h.text);
        html("span", { class: "score" }, li, `score ${fmt(h.score)}`);
        if (!r.forced && i === 0) li.classList.add("chosen");
        li.title = "show the attention of this translation";
        li.addEventListener("click", () => { $("target").value = h.text; submit(h.text); });
      });
      VIEWS.neuron.clear();
      r.example.record = r.record;  // what the views of a long input name it by
      if (body.audio) r.example.audio = body.audio;  // a speech model's sound: what the other tabs send again
      showExamples([r.example], m.info);
      unpackAhead();  // the other layers, off the main thread
    } catch (err) {
      status.textContent = String(err.message || err); status.classList.add("error");
    }
  }

  // A head's class over the last StreamingLLM cache the head atlas measured on this input (atlas.js
  // keeps it): a line for the maps' legends, or "" where none was measured for the head shown
  function streamedClass(ex) {
    const c = state.streamed, head = state.head;
    if (!c || c.record !== ex.record || c.kind !== state.kind || head === "mean" || !c.classes[state.layer]) return "";
    const cls = c.classes[state.layer][head], cost = c.cost[state.layer][head];
    if (!cls) return "";
    const needle = c.needle && c.needle[state.layer][head] !== null
      ? `; the copy ${c.needle[state.layer][head].toFixed(3)} predicted (${c.needle_base.toFixed(3)} with every head exact)` : "";
    return `the head atlas: a ${cls} head over ${c.sinks} sinks + ${c.window.toLocaleString("en")} recent keys, alone ` +
      `(${c.measure.split(" (")[0]} ${cost === null ? "not measured" : (cost >= 0 ? "+" : "−") + Math.abs(cost).toFixed(4)}${needle})`;
  }

  // ---- the views: one file each (head.js, matrix.js, model.js, neuron.js, attribution.js, image.js,
  // positions.js, atlas.js, circuits.js; long.js draws a long input's), each made from what it needs of this page
  const lib = { $, html, el, state, example, queries, keys, shown, heads, matrixOf, rowScale, scaleNote, area, clamp, fitCells, textWidth,
                fmt, layerName, layerCount, setupCanvas, renderCells, colourBar, wrapped, BAR, colour, diverging, rgb, api, currentModel,
                selectTab, draw, streamedClass, info: () => modelInfo, live: !!LIVE, FAMILY, SMALL, LEGEND, KIND_LABEL, HEAD_COLOURS, ONE_COLOUR };
  const VIEWS = Object.fromEntries(Object.entries(window.attnkitViews).map(([name, make]) => [name, make(lib)]));
  const TABS = Object.assign({}, ...Object.values(VIEWS).map((v) => v.tabs).filter((t) => !Array.isArray(t)));

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
  for (const id of ["attr-method", "attr-side"]) $(id).addEventListener("change", () => { if (state.tab === "attribution") draw(); });
  $("hide-special").addEventListener("change", (e) => { state.hideSpecial = e.target.checked; draw(); });
  for (const b of $("tabs").querySelectorAll("button[data-tab]")) b.addEventListener("click", () => selectTab(b.dataset.tab));
  for (const [id, wide] of [["hide-side", true], ["show-side", false]])  // the controls out of the way, or back
    $(id).addEventListener("click", () => { document.body.classList.toggle("wide", wide); draw(); });

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
    $("tabs").querySelector("[data-tab=atlas]").hidden = false;
    LIVE.models.forEach((m) => {  // the name in the select (it fits the sidebar), what it is on hover and below
      option($("model"), m.name, m.name);
      $("model").lastChild.title = m.capabilities.summary;
    });
    $("model").addEventListener("change", (e) => { chooseModel(e.target.value); submit(); });
    $("live").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
    $("text").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); submit(); } });
    const fitText = () => {  // the box grows with its text (to 8 lines), so no line scrolls out of sight
      const t = $("text"); t.style.height = "auto"; t.style.height = `${Math.min(t.scrollHeight + 2, 170)}px`;
    };
    $("text").addEventListener("input", fitText);
    fitText();
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
    resizing = setTimeout(() => { if (["head", "model", "matrix", "atlas"].includes(state.tab)) draw(); }, 120);
  });
  window.attnkit = { state: state, draw: draw, selectTab: selectTab, ahead: ahead, example: () => examples[state.example], views: VIEWS };
})();