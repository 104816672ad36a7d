// The configuration in force (secrets hidden), and on SQLite a consistent copy of the file.
import { blob, call } from "./api.js";
import { cellText, h, notice, replace } from "./dom.js";
export async function settingsPage(content, state) {
    const { body } = await call("GET", "/_/api/config");
    const message = h("div");
    const backup = h("button", { type: "button", id: "backup" }, "Download a backup");
    backup.addEventListener("click", async () => {
        try {
            const file = await blob("/_/api/backup");
            const link = h("a", { href: URL.createObjectURL(file), download: `rowgate-${Date.now()}.db` });
            link.click();
            URL.revokeObjectURL(link.href);
            replace(message, notice(`A consistent copy of the database file (${file.size} bytes) was downloaded.`, "ok"));
        }
        catch (e) {
            replace(message, notice(e.message));
        }
    });
    replace(content, h("h2", {}, "Configuration"), h("p", { class: "muted small" }, "As rowgate runs now: flags, ROWGATE_* variables and the config file merged. Secrets are hidden."), h("table", { class: "rows" }, h("tbody", {}, Object.entries(body).map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, cellText(v)))))), state.backend === "sqlite"
        ? h("div", { class: "card" }, h("h3", {}, "Backup"), h("p", { class: "small" }, "A copy of the SQLite file as it is now, made while the server keeps serving (VACUUM INTO)."), backup, message)
        : h("p", { class: "muted small" }, "A PostgreSQL database is backed up with its own tools (pg_dump, or its host's backups)."));
}
