// The ringmq console: polls /api/overview every second, turns counter
// totals into rates and histogram buckets into percentiles (the change
// since the previous poll), and draws the last two minutes.
"use strict";

const HISTORY = 120;
const history = [];
let previous = null;

const $ = (id) => document.getElementById(id);

function text(tag, content, cls) {
  const e = document.createElement(tag);
  e.textContent = content;
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const [content, cls] of cells) tr.appendChild(text("td", content, cls));
  return tr;
}

function fill(tableId, rows) {
  const body = $(tableId).querySelector("tbody");
  body.replaceChildren(...rows);
}

// The value below which a fraction q of the counted values lie, by linear
// interpolation inside the bucket (as Prometheus' histogram_quantile).
function quantile(q, bounds, counts) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    if (seen + counts[i] >= rank) {
      const lower = i === 0 ? 0 : bounds[i - 1];
      const upper = i < bounds.length ? bounds[i] : bounds[bounds.length - 1];
      const within = counts[i] === 0 ? 0 : (rank - seen) / counts[i];
      return lower + (upper - lower) * within;
    }
    seen += counts[i];
  }
  return bounds[bounds.length - 1];
}

function sample(now) {
  const point = { time: now.time_ms, produce: 0, fetch: 0, bytes: 0, p50: null, p99: null };
  if (previous) {
    const seconds = Math.max((now.time_ms - previous.time_ms) / 1000, 0.001);
    const rate = (key) => Math.max(now.totals[key] - previous.totals[key], 0) / seconds;
    point.produce = rate("produce_messages");
    point.fetch = rate("fetch_messages");
    point.bytes = rate("produce_bytes");
    const a = now.append_latency, b = previous.append_latency;
    if (a && b) {
      const delta = a.counts.map((c, i) => Math.max(c - (b.counts[i] || 0), 0));
      const ms = (v) => (v === null ? null : v * 1000);
      point.p50 = ms(quantile(0.5, a.bounds, delta));
      point.p99 = ms(quantile(0.99, a.bounds, delta));
    }
  }
  previous = now;
  history.push(point);
  while (history.length > HISTORY) history.shift();
  return point;
}

function chart(canvasId, series) {
  const canvas = $(canvasId);
  const g = canvas.getContext("2d");
  const [w, h, left, bottom] = [canvas.width, canvas.height, 60, 20];
  g.clearRect(0, 0, w, h);
  const values = series.flatMap((s) => history.map((p) => p[s.key]).filter((v) => v !== null));
  const max = Math.max(1, ...values) * 1.1;
  g.strokeStyle = "#e3e8ee";
  g.fillStyle = "#5b6b7c";
  g.font = "11px sans-serif";
  for (let i = 0; i <= 4; i++) {
    const y = 8 + ((h - bottom - 8) * i) / 4;
    g.beginPath();
    g.moveTo(left, y);
    g.lineTo(w - 8, y);
    g.stroke();
    const v = max * (1 - i / 4);
    g.fillText(v >= 100 ? v.toFixed(0) : v.toPrecision(3), 4, y + 4);
  }
  const x = (i) => left + ((w - left - 8) * i) / (HISTORY - 1);
  const y = (v) => 8 + (h - bottom - 8) * (1 - v / max);
  series.forEach((s, n) => {
    g.strokeStyle = s.color;
    g.lineWidth = 2;
    g.beginPath();
    let drawing = false;
    const offset = HISTORY - history.length;
    history.forEach((p, i) => {
      const v = p[s.key];
      if (v === null) { drawing = false; return; }
      if (drawing) g.lineTo(x(offset + i), y(v)); else g.moveTo(x(offset + i), y(v));
      drawing = true;
    });
    g.stroke();
    g.fillStyle = s.color;
    g.fillText(s.label, left + 10 + n * 110, h - 5);
  });
}

const fmt = (v, digits) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));

function render(o) {
  const point = sample(o);
  const cluster = o.node.cluster_id ? `, cluster ${o.node.cluster_id}` : "";
  $("node").textContent = `${o.node.shards} shards, ${o.node.role}${cluster}`;
  $("updated").textContent = "updated " + new Date(o.time_ms).toLocaleTimeString();
  $("produce-rate").textContent = fmt(point.produce, 0);
  $("fetch-rate").textContent = fmt(point.fetch, 0);
  $("produce-bytes").textContent = fmt(point.bytes / 1048576, 2);
  $("latency").textContent = `${fmt(point.p50, 2)} / ${fmt(point.p99, 2)}`;
  $("connections").textContent = fmt(o.totals.connections, 0);
  chart("rates", [
    { key: "produce", label: "produced", color: "#1f6feb" },
    { key: "fetch", label: "fetched", color: "#2da44e" },
  ]);
  chart("latencies", [
    { key: "p50", label: "p50", color: "#8250df" },
    { key: "p99", label: "p99", color: "#cf222e" },
  ]);
  const visible = o.topics.filter((t) => !t.name.startsWith("%"));
  fill("topics", visible.map((t) => {
    const stored = t.queues.reduce((a, q) => a + (q.end - q.start), 0);
    const tr = row([[t.name], [String(t.queues.length), "num"], [String(stored), "num"],
      [t.queues.map((q) => q.end).join(" "), "num"]]);
    tr.dataset.topic = t.name;
    return tr;
  }));
  const byGroup = new Map();
  for (const g of o.groups) {
    const k = g.group + "\u0000" + g.topic;
    const e = byGroup.get(k) || { group: g.group, topic: g.topic, queues: 0, lag: 0 };
    e.queues += 1;
    e.lag += g.lag;
    byGroup.set(k, e);
  }
  fill("groups", [...byGroup.values()].map((g) => {
    const tr = row([[g.group], [g.topic], [String(g.queues), "num"], [String(g.lag), g.lag > 0 ? "num lagging" : "num"]]);
    tr.dataset.group = g.group;
    tr.dataset.lag = String(g.lag);
    return tr;
  }));
  renderCluster(o.cluster);
}

function renderCluster(c) {
  $("cluster").hidden = !c;
  if (!c) return;
  $("cluster-node").textContent = `this node: epoch ${fmt(c.epoch, 0)}, in-sync replicas ${fmt(c.isr_size, 0)}`;
  fill("cluster-groups", c.groups.map((g) => row([[g.group], [String(g.shards), "num"], [g.leader || "(none)"]])));
  fill("followers", c.followers.map((f) => row([[f.follower], [String(f.lag_bytes), "num"]])));
}

async function poll() {
  try {
    const response = await fetch("/api/overview", { cache: "no-store" });
    if (!response.ok) throw new Error(await response.text());
    render(await response.json());
  } catch (e) {
    $("updated").textContent = "not updated: " + e.message;
  }
}

async function lookup(event) {
  event.preventDefault();
  const id = $("lookup-id").value.trim();
  const params = id ? { id } : { topic: $("lookup-topic").value.trim(), key: $("lookup-key").value };
  const found = $("found");
  const response = await fetch("/api/message?" + new URLSearchParams(params));
  if (!response.ok) {
    found.replaceChildren(text("p", await response.text(), "error"));
    return;
  }
  const { messages } = await response.json();
  if (messages.length === 0) {
    found.replaceChildren(text("p", "no message found (or retention removed it)"));
    return;
  }
  found.replaceChildren(...messages.map((m) => {
    const box = document.createElement("div");
    box.className = "message";
    box.appendChild(text("div", `${m.id}  ${m.topic}/${m.queue} offset ${m.offset}  key ${JSON.stringify(m.key)} tag ${JSON.stringify(m.tag)}  ${new Date(m.timestamp_ms).toISOString()}`));
    box.appendChild(text("pre", m.value + (m.value_bytes > m.value.length ? " …" : "")));
    if (m.trace.length > 0) {
      const table = document.createElement("table");
      table.className = "trace";
      const first = m.trace[0].time_ms;
      for (const e of m.trace) {
        const details = Object.entries(e).filter(([k]) => k !== "event" && k !== "time_ms").map(([k, v]) => `${k}=${v}`).join(" ");
        table.appendChild(row([[`+${e.time_ms - first} ms`, "num"], [e.event], [details]]));
      }
      box.appendChild(table);
    } else {
      box.appendChild(text("div", "no trace (tracing is off for its topic)", "note"));
    }
    return box;
  }));
}

$("lookup").addEventListener("submit", lookup);
poll();
setInterval(poll, 1000);
