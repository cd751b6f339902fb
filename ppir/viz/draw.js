// ppir viz: canvas drawing.  One <canvas>; the static picture of a view is drawn once into an
// off-screen canvas (BASE) and each frame of the dynamic mode only blits it and adds overlays
// (faded future, time cursor, running ops, messages in flight, memory now), so thousands of ops
// cost one drawImage per frame.
const LEFT = 58, MEMCOL = 132, AXIS = 26, TITLE = 22;
const MEMCOLOR = "#6a3d9a", CRITCOLOR = "#d6006e";
const TEXTON = { F: "#fff", B: "#1d2330", I: "#fff", W: "#fff" };
let BASE = null, GEOM = null;

function niceStep(span, n) {
  const raw = span / Math.max(1, n), p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const k of [1, 2, 5, 10]) if (k * p >= raw) return k * p;
  return 10 * p;
}

function layout(view, rank, width) {
  const g = { view, rank, width, left: LEFT, panels: [] };
  const top = document.getElementById("plotwrap").getBoundingClientRect().top;
  const avail = Math.max(260, window.innerHeight - top - 16);
  let y = 4;
  if (view === "global") {
    g.right = MEMCOL;
    const rows = RUNS.reduce((a, r) => a + r.ranks, 0);
    g.rowH = Math.max(9, Math.min(30, Math.floor((avail - RUNS.length * (TITLE + 8) - AXIS) / rows)));
    for (const run of RUNS) {
      const ranks = [...Array(run.ranks).keys()];
      g.panels.push({ run, y0: y, rowsTop: y + TITLE, rows: ranks.length, ranks });
      y += TITLE + run.ranks * g.rowH + 8;
    }
  } else {                          // a compared schedule without this rank: its title alone
    g.right = 24; g.rowH = 34; g.memH = 130;
    for (const run of RUNS) {
      const ranks = rank < run.ranks ? [rank] : [];
      g.panels.push({ run, y0: y, rowsTop: y + TITLE, rows: ranks.length, ranks,
        memTop: ranks.length ? y + TITLE + g.rowH + 8 : null });
      y += ranks.length ? TITLE + g.rowH + 8 + g.memH + 18 : TITLE + 8;
    }
  }
  g.plotW = Math.max(100, width - g.left - g.right);
  g.axisY = y; g.height = y + AXIS;
  g.x = (t) => g.left + (t / TMAX) * g.plotW;
  g.t = (x) => ((x - g.left) / g.plotW) * TMAX;
  return g;
}

function drawRow(ctx, g, run, r, y, h, big) {
  if (r >= run.ranks) return;       // no row (not even idle) for a rank the schedule lacks
  ctx.fillStyle = COLORS.idle;
  ctx.fillRect(g.x(0), y, g.x(run.step) - g.x(0), h);
  const ex = run.exposed[r];        // exposed comm: the rank's traffic while it computes nothing
  ctx.fillStyle = COLORS.comm;
  for (let i = 0; i < ex.length; i += 2) ctx.fillRect(g.x(ex[i]), y, g.x(ex[i + 1]) - g.x(ex[i]), h);
  const o = run.ops[r], n = o.length / 5, gap = h > 8 ? 1 : 0;
  for (let k = 0; k < 4; k++) {
    ctx.fillStyle = COLORS[KINDS[k]];
    for (let i = 0; i < n; i++) {
      if (o[5 * i + 2] !== k) continue;
      const x0 = g.x(o[5 * i]), w = g.x(o[5 * i + 1]) - x0;
      ctx.fillRect(x0, y + gap, Math.max(0.6, w > 3 ? w - 1 : w), h - 2 * gap);
    }
  }
  const ch = run.chunk[r], v = run.chunks[r];
  if (v > 1) {                      // later chunks of the rank: a darker shade of their kind
    for (let i = 0; i < n; i++) {
      const c = ch.get(o[5 * i + 4]);
      if (!c) continue;
      ctx.fillStyle = "rgba(0,0,0," + (0.25 * c / (v - 1)).toFixed(3) + ")";
      const x0 = g.x(o[5 * i]), w = g.x(o[5 * i + 1]) - x0;
      ctx.fillRect(x0, y + gap, Math.max(0.6, w > 3 ? w - 1 : w), h - 2 * gap);
    }
  }
  if (h < 10) return;
  ctx.font = (big ? 12 : Math.min(11, h - 3)) + "px system-ui, sans-serif";
  ctx.textAlign = "center"; ctx.textBaseline = "middle";
  for (let i = 0; i < n; i++) {
    const kk = KINDS[o[5 * i + 2]], x0 = g.x(o[5 * i]), w = g.x(o[5 * i + 1]) - x0;
    let s = big ? kk + o[5 * i + 3] : "" + o[5 * i + 3];
    if (big && run.stages > run.ranks && w > 7 * (s.length + 4)) s += " s" + o[5 * i + 4];
    if (w < 6.5 * s.length + 3) continue;
    ctx.fillStyle = TEXTON[kk];
    ctx.fillText(s, x0 + w / 2, y + h / 2 + 0.5);
  }
}

function drawAxis(ctx, g) {
  const step = niceStep(TMAX, Math.max(2, Math.floor(g.plotW / 90)));
  ctx.strokeStyle = "rgba(0,0,0,0.09)"; ctx.fillStyle = "#667085"; ctx.lineWidth = 1;
  ctx.font = "11px system-ui, sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (let t = 0; t <= TMAX * (1 + 1e-9); t += step) {
    const x = Math.round(g.x(t)) + 0.5;
    ctx.beginPath(); ctx.moveTo(x, 4); ctx.lineTo(x, g.axisY); ctx.stroke();
    ctx.fillText(fmtT(t), x, g.axisY + 4);
  }
  ctx.textAlign = "right";
  ctx.fillText(RUNS[0].unit === "s" ? "time" : "units", g.left - 6, g.axisY + 4);
}

function arrow(ctx, x0, y0, x1, y1, head) {
  ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y1); ctx.stroke();
  if (!head) return;
  const a = Math.atan2(y1 - y0, x1 - x0), L = 6;
  ctx.beginPath(); ctx.moveTo(x1, y1);
  ctx.lineTo(x1 - L * Math.cos(a - 0.4), y1 - L * Math.sin(a - 0.4));
  ctx.lineTo(x1 - L * Math.cos(a + 0.4), y1 - L * Math.sin(a + 0.4));
  ctx.closePath(); ctx.fill();
}

function msgStyle(ctx, grad, alpha) {
  const c = grad ? "192,57,43" : "29,35,48";
  ctx.strokeStyle = "rgba(" + c + "," + alpha + ")"; ctx.fillStyle = ctx.strokeStyle;
}

function drawArrows(ctx, g, p, js, alpha) {
  const run = p.run, m = run.msgs, head = js.length < 4000, mid = p.rowsTop + g.rowH / 2;
  ctx.lineWidth = head ? 1 : 0.6;
  for (const j of js) {
    msgStyle(ctx, m[8 * j + 4], alpha);
    arrow(ctx, g.x(m[8 * j + 2]), mid + m[8 * j] * g.rowH, g.x(m[8 * j + 3]),
      mid + m[8 * j + 1] * g.rowH, head);
  }
}

// "1f1b(P=4, M=8)   step 33 units": the step with its unit, as the header gives it
function panelTitle(g, p) {
  const run = p.run, what = g.view !== "local" ? "" : p.rows ? "  \u00b7  rank " + g.rank :
    "  \u00b7  no rank " + g.rank + " (ranks 0\u2013" + (run.ranks - 1) + ")";
  return run.label + what + "   step " + fmtT(run.step, run) + (run.unit === "s" ? "" : " units");
}

function drawBase(g, arrows, crit) {
  const dpr = window.devicePixelRatio || 1;
  const c = document.createElement("canvas");
  c.width = Math.ceil(g.width * dpr); c.height = Math.ceil(g.height * dpr);
  const ctx = c.getContext("2d");
  ctx.scale(dpr, dpr);
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, g.width, g.height);
  for (const p of g.panels) {
    const run = p.run;
    ctx.fillStyle = "#1d2330"; ctx.font = "600 12px system-ui, sans-serif";
    ctx.textAlign = "left"; ctx.textBaseline = "middle";
    ctx.fillText(panelTitle(g, p), g.left, p.y0 + TITLE / 2);
    ctx.font = "11px system-ui, sans-serif"; ctx.textAlign = "right"; ctx.fillStyle = "#475467";
    if (g.view === "global") {
      for (let r = 0; r < run.ranks; r++) {
        const y = p.rowsTop + r * g.rowH;
        drawRow(ctx, g, run, r, y, g.rowH, false);
        ctx.fillStyle = "#475467"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
        ctx.fillText("rank " + r, g.left - 6, y + g.rowH / 2);
      }
      if (arrows) drawArrows(ctx, g, p, [...Array(run.nmsg).keys()], 0.45);
      if (crit) drawCritical(ctx, g, p);
      ctx.textAlign = "left"; ctx.fillStyle = "#667085";
      ctx.fillText("memory (A)", g.left + g.plotW + 12, p.y0 + TITLE / 2);
      drawPeaks(ctx, g, p);
    } else if (p.rows) {
      drawRow(ctx, g, run, g.rank, p.rowsTop, g.rowH, true);
      if (crit) drawCritical(ctx, g, p);
      ctx.textBaseline = "middle";
      ctx.fillText("ops", g.left - 6, p.rowsTop + g.rowH / 2);
      drawMemory(ctx, g, p);
    }
  }
  drawAxis(ctx, g);
  return c;
}

// The critical path: its ops outlined, and in the global view joined from each op's end to the
// next one's start (a cross-rank hop is the data dependency, or the message, that it waits on).
function drawCritical(ctx, g, p) {
  const run = p.run, row = new Map(p.ranks.map((r, k) => [r, k]));
  ctx.strokeStyle = CRITCOLOR; ctx.lineWidth = 2;
  let prev = null;
  for (const id of run.critical) {
    const [r, i] = run.glob[id], k = row.get(r);
    if (k === undefined) { prev = null; continue; }
    const x0 = g.x(run.starts[r][i]), x1 = g.x(run.ends[r][i]), y = p.rowsTop + k * g.rowH;
    ctx.strokeRect(x0 + 1, y + 1.5, Math.max(1, x1 - x0 - 2), g.rowH - 3);
    if (prev && prev.k !== k) {
      ctx.beginPath(); ctx.moveTo(prev.x, prev.y); ctx.lineTo(x0 + 1, y + g.rowH / 2); ctx.stroke();
    }
    prev = { k, x: x1 - 1, y: y + g.rowH / 2 };
  }
}

function memY(g, p, v) { return p.memTop + g.memH - (v / MAXPEAK) * (g.memH - 14); }

function drawMemory(ctx, g, p) {
  const run = p.run, r = g.rank;
  ctx.strokeStyle = "#d0d5dd"; ctx.lineWidth = 1;
  ctx.strokeRect(g.left + 0.5, p.memTop + 0.5, g.plotW, g.memH);
  ctx.fillStyle = "#667085"; ctx.textAlign = "right"; ctx.font = "11px system-ui, sans-serif";
  const step = niceStep(MAXPEAK, 4);
  for (let v = 0; v <= MAXPEAK * (1 + 1e-9); v += step) {
    const y = Math.round(memY(g, p, v)) + 0.5;
    ctx.fillText(+v.toPrecision(3) + " A", g.left - 6, y);
    ctx.strokeStyle = "rgba(0,0,0,0.07)";
    ctx.beginPath(); ctx.moveTo(g.left, y); ctx.lineTo(g.left + g.plotW, y); ctx.stroke();
  }
  if (r >= run.ranks) return 0;
  const ends = run.ends[r], mem = run.mem[r];
  ctx.beginPath(); ctx.moveTo(g.x(0), memY(g, p, 0));
  let level = 0, peakI = -1;
  for (let i = 0; i < ends.length; i++) {
    const x = g.x(ends[i]);
    ctx.lineTo(x, memY(g, p, level)); level = mem[i]; ctx.lineTo(x, memY(g, p, level));
    if (peakI < 0 || mem[i] > mem[peakI]) peakI = i;
  }
  ctx.lineTo(g.x(run.step), memY(g, p, level));
  ctx.strokeStyle = MEMCOLOR; ctx.lineWidth = 1.6; ctx.stroke();
  ctx.lineTo(g.x(run.step), memY(g, p, 0)); ctx.closePath();
  ctx.fillStyle = "rgba(106,61,154,0.12)"; ctx.fill();
  if (peakI >= 0) {
    const x = g.x(ends[peakI]), y = memY(g, p, mem[peakI]);
    ctx.fillStyle = MEMCOLOR; ctx.beginPath(); ctx.arc(x, y, 3, 0, 7); ctx.fill();
    ctx.textAlign = "left"; ctx.textBaseline = "bottom";
    ctx.fillText("peak " + mem[peakI] + " A after " + opName(run, r, peakI), x + 5, y - 1);
  }
  ctx.textBaseline = "middle";
  STATE.drawn.memPoints += ends.length;
  return ends.length;
}

function drawFrame(ctx, g, t, dynamic) {
  ctx.drawImage(BASE, 0, 0, g.width, g.height);
  if (!dynamic) return;
  const x = g.x(t);
  for (const p of g.panels) {
    if (!p.rows) continue;
    const run = p.run, h = g.view === "global" ? p.rows * g.rowH : g.rowH + 8 + g.memH + 1;
    ctx.fillStyle = "rgba(255,255,255,0.62)";
    ctx.fillRect(x, p.rowsTop, g.left + g.plotW - x, h);
    ctx.strokeStyle = "#1d2330"; ctx.lineWidth = 1.5;
    p.ranks.forEach((r, k) => {
      const i = opAt(run, r, t);
      if (i < 0) return;
      const x0 = g.x(run.starts[r][i]), y = p.rowsTop + k * g.rowH;
      ctx.strokeRect(x0 + 0.5, y + 1, g.x(run.ends[r][i]) - x0 - 1, g.rowH - 2);
    });
    const inflight = messagesAt(run, t);
    if (g.view === "global") {
      drawArrows(ctx, g, p, inflight.wire, 0.9);
      drawMemNow(ctx, g, p, t, inflight.waiting);
    } else {
      const v = memAt(run, g.rank, t), y = memY(g, p, v);
      ctx.fillStyle = MEMCOLOR; ctx.beginPath(); ctx.arc(x, y, 4, 0, 7); ctx.fill();
      ctx.textAlign = "left"; ctx.textBaseline = "bottom"; ctx.font = "600 11px system-ui";
      ctx.fillText(v + " A", x + 6, y - 2);
    }
  }
  ctx.strokeStyle = "#c0392b"; ctx.lineWidth = 1.5;
  ctx.beginPath(); ctx.moveTo(x, 2); ctx.lineTo(x, g.axisY); ctx.stroke();
}

function drawPeaks(ctx, g, p) {       // static: each rank's peak activation memory
  const run = p.run, x0 = g.left + g.plotW + 12, w = MEMCOL - 62;
  ctx.font = "10px system-ui, sans-serif"; ctx.textBaseline = "middle"; ctx.textAlign = "left";
  for (let r = 0; r < run.ranks; r++) {
    const y = p.rowsTop + r * g.rowH, h = Math.max(3, g.rowH - 4);
    ctx.fillStyle = "rgba(106,61,154,0.45)"; ctx.fillRect(x0, y + 2, (run.peak[r] / MAXPEAK) * w, h);
    ctx.fillStyle = "#475467";
    if (g.rowH >= 12) ctx.fillText(run.peak[r] + "", x0 + w + 3, y + g.rowH / 2);
  }
}

function drawMemNow(ctx, g, p, t, waiting) {  // dynamic: memory now, peak tick, buffers waiting
  const run = p.run, x0 = g.left + g.plotW + 12, w = MEMCOL - 62;
  ctx.fillStyle = "#fff"; ctx.fillRect(x0, p.rowsTop, MEMCOL - 12, run.ranks * g.rowH);
  const pend = new Array(run.ranks).fill(0);
  for (const j of waiting) pend[run.msgs[8 * j + 1]]++;
  ctx.font = "10px system-ui, sans-serif"; ctx.textBaseline = "middle"; ctx.textAlign = "left";
  for (let r = 0; r < run.ranks; r++) {
    const y = p.rowsTop + r * g.rowH, v = memAt(run, r, t), h = Math.max(3, g.rowH - 4);
    ctx.fillStyle = "#eee"; ctx.fillRect(x0, y + 2, w, h);
    ctx.fillStyle = MEMCOLOR; ctx.fillRect(x0, y + 2, (v / MAXPEAK) * w, h);
    ctx.fillStyle = "#1d2330";
    ctx.fillRect(x0 + (run.peak[r] / MAXPEAK) * w - 1, y + 1, 2, h + 2);
    if (g.rowH >= 12) ctx.fillText(v + (pend[r] ? " +" + pend[r] + "\u2709" : ""), x0 + w + 3, y + g.rowH / 2);
  }
}
