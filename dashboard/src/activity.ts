// What the server is doing: its latest requests (kept while this page is open) and a few of
// its metrics (/rowgate/metrics) drawn over the last minutes.

import { call } from "./api.js";
import { h, replace } from "./dom.js";

interface Request {
  at: number;
  method: string;
  uri: string;
  status: number;
  micros: number;
  client: string;
  caller: string;
}

let timer: number | undefined;

export function stopActivity(): void {
  if (timer !== undefined) clearInterval(timer);
  timer = undefined;
}

const SERIES: [string, string][] = [
  ["requests per second", "requests/s"],
  ["p99 latency (ms)", "p99"],
  ["pgrst_db_pool_available", "pool connections free"],
  ["pgrst_db_pool_waiting", "requests waiting for a connection"],
  ["rowgate_realtime_connections", "realtime connections"],
  ["rowgate_cache_entries", "response cache entries"],
];
const POINTS = 90;

// A metric's value in Prometheus text (the sum of its series).
function metric(text: string, name: string): number | null {
  let sum: number | null = null;
  for (const line of text.split("\n")) {
    if (line.startsWith(name + " ") || line.startsWith(name + "{")) {
      const v = Number(line.slice(line.lastIndexOf(" ") + 1));
      if (!Number.isNaN(v)) sum = (sum ?? 0) + v;
    }
  }
  return sum;
}

function chart(values: number[]): SVGSVGElement {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${POINTS} 40`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("class", "chart");
  const max = Math.max(1, ...values);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", values.map((v, i) => `${i + POINTS - values.length},${40 - (v / max) * 38}`).join(" "));
  svg.append(line);
  return svg;
}

export async function activityPage(content: HTMLElement): Promise<void> {
  const history = new Map<string, number[]>();
  const charts = h("div", { class: "charts" });
  const table = h("div", { class: "grid-wrap" });
  replace(
    content,
    h("h2", {}, "Activity"),
    h("p", { class: "muted small" }, "Requests are kept while this page is open (the last 500). Refreshed every 2 s."),
    charts,
    h("h3", {}, "Latest requests"),
    table,
  );
  const push = (name: string, v: number | null) => {
    const values = history.get(name) ?? [];
    if (v !== null) values.push(v);
    while (values.length > POINTS) values.shift();
    history.set(name, values);
  };
  const tick = async (): Promise<void> => {
    const [{ body }, metrics] = await Promise.all([
      call<{ requests: Request[] }>("GET", "/_/api/requests"),
      fetch("/rowgate/metrics").then((r) => r.text()),
    ]);
    const now = Date.now();
    const last = body.requests.filter((r) => r.at > now - 2000 && !r.uri.startsWith("/_/"));
    push("requests per second", last.length / 2);
    const sorted = last.map((r) => r.micros).sort((a, b) => a - b);
    push("p99 latency (ms)", sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] / 1000 : 0);
    for (const [name] of SERIES.slice(2)) push(name, metric(metrics, name));
    replace(
      charts,
      SERIES.filter(([name]) => (history.get(name) ?? []).length > 0).map(([name, label]) => {
        const values = history.get(name) ?? [];
        return h("figure", { class: "metric" }, h("figcaption", {}, label, ": ", h("strong", {}, String(Math.round(values[values.length - 1] * 100) / 100))), chart(values));
      }),
    );
    replace(
      table,
      h(
        "table",
        { class: "rows" },
        h("thead", {}, h("tr", {}, ["time", "method", "path", "status", "ms", "caller", "client"].map((c) => h("th", {}, c)))),
        h(
          "tbody",
          {},
          body.requests.slice(0, 100).map((r) =>
            h(
              "tr",
              { class: r.status >= 500 ? "bad" : r.status >= 400 ? "warn" : undefined },
              h("td", { class: "small" }, new Date(r.at).toLocaleTimeString()),
              h("td", {}, r.method),
              h("td", {}, r.uri),
              h("td", {}, String(r.status)),
              h("td", {}, (r.micros / 1000).toFixed(1)),
              h("td", { class: "small" }, r.caller),
              h("td", { class: "small muted" }, r.client),
            ),
          ),
        ),
      ),
    );
  };
  await tick();
  timer = window.setInterval(() => void tick().catch(() => undefined), 2000);
}
