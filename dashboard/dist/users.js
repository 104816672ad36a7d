// The application's users, through Supabase Auth's admin API (/auth/v1/admin/users): search,
// create, confirm, ban and unban, delete; and a user's sessions (/_/api/users/{id}/sessions),
// which can be ended all at once.
import { call, part } from "./api.js";
import { action, h, notice, replace } from "./dom.js";
const PER_PAGE = 50;
async function sessionsOf(panel, user, message) {
    const path = `/_/api/users/${part(user.id)}/sessions`;
    const { body } = await call("GET", path);
    const end = action("Sign out everywhere", message, async () => {
        await call("DELETE", path);
        await sessionsOf(panel, user, message);
    }, { kind: "small danger" });
    replace(panel, h("div", { class: "card", id: "sessions" }, h("h3", {}, `Sessions of ${user.email || user.phone || user.id}`), body.sessions.length === 0
        ? h("p", { class: "muted small" }, "No session: signed out everywhere.")
        : h("table", { class: "rows" }, h("thead", {}, h("tr", {}, ["session", "signed in", "how", "level", "application"].map((c) => h("th", {}, c)))), h("tbody", {}, body.sessions.map((s) => h("tr", {}, [s.id, s.signed_in_at ?? "", s.method ?? "", s.aal ?? "", s.client_id ?? ""].map((v) => h("td", { class: "small" }, v)))))), body.sessions.length ? end : null));
}
export async function usersPage(content) {
    let page = 1;
    const search = h("input", { type: "search", name: "search", placeholder: "search by address or id" });
    const list = h("div", { class: "grid-wrap" });
    const message = h("div");
    const panel = h("div");
    const load = async () => {
        const { body } = await call("GET", `/auth/v1/admin/users?page=${page}&per_page=${PER_PAGE}`);
        const term = search.value.trim().toLowerCase();
        const users = body.users.filter((u) => !term || `${u.email ?? ""} ${u.phone ?? ""} ${u.id}`.toLowerCase().includes(term));
        const act = (label, run, kind) => action(label, message, async () => {
            await run();
            await load();
        }, { kind: kind ? `small ${kind}` : "small" });
        replace(list, h("table", { class: "rows" }, h("thead", {}, h("tr", {}, ["user", "id", "created", "last sign-in", "state", ""].map((c) => h("th", {}, c)))), h("tbody", {}, users.map((u) => {
            const banned = !!u.banned_until && new Date(u.banned_until) > new Date();
            const path = `/auth/v1/admin/users/${part(u.id)}`;
            return h("tr", {}, h("td", {}, u.email || u.phone || (u.is_anonymous ? "anonymous" : "")), h("td", { class: "small muted" }, u.id), h("td", { class: "small" }, u.created_at), h("td", { class: "small" }, u.last_sign_in_at ?? "never"), h("td", {}, banned ? "banned" : u.email && !u.email_confirmed_at ? "unconfirmed" : "active"), h("td", { class: "actions" }, u.email && !u.email_confirmed_at ? act("Confirm", () => call("PUT", path, { email_confirm: true })) : null, banned
                ? act("Unban", () => call("PUT", path, { ban_duration: "none" }))
                : act("Ban", () => call("PUT", path, { ban_duration: "876000h" })), act("Sessions", () => sessionsOf(panel, u, message)), act("Delete", async () => {
                if (confirm(`Delete ${u.email || u.id}?`))
                    await call("DELETE", path);
            }, "danger")));
        }))), h("p", { class: "muted small" }, `Page ${page}: ${users.length} user(s) shown.`));
        prev.disabled = page === 1;
        next.disabled = body.users.length < PER_PAGE;
    };
    const prev = h("button", { type: "button" }, "← Previous");
    prev.addEventListener("click", () => {
        page = Math.max(1, page - 1);
        void load();
    });
    const next = h("button", { type: "button" }, "Next →");
    next.addEventListener("click", () => {
        page += 1;
        void load();
    });
    search.addEventListener("input", () => void load());
    const email = h("input", { type: "email", name: "new-email", placeholder: "e-mail", required: true });
    const password = h("input", { type: "password", name: "new-password", placeholder: "password", autocomplete: "new-password", required: true });
    const create = h("form", { class: "toolbar" }, email, password, h("button", { type: "submit" }, "Create user"));
    create.addEventListener("submit", async (event) => {
        event.preventDefault();
        try {
            await call("POST", "/auth/v1/admin/users", { email: email.value, password: password.value, email_confirm: true });
            email.value = "";
            password.value = "";
            replace(message, notice("User created.", "ok"));
            await load();
        }
        catch (e) {
            replace(message, notice(e.message));
        }
    });
    replace(content, h("h2", {}, "Users"), create, search, message, panel, list, h("div", { class: "pager" }, prev, next));
    await load();
}
