"use strict";
// The head atlas (the studio, attnkit.heads): every head of the chosen attention as one cell of a
// layers x heads grid, coloured by a detector's score or by what the model loses without the
// head; the heads a detector flags are outlined. Hover a head for all its scores; click it to
// open it.
(window.attnkitViews = window.attnkitViews || {}).atlas = function (lib) {
  const { $, state, example, area, clamp, fitCells, setupCanvas, colour, diverging, api, selectTab, KIND_LABEL, FAMILY } = lib;
  const answers = new Map();  // record, kind, ablation -> the server's atlas (a promise)
  const FLAG = "#e020c0";  // magenta: apart from the red of the ablation's scale
  let ticket = 0;

  function ask(ex) {
    const ablate = $("atlas-ablate").value || null, stream = $("atlas-stream").value || null;
    const key = [ex.record, state.kind, ablate, stream].join("|");
    if (!answers.has(key)) {
      const cache = stream ? { sinks: +stream.split(",")[0], window: +stream.split(",")[1] } : null;
      const answer = api("/api/atlas", { model: state.model, record: ex.record, kind: state.kind, ablate: ablate, streaming: cache });
      answers.set(key, answer);
      answer.catch(() => answers.delete(key));
    }
    return answers.get(key);
  }

  // what the grid can be coloured by: each detector, then (once measured) the ablation and importance
  function measures(a) {
    const out = a.detectors.map((d) => ({
      key: d.name, label: d.name.replace(/_/g, "-"), values: d.values, threshold: d.threshold, unit: d.unit,
      scale: d.unit === "tokens" ? "top" : "share", about: `${d.means} (${d.paper}` + (d.threshold === null ? "; ranked)" : `; flagged at ≥ ${d.threshold})`),
    }));
    if (a.ablation) {
      const m = a.ablation;
      out.push({ key: "ablation", label: `${m.mode}-ablated alone`, values: m.effect, threshold: null, unit: `change in the ${m.measure}`,
                 scale: "effect", about: `each head ${m.mode}-ablated alone: the ${m.measure} with the head removed, minus ${m.base.toFixed(3)}, ` +
                 "the measure with every head (red: the model needs the head)" });
      out.push({ key: "importance", label: "importance", values: m.importance, threshold: null, unit: "|∂ measure / ∂ gate|", scale: "top",
                 about: "Michel et al. 2019: the measure's gradient on a gate on the head's output, in absolute value (a first-order " +
                 "estimate of what removing it costs)" });
    }
    if (a.streaming) {
      const c = a.streaming, cache = `a cache of ${c.sinks} sinks + ${c.window.toLocaleString("en")} recent keys`;
      out.push({ key: "stream_cost", label: "cost over the cache", values: c.cost, threshold: c.threshold, unit: `change in the ${c.measure}`,
                 scale: "effect", about: `each head alone over ${cache} (StreamingLLM), every other head exact: the ${c.measure} ` +
                 `less ${c.base.toFixed(3)}; outlined: retrieval heads, costing more than ${c.threshold} (the others can stream)` });
      out.push({ key: "stream_outside", label: "weight outside the cache", values: c.outside, threshold: null, unit: "weight", scale: "share",
                 about: `each query's weight on the keys ${cache} drops, the mean over the queries past it` });
      if (c.needle) {
        const lost = c.needle.map((row) => row.map((v) => v === null ? null : Math.max(0, c.needle_base - v)));
        out.push({ key: "stream_needle", label: "copy lost over the cache", values: lost, threshold: c.needle_drop, unit: "share of the copy",
                   scale: "share", about: `the input ends with a copy of an earlier span: the share of it the model predicts with every head ` +
                   `exact (${c.needle_base.toFixed(3)}) less that with the head alone over ${cache}; outlined: retrieval heads, losing more than ${c.needle_drop}` });
      }
      out.push({ key: "stream_estimate", label: "cost, first-order", values: c.estimate, threshold: null, unit: `change in the ${c.measure}`,
                 scale: "effect", about: "<dL/dz, z' − z>: the gradient on a gate between the head's full and cached outputs (DuoAttention's)" });
    }
    return out;
  }

  function fillChoices(list) {
    const by = $("atlas-by"), was = state.atlasBy || by.value;
    by.innerHTML = "";
    for (const m of list) lib.html("option", { value: m.key }, by, m.label);
    by.value = list.some((m) => m.key === was) ? was : (list.find((m) => m.key === "induction") || list[0]).key;
  }

  async function drawAtlas() {
    const ex = example(), mine = ++ticket, box = $("atlas-grid");
    if (!lib.live || !ex.record) {
      box.getContext("2d").clearRect(0, 0, box.width, box.height);
      $("readout").textContent = "The head atlas is computed by the studio (attnkit serve); on a saved page, run attnkit heads --detect all";
      return;
    }
    $("readout").textContent = $("atlas-ablate").value || $("atlas-stream").value ? "running each head in turn (the model runs once per head)…" : "scoring every head…";
    let a;
    try { a = await ask(ex); } catch (err) { if (mine === ticket) $("readout").textContent = String(err.message || err); return; }
    if (a.streaming) state.streamed = { record: ex.record, kind: state.kind, ...a.streaming };  // the maps' legends name each head's class
    if (mine !== ticket || state.tab !== "atlas") return;
    const list = measures(a);
    fillChoices(list);
    render(a, list.find((m) => m.key === $("atlas-by").value), list);
  }

  function cellColour(m, v, top) {
    if (v === null || v === undefined) return "#d1d5db";
    if (m.scale === "effect") return diverging(v / (top || 1));
    return colour(m.scale === "share" ? clamp(v, 0, 1) : v / (top || 1));
  }

  function number(m, v, digits) {  // an effect signed (0 unsigned), a distance to 0.1, a share to 2 digits
    if (m.scale === "effect") {  // signed; one significant digit where the fixed digits would read 0.000
      const a = Math.abs(v);
      return v === 0 ? (0).toFixed(digits) : (v > 0 ? "+" : "−") + (a < 0.5 * 10 ** -digits ? a.toPrecision(1) : a.toFixed(digits));
    }
    if (m.key === "importance") return v.toPrecision(digits === 3 ? 2 : 3);
    return v.toFixed(m.unit === "tokens" ? 1 : digits === 3 ? 2 : 3);
  }

  function cellText(m, v, top) {  // one format for every cell of a grid: effects and importance to the decimals
    // that give its largest value two significant digits (a value that rounds to 0 reads 0.000, unsigned;
    // the readout gives it in full)
    if (m.scale !== "effect" && m.key !== "importance") return number(m, v, 3);
    const digits = clamp(1 - Math.floor(Math.log10(top)), 0, 6), text = Math.abs(v).toFixed(digits);
    return m.scale === "effect" && Number(text) !== 0 ? (v > 0 ? "+" : "−") + text : text;
  }

  function render(a, m, list, hovered) {
    const L = a.layers, H = a.heads, room = area(), canvas = $("atlas-grid");
    const flat = m.values.flat().filter((v) => v !== null), top = Math.max(1e-12, ...flat.map(Math.abs));
    const left = 74, head = 40, label = `13px ${FAMILY}`;
    const fit = fitCells((room.w - left - 16) / H, (room.h - head - 215) / L);
    const ch = clamp(Math.floor(fit.h), 8, 140), cw = clamp(Math.floor(fit.w), 8, 224);
    const cell = Math.min(cw, ch);
    const width = left + cw * H + 8, height = head + ch * L + 4;
    const ctx = setupCanvas(canvas, width, height);
    ctx.font = label; ctx.fillStyle = "#1d2330"; ctx.textBaseline = "middle";
    const everyH = Math.ceil(18 / cw), everyL = Math.ceil(16 / ch);
    ctx.textAlign = "center";
    for (let h = 0; h < H; h += everyH) ctx.fillText(String(h), left + (h + 0.5) * cw, head - 10);
    ctx.fillText("head", left + (cw * H) / 2, 8);
    ctx.textAlign = "right";
    for (let l = 0; l < L; l += everyL) ctx.fillText(`layer ${l}`, left - 6, head + (l + 0.5) * ch);
    for (let l = 0; l < L; l++) {
      for (let h = 0; h < H; h++) {
        const v = m.values[l][h];
        ctx.fillStyle = cellColour(m, v, top);
        ctx.fillRect(left + h * cw, head + l * ch, cw - 1, ch - 1);
        if (m.threshold !== null && v !== null && v >= m.threshold) {
          ctx.strokeStyle = FLAG; ctx.lineWidth = Math.max(2, cell / 10);
          ctx.strokeRect(left + h * cw + 1, head + l * ch + 1, cw - 3, ch - 3);
        }
        if (hovered && hovered[0] === l && hovered[1] === h) {  // the head the readout describes
          ctx.strokeStyle = "#111"; ctx.lineWidth = 3;
          ctx.strokeRect(left + h * cw - 1, head + l * ch - 1, cw + 1, ch + 1);
        }
        if (cell >= 40 && v !== null) {  // room for the number
          const dark = m.scale === "effect" ? Math.abs(v) / top > 0.55 : (m.scale === "share" ? v : v / top) < 0.6;
          ctx.fillStyle = dark ? "#fff" : "#111";
          ctx.textAlign = "center"; ctx.font = `${cell >= 70 ? 15 : 12}px ${FAMILY}`;
          ctx.fillText(cellText(m, v, top), left + (h + 0.5) * cw, head + (l + 0.5) * ch);
          ctx.font = label;
        }
      }
    }
    const flagged = m.threshold === null ? null : flat.filter((v) => v >= m.threshold).length;
    const summary = `${KIND_LABEL[state.kind]}: ${L} layer(s) × ${H} head(s)` + (flagged === null ? "" : `; ${flagged} flagged ${m.label}`) +
      (a.unscored.length ? `; not scored on this input: ${a.unscored.join(", ").replace(/_/g, "-")}` : "");
    $("readout").textContent = summary;
    const at = (e) => {
      const b = canvas.getBoundingClientRect(), x = e.clientX - b.left - left, y = e.clientY - b.top - head;
      const h = Math.floor(x / cw), l = Math.floor(y / ch);
      return h >= 0 && h < H && l >= 0 && l < L ? [l, h] : null;
    };
    canvas.onmousemove = (e) => {
      const p = at(e);
      canvas.style.cursor = p ? "pointer" : "";
      if (String(p) !== String(hovered)) { render(a, m, list, p); return; }
      if (!p) { $("readout").textContent = summary; return; }
      const [l, h] = p;
      const parts = list.map((x) => {
        const v = x.values[l][h];
        const text = v === null ? "–" : number(x, v, 4) + (x.unit === "tokens" ? " tokens" : "");
        const off = x.key === "positional" && a.offsets ? ` at ${a.offsets[l][h] >= 0 ? "+" : ""}${a.offsets[l][h]}` : "";
        return `${x.label} ${text}${off}` + (x.threshold !== null && v >= x.threshold ? " ⚑" : "");
      });
      $("readout").textContent = `layer ${l}, head ${h}: ${parts.join(" · ")}`;
    };
    canvas.onmouseleave = () => { if (hovered) render(a, m, list, null); else $("readout").textContent = summary; };
    if (hovered) canvas.onmousemove({ clientX: canvas.getBoundingClientRect().left + left + (hovered[1] + 0.5) * cw,
                                      clientY: canvas.getBoundingClientRect().top + head + (hovered[0] + 0.5) * ch });
    canvas.onclick = (e) => {
      const p = at(e);
      if (p) open(p[0], p[1]);
    };
    legend(m, top);
  }

  function open(layer, head) {  // the head in the head view (a long input: its matrix)
    const ex = example(), ids = ex.layerIds && ex.layerIds[state.kind];
    const index = ids ? ids.indexOf(layer) : layer;
    if (index < 0) { $("readout").textContent = `layer ${layer} is not on this page`; return; }
    state.layer = index; state.head = head; state.apart = false; state.chips = new Set([head]);
    $("layer").value = index; $("head").value = head;
    selectTab(ex.remote ? "matrix" : "head");
  }

  function legend(m, top) {
    const w = 240, width = Math.min(area().w, w + 600);
    const words = lib.wrapped([`${m.label}: ${m.unit}` + (m.threshold !== null ? "; the magenta mark is the threshold" : "")],
                              lib.LEGEND, width - w - 28);  // beside the bar, as many lines as they need
    const ctx = setupCanvas($("atlas-legend"), width, Math.max(36, 4 + 18 * words.length));
    for (let x = 0; x < w; x++) {
      const t = x / (w - 1);
      ctx.fillStyle = m.scale === "effect" ? diverging(2 * t - 1) : colour(t);
      ctx.fillRect(x + 10, 2, 1, 14);
    }
    ctx.fillStyle = "#1d2330"; ctx.font = lib.LEGEND; ctx.textBaseline = "top";
    const lo = m.scale === "effect" ? `−${top.toPrecision(2)}` : "0", hi = m.scale === "share" ? "1" : `${m.scale === "effect" ? "+" : ""}${top.toPrecision(2)}`;
    ctx.textAlign = "left"; ctx.fillText(lo, 10, 20);
    ctx.textAlign = "right"; ctx.fillText(hi, w + 10, 20);
    if (m.scale === "effect") { ctx.textAlign = "center"; ctx.fillText("0", 10 + w / 2, 20); }
    if (m.threshold !== null) {
      const x = 10 + m.threshold * (w - 1);
      ctx.fillStyle = FLAG; ctx.fillRect(x - 1, 0, 2, 18);
    }
    ctx.textAlign = "left"; ctx.fillStyle = "#1d2330";
    words.forEach((line, i) => ctx.fillText(line, w + 22, 2 + 18 * i));
    $("atlas-about").textContent = m.about;
  }

  $("atlas-by").addEventListener("change", (e) => { state.atlasBy = e.target.value; if (state.tab === "atlas") drawAtlas(); });
  $("atlas-ablate").addEventListener("change", () => { if (state.tab === "atlas") drawAtlas(); });
  $("atlas-stream").addEventListener("change", () => {
    if ($("atlas-stream").value) state.atlasBy = "stream_cost";  // what was asked for, shown first
    if (state.tab === "atlas") drawAtlas();
  });

  return { tabs: { atlas: drawAtlas } };
};
