"use strict";
// Positions and contextual vectors (live): the model's positional scheme as a figure, and how
// alike one word's vectors are in two places, layer by layer.
(window.attnkitViews = window.attnkitViews || {}).positions = function (lib) {
  const { $, html, state, example, fmt, api, info } = lib;
  function drawPositions() {
    const box = $("positions"); box.innerHTML = "";
    const img = html("img", { alt: `positional scheme of ${state.model}`, src: `/api/positions?model=${encodeURIComponent(state.model)}` }, box);
    img.addEventListener("error", () => { box.innerHTML = ""; html("p", { class: "note" }, box, "this model has no positional scheme to draw"); });
    $("readout").textContent = "the model's positional scheme, as attnkit positions draws it: the same for every input";
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

  return { tabs: { positions: drawPositions, embed: drawEmbed } };
};
