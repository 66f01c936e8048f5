"use strict";
// The model view: every layer and head of one kind as thumbnails; click one to open it in the
// head view.
(window.attnkitViews = window.attnkitViews || {}).model = function (lib) {
  const {
    $, html, state, example, queries, keys, shown, heads, rowScale, scaleNote, area, clamp, layerName, layerCount,
    setupCanvas, renderCells, colour, selectTab, KIND_LABEL, LEGEND
  } = lib;
  // the room under the tab's last line, in the pane: what a second pass may give the thumbnails
  function spareHeight() {
    if ($("tab-model").hidden) return 0;
    const m = document.querySelector("main"), box = m.getBoundingClientRect();
    return Math.floor(box.top + m.clientHeight - 16 - $("tab-model").getBoundingClientRect().bottom);
  }
  function drawModelView() { drawModel(0); }
  function drawModel(bonus) {  // ``bonus``: px of height per layer that the first pass left under the tab
    const ex = example(), q = queries(ex, state.kind), k = keys(ex, state.kind);
    const rows = shown(q), cols = shown(k), maps = ex.maps[state.kind];
    const grid = $("model-grid"); grid.innerHTML = ""; grid.style.rowGap = "";
    const h = heads(), room = area();
    // thumbnails as large as the pane allows: every head of a layer in one row, every layer in sight if it can
    // be; square cells, so that a map keeps its shape (a diagonal at 45 degrees)
    const fitW = Math.floor((room.w - 80) / h) - 8, fitH = Math.floor((room.h - 110) / maps.length) - 8 + bonus;
    const aspect = clamp(cols.length / Math.max(1, rows.length), 0.5, 2);  // the map's width over its height
    const sideW = clamp(Math.round(Math.min(fitW, fitH * aspect)), 32, 260);
    const sideH = clamp(Math.round(sideW / aspect), 32, 260);
    grid.style.gridTemplateColumns = `auto repeat(${h}, ${sideW + 4}px)`;
    const narrow = sideW < 64;  // "head 10" wider than its thumbnail: the word once, in the corner
    html("div", { class: "axis" }, grid, narrow ? "head" : "");
    for (let j = 0; j < h; j++) html("div", { class: "axis" }, grid, h === 1 ? "the only head" : narrow ? String(j) : `head ${j}`);
    maps.forEach((layerMaps, l) => {
      html("div", { class: "axis" }, grid, `layer ${layerName(l)}`);
      layerMaps.forEach((W, j) => {
        const c = html("canvas", { "data-layer": l, "data-head": j, title: `layer ${layerName(l)}, head ${j}` }, grid);
        const div = rowScale(W, rows, cols), ctx = setupCanvas(c, sideW, sideH);
        const paint = () => renderCells(ctx, W, rows, cols, div, { r: 0, c: 0, nr: rows.length, nc: cols.length }, 0, 0, sideW, sideH);
        paint();
        let framed = null;  // the cell framed now: the thumbnail is repainted only when it changes
        if (l === state.layer && String(j) === String(state.head)) c.classList.add("selected");
        c.addEventListener("mousemove", (e) => {  // the tokens under the pointer, their cell framed
          const b = c.getBoundingClientRect();
          const r = clamp(Math.floor((e.clientY - b.top) / b.height * rows.length), 0, rows.length - 1);
          const cc = clamp(Math.floor((e.clientX - b.left) / b.width * cols.length), 0, cols.length - 1);
          if (framed === `${r},${cc}`) return;
          framed = `${r},${cc}`;
          const i = rows[r], jj = cols[cc];
          $("readout").textContent = `layer ${layerName(l)}, head ${j}: ${q[i]} (query ${i}) → ${k[jj]} (key ${jj}): weight ${W[i][jj].toFixed(3)}`;
          const cw = sideW / cols.length, ch = sideH / rows.length;
          paint();
          ctx.strokeStyle = "#dc2626"; ctx.lineWidth = 1.5;
          ctx.strokeRect(cc * cw + 0.75, r * ch + 0.75, Math.max(2, cw - 1.5), Math.max(2, ch - 1.5));
        });
        c.addEventListener("mouseleave", () => { framed = null; paint(); $("readout").textContent = overview; });
        c.addEventListener("click", () => {
          state.layer = l; state.head = j; state.apart = false; $("layer").value = l; $("head").value = j; state.chips = new Set([j]);
          selectTab("head");
        });
      });
    });
    const held = maps.length < layerCount() ? ` (this page holds ${maps.length} of the model's ${layerCount()} layers)` : "";
    const overview = `${KIND_LABEL[state.kind]}: ${maps.length} layer(s) × ${h} head(s)${held}; ${scaleNote()}`;
    $("readout").textContent = overview;
    const w = 220, ctx = setupCanvas($("model-legend"), Math.min(w + 640, room.w), 36);
    for (let x = 0; x < w; x++) { ctx.fillStyle = colour(x / (w - 1)); ctx.fillRect(x + 10, 2, 1, 12); }
    ctx.fillStyle = "#1d2330"; ctx.font = LEGEND; ctx.textBaseline = "top";
    ctx.textAlign = "left"; ctx.fillText("0", 10, 17);
    ctx.textAlign = "right"; ctx.fillText(state.scale === "row" ? "row's largest" : "1", w + 10, 17);
    ctx.textAlign = "left";
    ctx.fillText(state.scale === "row" ? "weight ÷ its row's largest (per-query scale)" : "attention weight (absolute, every thumbnail)", w + 22, 2);
    ctx.fillStyle = "#667085";  // the frames, in their own colours' words (blue only where one head is chosen)
    const framed = state.head !== "mean" && !state.apart;
    ctx.fillText((framed ? "blue frame: the layer and head the other views show; " : "") + "red frame: under the pointer", w + 22, 19);
    // the reserve under the grid is a guess: what it left unused goes to larger thumbnails, once, where the
    // height bound them
    const spare = bonus ? 0 : spareHeight();
    if (spare >= 2 * maps.length && sideW < Math.min(fitW, 260)) drawModel(Math.floor(spare / maps.length));
    else if (spare > 24 && maps.length > 1)  // the width bound them: the layers spread over the height left
      grid.style.rowGap = `${4 + Math.min(20, Math.floor((spare - 24) / (maps.length - 1)))}px`;
  }

  return { tabs: { model: drawModelView } };
};
