// A live inspector of the database's changes: a realtime socket (Supabase Realtime's protocol,
// as supabase-js speaks it) subscribed to every change in the exposed schema, shown as they
// arrive. The socket is the session's: its cookie, and the CSRF token in the URL.
import { call, csrfToken } from "./api.js";
import { cellText, h, replace } from "./dom.js";
let socket = null;
let heartbeat;
let poll;
export function stopRealtime() {
    if (heartbeat !== undefined)
        clearInterval(heartbeat);
    if (poll !== undefined)
        clearInterval(poll);
    heartbeat = undefined;
    poll = undefined;
    socket?.close();
    socket = null;
}
export async function realtimePage(content, state) {
    const status = h("span", { class: "badge warn", id: "realtime-status" }, "connecting");
    const log = h("ol", { class: "changes", id: "changes" });
    const note = state.backend === "sqlite"
        ? `On SQLite, the tables of realtime-tables send their changes: ${(state.realtime_tables ?? []).join(", ") || "none yet"}.`
        : "On PostgreSQL, the tables of the publication supabase_realtime send their changes.";
    const channels = h("div", { class: "grid-wrap", id: "channels" });
    replace(content, h("h2", {}, "Realtime ", status), h("p", { class: "muted small" }, note), h("h3", {}, "Channels"), channels, h("h3", {}, "Changes"), log);
    const listChannels = async () => {
        const { body } = await call("GET", "/_/api/channels");
        replace(channels, h("table", { class: "rows" }, h("thead", {}, h("tr", {}, ["topic", "connections", "present", "changes listened to"].map((c) => h("th", {}, c)))), h("tbody", {}, body.channels.map((c) => h("tr", {}, h("td", {}, c.topic), h("td", {}, String(c.members)), h("td", {}, String(c.presences)), h("td", {}, c.changes.join("; ")))))));
    };
    poll = window.setInterval(() => void listChannels().catch(() => undefined), 2000);
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const url = `${scheme}//${location.host}/realtime/v1/websocket?vsn=1.0.0&rowgate_csrf=${encodeURIComponent(csrfToken())}`;
    const ws = new WebSocket(url);
    socket = ws;
    let ref = 0;
    const send = (topic, event, payload) => ws.send(JSON.stringify({ topic, event, payload, ref: String(++ref), join_ref: "1" }));
    ws.addEventListener("open", () => {
        send("realtime:rowgate-dashboard", "phx_join", {
            config: { broadcast: { self: false }, presence: { key: "" }, postgres_changes: [{ event: "*", schema: state.schema }] },
        });
        heartbeat = window.setInterval(() => send("phoenix", "heartbeat", {}), 25000);
        void listChannels().catch(() => undefined);
    });
    ws.addEventListener("close", () => {
        status.className = "badge warn";
        status.textContent = "closed";
    });
    ws.addEventListener("message", (event) => {
        const message = JSON.parse(String(event.data));
        if (message.event === "phx_reply" && message.payload.status === "ok" && status.textContent !== "listening") {
            status.className = "badge ok";
            status.textContent = "listening";
        }
        else if (message.event === "phx_reply" && message.payload.status === "error") {
            status.className = "badge warn";
            status.textContent = `refused: ${cellText(message.payload.response?.reason)}`;
        }
        else if (message.event === "postgres_changes") {
            const change = message.payload.data;
            const row = change.record && Object.keys(change.record).length ? change.record : change.old_record;
            log.prepend(h("li", {}, h("span", { class: `badge ${change.type.toLowerCase()}` }, change.type), " ", h("strong", {}, change.table), " ", h("span", { class: "muted small" }, change.commit_timestamp), h("pre", {}, JSON.stringify(row ?? {}, null, 1))));
            while (log.children.length > 200)
                log.lastElementChild?.remove();
        }
    });
}
