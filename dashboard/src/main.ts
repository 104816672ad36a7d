// The dashboard's shell: who is signed in, the menu, and the page the location's hash names
// (#/tables/<name>, #/sql, #/rules, #/users, #/storage, #/realtime, #/settings; #/setup/<token>
// is the link printed at start).

import { call, ServerState, serverState, setCsrf } from "./api.js";
import { h, notice, replace } from "./dom.js";
import { tablesPage } from "./tables.js";
import { sqlPage } from "./sql.js";
import { rulesPage } from "./rules.js";
import { usersPage } from "./users.js";
import { storagePage } from "./storage.js";
import { realtimePage, stopRealtime } from "./realtime.js";
import { settingsPage } from "./settings.js";
import { keysPage } from "./keys.js";
import { activityPage, stopActivity } from "./activity.js";

const app = document.getElementById("app") as HTMLElement;

function credentialsForm(
  title: string,
  intro: string,
  button: string,
  submit: (email: string, password: string) => Promise<void>,
): HTMLElement {
  const email = h("input", { type: "email", name: "email", autocomplete: "username", required: true });
  const password = h("input", {
    type: "password",
    name: "password",
    autocomplete: button === "Sign in" ? "current-password" : "new-password",
    required: true,
  });
  const message = h("div");
  const form = h(
    "form",
    { class: "card narrow" },
    h("h1", {}, title),
    h("p", {}, intro),
    h("label", {}, "E-mail", email),
    h("label", {}, "Password", password),
    message,
    h("button", { type: "submit" }, button),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    replace(message);
    try {
      await submit(email.value, password.value);
    } catch (e) {
      replace(message, notice((e as Error).message));
    }
  });
  return form;
}

function setupPage(token: string): HTMLElement {
  return credentialsForm(
    "Welcome to rowgate",
    "Make the first administrator of this dashboard. Administrators are not your application's users.",
    "Create administrator",
    async (email, password) => {
      const answer = await call<{ csrf: string }>("POST", "/_/api/setup", { token, email, password });
      setCsrf(answer.body.csrf);
      location.hash = "#/tables";
      await render();
    },
  );
}

function loginPage(): HTMLElement {
  return credentialsForm("rowgate", "Sign in to the dashboard.", "Sign in", async (email, password) => {
    const answer = await call<{ csrf: string }>("POST", "/_/api/login", { email, password });
    setCsrf(answer.body.csrf);
    if (location.hash.startsWith("#/setup") || location.hash === "#/login") location.hash = "#/tables";
    await render();
  });
}

const MENU: [string, string, (s: ServerState) => boolean][] = [
  ["tables", "Tables", () => true],
  ["sql", "SQL", () => true],
  ["rules", "Access", () => true],
  ["users", "Users", (s) => !!s.services?.auth],
  ["storage", "Storage", (s) => !!s.services?.storage],
  ["realtime", "Realtime", (s) => !!s.services?.realtime],
  ["keys", "API keys", () => true],
  ["activity", "Activity", () => true],
  ["settings", "Settings", () => true],
];

async function render(): Promise<void> {
  stopRealtime();
  stopActivity();
  const route = location.hash.replace(/^#\/?/, "").split("/");
  let state: ServerState;
  try {
    state = await serverState();
  } catch (e) {
    replace(app, notice(`The server did not answer: ${(e as Error).message}`));
    return;
  }
  if (typeof state.setup_needed === "object") {
    replace(
      app,
      h(
        "div",
        { class: "card narrow" },
        h("h1", {}, "The dashboard cannot start"),
        notice(state.setup_needed.unavailable),
        h("p", {}, "On PostgreSQL, run `rowgate install` (or `rowgate accounts install`) first."),
      ),
    );
    return;
  }
  if (!state.admin) {
    if (route[0] === "setup" && route[1] && state.setup_needed) replace(app, setupPage(route[1]));
    else if (state.setup_needed)
      replace(
        app,
        h(
          "div",
          { class: "card narrow" },
          h("h1", {}, "Not set up yet"),
          h("p", {}, "Open the setup link rowgate printed when it started, or run `rowgate admin create`."),
        ),
      );
    else replace(app, loginPage());
    return;
  }
  const page = MENU.some(([id, , on]) => id === route[0] && on(state)) ? route[0] : "tables";
  const content = h("main", { id: "content" });
  const signOut = h("button", { class: "link", type: "button" }, "Sign out");
  signOut.addEventListener("click", async () => {
    await call("POST", "/_/api/logout");
    setCsrf("");
    location.hash = "#/login";
    await render();
  });
  replace(
    app,
    h(
      "div",
      { class: "shell" },
      h(
        "nav",
        {},
        h("div", { class: "brand" }, "rowgate"),
        h("div", { class: "muted small" }, `${state.backend} · ${state.schema}`),
        h(
          "ul",
          {},
          MENU.filter(([, , on]) => on(state)).map(([id, label]) =>
            h("li", {}, h("a", { href: `#/${id}`, class: id === page ? "active" : undefined }, label)),
          ),
        ),
        h("div", { class: "who small" }, state.admin.email, h("br"), signOut),
      ),
      content,
    ),
  );
  const pages: Record<string, () => Promise<void>> = {
    tables: () => tablesPage(content, state, route[1]),
    sql: () => sqlPage(content),
    rules: () => rulesPage(content, state),
    users: () => usersPage(content),
    storage: () => storagePage(content, route[1]),
    realtime: () => realtimePage(content, state),
    keys: () => keysPage(content),
    activity: () => activityPage(content),
    settings: () => settingsPage(content, state),
  };
  try {
    await pages[page]();
  } catch (e) {
    content.append(notice((e as Error).message));
  }
}

window.addEventListener("hashchange", () => void render());
void render();
