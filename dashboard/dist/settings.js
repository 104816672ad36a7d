// The configuration in force (secrets hidden).
import { call } from "./api.js";
import { cellText, h, replace } from "./dom.js";
export async function settingsPage(content) {
    const { body } = await call("GET", "/_/api/config");
    replace(content, h("h2", {}, "Configuration"), h("p", { class: "muted small" }, "As rowgate runs now: flags, ROWGATE_* variables and the config file merged. Secrets are hidden."), h("table", { class: "rows" }, h("tbody", {}, Object.entries(body).map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, cellText(v)))))));
}
