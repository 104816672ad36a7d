// API keys (`rowgate apikey`'s store): the keys with their role, prefix, dates and state; a new
// one, shown once; revoking one.

import { call, part } from "./api.js";
import { action, h, notice, replace } from "./dom.js";

export async function keysPage(content: HTMLElement): Promise<void> {
  const list = h("div", { class: "grid-wrap" });
  const message = h("div");
  const load = async (): Promise<void> => {
    const { body } = await call<{ columns: string[]; rows: string[][] }>("GET", "/_/api/keys");
    const revoke = (id: string, name: string) =>
      action(
        "Revoke",
        message,
        async () => {
          await call("DELETE", `/_/api/keys/${part(id)}`);
          await load();
        },
        { kind: "small danger", ask: `Revoke the key ${name}? Requests with it are refused from now on.` },
      );
    replace(
      list,
      body.rows.length === 0
        ? h("p", { class: "muted" }, "No keys yet.")
        : h(
            "table",
            { class: "rows" },
            h("thead", {}, h("tr", {}, body.columns.map((c) => h("th", {}, c)), h("th", {}))),
            h(
              "tbody",
              {},
              body.rows.map((r) =>
                h("tr", {}, r.map((v) => h("td", {}, v)), h("td", {}, r[r.length - 1] === "active" ? revoke(r[0], r[1]) : null)),
              ),
            ),
          ),
    );
  };
  const role = h("input", { name: "key-role", placeholder: "role (e.g. anon, service_role, member)", required: true });
  const name = h("input", { name: "key-name", placeholder: "name", required: true });
  const days = h("input", { name: "key-days", type: "number", min: "1", placeholder: "days (empty: never expires)" });
  const form = h("form", { class: "toolbar" }, role, name, days, h("button", { type: "submit" }, "Create key"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const { body } = await call<{ key: string }>("POST", "/_/api/keys", {
        role: role.value.trim(),
        name: name.value.trim(),
        expires_in_days: days.value ? Number(days.value) : null,
      });
      replace(
        message,
        h("div", { class: "notice ok", role: "status" }, "The new key, shown this once (only its hash is kept): ", h("code", { id: "new-key" }, body.key)),
      );
      name.value = "";
      await load();
    } catch (e) {
      replace(message, notice((e as Error).message));
    }
  });
  replace(
    content,
    h("h2", {}, "API keys"),
    h("p", { class: "muted small" }, "A request carrying a key in its apikey header runs as the key's role, with its claims."),
    form,
    message,
    list,
  );
  await load();
}
