"""lab-report.html: one self-contained page (no external assets). The
recorded events are embedded as JSON and the page draws each run's
timeline as SVG from them in the browser, so what is drawn is what was
recorded: the tests count the drawn marks against the JSON."""

import json

PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>tidemark lab: see it fail, see it hold</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;
color:#1d232a;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin:1.6em 0 .3em}
.story{color:#444;margin:.2em 0 .6em}
.run{margin:.2em 0 .9em}.run h3{font-size:.95em;margin:.3em 0}
.ok{color:#17803d}.bad{color:#b42318}
.verdict{font-size:.9em;color:#333}
.rounds{font-size:.85em;color:#333;margin:.2em 0}.norace{color:#8a6d00}
svg{display:block;background:#fafbfc;border:1px solid #e3e6ea;border-radius:4px}
.legend span{display:inline-block;margin-right:1.2em;font-size:.85em}
.sw{display:inline-block;width:14px;height:10px;vertical-align:middle;
margin-right:4px;border-radius:2px}
table{border-collapse:collapse;font-size:.9em}td,th{padding:2px 10px;
border-bottom:1px solid #e3e6ea;text-align:left}
</style></head><body>
<h1>tidemark lab: see it fail, see it hold</h1>
<p id="meta"></p>
<p class="legend">
<span><i class="sw" style="background:#7aa7d8"></i>lock held</span>
<span><i class="sw" style="background:#c9ccd1"></i>paused / held in the network</span>
<span><i class="sw" style="background:#17803d"></i>write applied</span>
<span><i class="sw" style="background:#b42318"></i>refused</span>
<span><i class="sw" style="background:#8a4baf"></i>crash, clock jump</span>
<span>· step (hover for text)</span></p>
<table id="summary"></table>
<div id="numbers"></div>
<div id="scenarios"></div>
<script type="application/json" id="lab-data">__DATA__</script>
<script>
"use strict";
const NS = "http://www.w3.org/2000/svg";
const data = JSON.parse(document.getElementById("lab-data").textContent);
function el(name, attrs, parent, text) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function tip(e, text) { el("title", {}, e, text); return e; }
function lanesOf(run) {
  const clients = [], systems = [];
  for (const ev of run.events) {
    const l = ev.lane, list = l.startsWith("client") ? clients : systems;
    if (!list.includes(l)) list.push(l);
  }
  clients.sort();
  if (!systems.includes("backend") && !systems.includes("postgres"))
    systems.push("backend");
  return clients.concat(systems);
}
// One run's timeline: a lane per client, then the backend (and any other
// system: redis, tidemark, postgres). x: ms since the run started.
function draw(run, maxT) {
  const lanes = lanesOf(run), W = 1040, L = 110, R = 20, LH = 34, top = 8;
  const H = top + lanes.length * LH + 26;
  const svg = el("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H,
                         "class": "timeline", "data-run": run.name});
  const x = t => L + (W - L - R) * Math.max(0, t) / maxT;
  const y = lane => top + lanes.indexOf(lane) * LH;
  lanes.forEach((lane, i) => {
    const g = el("g", {"class": "lane", "data-lane": lane}, svg);
    el("line", {x1: L, x2: W - R, y1: y(lane) + LH / 2, y2: y(lane) + LH / 2,
                stroke: "#e3e6ea"}, g);
    el("text", {x: 6, y: y(lane) + LH / 2 + 4, "font-size": 12,
                fill: "#333"}, g, lane);
  });
  const step = [50, 100, 200, 250, 500, 1000, 2000, 5000, 10000]
    .find(s => maxT / s <= 12) || 20000;
  for (let t = 0; t <= maxT; t += step) {
    el("line", {x1: x(t), x2: x(t), y1: top, y2: H - 20, stroke: "#eef0f2"},
       svg);
    el("text", {x: x(t), y: H - 6, "font-size": 10, fill: "#777",
                "text-anchor": "middle"}, svg, t + " ms");
  }
  for (const ev of run.events) {
    const yy = y(ev.lane), mid = yy + LH / 2;
    if (ev.kind === "hold") {
      tip(el("rect", {x: x(ev.t), y: yy + 7, width: Math.max(2, x(ev.t1) - x(ev.t)),
                      height: LH - 14, rx: 3, fill: "#7aa7d8",
                      "class": "bar-hold", "data-t": ev.t}, svg),
          "lock held: " + (ev.label || "") + " (" + ev.t + " to " + ev.t1 + " ms)");
      if (x(ev.t1) - x(ev.t) > 48)
        el("text", {x: x(ev.t) + 4, y: mid + 4, "font-size": 10, fill: "#fff"},
           svg, ev.label || "");
    } else if (ev.kind === "pause" || ev.kind === "delay") {
      tip(el("rect", {x: x(ev.t), y: yy + 3, width: Math.max(2, x(ev.t1) - x(ev.t)),
                      height: LH - 6, fill: "#c9ccd1", opacity: 0.75,
                      "class": "bar-" + ev.kind, "data-t": ev.t}, svg),
          (ev.kind === "pause" ? "paused (SIGSTOP) " : "held in the network ")
          + ev.t + " to " + ev.t1 + " ms");
    }
  }
  for (const ev of run.events) {
    const yy = y(ev.lane), mid = yy + LH / 2, cx = x(ev.t);
    if (ev.kind === "write") {
      const g = tip(el("g", {"class": "mark-write", "data-t": ev.t}, svg),
                    "applied at " + ev.t + " ms: " + ev.body);
      el("circle", {cx: cx, cy: mid, r: 7, fill: "#17803d"}, g);
      el("text", {x: cx, y: mid - 10, "font-size": 10, fill: "#17803d",
                  "text-anchor": "middle"}, g,
         (ev.client || "").replace("client ", "c") +
         (ev.token ? " t" + ev.token : ""));
    } else if (ev.kind === "refused") {
      const g = tip(el("g", {"class": "mark-refused", "data-t": ev.t}, svg),
                    ev.t + " ms: " + ev.text);
      el("path", {d: "M" + (cx - 6) + " " + (mid - 6) + "l12 12m0 -12l-12 12",
                  stroke: "#b42318", "stroke-width": 3}, g);
    } else if (ev.kind === "crash") {
      const g = tip(el("g", {"class": "mark-crash", "data-t": ev.t}, svg),
                    ev.t + " ms: " + ev.text);
      el("path", {d: "M" + cx + " " + (mid - 8) + "l5 8l-5 8l-5 -8z",
                  fill: "#8a4baf"}, g);
    } else if (ev.kind === "step") {
      tip(el("circle", {cx: cx, cy: yy + LH - 4, r: 2.5, fill: "#555",
                        "class": "mark-step", "data-t": ev.t}, svg),
          ev.t + " ms: " + ev.text);
    }
  }
  return svg;
}
function maxTime(sc) {
  let m = 100;
  for (const run of sc.runs)
    for (const ev of run.events) m = Math.max(m, ev.t1 || 0, ev.t);
  return Math.ceil(m * 1.05 / 100) * 100;
}
document.getElementById("meta").textContent =
  "Run " + data.started + ", " + data.mode + " mode: lock " + data.lock_ms +
  " ms, pause " + data.pause_ms + " ms, Redlock rounds " + data.rounds +
  ". Fencing off above, fencing on below.";
if (data.numbers && data.numbers.rows) {
  const n = data.numbers, box = document.getElementById("numbers");
  const h = document.createElement("h2");
  h.textContent = "The seed's numbers, and this machine's"; box.appendChild(h);
  const t = document.createElement("table");
  t.innerHTML = "<tr><th>lock rate</th><th>seed</th><th>here</th></tr>";
  for (const r of n.rows) {
    const tr = document.createElement("tr");
    for (const v of [r.what, r.seed.toLocaleString("en"),
                     r.here === null ? "-" : r.here.toLocaleString("en")]) {
      const td = document.createElement("td"); td.textContent = v; tr.appendChild(td);
    }
    t.appendChild(tr);
  }
  box.appendChild(t);
  const p = document.createElement("p"); p.className = "story";
  p.textContent = "Here: " + n.cpus + " CPUs, load " + n.load.join(" ") + ", " +
    n.seconds + " s a pgbench case, 60,000 requests a redis-benchmark case, " +
    "32 clients (tests/bench/locks_raw.sh). The seed: " +
    "Redis 8 and Postgres 16 on an 8-core laptop, 3 s a case.";
  box.appendChild(p);
}
const sum = document.getElementById("summary");
sum.innerHTML = "<tr><th>scenario</th><th>without fencing</th>" +
  "<th>with fencing</th><th>check</th></tr>";
const root = document.getElementById("scenarios");
for (const sc of data.scenarios) {
  const tr = document.createElement("tr");
  const off = sc.runs.filter(r => !r.fenced), on = sc.runs.filter(r => r.fenced);
  const cell = (rs) => rs.map(r => (r.raced === 0 ? "no race" :
    r.harm ? "failure happened" : "held") + (r.rounds && r.rounds.length > 1 ?
    " (race in " + r.raced + " of " + r.rounds.length + " rounds)" : "")).join(", ");
  const noRace = (sc.problem || "").startsWith("the race never happened");
  for (const t of [sc.title, cell(off), cell(on),
                   sc.ok ? "ok" : noRace ? "FAILED: no race" : "BROKEN"]) {
    const td = document.createElement("td"); td.textContent = t; tr.appendChild(td);
  }
  tr.lastChild.className = sc.ok ? "ok" : "bad";
  sum.appendChild(tr);
  const sec = document.createElement("section");
  sec.className = "scenario"; sec.dataset.id = sc.id;
  const h = document.createElement("h2"); h.textContent = sc.title; sec.appendChild(h);
  const p = document.createElement("p"); p.className = "story";
  p.textContent = sc.story; sec.appendChild(p);
  if (sc.problem) {
    const b = document.createElement("p"); b.className = "bad";
    b.textContent = sc.problem; sec.appendChild(b);
  }
  const maxT = maxTime(sc);
  for (const run of sc.runs) {
    const d = document.createElement("div"); d.className = "run";
    const h3 = document.createElement("h3");
    h3.textContent = run.name + ": " + (run.raced === 0 ?
      "the race did not happen" : run.harm ? "the failure happened" :
      "the data stayed right");
    h3.className = run.raced === 0 || run.harm || run.harm === run.fenced ?
      "bad" : "ok";
    d.appendChild(h3);
    d.appendChild(draw(run, maxT));
    const v = document.createElement("div"); v.className = "verdict";
    v.textContent = run.verdict; d.appendChild(v);
    // Every round, when a round is not the whole story: which had the
    // race, which did not, and what happened in each.
    const rounds = run.rounds || [];
    if (rounds.length > 1 || rounds.some(x => !x.race)) {
      const ol = document.createElement("ol"); ol.className = "rounds";
      for (const x of rounds) {
        const li = document.createElement("li");
        li.textContent = (x.race ? (x.harm ? "race, harm: " : "race, held: ")
                          : "") + x.verdict;
        li.className = x.race ? "" : "norace";
        ol.appendChild(li);
      }
      d.appendChild(ol);
    }
    sec.appendChild(d);
  }
  root.appendChild(sec);
}
</script></body></html>
"""


def html(doc):
    data = json.dumps(doc).replace("</", "<\\/")
    return PAGE.replace("__DATA__", data)
