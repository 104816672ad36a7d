//! Every PostgREST and rowgate code rowgate sends, by name, with its status. (Retired codes stay
//! as comments, so that a number is never reused.)

use super::Code;

/// Could not connect to the database.
pub const CONNECTION: Code = Code::new("PGRST000", 503);
/// The schema cache is not loaded yet, or is being reloaded after a schema change.
pub const SCHEMA_CACHE_NOT_READY: Code = Code::new("PGRST002", 503);
/// Timed out waiting for a pooled connection.
pub const POOL_TIMEOUT: Code = Code::new("PGRST003", 504);
/// A query parameter or header did not parse.
pub const PARSE: Code = Code::new("PGRST100", 400);
/// The body is not valid for the request (JSON, CSV, form).
pub const INVALID_BODY: Code = Code::new("PGRST102", 400);
/// A combination PostgREST has not implemented either (aggregates in a to-many spread).
pub const NOT_IMPLEMENTED: Code = Code::new("PGRST127", 400);
/// `max-affected` with `handling=strict` on a function that returns no set (PostgREST 13).
pub const MAX_AFFECTED_NOT_SET: Code = Code::new("PGRST128", 400);
/// `response.headers` set by SQL is not a JSON array of one-key objects with string values.
pub const GUC_HEADERS: Code = Code::new("PGRST111", 500);
/// `response.status` set by SQL is not a status code.
pub const GUC_STATUS: Code = Code::new("PGRST112", 500);
/// `RAISE SQLSTATE 'PGRST'` whose MESSAGE or DETAIL is not the JSON PostgREST reads.
pub const RAISE_PARSE: Code = Code::new("PGRST121", 500);
/// A method a function cannot be called with (`DELETE /rpc/f`).
pub const INVALID_RPC_METHOD: Code = Code::new("PGRST101", 405);
/// Invalid `Range` or offset.
pub const INVALID_RANGE: Code = Code::new("PGRST103", 416);
/// PUT with filters other than the primary key's, or on a relation without one.
pub const INVALID_PUT: Code = Code::new("PGRST105", 405);
/// Unknown schema in `Accept-Profile` / `Content-Profile`.
pub const UNACCEPTABLE_SCHEMA: Code = Code::new("PGRST106", 406);
/// No acceptable media type.
pub const UNACCEPTABLE_MEDIA: Code = Code::new("PGRST107", 406);
/// A filter, order or limit names a resource `select` does not embed.
pub const NOT_EMBEDDED: Code = Code::new("PGRST108", 400);
/// `limit`/`offset` on a PUT.
pub const PUT_RANGE: Code = Code::new("PGRST114", 400);
/// A PUT body whose primary key differs from the URL's.
pub const PUT_MISMATCH: Code = Code::new("PGRST115", 400);
/// `vnd.pgrst.object+json` with a row count other than one.
pub const SINGULAR: Code = Code::new("PGRST116", 406);
/// Unsupported method for the target.
pub const UNSUPPORTED_METHOD: Code = Code::new("PGRST117", 405);
/// An order by a column of a to-many embedded resource.
pub const RELATED_ORDER: Code = Code::new("PGRST118", 400);
/// `handling=strict` with an invalid preference.
pub const INVALID_PREFERENCES: Code = Code::new("PGRST122", 400);
/// An aggregate in `select` without `db-aggregates-enabled`.
pub const AGGREGATES_DISABLED: Code = Code::new("PGRST123", 400);
/// More rows affected than `Prefer: max-affected` allows.
pub const MAX_AFFECTED: Code = Code::new("PGRST124", 400);
/// A path that names no resource.
pub const INVALID_PATH: Code = Code::new("PGRST125", 404);
/// `GET /` with `openapi-mode = disabled`.
pub const OPENAPI_DISABLED: Code = Code::new("PGRST126", 404);
/// No foreign key between a resource and the one it embeds.
pub const NO_RELATIONSHIP: Code = Code::new("PGRST200", 400);
/// More than one relationship an embed could use.
pub const AMBIGUOUS_EMBED: Code = Code::new("PGRST201", 300);
/// No function of that name and those arguments.
pub const FUNCTION_NOT_FOUND: Code = Code::new("PGRST202", 404);
/// More than one overload a call could use.
pub const AMBIGUOUS_FUNCTION: Code = Code::new("PGRST203", 300);
/// A column in `columns=` or `on_conflict=` the relation does not have.
pub const COLUMN_NOT_FOUND: Code = Code::new("PGRST204", 400);
/// Unknown table or view.
pub const RELATION_NOT_FOUND: Code = Code::new("PGRST205", 404);
/// A token was sent but no `jwt-secret` is configured.
pub const JWT_SECRET_MISSING: Code = Code::new("PGRST300", 500);
/// The bearer token is invalid, expired or not for us.
pub const JWT_INVALID: Code = Code::new("PGRST301", 401);
/// No `db-anon-role` and no credentials.
pub const NO_ANON_ROLE: Code = Code::new("PGRST302", 401);
/// The token's claims refuse it (PostgREST 13).
pub const JWT_CLAIMS: Code = Code::new("PGRST303", 401);
/// URL longer than `server-max-url-length`.
pub const URL_TOO_LONG: Code = Code::new("RG001", 414);
/// Body larger than `server-max-body-size`.
pub const BODY_TOO_LARGE: Code = Code::new("RG002", 413);
/// The body could not be read (the client broke off, or sent a malformed chunked body).
pub const BODY_UNREADABLE: Code = Code::new("RG003", 400);
/// A request beyond one of rowgate's bounds on the work one request may ask for (distinct
/// keys of a body, nesting depth of a JSON value, items of a select list).
pub const TOO_COMPLEX: Code = Code::new("RG004", 400);
/// The client took longer than `server-read-timeout` to send its request's body.
pub const READ_TIMEOUT: Code = Code::new("RG005", 408);
/// More connections open than `server-max-connections`.
pub const TOO_MANY_CONNECTIONS: Code = Code::new("RG006", 503);
/// A client address, API key or role beyond its rate limit (`rate-limit-*`).
pub const RATE_LIMITED: Code = Code::new("RG007", 429);
/// The disk under the database or `storage-dir` is full: writes are refused (deletes still
/// work) until there is room again, with `Retry-After` (docs/reliability.md).
pub const DISK_FULL: Code = Code::new("RG008", 503);
/// No API key where `api-key-required`.
pub const API_KEY_MISSING: Code = Code::new("RG010", 401);
/// An unknown, revoked or expired API key.
pub const API_KEY_INVALID: Code = Code::new("RG011", 403);
// RG012, retired: a missing API-key store answers as an unknown key (RG011) does.
/// `Prefer: patch=by-key` with an object that lacks the primary key.
pub const PATCH_BY_KEY: Code = Code::new("RG021", 400);
/// A nested insert that cannot be one (an upsert, or no primary key).
pub const NESTED_INSERT: Code = Code::new("RG022", 400);
/// The dashboard's API: a request whose body or path is not what it takes.
pub const DASHBOARD_INVALID: Code = Code::new("RG030", 400);
/// The dashboard's API: no administrator's session (or it expired).
pub const DASHBOARD_SIGNED_OUT: Code = Code::new("RG031", 401);
/// The dashboard's API: a session's request without its CSRF token, from another site, or
/// from an address `dashboard-allowed-ips` leaves out.
pub const DASHBOARD_FORBIDDEN: Code = Code::new("RG032", 403);
/// The dashboard's API: set up already, or an address another administrator has.
pub const DASHBOARD_CONFLICT: Code = Code::new("RG033", 409);
/// The dashboard's API: no such endpoint, or nothing of that name.
pub const DASHBOARD_NOT_FOUND: Code = Code::new("RG034", 404);
/// Something went wrong on rowgate's side (a bug, or a database failing underneath); the
/// server keeps running.
pub const INTERNAL: Code = Code::new("RG500", 500);
/// A request rowgate does not support (on this backend, or in this version): refused,
/// never answered differently.
pub const UNSUPPORTED: Code = Code::new("RG501", 400);
