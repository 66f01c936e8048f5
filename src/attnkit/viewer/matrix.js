"use strict";
// The matrix view: every weight as a cell; wheel to zoom about a cell, drag to pan, double-click
// for all of it. A pixel that covers several cells shows the largest of them.
(window.attnkitViews = window.attnkitViews || {}).matrix = function (lib) {
  const {
    $, state, example, queries, keys, shown, heads, matrixOf, rowScale, area, clamp, fitCells, textWidth, layerName,
    setupCanvas, renderCells, colourBar, BAR, FAMILY, SMALL, KIND_LABEL
  } = lib;
  // The matrix: every cell in sight, or (wheel to zoom, drag to pan, double-click for all) a part of it.
  function drawMatrix() {
    $("tab-matrix").classList.remove("beside");  // the legend under the map (a long map may set it beside)
    const map = [state.example, state.kind, state.layer, state.head].join("|"), box = $("qk-why");
    if (box.dataset.map !== map) box.hidden = true;  // another map: the last cell's answer is not of it
    const ex = example(), q = queries(ex, state.kind), k = keys(ex, state.kind);
    const rows = shown(q), cols = shown(k);
    const W = matrixOf(state.layer, state.head), div = rowScale(W, rows, cols);
    const room = area(), sin = Math.sin(Math.PI / 3), cos = Math.cos(Math.PI / 3);
    if (!box.hidden) room.h = Math.max(240, room.h - box.offsetHeight - 12);  // the map and the answer below it in view
    const guess = textWidth([...rows.map((i) => q[i]), ...cols.map((j) => k[j])], SMALL);  // labels at 11 px
    // the pane filled, with room for the key and hint below
    const below = box.hidden ? 150 : 110;  // the key and two hint lines (an answer box under the map: the key alone)
    const full = fitCells((room.w - 1.5 * guess - 30) / cols.length, (room.h - guess * sin - below) / rows.length);
    const view = state.zoom && state.zoom.rows === rows.length && state.zoom.cols === cols.length ? state.zoom
      : { r: 0, c: 0, nr: rows.length, nc: cols.length, rows: rows.length, cols: cols.length };
    state.zoom = view.nr === rows.length && view.nc === cols.length ? null : view;
    const least = Math.min(6, 640 / Math.max(rows.length, cols.length));
    const baseW = clamp(full.w, least, 96), baseH = clamp(full.h, least, 80);
    let cw = baseW * cols.length / view.nc;
    let ch = baseH * rows.length / view.nr;  // px per cell, zoom included
    const seenRows = rows.slice(view.r, view.r + view.nr), seenCols = cols.slice(view.c, view.c + view.nc);
    // labels no taller than their row: 12-17 px where a row has room, less where it has not
    const fontOf = (cell) => cell >= 14 ? `${Math.max(12, Math.min(17, Math.round(cell * 0.85)))}px ${FAMILY}` : cell >= 10 ? `${Math.min(12, Math.floor(cell))}px ${FAMILY}` : `9px ${FAMILY}`;
    const topOf = (font) => Math.ceil(textWidth(seenCols.map((j) => k[j]), font) * sin + 16);
    let cell = Math.min(cw, ch), font = fontOf(cell);
    if (cell >= 7 && !state.zoom && topOf(font) + ch * view.nr + below > room.h) {  // the keys' labels, measured, fit above
      ch = Math.max(least, (room.h - topOf(font) - below) / view.nr);
      cell = Math.min(cw, ch); font = fontOf(cell);
    }
    const labelled = cell >= 7;
    const lq = labelled ? textWidth(seenRows.map((i) => q[i]), font) : 0, lk = labelled ? textWidth(seenCols.map((j) => k[j]), font) : 0;
    const left = lq + 10, top = labelled ? Math.ceil(lk * sin + 16) : 8;
    const right = Math.max(labelled ? Math.ceil(lk * cos + 12) : 8, ex.p_t ? 8 + Math.ceil(1.6 * Math.max(4, cell / 2.6)) : 0);  // p_t's triangle
    if (left + cw * view.nc + right > room.w) cw = Math.max(least, (room.w - left - right) / view.nc);  // the labels, measured, fit
    const plotW = cw * view.nc, plotH = ch * view.nr;
    state.pooled = cw < 1 || ch < 1;  // a pixel covers several cells: the legend says so
    const width = left + plotW + right, height = top + plotH + 6;
    const canvas = $("matrix"), ctx = setupCanvas(canvas, width, height);
    renderCells(ctx, W, rows, cols, div, view, left, top, plotW, plotH);
    if (labelled) {
      ctx.fillStyle = "#1d2330"; ctx.font = font; ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      seenRows.forEach((i, r) => ctx.fillText(q[i], left - 5, top + (r + 0.5) * ch));
      ctx.textAlign = "left";
      seenCols.forEach((j, c) => {
        ctx.save(); ctx.translate(left + (c + 0.5) * cw, top - 5); ctx.rotate(-Math.PI / 3);
        ctx.fillText(k[j], 0, 0); ctx.restore();
      });
    }
    const g = { left, top, cw, ch, cell };  // where the cells are drawn
    const asked = state.why && state.why.map === [state.example, state.kind, state.layer, state.head].join("|") ? state.why : null;
    const ar = asked ? seenRows.indexOf(asked.i) : -1, ac = asked ? seenCols.indexOf(asked.j) : -1;
    if (ar >= 0 && ac >= 0) {  // the cell whose score the box below explains
      ctx.strokeStyle = "#e020c0"; ctx.lineWidth = Math.max(2, Math.min(4, cell / 6));
      ctx.strokeRect(left + ac * cw, top + ar * ch, cw, ch);
    }
    if (!state.zoom && state.kind === "cross" && ex.p_t && ex.window !== null && ex.window !== undefined) {
      drawWindows(ctx, ex, rows, cols, g);
    }
    // the line above the map, while no cell is pointed at: which map it is and how large
    const which = heads() === 1 ? "the only head" : state.head === "mean" ? `average of ${heads()} heads` : `head ${state.head}`;
    const overview = `${KIND_LABEL[state.kind]}, layer ${layerName(state.layer)}, ${which}: ` +
      `${rows.length.toLocaleString("en")} queries × ${cols.length.toLocaleString("en")} keys`;
    $("readout").textContent = overview;
    interact(canvas, { ex, W, div, q, k, rows, cols, view, overview }, g);
    drawLegend(ex);
  }

  function drawWindows(ctx, ex, rows, cols, g) {
    const { left, top, cw, ch, cell } = g;
    // local attention: the window [p_t - D, p_t + D] of each row as an orange outline round the row's
    // cells in it (as the figures draw it: it belongs to its row and leaves the cells in view), and p_t
    // itself, a white ring (a triangle at the edge when p_t = S * sigmoid(.) passes the last key)
    const x = (p) => left + (p - cols[0] + 0.5) * cw, last = cols[cols.length - 1];
    rows.forEach((i, r) => {
      const p = ex.p_t[i], y = top + (r + 0.5) * ch, edge = last + 0.5;
      // round the cells of the keys the model attends to: the integers j with p_t - D <= j <= p_t + D
      const from = Math.ceil(p - ex.window), to = Math.floor(p + ex.window);
      const first = Math.max(cols[0], from), lastIn = Math.min(last, to);
      // the outline on the row's edges, its stroke over them (no sliver of a cell outside it), a row's
      // black edge meeting the next row's between them; open on a side the matrix's edge cuts, as the
      // figures draw it (the window goes on past the keys in view)
      const lo = x(first - 0.5), hi = x(lastIn + 0.5), half = Math.max(0.3 * ch, ch / 2 - 1.25);
      if (first <= lastIn) {
        const shut = [from >= cols[0], to <= last], yt = y - half, yb = y + half;
        const outline = () => {  // a closed side last to first, so the corners join
          ctx.beginPath();
          if (shut[0] && shut[1]) ctx.rect(lo, yt, hi - lo, 2 * half);
          else if (shut[0]) { ctx.moveTo(hi, yt); ctx.lineTo(lo, yt); ctx.lineTo(lo, yb); ctx.lineTo(hi, yb); }
          else if (shut[1]) { ctx.moveTo(lo, yt); ctx.lineTo(hi, yt); ctx.lineTo(hi, yb); ctx.lineTo(lo, yb); }
          else { ctx.moveTo(lo, yt); ctx.lineTo(hi, yt); ctx.moveTo(lo, yb); ctx.lineTo(hi, yb); }
          ctx.stroke();
        };
        ctx.strokeStyle = "#111"; ctx.lineWidth = 3.5; outline();
        ctx.strokeStyle = "#ff9f1c"; ctx.lineWidth = 2; outline();
      }
      const rad = Math.max(4, cell / (p <= edge ? 3.5 : 2.6));  // the triangle a little larger: it sits in a corner
      ctx.beginPath();
      if (p <= edge) {  // a ring, white edged in black: the cell under it stays in view
        ctx.arc(x(p), y, rad, 0, 2 * Math.PI);
        ctx.strokeStyle = "#111"; ctx.lineWidth = 4; ctx.stroke();
        ctx.strokeStyle = "white"; ctx.lineWidth = 2; ctx.stroke();
      } else {  // just outside the last column, pointing past it: the row's last cells stay in view
        const at = x(edge) + 3;
        ctx.moveTo(at, y - rad); ctx.lineTo(at + rad * 1.6, y); ctx.lineTo(at, y + rad); ctx.closePath();
        ctx.fillStyle = "white"; ctx.strokeStyle = "#111"; ctx.lineWidth = 1; ctx.fill(); ctx.stroke();
      }
    });
  }

  function interact(canvas, m, g) {  // the readout under the pointer; wheel: zoom about it; drag: pan; double-click: the whole
    const { ex, W, div, q, k, rows, cols, view, overview } = m, { left, top, cw, ch } = g;
    const at = (e) => {  // the cell under the pointer: (row, column) in rows/cols, or null
      const b = canvas.getBoundingClientRect();
      const c = Math.floor((e.clientX - b.left - left) / cw), r = Math.floor((e.clientY - b.top - top) / ch);
      return r < 0 || c < 0 || r >= view.nr || c >= view.nc ? null : { r: view.r + r, c: view.c + c, fr: r, fc: c };
    };
    canvas.onmousemove = (e) => {
      if (drag) {  // pan by whole cells
        const dr = Math.round((drag.y - e.clientY) / ch), dc = Math.round((drag.x - e.clientX) / cw);
        if (dr || dc) {
          state.zoom = { ...view, r: clamp(drag.view.r + dr, 0, rows.length - view.nr), c: clamp(drag.view.c + dc, 0, cols.length - view.nc) };
          if (state.zoom.r !== view.r || state.zoom.c !== view.c) requestAnimationFrame(drawMatrix);
        }
        return;
      }
      const hit = at(e);
      if (!hit) { $("readout").textContent = overview; return; }
      const i = rows[hit.r], j = cols[hit.c];
      let text = `${q[i]} (${i}) → ${k[j]} (${j}): weight ${W[i][j].toFixed(3)}`;
      if (state.pooled) text += " (zoomed out: a pixel shows the largest weight of the cells it covers)";
      if (state.scale === "row") text += ` (${(W[i][j] / div[hit.r]).toFixed(2)} of its row's largest, ${div[hit.r].toFixed(3)})`;
      if (ex.p_t && state.kind === "cross") text += ` · p_t = ${ex.p_t[i].toFixed(2)}, window ±${ex.window}`;
      $("readout").textContent = text;
    };
    let drag = null, moved = false;
    canvas.onmousedown = (e) => { moved = false; if (state.zoom) drag = { x: e.clientX, y: e.clientY, view: view }; };
    canvas.onmouseup = (e) => { if (drag && Math.hypot(e.clientX - drag.x, e.clientY - drag.y) > 3) moved = true; drag = null; };
    canvas.onclick = (e) => {  // why this cell is bright: its score by the writers of the two streams (the studio)
      const hit = at(e);
      if (!hit || moved) return;
      why(ex, rows[hit.r], cols[hit.c], q, k);
    };
    canvas.onmouseleave = () => { drag = null; $("readout").textContent = overview; };
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
  }

  let asking = 0;
  async function why(ex, i, j, q, k) {
    const box = $("qk-why"), m = lib.currentModel && lib.live ? lib.currentModel() : null;
    if (!m || !m.capabilities.circuits || !ex.record) return;
    box.hidden = false;
    box.dataset.map = [state.example, state.kind, state.layer, state.head].join("|");
    state.why = { map: box.dataset.map, i: i, j: j };
    drawMatrix();  // the cell outlined
    if (state.head === "mean" || state.kind === "cross") {
      box.textContent = state.kind === "cross" ? "Why a cell is bright is told for self-attention (a cross-attention head's keys are the encoder's)"
        : "Choose one head (not the average) and click a cell to see why it is bright";
      return;
    }
    const ids = ex.layerIds && ex.layerIds[state.kind], layer = ids ? ids[state.layer] : state.layer, mine = ++asking;
    box.textContent = `why ${q[i]} (${i}) → ${k[j]} (${j}) is bright in head ${state.head}…`;
    let a;
    try {
      a = await lib.api("/api/qk", { model: state.model, record: ex.record, kind: state.kind, layer: layer, head: state.head, query: i, key: j });
    } catch (err) { if (mine === asking) box.textContent = String(err.message || err); return; }
    if (mine !== asking) return;
    box.innerHTML = "";
    const bias = a.bias ? ` + bias ${a.bias.toFixed(3)}` : "";
    lib.html("div", {}, box, `Layer ${layer}, head ${a.head}: ${a.query_token} (${a.query}) → ${a.key_token} (${a.key}), weight ` +
      `${a.weight.toFixed(3)}, score ${a.score.toFixed(3)}${bias} = the sum over every writer a of the query's stream and b ` +
      "of the key's of the score q(a) · k(b) they make alone (the layer's norms frozen at their scale here; RoPE " +
      "rotates each term; attnkit qk)");
    const line = (what, shares) => lib.html("div", {}, box, `through the ${what}: ` +
      shares.slice(0, 4).map((s) => `${s.writer} ${s.score >= 0 ? "+" : "−"}${Math.abs(s.score).toFixed(3)}`).join(", "));
    line("query", a.by_query); line("key", a.by_key);
    const table = lib.html("table", {}, box), head = lib.html("tr", {}, table);
    for (const [text, cls] of [["the query's writer × the key's", ""], ["term", "num"], ["share", "num"]]) lib.html("th", { class: cls }, head, text);
    for (const t of a.terms.slice(0, 5)) {
      const tr = lib.html("tr", {}, table);
      lib.html("td", {}, tr, `${t.query_writer} × ${t.key_writer}`);
      lib.html("td", { class: "num" }, tr, `${t.score >= 0 ? "+" : "−"}${Math.abs(t.score).toFixed(3)}`);
      lib.html("td", { class: "num" }, tr, t.share === null ? "" : `${t.share < 0 ? "−" : ""}${Math.abs(100 * t.share).toFixed(0)}%`);
    }
    drawMatrix();  // smaller, so that the map and this answer are both in view
  }

  function drawLegend(ex) {
    const shownHead = heads() === 1 ? "the only head" : state.head === "mean" ? "average of heads" : `head ${state.head}`;
    let text = `layer ${layerName(state.layer)}, ${shownHead}: ` +
      (state.scale === "row" ? "weight ÷ its row's largest (per-query scale)" : "attention weight (absolute)");
    if (state.hideSpecial) text += "; special tokens hidden, rows not renormalised";
    if (state.pooled) text += "; each pixel: the largest weight of the cells it covers";
    const q = queries(ex, state.kind), k = keys(ex, state.kind), z = state.zoom;
    const where = z ? `queries ${z.r}-${z.r + z.nr - 1} of ${z.rows}, keys ${z.c}-${z.c + z.nc - 1} of ${z.cols}: drag to move, wheel to zoom, double-click for all`
      : q.length * k.length > 400 ? "wheel to zoom in, drag to move" : "";
    const more = ex.p_t && state.kind === "cross" && !z  // a line each: the wrap never splits one apart
      ? [`orange outline: each row's window p_t ± ${ex.window}`, "white ring: p_t; a triangle: p_t lies past the last key"]
      : [where || (state.head === "mean" && heads() > 1 ? `average of ${heads()} heads` : "")];
    const streamed = lib.streamedClass(ex);
    if (streamed) more.push(streamed);
    colourBar($("legend"), BAR + 760, state.scale === "row" ? "row's largest" : "1", [text, ...more]);
  }

  return { tabs: { matrix: drawMatrix } };
};
