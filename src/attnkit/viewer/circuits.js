"use strict";
// Which heads carry a behaviour (the studio, attnkit.circuits): the text above is the clean input, a
// corrupted one of as many tokens beside it, and the answer it should give against a foil. Every head
// is one cell of a layers x heads grid, coloured by what patching it from the clean run restores (or
// by its attribution-patching estimate, its direct logit attribution, its OV copying score); arrows
// are the strongest paths between heads, into a later head's query, key or value. Hover a head for
// every measure; click it to open its map (click a cell there to see why it is bright).
(window.attnkitViews = window.attnkitViews || {}).circuits = function (lib) {
  const { $, state, example, area, clamp, fitCells, setupCanvas, diverging, api, selectTab, FAMILY, currentModel } = lib;
  const VIA = { q: "#1a9850", k: "#f28e2b", v: "#7b3294" };  // green, orange, purple: apart from the cells' red and blue
  const PATHS_DRAWN = 5;  // the strongest paths, each with its effect written on it
  let answer = null, asked = null, ticket = 0;

  const MEASURES = [
    { key: "activation", label: "activation patching", unit: "effect (1: the clean run restored; 0: none of it)",
      about: "each head's output patched from the clean run into the corrupted one, alone: how much of the clean metric it restores" },
    { key: "attribution", label: "attribution patching", unit: "estimated effect",
      about: "the same from one forward and one backward pass (Nanda 2023): the first-order estimate of each patch" },
    { key: "logit", label: "direct logit attribution", unit: "logit of the answer less the foil's",
      about: "what each head writes straight into the answer's logit less the foil's, read through the final norm frozen at its scale" },
    { key: "copying", label: "OV copying score", unit: "−1 (suppresses its token) to 1 (copies it)",
      about: "Elhage et al. 2021: the eigenvalues' sum over their absolute sum of the head's circuit from the token embeddings to the logits" },
  ];

  function request() {
    const m = currentModel(), body = { model: state.model, clean: $("text").value, corrupt: $("circ-corrupt").value,
      answer: $("circ-answer").value, foil: $("circ-foil").value, metric: $("circ-metric").value, paths: 6 };
    if (m.capabilities.forced && $("circ-target").value.trim()) body.target = $("circ-target").value;
    return body;
  }

  async function patch() {
    const mine = ++ticket, body = request();
    $("readout").textContent = "patching every head (the model runs once per head), then the paths between the strongest…";
    try {
      const got = await api("/api/circuits", body);
      if (mine !== ticket) return;
      answer = got; asked = body;
    } catch (err) {
      if (mine === ticket) { answer = null; $("readout").textContent = String(err.message || err); clear(); }
      return;
    }
    drawCircuits();
  }

  function clear() {
    const c = $("circ-grid");
    c.getContext("2d").clearRect(0, 0, c.width, c.height);
    $("circ-legend").getContext("2d").clearRect(0, 0, $("circ-legend").width, $("circ-legend").height);
  }

  function drawCircuits() {
    const m = currentModel();
    $("circ-target-box").hidden = !m || !m.capabilities.forced;
    if (!lib.live || !m || !m.capabilities.circuits) {
      clear();
      $("readout").textContent = lib.live ? `${state.model} names no residual stream read into logits: its heads' causal analyses do not apply`
        : "Patching runs in the studio (attnkit serve); on a saved page, run attnkit patch";
      return;
    }
    if (!answer || asked.model !== state.model) {
      clear();
      $("readout").textContent = "Give a corrupted input of as many tokens as the text above, the answer the text should give next and a foil, then press patch";
      return;
    }
    const list = MEASURES.filter((x) => answer[x.key]);
    const by = $("circ-by"), was = by.value;
    by.innerHTML = "";
    for (const x of list) lib.html("option", { value: x.key }, by, x.label);
    by.value = list.some((x) => x.key === was) ? was : "activation";
    render(list.find((x) => x.key === by.value), list, null);
  }

  function scaleOf(x, values) {  // effects and scores on a fixed scale (±1) unless a value passes it; logits on their own
    const top = Math.max(1e-12, ...values.filter((v) => v !== null).map(Math.abs));
    return x.key === "copying" ? 1 : x.key === "logit" ? top : Math.max(1, top);
  }

  function render(x, list, hovered) {
    const a = answer, L = a.layers, C = a.columns.length * (1 + Math.max(...a.heads.map((h) => h.head)));
    const per = C / a.columns.length, values = a[x.key], top = scaleOf(x, values);
    const room = area(), left = 74, head = a.columns.length > 1 ? 58 : 40, canvas = $("circ-grid");
    const fit = fitCells((room.w - left - 16) / C, (room.h - head - 260) / L);
    const ch = clamp(Math.floor(fit.h), 10, 110), cw = clamp(Math.floor(fit.w), 10, 160), cell = Math.min(cw, ch);
    const ctx = setupCanvas(canvas, left + cw * C + 8, head + ch * L + 4);
    ctx.font = `13px ${FAMILY}`; ctx.fillStyle = "#1d2330"; ctx.textBaseline = "middle"; ctx.textAlign = "center";
    const everyH = Math.ceil(18 / cw);
    for (let c = 0; c < C; c += everyH) ctx.fillText(String(c % per), left + (c + 0.5) * cw, head - 10);
    if (a.columns.length > 1) a.columns.forEach((g, i) => ctx.fillText(g.replace(".", " "), left + (i + 0.5) * per * cw, head - 30));
    ctx.fillText("head", left + (cw * C) / 2, 8);
    ctx.textAlign = "right";
    for (let l = 0; l < L; l++) ctx.fillText(`layer ${l}`, left - 6, head + (l + 0.5) * ch);
    const centre = (i) => [left + (a.heads[i].column + 0.5) * cw, head + (a.heads[i].layer + 0.5) * ch];
    ctx.fillStyle = "#d1d5db"; ctx.fillRect(left, head, cw * C - 1, ch * L - 1);
    a.heads.forEach((h, i) => {
      const v = values[i];
      ctx.fillStyle = v === null ? "#d1d5db" : diverging(v / top);
      ctx.fillRect(left + h.column * cw, head + h.layer * ch, cw - 1, ch - 1);
      if (cell >= 40 && v !== null) {
        // in the cell's top left corner: the arrows start and end at its centre
        ctx.fillStyle = Math.abs(v) / top > 0.55 ? "#fff" : "#111"; ctx.textAlign = "left"; ctx.font = `${cell >= 70 ? 15 : 12}px ${FAMILY}`;
        const shownV = Math.abs(v).toFixed(2), sign = Number(shownV) === 0 ? "" : v > 0 ? "+" : "−";
        ctx.fillText(sign + shownV, left + h.column * cw + 6, head + h.layer * ch + 12);
      }
      if (hovered === i) { ctx.strokeStyle = "#111"; ctx.lineWidth = 3; ctx.strokeRect(left + h.column * cw - 1, head + h.layer * ch - 1, cw + 1, ch + 1); }
    });
    const strongest = Math.max(1e-12, ...a.paths.map((p) => Math.abs(p.effect)));
    const paths = a.paths.filter((p) => Math.abs(p.effect) >= 0.05 * strongest).slice(0, PATHS_DRAWN);
    const marks = [...paths].reverse().map((p) => arrow(ctx, centre(p.sender), centre(p.receiver), p, strongest, cell));  // the strongest on top
    label(ctx, marks.reverse());  // every curve drawn first: no label under a later curve
    const summary = `${a.metric.replace("_", " ")}: clean ${a.clean.toFixed(3)}, corrupted ${a.corrupt.toFixed(3)}; ` +
      `${a.heads.length} heads` + (a.agreement !== null ? `; attribution patching agrees with activation patching at r = ${a.agreement.toFixed(3)}` : "");
    const refused = ["logit", "copying", "paths"].map((k) => a[`${k}_refused`]).filter(Boolean);
    const at = (e) => {
      const b = canvas.getBoundingClientRect(), c = Math.floor((e.clientX - b.left - left) / cw), l = Math.floor((e.clientY - b.top - head) / ch);
      const i = a.heads.findIndex((h) => h.layer === l && h.column === c);
      return i < 0 ? null : i;
    };
    const describe = (i) => {
      if (i === null) { $("readout").textContent = summary; return; }
      const parts = list.map((y) => `${y.label} ${a[y.key][i] === null ? "–" : a[y.key][i].toFixed(3)}${y.key === "logit" ? " logits" : ""}`);
      const through = a.paths.filter((p) => p.sender === i || p.receiver === i).slice(0, 3)
        .map((p) => `${a.heads[p.sender].name} → ${a.heads[p.receiver].name}.${p.via} ${p.effect >= 0 ? "+" : "−"}${Math.abs(p.effect).toFixed(3)}`);
      $("readout").textContent = `${a.heads[i].name}: ${parts.join(" · ")}` + (through.length ? ` · paths: ${through.join(", ")}` : "");
    };
    canvas.onmousemove = (e) => {
      const i = at(e);
      canvas.style.cursor = i === null ? "" : "pointer";
      if (i !== hovered) render(x, list, i);  // the head framed, and read out
    };
    canvas.onmouseleave = () => { if (hovered !== null) render(x, list, null); else describe(null); };
    describe(hovered);
    canvas.onclick = (e) => { const i = at(e); if (i !== null) open(a.heads[i], a.columns); };
    legend(x, top, paths.length, refused);
  }

  function arrow(ctx, [x0, y0], [x1, y1], p, strongest, cell) {  // a curve from the sender to the receiver, its head at the receiver
    // q, k and v of one pair of heads on three curves: one bent left, two right; from and to a third of
    // the way out of each cell's centre, clear of the numbers in its corner
    const w = 1.5 + 4 * Math.abs(p.effect) / strongest, d = Math.hypot(x1 - x0, y1 - y0);
    const bend = d * { q: -0.3, k: 0.3, v: 0.6 }[p.via], nx = (y1 - y0) / d, ny = -(x1 - x0) / d;
    const mx = (x0 + x1) / 2 + bend * nx, my = (y0 + y1) / 2 + bend * ny;
    // the receiver's end clear of its number; the sender's nearer its centre where the cells are neighbours
    const out = cell * 0.3, from = Math.min(out, d * 0.1), a0 = Math.atan2(my - y0, mx - x0), ang = Math.atan2(y1 - my, x1 - mx);
    x0 += from * Math.cos(a0); y0 += from * Math.sin(a0); x1 -= out * Math.cos(ang); y1 -= out * Math.sin(ang);
    const end = Math.max(6, cell * 0.08), tx = x1 - end * Math.cos(ang), ty = y1 - end * Math.sin(ang);
    ctx.lineCap = "round";
    for (const [colour, width] of [["#fff", w + 3], [VIA[p.via], w]]) {  // a white edge: the line reads over any cell
      ctx.strokeStyle = colour; ctx.lineWidth = width; ctx.setLineDash(p.effect < 0 && colour !== "#fff" ? [6, 4] : []);
      ctx.beginPath(); ctx.moveTo(x0, y0); ctx.quadraticCurveTo(mx, my, tx, ty); ctx.stroke();
    }
    ctx.setLineDash([]);
    const size = 8 + 1.5 * w;
    ctx.fillStyle = VIA[p.via]; ctx.strokeStyle = "#fff"; ctx.lineWidth = 1.5;
    ctx.beginPath(); ctx.moveTo(x1, y1);
    ctx.lineTo(x1 - size * Math.cos(ang - 0.45), y1 - size * Math.sin(ang - 0.45));
    ctx.lineTo(x1 - size * Math.cos(ang + 0.45), y1 - size * Math.sin(ang + 0.45));
    ctx.closePath(); ctx.fill(); ctx.stroke();
    // its label beside the curve's middle, on the side it bends to
    const side = Math.sign(bend) || 1;
    return { text: `${p.via} ${p.effect >= 0 ? "+" : "−"}${Math.abs(p.effect).toFixed(2)}`, colour: VIA[p.via],
             x: 0.25 * x0 + 0.5 * mx + 0.25 * tx, y: 0.25 * y0 + 0.5 * my + 0.25 * ty, nx: side * nx, ny: side * ny };
  }

  function label(ctx, marks) {  // each path's number, strongest first: dark type on white in a box of its colour,
    // clear of its own curve (its box's half-extent along the normal, and 10 px more) and of the labels before it
    ctx.font = `12px ${FAMILY}`; ctx.textAlign = "center"; ctx.textBaseline = "middle";
    const boxes = [];
    for (const m of marks) {
      const tw = ctx.measureText(m.text).width + 8, reach = Math.abs(m.nx) * tw / 2 + Math.abs(m.ny) * 9 + 10;
      let lx = m.x + reach * m.nx, ly = m.y + reach * m.ny;
      for (let k = 0; k < 6 && boxes.some((b) => Math.abs(b.x - lx) < (b.w + tw) / 2 + 2 && Math.abs(b.y - ly) < 20); k++) {
        lx += (Math.abs(m.nx) * tw + Math.abs(m.ny) * 20) * m.nx; ly += (Math.abs(m.nx) * tw + Math.abs(m.ny) * 20) * m.ny;
      }
      boxes.push({ x: lx, y: ly, w: tw });
      ctx.fillStyle = "#fff"; ctx.fillRect(lx - tw / 2, ly - 9, tw, 18);
      ctx.strokeStyle = m.colour; ctx.lineWidth = 1.5; ctx.strokeRect(lx - tw / 2, ly - 9, tw, 18);
      ctx.fillStyle = "#1d2330"; ctx.fillText(m.text, lx, ly);
    }
  }

  function legend(x, top, drawn, refused) {
    const w = 240, width = Math.min(area().w, w + 640), room = width - w - 28;  // the words beside the bar, wrapped
    const lines = lib.wrapped([`${x.label}: ${x.unit}`,
      drawn ? `arrows: the ${drawn} strongest paths, into a later head's` : "no paths between the strongest heads"], lib.LEGEND, room);
    const items = drawn ? [["q", "query"], ["k", "key"], ["v", "value"], [null, "· width: effect; dashed: below 0"]] : [];
    const placed = [];  // the arrows' colours, item by item: a new line where one would run past the edge
    let at = 0, row = 0;
    for (const [via, word] of items) {
      const iw = (via ? 22 : 0) + lib.textWidth([word], lib.LEGEND) + 10;
      if (at && at + iw > room) { row += 1; at = 0; }
      placed.push([via, word, at, row]); at += iw;
    }
    const rows = lines.length + (items.length ? row + 1 : 0);
    const ctx = setupCanvas($("circ-legend"), width, Math.max(40, 4 + 19 * rows));
    for (let i = 0; i < w; i++) { ctx.fillStyle = diverging((2 * i) / (w - 1) - 1); ctx.fillRect(i + 10, 2, 1, 14); }
    ctx.fillStyle = "#1d2330"; ctx.font = lib.LEGEND; ctx.textBaseline = "top";
    const t = top.toPrecision(2);
    ctx.textAlign = "left"; ctx.fillText(`−${t}`, 10, 20);
    ctx.textAlign = "center"; ctx.fillText("0", 10 + w / 2, 20);
    ctx.textAlign = "right"; ctx.fillText(`+${t}`, w + 10, 20);
    ctx.textAlign = "left";
    lines.forEach((line, i) => ctx.fillText(line, w + 22, 2 + 19 * i));
    for (const [via, word, x0, r] of placed) {
      const y = 2 + 19 * (lines.length + r);
      let tx = w + 22 + x0;
      if (via) { ctx.fillStyle = VIA[via]; ctx.fillRect(tx, y + 7, 18, 4); tx += 22; }
      ctx.fillStyle = "#1d2330"; ctx.fillText(word, tx, y);
    }
    $("circ-about").textContent = `${x.about}. Arrows: path patching among the six heads of largest effect (at most ${PATHS_DRAWN} paths, each at least 5% of the strongest), each number the ` +
      "path's effect (1: the clean run restored through that input alone)" + (refused.length ? `. Not shown: ${refused.join("; ")}.` : ".");
  }

  function open(h, columns) {  // the head's map in the matrix view
    const group = columns[Math.floor(h.column / (1 + Math.max(...answer.heads.map((x) => x.head))))];
    const kind = group.endsWith(".cross") ? "cross" : group.startsWith("encoder") ? "encoder" : "decoder";
    const ex = example(), ids = ex.layerIds && ex.layerIds[kind], index = ids ? ids.indexOf(h.layer) : h.layer;
    const has = (ex.maps && ex.maps[kind] && ex.maps[kind].length) || (ex.remote && ex.remote[kind]) || (ex.packed && ex.packed[kind]);
    if (!has || index < 0) { $("readout").textContent = `${kind} layer ${h.layer} is not on this page`; return; }
    state.kind = kind; $("kind").value = kind;
    state.layer = index; state.head = h.head; state.apart = false; state.chips = new Set([h.head]); state.zoom = null;
    $("layer").value = index; $("head").value = h.head;
    selectTab("matrix");
  }

  $("circ-go").addEventListener("click", patch);
  for (const id of ["circ-corrupt", "circ-answer", "circ-foil", "circ-target"])
    $(id).addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); patch(); } });
  $("circ-by").addEventListener("change", () => { if (state.tab === "circuits") drawCircuits(); });

  return { tabs: { circuits: drawCircuits } };
};
