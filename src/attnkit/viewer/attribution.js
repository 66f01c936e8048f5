"use strict";
// The attribution view (live): what each output token (or encoder position) draws on, by the
// chosen method, as a matrix over the input tokens.
(window.attnkitViews = window.attnkitViews || {}).attribution = function (lib) {
  const {
    $, html, state, example, area, clamp, fitCells, textWidth, setupCanvas, renderCells, colourBar, api, FAMILY, SMALL
  } = lib;
  const attributionCache = new Map();
  const ABOUT = {  // what the chosen method does, under the map
    "attention": "Raw attention: the last layer's weights (the mean of its heads, where it has several).",
    "rollout": "Rollout multiplies every layer's attention, mixed with the residual connection (Abnar & Zuidema 2020).",
    "flow": "Flow: the most weight that can pass from each input through every layer, as a flow network (Abnar & Zuidema 2020).",
    "value-norm": "Value-norm weighs each weight by the size of what the token sends, ‖a f(x)‖ (Kobayashi et al. 2020).",
    "grad-attention": "Gradient-weighted attention keeps the heads and weights that raise the output token's probability " +
      "(Chefer et al. 2021). A gradient method explains an output: the output tokens, or an encoder's sentence vector.",
    "integrated-gradients": "Integrated gradients follow the gradient back to the input vectors along a path from a " +
      "zero input (Sundararajan et al. 2017). A gradient method explains an output: the output tokens, or an encoder's sentence vector.",
    "input-x-gradient": "Input × gradient: each input vector times its gradient (Shrikumar et al. 2016). A gradient " +
      "method explains an output: the output tokens, or an encoder's sentence vector.",
  };
  async function drawAttribution() {
    const ex = example(), box = $("attribution"), method = $("attr-method").value, side = $("attr-side").value;
    $("attr-about").textContent = ABOUT[method] || "";
    const request = { model: state.model, text: ex.source, method: method, side: side };
    if (ex.image) request.image = ex.image;
    if (ex.audio) request.audio = ex.audio;
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
    const font = nc <= 40 ? `15px ${FAMILY}` : SMALL, guess = textWidth(both, font) + 10;  // labels: left and slanted above
    // the pane, less what the tab holds besides the matrix (its controls and help, measured with the matrix
    // not yet drawn), the readout above and the colour bar below: the help stays in the window
    const besides = $("tab-attribution").getBoundingClientRect().height + 90;
    const fit = fitCells((room.w - guess - 60) / nc, (room.h - guess * 0.87 - besides) / nr);
    const cw = clamp(Math.floor(fit.w), 1, 96), ch = clamp(Math.floor(fit.h), 1, 80);
    const labelled = Math.min(cw, ch) >= 7, lw = labelled ? guess : 6;
    const top = labelled ? Math.ceil(lw * Math.sin(Math.PI / 3)) + 10 : 6;
    const c = html("canvas", { id: "attr-matrix" }, box), ctx = setupCanvas(c, lw + cw * nc + 40, top + ch * nr + 6);
    const peak = Math.max(...r.scores.map((row) => Math.max(...row)));  // said under the bar; the scale is 0 to 1
    renderCells(ctx, r.scores, rowIdx, colIdx, colIdx.map(() => 1), { r: 0, c: 0, nr: nr, nc: nc }, lw, top, cw * nc, ch * nr);
    if (labelled) {
      ctx.fillStyle = "#1d2330"; ctx.font = font; ctx.textBaseline = "middle"; ctx.textAlign = "right";
      r.rows.forEach((t, i) => ctx.fillText(t, lw - 5, top + (i + 0.5) * ch));
      ctx.textAlign = "left";
      r.tokens.forEach((t, j) => { ctx.save(); ctx.translate(lw + (j + 0.5) * cw, top - 5); ctx.rotate(-Math.PI / 3); ctx.fillText(t, 0, 0); ctx.restore(); });
    }
    const row = { output: "output token", encoder: "top-layer position", sentence: "row" }[r.side];
    const drawn = ctx.getImageData(0, 0, c.width, c.height);  // the matrix as drawn: the hovered cell's frame goes on it
    c.onmousemove = (e) => {
      const b = c.getBoundingClientRect(), j = Math.floor((e.clientX - b.left - lw) / cw), i = Math.floor((e.clientY - b.top - top) / ch);
      ctx.putImageData(drawn, 0, 0);
      if (i >= 0 && j >= 0 && i < nr && j < nc) {
        ctx.strokeStyle = "#dc2626"; ctx.lineWidth = 2.5; ctx.strokeRect(lw + j * cw + 1, top + i * ch + 1, cw - 2, ch - 2);
      }
      $("readout").textContent = i >= 0 && j >= 0 && i < nr && j < nc
        ? (r.side === "encoder" ? `${r.label}: position ${i} “${r.rows[i]}” draws ${r.scores[i][j].toFixed(3)} of itself from “${r.tokens[j]}” (${j})`
          : `${r.label}: ${row} ${i} “${r.rows[i]}” draws ${r.scores[i][j].toFixed(3)} from “${r.tokens[j]}” (${j})`) : "";
    };
    c.onmouseleave = () => { ctx.putImageData(drawn, 0, 0); $("readout").textContent = ""; };
    colourBar(html("canvas", {}, box), 1040, "1", [
      `${r.label}: share of each ${row} (0 to 1, as every attention map; the largest here ${peak.toFixed(3)})`,
      `computed in ${r.server_ms} ms (server)`]);
  }

  return { tabs: { attribution: drawAttribution } };
};
