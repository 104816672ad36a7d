// Calls to rowgate from the page: the dashboard's own API under /_/api/, and the services
// every client uses (/rest/v1, /auth/v1, /storage/v1). The session's cookie rides along; its
// CSRF token goes in a header, which is what makes the pair a credential.
let csrf = "";
export function setCsrf(token) {
    csrf = token;
}
export function csrfToken() {
    return csrf;
}
export class ApiError extends Error {
    status;
    body;
    constructor(status, message, body) {
        super(message);
        this.status = status;
        this.body = body;
    }
}
// The message of an error body, in any of the services' shapes.
function messageOf(status, body) {
    if (body && typeof body === "object") {
        const b = body;
        for (const key of ["message", "msg", "error_description", "error"]) {
            if (typeof b[key] === "string" && b[key]) {
                const hint = typeof b.hint === "string" ? ` (${b.hint})` : "";
                return `${b[key]}${hint}`;
            }
        }
    }
    return `HTTP ${status}`;
}
export async function call(method, path, body, headers = {}) {
    const init = {
        method,
        credentials: "same-origin",
        headers: { "X-Rowgate-Csrf": csrf, ...headers },
    };
    if (body instanceof Blob || body instanceof ArrayBuffer) {
        init.body = body;
    }
    else if (body !== undefined) {
        init.headers["Content-Type"] = "application/json";
        init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    const text = await response.text();
    let parsed = text;
    if ((response.headers.get("content-type") ?? "").includes("json") && text) {
        parsed = JSON.parse(text);
    }
    if (!response.ok)
        throw new ApiError(response.status, messageOf(response.status, parsed), parsed);
    return { status: response.status, body: parsed, headers: response.headers };
}
export async function blob(path) {
    const response = await fetch(path, { credentials: "same-origin", headers: { "X-Rowgate-Csrf": csrf } });
    if (!response.ok)
        throw new ApiError(response.status, `HTTP ${response.status}`, null);
    return response.blob();
}
export async function serverState() {
    const state = (await call("GET", "/_/api/state")).body;
    if (state.csrf)
        setCsrf(state.csrf);
    return state;
}
// A path segment or a filter value, percent-encoded.
export function part(text) {
    return encodeURIComponent(text);
}
