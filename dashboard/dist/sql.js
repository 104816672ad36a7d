// The SQL console: statements run as written (on PostgreSQL as dashboard-db-uri's role, on
// SQLite on the writer, as writes are); the last statement's rows are shown.
import { call } from "./api.js";
import { cellText, h, notice, replace } from "./dom.js";
export async function sqlPage(content) {
    const query = h("textarea", { name: "query", rows: "8", spellcheck: "false", placeholder: "select * from ..." });
    query.value = sessionStorage.getItem("rowgate.sql") ?? "";
    const result = h("div", { class: "grid-wrap" });
    const form = h("form", { class: "card" }, h("h2", {}, "SQL"), query, h("div", { class: "toolbar" }, h("button", { type: "submit" }, "Run"), h("span", { class: "muted small" }, "Ctrl+Enter")));
    const run = async () => {
        sessionStorage.setItem("rowgate.sql", query.value);
        replace(result, h("p", { class: "muted" }, "Running…"));
        try {
            const { body } = await call("POST", "/_/api/sql", { query: query.value });
            replace(result, body.columns.length
                ? h("table", { class: "rows" }, h("thead", {}, h("tr", {}, body.columns.map((c) => h("th", {}, c)))), h("tbody", {}, body.rows.map((r) => h("tr", {}, r.map((v) => h("td", { class: v === null ? "null" : undefined }, cellText(v)))))))
                : null, h("p", { class: "muted small" }, body.columns.length ? `${body.rows.length} row(s)${body.truncated ? " shown; more were returned" : ""}. ` : "", `${body.affected} row(s) changed.`));
        }
        catch (e) {
            replace(result, notice(e.message));
        }
    };
    form.addEventListener("submit", (event) => {
        event.preventDefault();
        void run();
    });
    query.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
            event.preventDefault();
            void run();
        }
    });
    replace(content, form, result);
}
