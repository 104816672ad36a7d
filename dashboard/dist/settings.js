// The configuration in force (secrets hidden), and on SQLite the backups in backup-dir: listed,
// downloaded, and one taken now.
import { blob, call } from "./api.js";
import { action, cellText, h, notice, replace } from "./dom.js";
export async function settingsPage(content, state) {
    const { body } = await call("GET", "/_/api/config");
    const backups = h("div", { class: "card" });
    replace(content, h("h2", {}, "Configuration"), h("p", { class: "muted small" }, "As rowgate runs now: flags, ROWGATE_* variables and the config file merged. Secrets are hidden."), h("table", { class: "rows" }, h("tbody", {}, Object.entries(body).map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, cellText(v)))))), state.backend === "sqlite"
        ? backups
        : h("p", { class: "muted small" }, "A PostgreSQL database is backed up with pg_basebackup and its WAL archive (docs/reliability.md)."));
    if (state.backend === "sqlite")
        await backupsCard(backups);
}
// The backups in backup-dir, newest first, each downloadable; "Back up now" adds one.
async function backupsCard(card, done) {
    const { body } = await call("GET", "/_/api/backups");
    const message = h("div");
    if (done)
        replace(message, notice(done, "ok"));
    const now = action("Back up now", message, async () => {
        const taken = (await call("POST", "/_/api/backups")).body;
        await backupsCard(card, `Backup ${taken.name} taken (${taken.bytes} bytes).`);
    });
    now.id = "backup";
    const download = (name) => action("Download", message, async () => {
        const file = await blob(`/_/api/backups/${encodeURIComponent(name)}`);
        const link = h("a", { href: URL.createObjectURL(file), download: name });
        link.click();
        URL.revokeObjectURL(link.href);
        replace(message, notice(`${name} (${file.size} bytes) was downloaded.`, "ok"));
    });
    const schedule = body.schedule
        ? `Taken on the schedule ${body.schedule} (UTC); the newest ${body.keep} are kept.`
        : "No schedule (backup-schedule): taken by hand, or by rowgate backup.";
    replace(card, h("h3", {}, "Backups"), h("p", { class: "small" }, `The SQLite file as it was at one moment, with storage's files and the access rules, taken while the server keeps serving; in ${body.dir}. ${schedule} Restore one with rowgate restore.`), now, message, body.backups.length
        ? h("table", { class: "rows", id: "backups" }, h("tbody", {}, body.backups.map((b) => h("tr", {}, h("td", {}, b.name), h("td", {}, `${b.bytes} bytes`), h("td", {}, download(b.name))))))
        : h("p", { class: "muted small" }, "No backups yet."));
}
