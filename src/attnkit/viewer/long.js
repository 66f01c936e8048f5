"use strict";
// Long inputs in the studio: the maps stay on the server (a record of q, k and each row's
// log-sum-exp) and this view asks for what the pane can show. The matrix is an overview pooled to
// the pane's pixels (the max of the cells each pixel covers, so a thin diagonal or one sink column
// stays visible; or their mean), and exact cells once zoomed in far enough; the model view is every
// layer and head as thumbnails; the head view lists a query's strongest keys; the head list sorts
// every head by its summaries. Answers are kept: a map drawn once is drawn again at once.
(window.attnkitViews = window.attnkitViews || {}).long = function (lib) {
  const { $, html, state } = lib;
  const cache = new Map();  // request -> answer (decoded)
  const LOG_DECADES = 4;  // the log scale's range: 10⁻⁴ to 1
  const DECADE = (n) => (n >= 3 ? `1e-${n}` : (10 ** -n).toFixed(n));  // 10⁻ⁿ in plain type: a superscript is too small to read
  const STATS = [
    ["entropy", "entropy (nats)", "the spread of a query's weights: 0 = one key"],
    ["normalised", "entropy ÷ log(keys)", "0 = one key, 1 = uniform over the keys it may see"],
    ["max_weight", "largest weight", "a query's strongest key's share, on average"],
    ["sink", "on the first token", "weight on token 0 (an attention sink parks its weight there)"],
    ["local", "within 8 tokens", "weight on the keys at most 8 positions away (a local head keeps it near)"],
    ["distance", "mean distance", "how far a query looks, in tokens, weighted by its weights"],
    ["outside", "outside 4 + 1,020", "weight on the keys a StreamingLLM cache (the first 4 and the 1,020 most recent) drops, over the queries past it"],
  ];
  const CACHE = [4, 1020];  // the StreamingLLM cache outlined and measured ("outside"): sinks, recent keys
  let ticket = 0;  // a drawing for an older choice is dropped when its answer comes

  function floats(b64) {
    const bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Float32Array(bytes.buffer);
  }
  async function ask(path, body) {
    const key = path + JSON.stringify(body);
    if (!cache.has(key)) {
      const answer = !lib.live ? Promise.resolve().then(() => offline(path, body))
        : lib.api(path, body).then((r) => (r.data ? { ...r, values: floats(r.data) } : r));
      cache.set(key, answer);
      answer.catch(() => cache.delete(key));
    }
    return cache.get(key);
  }
  // ---- a static page (`attnkit view`, show()): the same answers from what the page holds ---------
  // every head's overview (one byte of its own largest pixel), every head's summaries, and for
  // some layers q, k and each row's log-sum-exp, from which any cell is exact: w = exp(s·q·k - lse)
  function bytes(b64) { const bin = atob(b64), out = new Uint8Array(bin.length); for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i); return out; }
  const decoded = new Map();
  function held(ex, kind, layer) {  // a layer the page computes exactly, decoded once
    const e = ex.offline[kind].exact[String(layer)];
    if (!e) return null;
    if (!decoded.has(e)) decoded.set(e, { ...e, qv: new Float32Array(bytes(e.q).buffer), kv: new Float32Array(bytes(e.k).buffer), lv: new Float32Array(bytes(e.lse).buffer) });
    return decoded.get(e);
  }
  function exactRow(e, [, H, T, S], head, i, c0, c1, out) {  // weights of query i, keys c0..c1-1, into out
    const d = e.dim, heads = head === "mean" ? [...Array(H).keys()] : [head], shift = S - T;
    out.fill(0);
    for (const h of heads) {
      const g = Math.floor(h / (H / e.kv_heads)), q = e.qv.subarray((h * T + i) * d, (h * T + i + 1) * d), lse = e.lv[h * T + i];
      if (!Number.isFinite(lse)) continue;
      const last = e.causal ? Math.min(c1, i + shift + 1) : c1;
      const first = e.causal && e.window ? Math.max(c0, i + shift - e.window + 1) : c0;  // a sliding window
      for (let j = first; j < last; j++) {
        let dot = 0;
        const k = (g * S + j) * d;
        for (let x = 0; x < d; x++) dot += q[x] * e.kv[k + x];
        const score = e.cap ? e.cap * Math.tanh(dot * e.scale / e.cap) : dot * e.scale;  // a soft-cap
        out[j - c0] += Math.exp(score - lse) / heads.length;
      }
    }
  }
  function offline(path, body) {
    const ex = lib.example(), off = ex.offline[body.kind], dims = ex.remote[body.kind], [L, H, T, S] = dims;
    const layer = ((body.layer % L) + L) % L;
    const exactLayers = Object.keys(off.exact).join(", ");
    if (path === "/api/heads") return { layers: [{ layer: layer, stats: off.heads[layer] }], server_ms: 0 };
    const e = held(ex, body.kind, layer);
    if (path === "/api/top") {
      if (!e) throw new Error(`this page computes layer(s) ${exactLayers || "none"} exactly: a query's keys are listed there (attnkit view --layers chooses)`);
      const row = new Float64Array(S);
      exactRow(e, dims, body.head, body.first, 0, S, row);
      const order = [...row.keys()].sort((a, b) => row[b] - row[a]).slice(0, body.k);
      return { first: body.first, keys: [order], weights: [order.map((j) => row[j])], server_ms: 0 };
    }
    const [r0, r1, c0, c1] = body.region || [0, T, 0, S];
    const whole = r0 === 0 && r1 === T && c0 === 0 && c1 === S;
    if (e && (!whole || (T <= body.rows && S <= body.cols))) {  // exact cells, pooled to the pixels asked
      const ph = Math.min(body.rows, r1 - r0), pw = Math.min(body.cols, c1 - c0), values = new Float32Array(ph * pw);
      const counts = new Float32Array(ph * pw), row = new Float64Array(c1 - c0);
      for (let i = r0; i < r1; i++) {
        exactRow(e, dims, body.head, i, c0, c1, row);
        const pi = Math.floor(((i - r0) * ph) / (r1 - r0));
        for (let j = 0; j < c1 - c0; j++) {
          const p = pi * pw + Math.floor((j * pw) / (c1 - c0));
          if (body.reduce === "mean") { values[p] += row[j]; counts[p] += 1; } else if (row[j] > values[p]) values[p] = row[j];
        }
      }
      if (body.reduce === "mean") for (let p = 0; p < values.length; p++) values[p] /= counts[p];
      return { rows: ph, cols: pw, values: values, reduce: body.reduce, causal: e.causal, server_ms: 0 };
    }
    // the overview the page holds (the max of the cells each pixel covers), cut to the region asked
    const [oh, ow] = off.size, hi = body.head === "mean" ? H : body.head, all = bytes(off.data[layer]), top = off.top[layer][hi];
    const p0 = Math.floor((r0 * oh) / T), p1 = Math.max(p0 + 1, Math.ceil((r1 * oh) / T));
    const q0 = Math.floor((c0 * ow) / S), q1 = Math.max(q0 + 1, Math.ceil((c1 * ow) / S));
    const values = new Float32Array((p1 - p0) * (q1 - q0));
    for (let a = p0; a < p1; a++) for (let b = q0; b < q1; b++) values[(a - p0) * (q1 - q0) + (b - q0)] = (all[(hi * oh + a) * ow + b] / 255) * top;
    return { rows: p1 - p0, cols: q1 - q0, values: values, reduce: "max", coarse: !(oh === T && ow === S), causal: off.causal, server_ms: 0,
             note: exactLayers ? `exact cells on layer(s) ${exactLayers}` : "no layer held exactly (attnkit view --layers)" };
  }

  function shape(ex) { return ex.remote[state.kind]; }  // layers, heads, queries, keys
  const count = (n) => n.toLocaleString("en-US");  // 2,047: a long input's lengths read as the docs write them
  function mapBody(ex, layer = state.layer, head = state.head) {
    return { record: ex.record || "page", kind: state.kind, layer: layer, head: head };
  }
  const tokenAt = (tokens, i) => (tokens[i] === undefined ? `#${i}` : tokens[i]);

  // ---- the matrix: an overview, then exact cells --------------------------------------
  function region(ex) {
    const [, , T, S] = shape(ex);
    return state.long && state.long.kind === state.kind && state.long.region ? state.long.region : [0, T, 0, S];
  }
  function setRegion(ex, r) {
    const [, , T, S] = shape(ex);
    const whole = r[0] <= 0 && r[1] >= T && r[2] <= 0 && r[3] >= S;
    state.long = { kind: state.kind, region: whole ? null : r };
    drawMatrix(ex);
  }
  const BESIDE = 360;  // px: the legend and help's column beside a square map
  // the map's side: the pane less its labels, the readout, the colour bar and the help below it, in view
  function side0(room, wide = 0, tall = 0) {  // the map's side, less ``wide`` px beside it and ``tall`` under it
    const help = [...document.querySelectorAll("#tab-matrix .hint")].reduce((h, e) => h + e.offsetHeight, 0);
    return Math.max(160, Math.min(room.w - 64 - 20 - wide, room.h - 22 - 140 - help - tall, 1400));
  }
  // the map's side, and whether its legend and help go beside it: a squarish map in a pane wider than tall,
  // where that makes the map larger (else under it, the key labels under the map, the query labels beside)
  function placeLegend(room, left, top, under, nr, nc) {
    $("tab-matrix").classList.remove("beside");  // the legend and help under the map, as side0 measures them
    const below = side0(room, left - 64, under - 36);
    const aside = Math.min(room.w - left - 24 - BESIDE, room.h - top - under - 12, 1400);
    const beside = nc <= 1.25 * nr && nr <= 1.25 * nc && aside > 1.1 * below;
    $("tab-matrix").classList.toggle("beside", beside);
    return { side: beside ? aside : below, beside };
  }
  async function drawMatrix(ex) {
    const mine = ++ticket, canvas = $("matrix"), [, , T, S] = shape(ex), room = lib.area();
    const [r0, r1, c0, c1] = region(ex), nr = r1 - r0, nc = c1 - c0;
    const k = lib.keys(ex, state.kind), q = lib.queries(ex, state.kind);
    const guess = Math.min(side0(room) / nc, side0(room) / nr);  // px per cell, about: room for the tokens?
    const font = guess >= 18 ? `13px ${lib.FAMILY}` : guess >= 13 ? `12px ${lib.FAMILY}` : lib.SMALL;
    const below = guess >= 11 ? Math.min(100, 8 + lib.textWidth(k.slice(c0, c1).map((t) => String(t)), font)) : 0;
    const left = guess >= 11 ? Math.min(120, 12 + lib.textWidth(q.slice(r0, r1).map((t) => String(t)), font)) : 76;
    // under the map: the key tokens (their longest's length), or positions and "keys →"
    const under = below ? below + 6 : 36;
    const top = 22, { side, beside } = placeLegend(room, left, top, under, nr, nc);
    // as wide as the region's shape asks (a square map square, so that its diagonal runs at 45°), within the pane
    const shaped = (side * nc) / nr;
    const wide = Math.max(Math.min(160, side), Math.min(shaped, room.w - left - 40, 1400));
    const { w: cw, h: ch } = lib.fitCells(wide / nc, side / nr);  // every cell its own pixels
    const exact = Math.min(cw, ch) >= 1;
    const pw = exact ? nc : Math.min(nc, Math.round(wide)), ph = exact ? nr : Math.min(nr, Math.round(side));
    const w = exact ? cw * nc : wide, h = exact ? ch * nr : side;
    const body = { ...mapBody(ex), rows: ph, cols: pw, reduce: state.reduce || "max", region: [r0, r1, c0, c1] };
    $("readout").textContent = "computing the overview…";
    let answer;
    try { answer = await ask("/api/overview", body); } catch (err) { $("readout").textContent = String(err.message || err); return; }
    if (mine !== ticket || state.tab !== "matrix") return;
    const ctx = lib.setupCanvas(canvas, left + w + 24, top + h + under);
    const cells = exact && !answer.coarse;
    canvas.dataset.exact = String(cells);  // every cell drawn from its exact weight
    document.body.classList.toggle("exact-cells", cells);  // no pooling to choose
    const scaled = state.scale === "row", log = state.scale === "log";
    const tone = (x) => (log ? Math.max(0, 1 + Math.log10(Math.max(x, 1e-12)) / LOG_DECADES) : Math.min(1, x));
    const v = answer.values, img = new ImageData(answer.cols, answer.rows), d = img.data;
    const rowsOf = (i) => [r0 + Math.floor((i * nr) / answer.rows), r0 + Math.floor(((i + 1) * nr) / answer.rows)];
    const colOf = (j) => c0 + Math.floor((j * nc) / answer.cols);
    for (let i = 0; i < answer.rows; i++) {
      let m = 1e-12;
      if (scaled) for (let j = 0; j < answer.cols; j++) m = Math.max(m, v[i * answer.cols + j]);
      const lastRow = rowsOf(i)[1] - 1;
      for (let j = 0; j < answer.cols; j++) {
        const p = 4 * (i * answer.cols + j);
        if (answer.causal && colOf(j) > lastRow + (S - T)) { d[p] = d[p + 1] = d[p + 2] = 236; d[p + 3] = 255; continue; }  // no query may see it
        const c = lib.rgb(tone(v[i * answer.cols + j] / (scaled ? m : 1)));
        d[p] = c[0]; d[p + 1] = c[1]; d[p + 2] = c[2]; d[p + 3] = 255;
      }
    }
    const off = document.createElement("canvas"); off.width = answer.cols; off.height = answer.rows;
    off.getContext("2d").putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, left, top, w, h);
    axes(ctx, ex, [r0, r1, c0, c1], left, top, w, h, font);
    const cached = answer.causal && S > CACHE[0] + CACHE[1];  // a StreamingLLM cache drops keys of this map
    if (cached) cacheOutline(ctx, [r0, r1, c0, c1], left, top, w, h, S - T);
    let outside = "";
    canvas.dataset.outside = "";  // the head's weight outside the cache, as the legend says it (tests read it)
    if (cached) {  // the head's weight outside the cache, from the head list's summaries (kept by the server)
      try {
        const st = (await ask("/api/heads", { record: ex.record, kind: state.kind, layer: state.layer })).layers[0].stats;
        if (st.outside) {
          const o = state.head === "mean" ? st.outside.reduce((a, b) => a + b, 0) / st.outside.length : st.outside[state.head];
          outside = `; ${o.toFixed(3)} of a query's weight lies outside it (the mean over the queries past it)`;
          canvas.dataset.outside = o.toFixed(3);
        }
      } catch (err) { outside = ""; }
      if (mine !== ticket || state.tab !== "matrix") return;
    }
    const how = cells ? "every cell exact" : answer.coarse ? `the page's overview, 8-bit (${answer.note})`
      : `each pixel: the ${body.reduce} of about ${Math.round(nr / ph)} queries × ${Math.round(nc / pw)} keys`;
    const which = state.head === "mean" ? "mean of heads" : `head ${state.head}`;
    const masked = answer.causal ? " · grey: masked" : "";
    const scaleNote = scaled ? "per-query scale" : log ? `log scale: the bar's left end is ${DECADE(LOG_DECADES)} or less` : "";
    const span = r0 === c0 && r1 === c1 && T === S ? `queries and keys ${r0}-${r1 - 1} of ${count(T)}`  // the diagonal's block
      : `queries ${r0}-${r1 - 1} of ${count(T)}, keys ${c0}-${c1 - 1} of ${count(S)}`;
    const cacheNote = cached ? `red dashes: a StreamingLLM cache keeps the keys left of the upright line (the first ${CACHE[0]}) and right of the slanted one (the ${CACHE[1].toLocaleString("en")} most recent)${outside}` : "";
    lib.colourBar($("legend"), beside ? room.w - left - w - 36 : Math.max(860, room.w - 8), scaled ? "row's largest" : "1", [  // its lines in full
      `layer ${lib.layerName(state.layer)}, ${which}: ${span}; ${how}`,
      [scaleNote, masked.replace(" · ", "")].filter(Boolean).join(" · "),
      ...(cacheNote ? [cacheNote] : []),
      ...(lib.streamedClass(ex) ? [lib.streamedClass(ex)] : []),
      "wheel: zoom · drag: zoom to a box · double-click: the whole map",
    ], log ? DECADE(LOG_DECADES) : "0",  // "or less": the note beside the bar
    log ? [...Array(LOG_DECADES - 1).keys()].map((i) => [(i + 1) / LOG_DECADES, DECADE(LOG_DECADES - 1 - i)]) : []);
    const part = nr < T || nc < S ? `queries ${r0}-${r1 - 1} and keys ${c0}-${c1 - 1} of ` : "";
    $("readout").textContent = `${lib.KIND_LABEL[state.kind]}, layer ${lib.layerName(state.layer)}, ${which}, ${part}${count(T)} × ${count(S)} tokens ` +
      `(computed in ${answer.server_ms} ms ${lib.live ? "on the server" : "in the page"})`;
    wire(canvas, ex, { r0, r1, c0, c1, left, top, w, h, answer, exact: cells });
  }
  // The keys a StreamingLLM cache keeps (Xiao et al. 2023): the first CACHE[0] and the CACHE[1] most
  // recent up to each query (key j kept for query i when j < CACHE[0] or j > i + offset - CACHE[1]).
  function cacheOutline(ctx, [r0, r1, c0, c1], left, top, w, h, offset) {
    const x = (j) => left + ((j - c0) / (c1 - c0)) * w, y = (i) => top + ((i - r0) / (r1 - r0)) * h;
    ctx.save();
    ctx.beginPath(); ctx.rect(left, top, w, h); ctx.clip();
    ctx.strokeStyle = "#d92d20"; ctx.lineWidth = 1.5; ctx.setLineDash([6, 4]);
    ctx.beginPath();
    ctx.moveTo(x(CACHE[0]), top); ctx.lineTo(x(CACHE[0]), top + h);  // past the sinks
    const edge = (i) => i + offset - CACHE[1] + 1;  // the oldest recent key of query i
    ctx.moveTo(x(edge(r0)), y(r0)); ctx.lineTo(x(edge(r1)), y(r1));
    ctx.stroke();
    ctx.restore();
  }
  function axes(ctx, ex, [r0, r1, c0, c1], left, top, w, h, font) {
    const q = lib.queries(ex, state.kind), k = lib.keys(ex, state.kind);
    ctx.fillStyle = "#1d2330"; ctx.font = font;
    const cell = h / (r1 - r0);
    if (cell >= 11 && w / (c1 - c0) >= 11) {  // room for the tokens themselves: every one, in full
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      for (let i = r0; i < r1; i++) ctx.fillText(tokenAt(q, i), left - 4, top + (i - r0 + 0.5) * cell);
      const cw = w / (c1 - c0);
      for (let j = c0; j < c1; j++) {  // keys: read downwards, under their columns
        ctx.save(); ctx.translate(left + (j - c0 + 0.5) * cw, top + h + 4); ctx.rotate(-Math.PI / 2);
        ctx.textAlign = "right"; ctx.fillText(tokenAt(k, j), 0, 0); ctx.restore();
      }
      return;
    }
    const ticks = (a, b, n) => { const step = Math.max(1, Math.ceil((b - a) / n)); const out = []; for (let x = a; x < b; x += step) out.push(x); return out; };
    ctx.font = lib.LEGEND;  // positions, not tokens: the legend's size
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (const i of ticks(r0, r1, 8)) ctx.fillText(String(i), left - 4, top + ((i - r0) / (r1 - r0)) * h);
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (const j of ticks(c0, c1, 8)) ctx.fillText(String(j), left + ((j - c0) / (c1 - c0)) * w, top + h + 3);
    ctx.textAlign = "right"; ctx.fillText("keys →", left + w, top + h + 20);
    ctx.save(); ctx.translate(12, top + h / 2); ctx.rotate(-Math.PI / 2); ctx.textAlign = "center"; ctx.fillText("← queries", 0, 0); ctx.restore();
  }
  function wire(canvas, ex, g) {
    const q = lib.queries(ex, state.kind), k = lib.keys(ex, state.kind), nr = g.r1 - g.r0, nc = g.c1 - g.c0;
    const at = (e) => {
      const b = canvas.getBoundingClientRect(), x = e.clientX - b.left - g.left, y = e.clientY - b.top - g.top;
      return { i: g.r0 + Math.floor((y / g.h) * nr), j: g.c0 + Math.floor((x / g.w) * nc), x: x, y: y, inside: x >= 0 && y >= 0 && x < g.w && y < g.h };
    };
    let drag = null;
    canvas.onmousemove = (e) => {
      const p = at(e);
      if (!p.inside) return;
      const a = g.answer, pi = Math.floor((p.y / g.h) * a.rows), pj = Math.floor((p.x / g.w) * a.cols), value = a.values[pi * a.cols + pj];
      $("readout").textContent = g.exact
        ? `query ${p.i} "${tokenAt(q, p.i)}" → key ${p.j} "${tokenAt(k, p.j)}": weight ${value.toFixed(6)} (exact)`
        : `queries near ${p.i} → keys near ${p.j}: ${a.reduce} weight ${value.toFixed(4)}`;
      if (drag) {
        const ctx = canvas.getContext("2d"), r = window.devicePixelRatio || 1;
        ctx.setTransform(r, 0, 0, r, 0, 0);
        if (drag.snapshot) ctx.putImageData(drag.snapshot, 0, 0);
        ctx.strokeStyle = "#ff5a5a"; ctx.lineWidth = 1.5;
        ctx.strokeRect(g.left + Math.min(drag.x, p.x), g.top + Math.min(drag.y, p.y), Math.abs(p.x - drag.x), Math.abs(p.y - drag.y));
      }
    };
    canvas.onmousedown = (e) => {
      const p = at(e);
      if (!p.inside) return;
      drag = { ...p, snapshot: canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height) };
    };
    canvas.onmouseup = (e) => {
      if (!drag) return;
      const p = at(e), a = drag; drag = null;
      if (Math.abs(p.x - a.x) < 4 && Math.abs(p.y - a.y) < 4) return;  // a click
      const i0 = Math.max(g.r0, Math.min(a.i, p.i)), i1 = Math.min(g.r1, Math.max(a.i, p.i) + 1);
      const j0 = Math.max(g.c0, Math.min(a.j, p.j)), j1 = Math.min(g.c1, Math.max(a.j, p.j) + 1);
      setRegion(ex, [i0, Math.max(i1, i0 + 1), j0, Math.max(j1, j0 + 1)]);
    };
    canvas.onwheel = (e) => {
      const p = at(e);
      if (!p.inside) return;
      e.preventDefault();
      const [, , T, S] = shape(ex), f = e.deltaY < 0 ? 0.5 : 2;
      // from the region last asked for (a wheel while the map is still being drawn zooms on from it), the
      // pointer at the same place in it
      const [r0, r1, c0, c1] = region(ex), i = r0 + (p.y / g.h) * (r1 - r0), j = c0 + (p.x / g.w) * (c1 - c0);
      const zoom = (a, b, at, n) => {
        const len = Math.max(1, Math.min(n, Math.round((b - a) * f))), start = Math.round(at - ((at - a) / (b - a)) * len);
        const s = Math.max(0, Math.min(n - len, start));
        return [s, s + len];
      };
      setRegion(ex, [...zoom(r0, r1, i, T), ...zoom(c0, c1, j, S)]);
    };
    canvas.ondblclick = () => setRegion(ex, [0, 1e12, 0, 1e12]);
  }

  // ---- the model view: every layer and head ---------------------------------------------
  async function drawModel(ex) {
    const mine = ++ticket, [L, H] = shape(ex), grid = $("model-grid"), room = lib.area();
    grid.innerHTML = "";
    const side = lib.clamp(Math.floor(Math.min((room.w - 70) / H, (room.h - 110) / Math.min(L, 6))) - 8, 48, 160);
    grid.style.gridTemplateColumns = `auto repeat(${H}, ${side + 4}px)`;
    html("div", { class: "axis" }, grid, "");
    for (let j = 0; j < H; j++) html("div", { class: "axis" }, grid, `head ${j}`);
    const cells = [];
    for (let l = 0; l < L; l++) {
      html("div", { class: "axis" }, grid, `layer ${l}`);
      for (let j = 0; j < H; j++) {
        const c = html("canvas", { "data-layer": l, "data-head": j, title: `layer ${l}, head ${j}: click to open its matrix` }, grid);
        lib.setupCanvas(c, side, side);
        if (l === state.layer && String(j) === String(state.head)) c.classList.add("selected");
        c.addEventListener("click", () => { choose(l, j); lib.selectTab("matrix"); });
        cells.push([l, j, c]);
      }
    }
    lib.colourBar($("model-legend"), 860, "1", [
      "attention weight (absolute); each pixel: the largest weight of the cells it covers",
      `${L} layer(s) × ${H} head(s) over ${count(shape(ex)[2])} × ${count(shape(ex)[3])} tokens`,
    ]);
    let done = 0;
    for (const [l, j, c] of cells) {  // layer by layer: the first rows appear while the rest are computed
      if (mine !== ticket || state.tab !== "model") return;
      let a;
      try { a = await ask("/api/overview", { ...mapBody(ex, l, j), rows: side, cols: side, reduce: "max", region: null }); }
      catch (err) { $("readout").textContent = String(err.message || err); return; }
      paint(c, a, side);
      done += 1;
      $("readout").textContent = `${lib.KIND_LABEL[state.kind]}: ${done} of ${L * H} heads drawn (each pixel the max of the cells it covers, absolute scale)`;
    }
  }
  function paint(canvas, a, side) {
    const img = new ImageData(a.cols, a.rows), d = img.data;
    for (let p = 0; p < a.values.length; p++) {
      const c = lib.rgb(Math.min(1, a.values[p]));
      d[4 * p] = c[0]; d[4 * p + 1] = c[1]; d[4 * p + 2] = c[2]; d[4 * p + 3] = 255;
    }
    const off = document.createElement("canvas"); off.width = a.cols; off.height = a.rows;
    off.getContext("2d").putImageData(img, 0, 0);
    const ctx = canvas.getContext("2d"); ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, 0, 0, side, side);
  }
  function choose(layer, head) {
    state.layer = layer; state.head = head; state.long = null;
    $("layer").value = layer; $("head").value = head;
  }

  // ---- the head view: a query's strongest keys -------------------------------------------
  async function drawHead(ex) {
    const mine = ++ticket, [, , T] = shape(ex), box = $("long-head"), q = lib.queries(ex, state.kind), k = lib.keys(ex, state.kind);
    const query = lib.clamp(state.longQuery === undefined ? T - 1 : state.longQuery, 0, T - 1);
    box.innerHTML = "";
    const bar = html("div", { class: "long-query" }, box);
    html("label", { for: "long-query" }, bar, "query");
    const slider = html("input", { type: "range", id: "long-query", min: 0, max: T - 1, value: query }, bar);
    const number = html("input", { type: "number", min: 0, max: T - 1, value: query }, bar);
    const pick = (x) => { state.longQuery = lib.clamp(Math.round(+x), 0, T - 1); drawHead(ex); };
    slider.addEventListener("change", (e) => pick(e.target.value));
    number.addEventListener("change", (e) => pick(e.target.value));
    html("p", { class: "long-context" }, box, context(q, query, 6));
    let a;
    try { a = await ask("/api/top", { ...mapBody(ex), first: query, count: 1, k: 12 }); } catch (err) { $("readout").textContent = String(err.message || err); return; }
    if (mine !== ticket || state.tab !== "head") return;
    const list = html("table", { class: "long-top" }, box), head = html("tr", {}, list);
    for (const t of ["key", "token", "in context", "weight"]) html("th", {}, head, t);
    const top = Math.max(1e-9, a.weights[0][0]);
    a.keys[0].forEach((j, n) => {
      const w = a.weights[0][n], tr = html("tr", {}, list);
      html("td", { class: "num" }, tr, String(j));
      html("td", {}, tr, tokenAt(k, j));
      html("td", { class: "ctx" }, tr, context(k, j, 3));
      const cell = html("td", { class: "bar" }, tr), b = html("span", {}, cell);
      b.style.width = `${Math.round((160 * w) / top)}px`;
      html("span", { class: "num" }, cell, w.toFixed(4));
    });
    const shown = a.weights[0].reduce((x, y) => x + y, 0);
    $("readout").textContent = `query ${query} "${tokenAt(q, query)}": its ${a.keys[0].length} strongest keys hold ${(100 * shown).toFixed(1)} % of its weight`;
  }
  function context(tokens, i, n) {
    const a = Math.max(0, i - n), b = Math.min(tokens.length, i + n + 1);
    return (a > 0 ? "… " : "") + tokens.slice(a, i).join(" ") + ` [${tokenAt(tokens, i)}] ` + tokens.slice(i + 1, b).join(" ") + (b < tokens.length ? " …" : "");
  }

  // ---- the head list: every head by its summaries -------------------------------------------
  async function drawHeads(ex) {
    const mine = ++ticket, [L, H] = shape(ex), box = $("heads-list");
    const rows = [];
    const render = () => {
      box.innerHTML = "";
      const key = state.headsSort || "sink", down = state.headsDown !== false;
      rows.sort((a, b) => (down ? b[key] - a[key] : a[key] - b[key]));
      const table = html("table", { class: "heads" }, box), head = html("tr", {}, table);
      const stats = STATS.filter(([n]) => rows.length && n in rows[0]);  // "outside": only past the cache
      for (const [name, label, title] of [["layer", "layer", ""], ["head", "head", ""], ...stats]) {
        const th = html("th", { title: title, "data-stat": name, class: name === key ? "sorted" : "" }, head, label + (name === key ? (down ? " ▼" : " ▲") : ""));
        th.addEventListener("click", () => { state.headsDown = name === key ? !down : true; state.headsSort = name; render(); });
      }
      for (const r of rows) {
        const tr = html("tr", { "data-layer": r.layer, "data-head": r.head, title: "open this head's matrix" }, table);
        html("td", {}, tr, String(r.layer)); html("td", {}, tr, String(r.head));
        for (const [name] of stats) html("td", { class: name === key ? "num sorted" : "num" }, tr, r[name].toFixed(name === "distance" ? 1 : 3));
        tr.addEventListener("click", () => { choose(r.layer, r.head); lib.selectTab("matrix"); });
      }
    };
    for (let l = 0; l < L; l++) {  // layer by layer: the list grows and sorts as the layers come
      let a;
      try { a = await ask("/api/heads", { record: ex.record, kind: state.kind, layer: l }); }
      catch (err) { $("readout").textContent = String(err.message || err); return; }
      if (mine !== ticket || state.tab !== "heads") return;
      const s = a.layers[0].stats;
      for (let j = 0; j < H; j++) rows.push({ layer: l, head: j, ...Object.fromEntries(STATS.filter(([n]) => n in s).map(([n]) => [n, s[n][j]])) });
      render();
      const T = shape(ex)[2];
      $("readout").textContent = `${rows.length} of ${L * H} heads summarised over ${T.toLocaleString("en")} tokens, each the mean over its queries; ` +
        "click a column to sort, a head to open its matrix";
    }
  }

  return {
    draw(ex, tab) {
      $("lines").style.display = tab === "head" ? "none" : "";
      $("long-head").hidden = tab !== "head";
      $("head-chips").innerHTML = "";
      if (tab === "matrix") drawMatrix(ex);
      else if (tab === "model") drawModel(ex);
      else if (tab === "head") drawHead(ex);
      else if (tab === "heads") drawHeads(ex);
    },
    tabs: ["head", "model", "matrix", "heads"],  // what it draws; the others wait for a short input
  };
};
