// Tables: the exposed schema's tables and views; one's rows with filters, sorting and pages,
// rows added, edited and deleted through the REST API (as the service role), and the table
// editor (create a table, add or drop a column, drop a table) through /_/api/tables.

import { call, part, ServerState } from "./api.js";
import { action, button, cellText, h, notice, replace } from "./dom.js";

interface Column {
  name: string;
  type: string;
  nullable: boolean;
  default: string | null;
  primary_key: boolean;
}

interface Table {
  name: string;
  kind: "table" | "view";
  primary_key: string[];
  columns: Column[];
}

const PAGE = 50;

export async function tablesPage(content: HTMLElement, state: ServerState, selected?: string): Promise<void> {
  const { body } = await call<{ schema: string; tables: Table[] }>("GET", "/_/api/tables");
  const table = body.tables.find((t) => t.name === selected);
  const newTable = h("button", { type: "button" }, "New table");
  newTable.addEventListener("click", () => replace(main, createTableForm(state)));
  const main = h("section", { class: "grow" });
  replace(
    content,
    h(
      "div",
      { class: "split" },
      h(
        "aside",
        {},
        h("h2", {}, "Tables"),
        body.tables.length === 0 ? h("p", { class: "muted" }, "No tables yet.") : null,
        h(
          "ul",
          { class: "list" },
          body.tables.map((t) =>
            h(
              "li",
              {},
              h(
                "a",
                { href: `#/tables/${part(t.name)}`, class: t.name === selected ? "active" : undefined },
                t.name,
                t.kind === "view" ? h("span", { class: "muted small" }, " view") : null,
              ),
            ),
          ),
        ),
        newTable,
      ),
      main,
    ),
  );
  if (table) await rowsView(main, table, state);
  else if (body.tables.length === 0) replace(main, createTableForm(state));
  else replace(main, h("p", { class: "muted" }, "Choose a table."));
}

async function rowsView(main: HTMLElement, table: Table, state: ServerState): Promise<void> {
  let offset = 0;
  let order: { column: string; asc: boolean } | null = table.primary_key.length
    ? { column: table.primary_key[0], asc: true }
    : null;
  const filter = h("input", {
    type: "search",
    name: "filter",
    placeholder: "filters, as in a query string: title=ilike.*milk*&done=is.false",
  });
  const grid = h("div", { class: "grid-wrap" });
  const status = h("div", { class: "muted small" });
  const message = h("div");
  const editable = table.kind === "table" && table.primary_key.length > 0;

  const load = async (): Promise<void> => {
    replace(message);
    const params = new URLSearchParams(filter.value.trim());
    params.set("select", "*");
    params.set("limit", String(PAGE));
    params.set("offset", String(offset));
    if (order) params.set("order", `${order.column}.${order.asc ? "asc" : "desc"}`);
    let rows: Record<string, unknown>[];
    let total = "?";
    try {
      const answer = await call<Record<string, unknown>[]>(
        "GET",
        `${state.api}/${part(table.name)}?${params}`,
        undefined,
        { Prefer: "count=exact" },
      );
      rows = answer.body;
      total = (answer.headers.get("content-range") ?? "").split("/")[1] ?? "?";
    } catch (e) {
      replace(message, notice((e as Error).message));
      return;
    }
    const head = h(
      "tr",
      {},
      table.columns.map((c) => {
        const th = h(
          "th",
          { title: `${c.type}${c.primary_key ? ", primary key" : ""}` },
          c.name,
          order?.column === c.name ? (order.asc ? " ▲" : " ▼") : "",
        );
        th.addEventListener("click", () => {
          order = { column: c.name, asc: order?.column === c.name ? !order.asc : true };
          void load();
        });
        return th;
      }),
      editable ? h("th", {}) : null,
    );
    const body = rows.map((row) =>
      h(
        "tr",
        {},
        table.columns.map((c) => h("td", { class: row[c.name] === null ? "null" : undefined }, cellText(row[c.name]))),
        editable
          ? h(
              "td",
              { class: "actions" },
              button("Edit", () => replace(main, rowForm(table, state, row, () => rowsView(main, table, state)))),
              action(
                "Delete",
                message,
                async () => {
                  await call("DELETE", `${state.api}/${part(table.name)}?${keyFilter(table, row)}`);
                  await load();
                },
                { ask: `Delete this row of ${table.name}?` },
              ),
            )
          : null,
      ),
    );
    replace(grid, h("table", { class: "rows" }, h("thead", {}, head), h("tbody", {}, body)));
    const last = Math.min(offset + rows.length, Number(total) || offset + rows.length);
    replace(status, rows.length ? `Rows ${offset + 1}–${last} of ${total}` : `No rows (of ${total})`);
    prev.disabled = offset === 0;
    next.disabled = rows.length < PAGE;
  };

  const prev = button("← Previous", () => {
    offset = Math.max(0, offset - PAGE);
    void load();
  });
  const next = button("Next →", () => {
    offset += PAGE;
    void load();
  });
  filter.addEventListener("change", () => {
    offset = 0;
    void load();
  });
  replace(
    main,
    h(
      "div",
      { class: "toolbar" },
      h("h2", {}, table.name),
      table.kind === "table"
        ? button("Add row", () => replace(main, rowForm(table, state, null, () => rowsView(main, table, state))))
        : null,
      table.kind === "table" ? button("Add column", () => replace(main, columnForm(table, state))) : null,
      table.kind === "table"
        ? action(
            "Drop table",
            message,
            async () => {
              await call("DELETE", `/_/api/tables/${part(table.name)}`);
              location.hash = "#/tables";
            },
            { kind: "danger", ask: `Drop table ${table.name} and all its rows?` },
          )
        : null,
    ),
    editable || table.kind === "view"
      ? null
      : h("p", { class: "muted small" }, "Without a primary key, rows can be added here but not edited or deleted."),
    filter,
    message,
    grid,
    h("div", { class: "pager" }, prev, status, next),
  );
  await load();
}

// The row's primary key as equality filters.
function keyFilter(table: Table, row: Record<string, unknown>): string {
  return table.primary_key.map((k) => `${part(k)}=eq.${part(cellText(row[k]))}`).join("&");
}

function isJson(c: Column): boolean {
  return /json/i.test(c.type);
}

// An input's text as the value the column takes: empty is NULL where allowed (and left out of
// a new row, so defaults apply), JSON columns take JSON.
function valueOf(c: Column, text: string, isNew: boolean): { skip: boolean; value?: unknown } {
  if (text === "") {
    if (isNew && (c.default !== null || c.nullable || c.primary_key)) return { skip: true };
    if (c.nullable) return { skip: false, value: null };
  }
  if (isJson(c)) return { skip: false, value: JSON.parse(text) };
  return { skip: false, value: text };
}

function rowForm(
  table: Table,
  state: ServerState,
  row: Record<string, unknown> | null,
  back: () => Promise<void>,
): HTMLElement {
  const message = h("div");
  const inputs = table.columns.map((c) => {
    const current = row ? row[c.name] : null;
    const text = current === null || current === undefined ? "" : typeof current === "object" ? JSON.stringify(current) : String(current);
    return h("input", { name: c.name, value: text, placeholder: row ? "NULL" : c.default ? `default: ${c.default}` : "" });
  });
  const form = h(
    "form",
    { class: "card" },
    h("h2", {}, row ? `Edit a row of ${table.name}` : `New row in ${table.name}`),
    table.columns.map((c, i) => h("label", {}, h("span", {}, c.name, h("span", { class: "muted small" }, ` ${c.type}`)), inputs[i])),
    message,
    h("div", { class: "toolbar" }, h("button", { type: "submit" }, "Save"), button("Cancel", back)),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const values: Record<string, unknown> = {};
    try {
      table.columns.forEach((c, i) => {
        const v = valueOf(c, inputs[i].value, !row);
        if (!v.skip) values[c.name] = v.value;
      });
      if (row) await call("PATCH", `${state.api}/${part(table.name)}?${keyFilter(table, row)}`, values);
      else await call("POST", `${state.api}/${part(table.name)}`, values);
      await back();
    } catch (e) {
      replace(message, notice((e as Error).message));
    }
  });
  return form;
}

function typesOf(state: ServerState): string[] {
  return state.backend === "sqlite"
    ? ["text", "integer", "real", "numeric", "boolean", "json", "timestamp", "blob"]
    : ["text", "integer", "bigint", "identity", "numeric", "double precision", "boolean", "jsonb", "timestamptz", "date", "uuid"];
}

interface ColumnInputs {
  row: HTMLElement;
  read: () => Record<string, unknown>;
}

function columnInputs(state: ServerState, first: boolean): ColumnInputs {
  const name = h("input", { name: "column", placeholder: "name", required: true, value: first ? "id" : "" });
  const type = h(
    "select",
    { name: "type" },
    typesOf(state).map((t) => h("option", { value: t, selected: first && t === (state.backend === "sqlite" ? "integer" : "identity") }, t)),
  );
  const key = h("input", { type: "checkbox", name: "primary_key", checked: first });
  const notNull = h("input", { type: "checkbox", name: "not_null" });
  const unique = h("input", { type: "checkbox", name: "unique" });
  const dflt = h("input", { name: "default", placeholder: "default: now, uuid or a value" });
  return {
    row: h(
      "div",
      { class: "column-row" },
      name,
      type,
      h("label", { class: "inline" }, key, "key"),
      h("label", { class: "inline" }, notNull, "not null"),
      h("label", { class: "inline" }, unique, "unique"),
      dflt,
    ),
    read: () => ({
      name: name.value.trim(),
      type: type.value,
      primary_key: key.checked,
      not_null: notNull.checked,
      unique: unique.checked,
      default: dflt.value === "" ? null : dflt.value,
    }),
  };
}

function createTableForm(state: ServerState): HTMLElement {
  const name = h("input", { name: "table", placeholder: "table name", required: true });
  const columns: ColumnInputs[] = [columnInputs(state, true), columnInputs(state, false)];
  const list = h("div", {}, columns.map((c) => c.row));
  const message = h("div");
  const form = h(
    "form",
    { class: "card" },
    h("h2", {}, "New table"),
    h("label", {}, "Name", name),
    h("h3", {}, "Columns"),
    list,
    button("Another column", () => {
      const c = columnInputs(state, false);
      columns.push(c);
      list.append(c.row);
    }),
    message,
    h("div", { class: "toolbar" }, h("button", { type: "submit" }, "Create table")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const cols = columns.map((c) => c.read()).filter((c) => c.name !== "");
      await call("POST", "/_/api/tables", { name: name.value.trim(), columns: cols });
      location.hash = `#/tables/${part(name.value.trim())}`;
    } catch (e) {
      replace(message, notice((e as Error).message));
    }
  });
  return form;
}

function columnForm(table: Table, state: ServerState): HTMLElement {
  const column = columnInputs(state, false);
  const message = h("div");
  const form = h(
    "form",
    { class: "card" },
    h("h2", {}, `New column in ${table.name}`),
    column.row,
    message,
    h("div", { class: "toolbar" }, h("button", { type: "submit" }, "Add column"), button("Cancel", () => {
      location.hash = `#/tables/${part(table.name)}`;
      dispatchEvent(new HashChangeEvent("hashchange"));
    })),
    h("h3", {}, "Columns"),
    h(
      "ul",
      { class: "list" },
      table.columns.map((c) =>
        h(
          "li",
          {},
          `${c.name} `,
          h("span", { class: "muted small" }, c.type),
          c.primary_key
            ? null
            : action(
                "Drop",
                message,
                async () => {
                  await call("DELETE", `/_/api/tables/${part(table.name)}/columns/${part(c.name)}`);
                  dispatchEvent(new HashChangeEvent("hashchange"));
                },
                { kind: "small", ask: `Drop column ${c.name} of ${table.name}?` },
              ),
        ),
      ),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await call("POST", `/_/api/tables/${part(table.name)}/columns`, column.read());
      dispatchEvent(new HashChangeEvent("hashchange"));
    } catch (e) {
      replace(message, notice((e as Error).message));
    }
  });
  return form;
}
