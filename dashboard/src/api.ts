// Calls to rowgate from the page: the dashboard's own API under /_/api/, and the services
// every client uses (/rest/v1, /auth/v1, /storage/v1). The session's cookie rides along; its
// CSRF token goes in a header, which is what makes the pair a credential.

export interface Session {
  email: string;
  csrf: string;
}

export interface ServerState {
  setup_needed: boolean | { unavailable: string };
  admin: { email: string; expires_at: number } | null;
  csrf?: string;
  backend?: "sqlite" | "postgresql";
  schema?: string;
  api?: string;
  services?: { auth: boolean; storage: boolean; realtime: boolean };
  realtime_tables?: string[];
}

let csrf = "";

export function setCsrf(token: string): void {
  csrf = token;
}

export function csrfToken(): string {
  return csrf;
}

export class ApiError extends Error {
  constructor(public status: number, message: string, public body: unknown) {
    super(message);
  }
}

// The message of an error body, in any of the services' shapes.
function messageOf(status: number, body: unknown): string {
  if (body && typeof body === "object") {
    const b = body as Record<string, unknown>;
    for (const key of ["message", "msg", "error_description", "error"]) {
      if (typeof b[key] === "string" && b[key]) {
        const hint = typeof b.hint === "string" ? ` (${b.hint})` : "";
        return `${b[key]}${hint}`;
      }
    }
  }
  return `HTTP ${status}`;
}

export interface Answer<T> {
  status: number;
  body: T;
  headers: Headers;
}

export async function call<T = unknown>(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer<T>> {
  const init: RequestInit = {
    method,
    credentials: "same-origin",
    headers: { "X-Rowgate-Csrf": csrf, ...headers },
  };
  if (body instanceof Blob || body instanceof ArrayBuffer) {
    init.body = body;
  } else if (body !== undefined) {
    (init.headers as Record<string, string>)["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let parsed: unknown = text;
  if ((response.headers.get("content-type") ?? "").includes("json") && text) {
    parsed = JSON.parse(text);
  }
  if (!response.ok) throw new ApiError(response.status, messageOf(response.status, parsed), parsed);
  return { status: response.status, body: parsed as T, headers: response.headers };
}

export async function blob(path: string): Promise<Blob> {
  const response = await fetch(path, { credentials: "same-origin", headers: { "X-Rowgate-Csrf": csrf } });
  if (!response.ok) throw new ApiError(response.status, `HTTP ${response.status}`, null);
  return response.blob();
}

export async function serverState(): Promise<ServerState> {
  const state = (await call<ServerState>("GET", "/_/api/state")).body;
  if (state.csrf) setCsrf(state.csrf);
  return state;
}

// A path segment or a filter value, percent-encoded.
export function part(text: string): string {
  return encodeURIComponent(text);
}
