//! rowgate as an OAuth 2.1 server to other applications, as Supabase Auth is one
//! (`accounts-oauth-server-enabled`), on both backends: the clients an administrator registers
//! at `/admin/oauth/clients`, and those registered dynamically (the flow itself:
//! accounts_oauth_flow.rs).

use serde_json::{json, Value};

use crate::accounts::{on_both, postgres, sqlite, token_of};
use crate::support::send_to;

on_both!(an_administrator_registers_changes_and_deletes_oauth_clients);
on_both!(clients_register_themselves_when_dynamic_registration_is_on);

/// `method path` with a JSON body and, if any, a bearer token: the status, the body and the
/// `X-Total-Count` header.
pub(crate) fn call(
    base: &str,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let authorization = bearer.map(|b| format!("Bearer {b}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = &authorization {
        headers.push(("authorization", a));
    }
    let body = body.map(|b| b.to_string());
    let r = send_to(base, method, path, &headers, body.as_deref());
    let v = if r.body.is_empty() { Value::Null } else { r.json() };
    (r.status, v)
}

fn an_administrator_registers_changes_and_deletes_oauth_clients(base: &str) {
    let admin = token_of("service_role");
    let admin = Some(admin.as_str());
    let (status, made) = call(
        base,
        "POST",
        "/auth/v1/admin/oauth/clients",
        admin,
        Some(
            json!({"client_name": "Notes CLI", "redirect_uris": ["https://notes.example.com/cb", "http://localhost:8765/cb"]}),
        ),
    );
    assert_eq!(status, 201, "{made}");
    let id = made["client_id"].as_str().unwrap().to_owned();
    let secret = made["client_secret"].as_str().unwrap().to_owned();
    assert_eq!(secret.len(), 43, "32 random bytes, base64url");
    let (created_at, updated_at) = (made["created_at"].clone(), made["updated_at"].clone());
    assert_eq!(
        made,
        json!({
            "client_id": id, "client_secret": secret, "client_type": "confidential",
            "client_name": "Notes CLI",
            "redirect_uris": ["https://notes.example.com/cb", "http://localhost:8765/cb"],
            "token_endpoint_auth_method": "client_secret_basic",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "registration_type": "manual", "created_at": created_at, "updated_at": updated_at,
        })
    );

    // The secret is shown once.
    let (status, read) = call(base, "GET", &format!("/auth/v1/admin/oauth/clients/{id}"), admin, None);
    assert_eq!(status, 200);
    let mut without_secret = made.clone();
    without_secret.as_object_mut().unwrap().remove("client_secret");
    assert_eq!(read, without_secret);

    // Listed newest first, a page at a time.
    let (_, public) = call(
        base,
        "POST",
        "/auth/v1/admin/oauth/clients",
        admin,
        Some(
            json!({"client_name": "Notes SPA", "redirect_uris": ["https://spa.example.com/cb"], "client_type": "public"}),
        ),
    );
    assert_eq!(
        (&public["client_type"], &public["token_endpoint_auth_method"], public.get("client_secret")),
        (&json!("public"), &json!("none"), None)
    );
    let r = send_to(
        base,
        "GET",
        "/auth/v1/admin/oauth/clients?page=1&per_page=1",
        &[("authorization", &format!("Bearer {}", token_of("service_role")))],
        None,
    );
    assert_eq!(r.status, 200);
    let total: usize = r.header("x-total-count").unwrap().parse().unwrap();
    assert!(total >= 2, "{total}");
    assert_eq!(r.json()["clients"].as_array().unwrap().len(), 1);
    let (_, all) = call(base, "GET", "/auth/v1/admin/oauth/clients?per_page=1000", admin, None);
    let ids: Vec<&str> =
        all["clients"].as_array().unwrap().iter().map(|c| c["client_id"].as_str().unwrap()).collect();
    let (newer, older) =
        (ids.iter().position(|c| *c == public["client_id"]), ids.iter().position(|c| *c == id));
    assert!(newer.unwrap() < older.unwrap(), "{ids:?}");

    // Changed field by field; the rest stays.
    let (status, changed) = call(
        base,
        "PUT",
        &format!("/auth/v1/admin/oauth/clients/{id}"),
        admin,
        Some(
            json!({"logo_uri": "https://notes.example.com/logo.png", "token_endpoint_auth_method": "client_secret_post"}),
        ),
    );
    assert_eq!(status, 200, "{changed}");
    assert_eq!(
        (&changed["client_name"], &changed["logo_uri"], &changed["token_endpoint_auth_method"]),
        (&json!("Notes CLI"), &json!("https://notes.example.com/logo.png"), &json!("client_secret_post"))
    );
    let (status, e) = call(
        base,
        "PUT",
        &format!("/auth/v1/admin/oauth/clients/{id}"),
        admin,
        Some(json!({"token_endpoint_auth_method": "none"})),
    );
    assert_eq!(
        (status, e),
        (
            400,
            json!({"code": 400, "error_code": "validation_failed",
                   "msg": "token_endpoint_auth_method 'none' is not valid for client_type 'confidential'"})
        )
    );
    let (status, e) =
        call(base, "PUT", &format!("/auth/v1/admin/oauth/clients/{id}"), admin, Some(json!({})));
    assert_eq!((status, &e["msg"]), (400, &json!("No fields provided for update")));

    // A new secret, shown once; a public client has none to renew.
    let (status, renewed) =
        call(base, "POST", &format!("/auth/v1/admin/oauth/clients/{id}/regenerate_secret"), admin, None);
    assert_eq!(status, 200, "{renewed}");
    let new_secret = renewed["client_secret"].as_str().unwrap();
    assert_ne!(new_secret, secret);
    let public_id = public["client_id"].as_str().unwrap();
    let (status, e) = call(
        base,
        "POST",
        &format!("/auth/v1/admin/oauth/clients/{public_id}/regenerate_secret"),
        admin,
        None,
    );
    assert_eq!((status, &e["msg"]), (400, &json!("Cannot regenerate secret for public client")));

    // Deleted: gone from the API.
    let (status, _) = call(base, "DELETE", &format!("/auth/v1/admin/oauth/clients/{id}"), admin, None);
    assert_eq!(status, 204);
    let (status, e) = call(base, "GET", &format!("/auth/v1/admin/oauth/clients/{id}"), admin, None);
    assert_eq!(
        (status, e),
        (404, json!({"code": 404, "error_code": "oauth_client_not_found", "msg": "OAuth client not found"}))
    );
    let (status, e) = call(base, "GET", "/auth/v1/admin/oauth/clients/not-a-uuid", admin, None);
    assert_eq!((status, &e["msg"]), (400, &json!("invalid client_id format")));

    // What a registration may not name.
    for (body, msg) in [
        (json!({"client_name": "x", "redirect_uris": []}), "redirect_uris is required"),
        (
            json!({"redirect_uris": ["http://notes.example.com/cb"]}),
            "invalid redirect_uri 'http://notes.example.com/cb': HTTP scheme only allowed for localhost",
        ),
        (
            json!({"redirect_uris": ["https://notes.example.com/cb#here"]}),
            "invalid redirect_uri 'https://notes.example.com/cb#here': fragment not allowed in redirect URI",
        ),
        (
            json!({"redirect_uris": ["https://a.example.com/cb"], "grant_types": ["password"]}),
            "grant_types must only contain 'authorization_code' and/or 'refresh_token'",
        ),
        (
            json!({"redirect_uris": ["https://a.example.com/cb"], "client_type": "public", "token_endpoint_auth_method": "client_secret_basic"}),
            "client_type 'public' is inconsistent with token_endpoint_auth_method 'client_secret_basic' (expected client_type 'confidential')",
        ),
    ] {
        let (status, e) = call(base, "POST", "/auth/v1/admin/oauth/clients", admin, Some(body));
        assert_eq!((status, &e["error_code"], &e["msg"]), (400, &json!("validation_failed"), &json!(msg)));
    }
    let (status, e) =
        call(base, "POST", "/auth/v1/admin/oauth/clients", admin, Some(json!({"redirect_uris": "x"})));
    assert_eq!((status, &e["error_code"]), (400, &json!("bad_json")));

    // Only an administrator.
    let (status, e) = call(base, "GET", "/auth/v1/admin/oauth/clients", Some(&token_of("anon")), None);
    assert_eq!(
        (status, e),
        (403, json!({"code": 403, "error_code": "not_admin", "msg": "User not allowed"}))
    );
}

fn clients_register_themselves_when_dynamic_registration_is_on(base: &str) {
    let (status, made) = call(
        base,
        "POST",
        "/auth/v1/oauth/clients/register",
        None,
        Some(json!({"client_name": "An MCP client", "redirect_uris": ["http://127.0.0.1:33418/callback"],
                    "token_endpoint_auth_method": "none"})),
    );
    assert_eq!(status, 201, "{made}");
    assert_eq!(
        (&made["registration_type"], &made["client_type"], made.get("client_secret")),
        (&json!("dynamic"), &json!("public"), None)
    );
}

#[test]
fn without_the_oauth_server_its_routes_answer_as_a_gotrue_without_it() {
    let path = tempfile::tempdir().expect("temp dir").keep().join("no-oauth-server.db");
    let args = rowgate::config::ServeArgs { accounts_enabled: Some(true), ..Default::default() };
    let base = crate::sqlite::serve_sqlite(&path, "CREATE TABLE t (id INTEGER PRIMARY KEY);", "", args);
    let disabled = json!({"code": 404, "error_code": "feature_disabled", "msg": "OAuth server is disabled"});
    let admin = token_of("service_role");
    assert_eq!(
        call(&base, "GET", "/auth/v1/admin/oauth/clients", Some(&admin), None),
        (404, disabled.clone())
    );
    let body = json!({"redirect_uris": ["https://a.example.com/cb"]});
    assert_eq!(call(&base, "POST", "/auth/v1/oauth/clients/register", None, Some(body)), (404, disabled));
}
