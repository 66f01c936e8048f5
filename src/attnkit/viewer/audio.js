"use strict";
// The sound view: a speech model's output tokens, each a row of its cross-attention over the encoder's
// positions in time, under the spectrogram its encoder heard; the chosen token's weights as a curve.
(window.attnkitViews = window.attnkitViews || {}).audio = function (lib) {
  const { $, html, state, example, heads, matrixOf, area, clamp, layerName, setupCanvas, colour, colourBar } = lib;
  const LABEL = 170, ROW = 18, SOUND = 110, CURVE = 70, AXIS = 24, FONT = "14px system-ui, sans-serif";

  let drawn = 0;  // the latest draw: an earlier one whose sound decodes later draws nothing

  function drawAudioView() {
    const ex = example(), box = $("audio-view"), ticket = ++drawn;
    if (!ex.spectrogram || !ex.maps.cross) { box.innerHTML = ""; return; }
    if (state.kind !== "cross") { box.innerHTML = ""; html("p", { class: "note" }, box, "this view draws the cross-attention, each output token over the sound: choose the cross kind"); return; }
    const words = ex.tgt_out_tokens, W = matrixOf(state.layer, state.head), step = ex.frame_seconds;  // the kind is cross
    const pinned = state.pinned && state.pinned.side === "q" ? state.pinned.i : null;
    const query = clamp(pinned === null ? Math.min(1, words.length - 1) : pinned, 0, words.length - 1);
    const img = new Image();
    img.onload = () => {  // chips and map drawn together, once the spectrogram is decoded: never one without the other
      if (ticket !== drawn) return;
      box.innerHTML = "";
      const chips = html("div", { class: "chips" }, box);
      words.forEach((t, i) => {
        const b = html("button", { type: "button", class: i === query ? "chip on" : "chip" }, chips, t);
        b.addEventListener("click", () => { state.pinned = { side: "q", i: i }; drawAudioView(); });
      });
      paint(box, ex, W, words, query, img, step);
    };
    img.src = ex.spectrogram;
  }

  function paint(box, ex, W, words, query, img, step) {
    const heard = img.width, room = area(), width = clamp(Math.floor(room.w - 20), 420, 1600);
    const plot = width - LABEL - 10, cell = plot / heard, rows = words.length;
    let top = 1e-9;
    for (const row of W) for (let j = 0; j < heard; j++) if (row[j] > top) top = row[j];
    const height = SOUND + CURVE + AXIS + 8 + rows * ROW;
    const c = html("canvas", { id: "audio-heat" }, box), ctx = setupCanvas(c, width, height);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(img, LABEL, 0, plot, SOUND);  // the spectrogram, one column per encoder position
    const curveTop = SOUND + 4, row = W[query];
    ctx.fillStyle = "#f3f4f6"; ctx.fillRect(LABEL, curveTop, plot, CURVE);
    ctx.fillStyle = "#2563eb";
    for (let j = 0; j < heard; j++) {
      const h = (row[j] / top) * CURVE;
      ctx.fillRect(Math.round(LABEL + j * cell), curveTop + CURVE - h, Math.max(1, Math.round(LABEL + (j + 1) * cell) - Math.round(LABEL + j * cell)), h);
    }
    const gridTop = curveTop + CURVE + 4;
    const edge = (j) => Math.round(LABEL + j * cell);  // whole pixels: no seam between two cells
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < heard; j++) {
        ctx.fillStyle = colour(W[i][j] / top);
        ctx.fillRect(edge(j), gridTop + i * ROW, edge(j + 1) - edge(j), ROW);
      }
    }
    ctx.strokeStyle = "#ff5a5a"; ctx.lineWidth = 2;
    ctx.strokeRect(LABEL + 1, gridTop + query * ROW + 1, plot - 2, ROW - 2);
    ctx.fillStyle = "#1d2330"; ctx.font = FONT; ctx.textBaseline = "middle"; ctx.textAlign = "right";
    ctx.fillText("log-mel", LABEL - 8, SOUND / 2 - 9);
    ctx.fillText("pitch ↑", LABEL - 8, SOUND / 2 + 9);
    ctx.fillText(`“${words[query]}” (${query})`, LABEL - 8, curveTop + CURVE / 2 - 9);
    ctx.fillText(`0 to ${top.toFixed(3)}`, LABEL - 8, curveTop + CURVE / 2 + 9);
    words.forEach((t, i) => ctx.fillText(t.length > 18 ? t.slice(0, 17) + "…" : t, LABEL - 8, gridTop + i * ROW + ROW / 2));
    const axis = gridTop + rows * ROW + 4, seconds = heard * step, every = niceStep(seconds, plot);
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (let s = 0; s <= seconds + 1e-9; s += every) {
      const x = LABEL + (s / seconds) * plot;
      ctx.fillRect(x - 0.5, axis - 4, 1, 4);
      ctx.fillText(`${+s.toFixed(2)} s`, clamp(x, LABEL + 16, LABEL + plot - 16), axis + 2);
    }
    const at = (e) => {
      const b = c.getBoundingClientRect(), x = e.clientX - b.left, y = e.clientY - b.top;
      const j = clamp(Math.floor((x - LABEL) / cell), 0, heard - 1);
      const i = y >= gridTop ? clamp(Math.floor((y - gridTop) / ROW), 0, rows - 1) : query;
      return [i, j];
    };
    c.onmousemove = (e) => {
      const [i, j] = at(e);
      $("readout").textContent = `${words[i]} → ${(j * step).toFixed(2)}–${((j + 1) * step).toFixed(2)} s: weight ${W[i][j].toFixed(4)}`;
    };
    c.onclick = (e) => {
      const [i] = at(e);
      state.pinned = { side: "q", i: i };
      drawAudioView();
    };
    const sum = (xs) => xs.reduce((x, y) => x + y, 0), all = Array.from(row);
    const pad = sum(all.slice(heard)), which = state.head === "mean" ? "average of heads" : heads() === 1 ? "its one attention" : `head ${state.head}`;
    colourBar(html("canvas", {}, box), 960, top.toFixed(4), [
      `each output token's cross-attention over the ${seconds.toFixed(2)} s of sound (${heard} encoder positions of ${(step * 1000).toFixed(0)} ms), layer ${layerName(state.layer)}, ${which}`,
      `scale: 0 to the largest weight drawn; “${words[query]}” puts ${pad.toFixed(4)} of its weight on the ${all.length - heard} padding positions after the sound (the model hears ${(all.length * step).toFixed(1)} s at a time)`]);
  }

  function niceStep(seconds, pixels) {  // a tick every 1, 2 or 5 x 10^k seconds, about 90 px apart
    const rough = seconds / Math.max(1, Math.floor(pixels / 90)), ten = Math.pow(10, Math.floor(Math.log10(rough)));
    return [1, 2, 5, 10].map((m) => m * ten).find((s) => s >= rough) || rough;
  }

  return { tabs: { audio: drawAudioView } };
};
