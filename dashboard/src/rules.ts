// Who may do what. On SQLite, the access rules file: edited here, checked by the server before
// it is written, and in force from the next request. On PostgreSQL, each table's row-level
// security and policies (written in SQL, in the console).

import { call, ServerState } from "./api.js";
import { cellText, h, notice, replace } from "./dom.js";

interface Policy {
  name: string;
  command: string;
  permissive: string;
  roles: string[];
  using: string | null;
  check: string | null;
}

type Rules =
  | { kind: "file"; path: string; text: string }
  | { kind: "policies"; tables: { table: string; rls_enabled: boolean; policies: Policy[] }[] };

const EXAMPLE = `# Who may do what, per table: select, insert, update, delete.
# A caller is "everyone" (visitors and signed-in users alike), "anon" (visitors only),
# "authenticated" (any signed-in user) or a role. The value is "true" (every row) or filters
# as in a query string; @jwt.sub is the caller's user id.
#
# [todos]
# select = { everyone = "true" }
# insert = { authenticated = "owner=eq.@jwt.sub" }
`;

export async function rulesPage(content: HTMLElement, state: ServerState): Promise<void> {
  const { body } = await call<Rules>("GET", "/_/api/rules");
  if (body.kind === "policies") {
    replace(
      content,
      h("h2", {}, "Row-level security"),
      h("p", { class: "muted" }, `Policies of schema ${state.schema}. Write them in SQL (CREATE POLICY ...) in the SQL page.`),
      body.tables.map((t) =>
        h(
          "div",
          { class: "card" },
          h("h3", {}, t.table, " ", h("span", { class: t.rls_enabled ? "badge ok" : "badge warn" }, t.rls_enabled ? "RLS on" : "RLS off")),
          t.policies.length
            ? h(
                "table",
                { class: "rows" },
                h("thead", {}, h("tr", {}, ["policy", "command", "roles", "using", "with check"].map((c) => h("th", {}, c)))),
                h(
                  "tbody",
                  {},
                  t.policies.map((p) =>
                    h("tr", {}, [p.name, p.command, p.roles.join(", "), cellText(p.using), cellText(p.check)].map((v) => h("td", {}, v))),
                  ),
                ),
              )
            : h("p", { class: "muted small" }, t.rls_enabled ? "No policy: no row for any role but the owner and service_role." : "Every role with grants sees every row."),
        ),
      ),
    );
    return;
  }
  const text = h("textarea", { name: "rules", rows: "18", spellcheck: "false" });
  text.value = body.text || EXAMPLE;
  const message = h("div");
  const form = h(
    "form",
    { class: "card" },
    h("h2", {}, "Access rules"),
    h("p", { class: "muted small" }, `The file ${body.path}, read again whenever it changes.`),
    h(
      "p",
      { class: "small" },
      "A rule for ",
      h("code", {}, "anon"),
      " covers visitors only: once a user signs in, they are ",
      h("code", {}, "authenticated"),
      ". Write ",
      h("code", {}, "everyone"),
      " for what both may do. The service_role key and this dashboard are not bound by the rules.",
    ),
    text,
    message,
    h("div", { class: "toolbar" }, h("button", { type: "submit" }, "Save rules")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await call("PUT", "/_/api/rules", { text: text.value });
      replace(message, notice("Saved: the rules are in force.", "ok"));
    } catch (e) {
      replace(message, notice((e as Error).message));
    }
  });
  replace(content, form);
}
