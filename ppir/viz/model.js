// ppir viz: the data model.  Decodes the embedded ppir.viz/2 object (flat arrays, see
// ppir/viz/data.py) and answers the questions the views ask: which op runs at time t, the
// memory of a rank at t, the activations it holds, the messages in flight, what an op waits on.
"use strict";
const DATA = JSON.parse(document.getElementById("ppir-data").textContent);
const KINDS = DATA.kinds;                       // "FBIW": ops[5*i+2] indexes this string
const COLORS = DATA.colors;
const RUNS = DATA.runs;
const TMAX = Math.max(1e-12, ...RUNS.map((r) => r.step));

function prepRun(run) {
  const P = run.ranks;
  run.starts = []; run.ends = []; run.glob = [];
  run.inMsg = []; run.chunk = []; run.chunks = [];
  for (let r = 0; r < P; r++) {
    const o = run.ops[r], n = o.length / 5;
    const st = new Float64Array(n), en = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      st[i] = o[5 * i]; en[i] = o[5 * i + 1];
      run.glob.push([r, i]);
    }
    run.starts.push(st); run.ends.push(en);
    const stages = [...new Set(Array.from({ length: n }, (_, i) => o[5 * i + 4]))].sort((a, b) => a - b);
    run.chunk.push(new Map(stages.map((s, c) => [s, c]))); run.chunks.push(stages.length);
    run.inMsg.push(new Int32Array(n).fill(-1));
  }
  const m = run.msgs;
  run.nmsg = m.length / 8;
  for (let j = 0; j < run.nmsg; j++) {
    const dst = m[8 * j + 1], dop = m[8 * j + 7];
    if (dop >= 0) run.inMsg[dst][dop] = j;
  }
  run.maxPeak = Math.max(1e-9, ...run.peak);
  run.onCritical = new Set(run.critical || []);   // global ids (base[r] + i)
}
RUNS.forEach(prepRun);
const MAXPEAK = Math.max(...RUNS.map((r) => r.maxPeak));

// Sorted distinct event times (op starts and ends, message ends) for stepping.
const EVENTS = (() => {
  const all = [0, TMAX];
  for (const run of RUNS) {
    for (let r = 0; r < run.ranks; r++) {
      for (const x of run.starts[r]) all.push(x);
      for (const x of run.ends[r]) all.push(x);
    }
    for (let j = 0; j < run.nmsg; j++) all.push(run.msgs[8 * j + 3]);
  }
  const s = Float64Array.from(all).sort();
  const out = [];
  for (const x of s) if (!out.length || x - out[out.length - 1] > TMAX * 1e-9) out.push(x);
  return out;
})();

function lastLE(arr, t) {        // index of the last element <= t, or -1 (arr ascending)
  let lo = 0, hi = arr.length - 1, ans = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid] <= t) { ans = mid; lo = mid + 1; } else hi = mid - 1;
  }
  return ans;
}

function opAt(run, r, t) {       // index of the op running on rank r at t, or -1
  if (r >= run.ranks) return -1;
  const i = lastLE(run.starts[r], t);
  return i >= 0 && t < run.ends[r][i] ? i : -1;
}

function memAt(run, r, t) {      // activation memory (A) of rank r once every op ending <= t ran
  if (r >= run.ranks) return 0;
  const i = lastLE(run.ends[r], t);
  return i >= 0 ? run.mem[r][i] : 0;
}

function opName(run, r, i) {     // "F3@s5": kind, microbatch, stage
  const o = run.ops[r];
  return KINDS[o[5 * i + 2]] + o[5 * i + 3] + "@s" + o[5 * i + 4];
}

function endedBy(run, id, t) {   // has the op with this global id ended by t?  false for -1
  if (id < 0) return false;
  const [r, i] = run.glob[id];
  return run.ends[r][i] <= t;
}

// Activations rank r holds at t: forwards that ended and that the ops data.py names in
// run.frees (ppir.analysis.memory.released_by) have not freed; -2: the forward keeps nothing.
function heldAt(run, r, t) {
  const out = [];
  if (r >= run.ranks) return out;
  const o = run.ops[r], f = run.frees[r];
  for (let i = 0, n = o.length / 5; i < n && run.starts[r][i] <= t; i++) {
    if (o[5 * i + 2] !== 0 || run.ends[r][i] > t || f[2 * i] === -2) continue;
    if (endedBy(run, f[2 * i], t)) continue;
    out.push({ stage: o[5 * i + 4], mb: o[5 * i + 3], partial: endedBy(run, f[2 * i + 1], t) });
  }
  return out;
}

// Messages at t, per run: on the wire (start <= t < end) and delivered but not yet consumed.
function messagesAt(run, t) {
  const wire = [], waiting = [], m = run.msgs;
  for (let j = 0; j < run.nmsg; j++) {
    const s = m[8 * j + 2], e = m[8 * j + 3];
    if (s > t) continue;
    if (t < e) { wire.push(j); continue; }
    const dst = m[8 * j + 1], dop = m[8 * j + 7];
    if (dop >= 0 && run.starts[dst][dop] > t) waiting.push(j);
  }
  return { wire, waiting };
}

function msgName(run, j) {
  const m = run.msgs;
  return (m[8 * j + 4] ? "grad" : "act") + " mb " + m[8 * j + 5] + " r" + m[8 * j] + "\u2192r" +
    m[8 * j + 1];
}

function fmtT(x, run) {
  const unit = (run || RUNS[0]).unit;
  if (unit !== "s") return +x.toPrecision(5) + "";
  const a = Math.abs(x);
  if (a >= 1) return +x.toPrecision(4) + " s";
  if (a >= 1e-3) return +(x * 1e3).toPrecision(4) + " ms";
  return +(x * 1e6).toPrecision(4) + " \u00b5s";
}

// What op i of rank r waited on: its predecessor on the rank and its data producers.
function waitsOn(run, r, i) {
  const lines = [], start = run.starts[r][i];
  const prevEnd = i > 0 ? run.ends[r][i - 1] : 0;
  let binding = i > 0 ? "previous op " + opName(run, r, i - 1) : "step start";
  let ready = prevEnd;
  const d = run.deps[r];
  for (const g of [d[2 * i], d[2 * i + 1]]) {
    if (g < 0) continue;
    const [pr, pi] = run.glob[g];
    let t = run.ends[pr][pi], via = "";
    const j = run.inMsg[r][i];
    if (pr !== r && j >= 0 && run.msgs[8 * j] === pr) {
      t = run.msgs[8 * j + 3]; via = ", message arrives " + fmtT(t, run);
    }
    lines.push("input " + opName(run, pr, pi) + " on r" + pr + " ends " +
      fmtT(run.ends[pr][pi], run) + via);
    if (t > ready + 1e-12) { ready = t; binding = "input " + opName(run, pr, pi); }
  }
  if (i > 0) lines.unshift("after " + opName(run, r, i - 1) + " (ends " + fmtT(prevEnd, run) + ")");
  const gap = start - prevEnd;
  if (gap > 1e-12) {
    const why = start - ready > 1e-12 ? "a communication group" : binding;
    lines.push("idle " + fmtT(gap, run) + " before it, waiting on " + why);
  }
  return lines;
}
