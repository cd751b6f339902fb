// ppir viz: state, controls, side panel, hover and playback.  window.ppirViz exposes the state
// and the actions (for scripting and the browser tests).
const $ = (id) => document.getElementById(id);
const INIT = DATA.initial || {};
const STATE = {
  view: INIT.view || "global", mode: INIT.mode || "static", rank: INIT.rank || 0, t: 0,
  playing: false, speed: 1, arrows: false, crit: false, duration: 12, drawn: { memPoints: 0, frames: 0 },
};
const canvas = $("main"), ctx = canvas.getContext("2d");
let baseKey = "", lastFrame = 0;

function header() {
  const h = $("hdr"), pct = (x) => (100 * x).toFixed(1) + "%";
  h.innerHTML = "";
  for (const run of RUNS) {
    const f = run.figures, d = document.createElement("div");
    d.className = "run";
    // in A: the layers' activations (the bytes: its layers', not the rank's whole memory,
    // which 'ppir compile --backend cost --model ...' prints)
    const mem = f.peak_act + " A on rank " + f.peak_rank +
      (f.peak_bytes ? " (" + f.peak_bytes + " of layer activations)" : "");
    d.innerHTML = "<h1></h1><div class=figs>" +
      "<span>step <b>" + f.step + "</b></span><span>bubble/total <b>" + pct(f.bubble_total) +
      "</b></span><span>bubble/ideal <b>" + pct(f.bubble_ideal) + "</b></span>" +
      "<span>peak activations <b>" + mem + "</b></span><span>messages <b>" + f.messages +
      "</b></span></div>";
    d.querySelector("h1").textContent = run.label;
    d.title = "assuming " + f.assumptions + "; critical path " + f.critical_path;
    h.appendChild(d);
  }
  if (RUNS.length === 2 && RUNS[0].step > 0) {
    const c = document.createElement("div"), dt = RUNS[1].step / RUNS[0].step - 1;
    c.className = "cmp";
    c.innerHTML = "second vs first: step <b>" + (dt >= 0 ? "+" : "") + (100 * dt).toFixed(1) +
      "%</b>, peak memory <b>" + RUNS[1].figures.peak_act + " A</b> vs <b>" +
      RUNS[0].figures.peak_act + " A</b>";
    h.appendChild(c);
  }
  const leg = $("legend");
  const names = { F: "forward", B: "backward", I: "backward-input", W: "backward-weight" };
  const used = new Set();
  for (const run of RUNS) for (const o of run.ops) for (let i = 2; i < o.length; i += 5) used.add(o[i]);
  leg.innerHTML = [...used].sort().map((k) => "<span><i style='background:" + COLORS[KINDS[k]] +
    "'></i>" + KINDS[k] + " " + names[KINDS[k]] + "</span>").join("") +
    (RUNS.some((r) => r.exposed.some((e) => e.length)) ? "<span><i style='background:" + COLORS.comm +
      "'></i>exposed comm (messages or gradient reductions while the rank computes nothing)</span>" : "") +
    "<span><i style='background:" + COLORS.idle + "'></i>idle (bubble)</span>" +
    (RUNS.some((r) => r.stages > r.ranks) ? "<span>darker: a later chunk (stage) of the rank</span>" : "") +
    "<span>labels: microbatch \u00b7 " + RUNS[0].unit_note + " \u00b7 memory in A = one microbatch's activations of a rank share</span>";
}

function setup() {
  const P = Math.max(...RUNS.map((r) => r.ranks)), sel = $("rank");
  for (let r = 0; r < P; r++) sel.add(new Option("rank " + r, r));
  sel.value = STATE.rank;
  sel.onchange = () => { STATE.rank = +sel.value; render(); };
  $("view-global").onclick = () => setView("global");
  $("view-local").onclick = () => setView("local");
  $("mode-static").onclick = () => setMode("static");
  $("mode-dynamic").onclick = () => setMode("dynamic");
  $("play").onclick = () => (STATE.playing ? pause() : play());
  $("step-fwd").onclick = () => step(1);
  $("step-back").onclick = () => step(-1);
  $("scrub").oninput = (e) => { setMode("dynamic"); seek((+e.target.value / 1000) * TMAX); };
  $("speed").onchange = (e) => { STATE.speed = +e.target.value; };
  $("arrows").onchange = (e) => { STATE.arrows = e.target.checked; render(); };
  $("crit").onchange = (e) => setCritical(e.target.checked);
  canvas.onmousemove = hover;
  canvas.onmouseleave = () => { $("tip").hidden = true; };
  canvas.onclick = click;
  window.addEventListener("resize", () => render());
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "SELECT" || e.target.tagName === "INPUT") return;
    const k = { " ": () => (STATE.playing ? pause() : play()), ArrowRight: () => step(1),
      ArrowLeft: () => step(-1), g: () => setView("global"), l: () => setView("local"),
      s: () => setMode("static"), d: () => setMode("dynamic"), c: () => setCritical(!STATE.crit) }[e.key];
    if (k) { e.preventDefault(); k(); }
  });
}

function setView(v) { STATE.view = v; render(); }
function setMode(m) { if (m === "static") pause(); STATE.mode = m; render(); }
function setCritical(on) { STATE.crit = on; $("crit").checked = on; render(); }
function setRank(r) { STATE.rank = r; $("rank").value = r; render(); }
function seek(t) { STATE.t = Math.max(0, Math.min(TMAX, t)); render(); }
function step(dir) {
  pause(); STATE.mode = "dynamic";
  const i = lastLE(EVENTS, STATE.t + (dir > 0 ? TMAX * 1e-9 : -TMAX * 1e-9));
  seek(EVENTS[Math.max(0, Math.min(EVENTS.length - 1, dir > 0 ? i + 1 : i))]);
}
function play() {
  STATE.mode = "dynamic";
  if (STATE.t >= TMAX) STATE.t = 0;
  STATE.playing = true; lastFrame = performance.now();
  requestAnimationFrame(tick); render();
}
function pause() { STATE.playing = false; $("play").innerHTML = "&#9654; Play"; }
function tick(now) {
  if (!STATE.playing) return;
  const dt = Math.min(0.1, (now - lastFrame) / 1000);
  lastFrame = now;
  STATE.t = Math.min(TMAX, STATE.t + (dt * STATE.speed * TMAX) / STATE.duration);
  if (STATE.t >= TMAX) pause();
  render();
  if (STATE.playing) requestAnimationFrame(tick);
}

function render() {
  const width = Math.max(420, $("plotwrap").clientWidth - 8);
  const key = [STATE.view, STATE.rank, STATE.arrows, STATE.crit, width, window.innerHeight,
    window.devicePixelRatio].join("|");
  if (key !== baseKey) {
    STATE.drawn.memPoints = 0;
    GEOM = layout(STATE.view, STATE.rank, width);
    BASE = drawBase(GEOM, STATE.arrows, STATE.crit);
    const dpr = window.devicePixelRatio || 1;
    canvas.width = BASE.width; canvas.height = BASE.height;
    canvas.style.width = GEOM.width + "px"; canvas.style.height = GEOM.height + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    baseKey = key;
  }
  const dynamic = STATE.mode === "dynamic";
  drawFrame(ctx, GEOM, STATE.t, dynamic);
  STATE.drawn.frames++;
  document.body.dataset.view = STATE.view; document.body.dataset.mode = STATE.mode;
  for (const [id, on] of [["view-global", STATE.view === "global"], ["view-local", STATE.view === "local"],
    ["mode-static", !dynamic], ["mode-dynamic", dynamic]]) $(id).classList.toggle("on", on);
  if (STATE.playing) $("play").innerHTML = "&#10074;&#10074; Pause";
  $("scrub").value = Math.round((STATE.t / TMAX) * 1000);
  $("clock").textContent = dynamic ? "t = " + fmtT(STATE.t) + " / " + fmtT(TMAX) : "whole step";
  side(dynamic);
}

function chips(items) {
  return items.length ? items.map((s) => "<span class=chip>" + s + "</span>").join("") :
    "<span class=muted>none</span>";
}

// The side panel: a skeleton built when the view, rank or mode changes (the op list of a rank
// is built once), then per frame only the "now" lines and the op list's classes are updated.
let sideKey = "", sideNow = [], sideCls = [];
function side(dynamic) {
  const key = [STATE.view, STATE.rank, dynamic].join("|");
  if (key !== sideKey) { sideSkeleton(dynamic); sideKey = key; }
  RUNS.forEach((run, k) => {
    const html = dynamic || STATE.view === "local" ? nowHtml(run, dynamic) : "";
    if (html !== sideNow[k]) { $("now" + k).innerHTML = html; sideNow[k] = html; }
    const ol = $("ops" + k), r = STATE.rank, t = STATE.t;
    if (!ol) return;
    const cur = dynamic ? lastLE(run.starts[r], t) : -1, cls = sideCls[k];
    for (let i = 0; i < ol.children.length; i++) {
      const c = !dynamic ? "" : i === cur && t < run.ends[r][i] ? "cur" : run.ends[r][i] <= t ? "done" : "";
      if (c !== cls[i]) { ol.children[i].className = c; cls[i] = c; }
    }
  });
}

function sideSkeleton(dynamic) {
  const parts = [];
  RUNS.forEach((run, k) => {
    parts.push("<h2>" + run.label.replace(/</g, "&lt;") + "</h2><div id=now" + k + "></div>");
    const r = STATE.rank;
    if (STATE.view === "global") {
      if (dynamic) return;
      parts.push("<div class=muted>busy / idle / peak memory per rank (click a row for its local view)</div>");
      for (let q = 0; q < run.ranks; q++) {
        parts.push("<div class=now>rank " + q + ": " + fmtT(run.busy[q], run) + " / " +
          fmtT(run.idle[q], run) + " (" + (100 * run.idle[q] / (run.step || 1)).toFixed(1) +
          "%) / " + run.peak[q] + " A</div>");
      }
    } else if (r < run.ranks) {
      const n = run.starts[r].length, items = [];
      for (let i = 0; i < n; i++) {
        items.push("<li>" + opName(run, r, i) + "  " + fmtT(run.starts[r][i], run) + "\u2013" +
          fmtT(run.ends[r][i], run) + "  \u00b7 " + run.mem[r][i] + " A</li>");
      }
      parts.push("<div class=muted>" + n + " ops (start\u2013end \u00b7 memory after)</div><ol id=ops" + k + ">" +
        items.join("") + "</ol>");
    }
  });
  $("side").innerHTML = parts.join("");
  sideNow = RUNS.map(() => null); sideCls = RUNS.map(() => []);
}

function nowHtml(run, dynamic) {
  const t = STATE.t, parts = [];
  if (STATE.view === "global") {
    const fl = messagesAt(run, t);
    parts.push("<div class=muted>running now (" + fl.wire.length + " messages on the wire, " +
      fl.waiting.length + " received, not yet used)</div>");
    for (let r = 0; r < run.ranks; r++) {
      const i = opAt(run, r, t);
      parts.push("<div class=now>rank " + r + ": " + (i >= 0 ? "<b>" + opName(run, r, i) + "</b>" :
        "<span class=muted>idle</span>") + " \u00b7 " + memAt(run, r, t) + " A</div>");
    }
    return parts.join("");
  }
  const r = STATE.rank;
  if (r >= run.ranks) return "<div class=muted>no rank " + r + " in this schedule</div>";
  if (!dynamic) {
    return "<div class=now>busy " + fmtT(run.busy[r], run) + ", idle " + fmtT(run.idle[r], run) +
      ", peak " + run.peak[r] + " A</div>";
  }
  const i = opAt(run, r, t), fl = messagesAt(run, t), m = run.msgs;
  const mine = (js, src) => js.filter((j) => m[8 * j + 1] === r || (src && m[8 * j] === r))
    .map((j) => msgName(run, j));
  parts.push("<div class=now>at t = " + fmtT(t, run) + ": " + (i >= 0 ? "running <b>" +
    opName(run, r, i) + "</b>" : "idle") + ", memory <b>" + memAt(run, r, t) + " A</b></div>");
  const held = heldAt(run, r, t).map((h) => "F" + h.mb + "@s" + h.stage + (h.partial ? " (I done)" : ""));
  parts.push("<div>activations held (" + held.length + "): " + chips(held) + "</div>");
  parts.push("<div>received, not yet used: " + chips(mine(fl.waiting)) + "</div>");
  parts.push("<div>on the wire: " + chips(mine(fl.wire, true)) + "</div>");
  return parts.join("");
}

function hit(e) {              // {p, r, i, t} under the mouse, or null
  const b = canvas.getBoundingClientRect(), x = e.clientX - b.left, y = e.clientY - b.top, g = GEOM;
  if (!g || x < g.left || x > g.left + g.plotW) return null;
  const t = g.t(x);
  for (const p of g.panels) {
    const rr = Math.floor((y - p.rowsTop) / g.rowH);
    if (y >= p.rowsTop && rr < p.rows) return { p, r: p.ranks[rr], i: opAt(p.run, p.ranks[rr], t), t };
    if (p.memTop != null && y >= p.memTop && y <= p.memTop + g.memH) return { p, r: g.rank, i: -1, t, mem: true };
  }
  return null;
}

function hover(e) {
  const h = hit(e), tip = $("tip");
  if (!h) { tip.hidden = true; return; }
  const run = h.p.run, r = h.r;
  let text;
  if (h.mem) text = "rank " + r + " at " + fmtT(h.t, run) + ": " + memAt(run, r, h.t) + " A held";
  else if (h.i >= 0) {
    const i = h.i, o = run.ops[r];
    text = opName(run, r, i) + " \u00b7 " + { F: "forward", B: "backward", I: "backward-input", W: "backward-weight" }[KINDS[o[5 * i + 2]]] +
      " of microbatch " + o[5 * i + 3] + ", stage " + o[5 * i + 4] + ", rank " + r +
      "\nstart " + fmtT(run.starts[r][i], run) + ", end " + fmtT(run.ends[r][i], run) +
      " (" + fmtT(run.ends[r][i] - run.starts[r][i], run) + ")\n" + waitsOn(run, r, i).join("\n") +
      "\nmemory after: " + run.mem[r][i] + " A" +
      (run.onCritical.has(run.base[r] + i) ? "\non the critical path" : "");
  } else if (r < run.ranks) {
    const nx = lastLE(run.starts[r], h.t) + 1;
    text = "rank " + r + " idle at " + fmtT(h.t, run) +
      (nx < run.starts[r].length ? "\nnext: " + opName(run, r, nx) + "\n" + waitsOn(run, r, nx).join("\n") : "\n(step finished)");
  } else { tip.hidden = true; return; }
  tip.textContent = text; tip.hidden = false;
  tip.style.left = Math.min(window.innerWidth - 390, e.clientX + 14) + "px";
  tip.style.top = Math.min(window.innerHeight - tip.offsetHeight - 8, e.clientY + 14) + "px";
}

function click(e) {
  const b = canvas.getBoundingClientRect(), x = e.clientX - b.left, y = e.clientY - b.top, g = GEOM;
  if (!g || g.view !== "global") return;
  for (const p of g.panels) {
    const rr = Math.floor((y - p.rowsTop) / g.rowH);
    if (y >= p.rowsTop && rr < p.rows && x < g.left + g.plotW) { setRank(rr); setView("local"); return; }
  }
}

header();
setup();
render();
window.ppirViz = { state: STATE, data: DATA, geom: () => GEOM, setView, setMode, setRank, setCritical, seek, play,
  pause, step, render };
