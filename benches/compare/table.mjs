// Prints the comparison table of run.sh from its JSON lines (one `fairyring bench --json`
// report per server and rate, each with a "server" field). Ratios are the other server's
// figure over fairyring's: above 1 means fairyring is ahead (for deliveries/s: fairyring's
// over the other's).
import { readFileSync } from "node:fs";

const rows = readFileSync(process.argv[2], "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l));
const by = (server, rate) => rows.find((r) => r.server === server && r.rate_per_client === rate);
const rates = [...new Set(rows.map((r) => r.rate_per_client))].sort((a, b) => a - b);
const others = ["hocuspocus", "y-websocket"];
const f = (x, d = 1) => (x == null || Number.isNaN(x) ? "—" : x.toFixed(d));
const mib = (kib) => (kib == null ? "—" : (kib / 1024).toFixed(1));
const lat = (r) => `${f(r.latency_ms.p50, 2)} / ${f(r.latency_ms.p99, 2)}`;
const cell = (r) =>
  r
    ? `${lat(r)} ms, ${f(r.deliveries_per_sec, 0)}/s (${f(r.delivered_ratio * 100, 1)} %)`
    : "—";

console.log(
  "| clients × rate | upd/s | fairyring p50 / p99, deliveries | Hocuspocus | y-websocket | p99 ratio (Hocuspocus / fairyring, y-websocket / fairyring) | CPU s per 1,000 deliveries (fr / hp / yws) | RSS after load MiB (fr / hp / yws) |",
);
console.log("|---|---|---|---|---|---|---|---|");
for (const rate of rates) {
  const fr = by("fairyring", rate);
  if (!fr) continue;
  const o = others.map((s) => by(s, rate));
  const ratio = (r) => (r ? f(r.latency_ms.p99 / fr.latency_ms.p99, 2) + "×" : "—");
  const cpu = [fr, ...o].map((r) => (r ? f(r.server_cpu.seconds_per_1000_deliveries, 4) : "—"));
  const rss = [fr, ...o].map((r) => (r ? mib(r.server_rss_kib.after_load) : "—"));
  console.log(
    `| ${fr.clients} × ${rate}/s | ${f(fr.updates_sent_per_sec, 0)} | ${cell(fr)} | ${cell(o[0])} | ${cell(o[1])} | ${ratio(o[0])}, ${ratio(o[1])} | ${cpu.join(" / ")} | ${rss.join(" / ")} |`,
  );
}
const warned = rows.filter((r) => r.warnings?.length);
for (const r of warned) {
  console.log(`\n${r.server} at ${r.rate_per_client}/s: ${r.warnings.join("; ")}`);
}
