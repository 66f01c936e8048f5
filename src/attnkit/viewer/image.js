"use strict";
// The image view: a query's attention over an image model's patches (a captioner's words over
// the image's regions; a vision-language model's words over its image's tokens), beside the image as the model saw it.
(window.attnkitViews = window.attnkitViews || {}).image = function (lib) {
  const {
    $, html, state, example, queries, keys, heads, matrixOf, area, clamp, layerName, setupCanvas, colour,
    colourBar
  } = lib;
  function drawImageView() {
    const ex = example(), box = $("image-view"); box.innerHTML = "";
    if (!ex.image || !ex.grid) return;
    const q = queries(ex, state.kind), k = keys(ex, state.kind);
    // a vision-language model's decoder: its image's tokens are a run of its own sequence, on their own grid
    const within = state.kind === "decoder" && ex.image_tokens ? ex.image_tokens : null;
    const [gr, gc] = within ? within.slice(1) : ex.grid;
    const overImage = within || (k.length >= gr * gc && state.kind !== "decoder");  // keys: the patches, after any [CLS]
    if (!overImage) { html("p", { class: "note" }, box, "the decoder attends over the words it has written, not over the image: choose the cross kind"); return; }
    const first = within ? within[0] : k.length - gr * gc, selfOver = state.kind === "encoder";  // the patches' own attention: queries are patches too
    const after = within ? first + gr * gc : 0;  // the words that read the image: those after its tokens
    const fallback = within ? Math.min(q.length - 1, Math.max(after, ex.prompt_length || 0)) : 0;  // the first word written
    const query = state.pinned && state.pinned.side === "q" && state.pinned.i >= after ? Math.min(state.pinned.i, q.length - 1) : fallback;
    if (!selfOver) {  // the words of the output (after the image) as the queries to choose from
      const words = html("div", { class: "chips" }, box);
      q.forEach((t, i) => {
        if (i < after) return;
        const b = html("button", { type: "button", class: i === query ? "chip on" : "chip" }, words, t);
        b.addEventListener("click", () => { state.pinned = { side: "q", i: i }; drawImageView(); });
      });
    }
    const row = matrixOf(state.layer, state.head)[query], patches = Array.from(row).slice(first, first + gr * gc);
    const top = Math.max(1e-9, ...patches), room = area();
    const side = clamp(Math.floor(Math.min((room.w - 80) / 2, room.h - 160)), 160, 900);
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
      $("readout").textContent = `${q[query]} → ${selfOver ? "patch" : within ? "image token" : "region"} ${pr},${pc}: weight ${patches[pr * gc + pc].toFixed(4)}`;
    };
    if (selfOver) c.onclick = (e) => {
      const [pr, pc] = at(e);
      state.pinned = { side: "q", i: first + pr * gc + pc };
      drawImageView();
      $("readout").textContent = `query: patch ${pr},${pc} (pinned; it is the query of the head view and the neuron view too)`;
    };
    const which = state.head === "mean" ? "average of heads" : heads() === 1 ? "its one attention" : `head ${state.head}`;
    const sum = (xs) => xs.reduce((x, y) => x + y, 0);
    const rest = within ? `; its weight on the image: ${sum(patches).toFixed(4)}, on the text: ${(sum(Array.from(row)) - sum(patches)).toFixed(4)}`
      : first ? `; its weight on ${k.slice(0, first).join(", ")}: ${sum(Array.from(row).slice(0, first)).toFixed(4)}` : "";
    colourBar(html("canvas", {}, box), 960, top.toFixed(4), [
      `${q[query]}'s attention over the ${gr} x ${gc} ${selfOver ? "patches" : within ? "image tokens" : "regions"}, layer ${layerName(state.layer)}, ${which}`,
      `scale: 0 to its largest weight${rest}`]);
  }

  return { tabs: { image: drawImageView } };
};
