// nodeplane zone view: reads /ui/api/events (server-sent events over
// fetch, so the bearer token travels in a header, never in the URL) and
// draws the node lifecycle controller's zones.
"use strict";

const TOKEN_KEY = "nodeplane.token";
const MAX_SAMPLES = 240;
const COLORS = { ready: "#2e7d32", notReady: "#ef6c00", unknown: "#c62828", tainted: "#6a1b9a" };

let samples = [];
let leading = true;
let lastUpdate = 0;
let retryTimer = null;

const $ = (id) => document.getElementById(id);

function setStatus(text, bad) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("bad", !!bad);
}

function showLogin(why) {
  $("view").hidden = true;
  $("login").hidden = false;
  $("login-why").textContent = why;
  $("signout").hidden = true;
}

async function connect() {
  clearTimeout(retryTimer);
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = { Accept: "text/event-stream" };
  if (token) headers.Authorization = "Bearer " + token;
  let resp;
  try {
    resp = await fetch("api/events", { headers, cache: "no-store", credentials: "same-origin" });
  } catch (e) {
    return retry("cannot reach the server: " + e.message);
  }
  if (resp.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    setStatus("not signed in", true);
    return showLogin(token ? "The server did not accept that token." : "This server needs a credential.");
  }
  if (resp.status === 403) {
    setStatus("forbidden", true);
    return showLogin("Signed in, but not allowed to read /ui/api/ (RBAC nonResourceURLs \"/ui/*\", verb get).");
  }
  if (!resp.ok || !resp.body) {
    return retry("server answered " + resp.status);
  }
  $("login").hidden = true;
  $("view").hidden = false;
  $("signout").hidden = !token;
  setStatus("live");
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        handle(buf.slice(0, end));
        buf = buf.slice(end + 2);
      }
    }
  } catch (e) {
    return retry("stream broken: " + e.message);
  }
  retry("stream ended");
}

function retry(why) {
  setStatus(why + "; reconnecting…", true);
  retryTimer = setTimeout(connect, 2000);
}

function handle(block) {
  let event = "message";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) event = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const msg = JSON.parse(data);
  if (event === "snapshot") {
    leading = msg.leading;
    samples = msg.samples || [];
  } else if (event === "sample") {
    leading = true;
    samples.push(msg);
    if (samples.length > MAX_SAMPLES) samples.splice(0, samples.length - MAX_SAMPLES);
  }
  lastUpdate = Date.now();
  render();
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function render() {
  const last = samples[samples.length - 1];
  if (!last) {
    $("summary").textContent = leading ? "waiting for the first monitor pass…"
      : "this server is not running the node lifecycle controller: open the leading server's /ui/";
    return;
  }
  const at = new Date(last.time);
  $("summary").textContent = `${last.nodes.toLocaleString()} nodes · pass at ${at.toLocaleTimeString()}` +
    (last.fresh ? "" : " · VIEW STALE: no node is being marked") +
    (last.allZonesDisrupted ? " · every zone disrupted: no NoExecute taints" : "");
  const body = $("zones").tBodies[0];
  body.replaceChildren();
  for (const z of last.zones) {
    const tr = document.createElement("tr");
    tr.dataset.zone = z.name;
    cell(tr, z.name || "(no zone)", "name");
    cell(tr, z.state, "state " + z.state);
    cell(tr, z.size.toLocaleString(), "size");
    cell(tr, z.unhealthy.toLocaleString(), "unhealthy");
    cell(tr, z.ready.toLocaleString(), "ready");
    cell(tr, z.notReady.toLocaleString(), "notready");
    cell(tr, z.unknown.toLocaleString(), "unknown");
    cell(tr, z.tainted.toLocaleString(), "tainted");
    cell(tr, String(z.taintRate), "rate");
    const q = z.queued + (z.queuedFirst && z.queuedFirst.length ? " (" + z.queuedFirst.join(", ") + (z.queued > z.queuedFirst.length ? ", …" : "") + ")" : "");
    cell(tr, q, "queued");
    cell(tr, z.evictions.toLocaleString(), "evictions");
    body.appendChild(tr);
  }
  const wb = $("worst").tBodies[0];
  wb.replaceChildren();
  for (const n of last.worst || []) {
    const tr = document.createElement("tr");
    tr.dataset.node = n.name;
    cell(tr, n.name);
    cell(tr, n.zone || "(no zone)");
    cell(tr, n.ready || "-");
    cell(tr, n.sinceHeartbeatSeconds.toFixed(1) + " s", "age");
    cell(tr, n.noExecute || "-");
    wb.appendChild(tr);
  }
  drawCharts(last.zones.map((z) => z.name));
}

function drawCharts(zones) {
  const box = $("charts");
  for (const fig of [...box.children]) {
    if (!zones.includes(fig.dataset.zone)) fig.remove();
  }
  for (const name of zones) {
    let fig = [...box.children].find((f) => f.dataset.zone === name);
    if (!fig) {
      fig = document.createElement("figure");
      fig.dataset.zone = name;
      const cap = document.createElement("figcaption");
      cap.textContent = name || "(no zone)";
      const canvas = document.createElement("canvas");
      canvas.width = 420;
      canvas.height = 160;
      fig.append(cap, canvas);
      box.appendChild(fig);
    }
    drawChart(fig.querySelector("canvas"), name);
  }
}

function drawChart(canvas, zoneName) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 44, R = 8, T = 8, B = 20;
  ctx.clearRect(0, 0, W, H);
  const series = { ready: [], notReady: [], unknown: [], tainted: [] };
  const times = [];
  let max = 1;
  for (const s of samples) {
    const z = s.zones.find((z) => z.name === zoneName);
    if (!z) continue;
    times.push(Date.parse(s.time));
    for (const k of Object.keys(series)) {
      series[k].push(z[k]);
      if (z[k] > max) max = z[k];
    }
  }
  if (times.length === 0) return;
  const t1 = times[times.length - 1];
  const t0 = Math.min(times[0], t1 - 60000);
  const x = (t) => L + (W - L - R) * (t - t0) / Math.max(1, t1 - t0);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  ctx.strokeStyle = "#d0d5db";
  ctx.fillStyle = "#4a5560";
  ctx.font = "11px system-ui, sans-serif";
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (const v of [0, max / 2, max]) {
    ctx.moveTo(L, y(v));
    ctx.lineTo(W - R, y(v));
    ctx.fillText(String(Math.round(v)), 4, y(v) + 4);
  }
  ctx.stroke();
  ctx.fillText(Math.round((t1 - t0) / 1000) + " s ago", L, H - 4);
  ctx.fillText("now", W - R - 22, H - 4);
  ctx.lineWidth = 2;
  for (const [k, vals] of Object.entries(series)) {
    ctx.strokeStyle = COLORS[k];
    ctx.setLineDash(k === "tainted" ? [4, 3] : []);
    ctx.beginPath();
    vals.forEach((v, i) => (i === 0 ? ctx.moveTo(x(times[i]), y(v)) : ctx.lineTo(x(times[i]), y(v))));
    ctx.stroke();
  }
  ctx.setLineDash([]);
}

$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  connect();
});
$("signout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});
setInterval(() => {
  if (lastUpdate && Date.now() - lastUpdate > 30000) setStatus("no update for " + Math.round((Date.now() - lastUpdate) / 1000) + " s", true);
}, 5000);
connect();
