//! rowgate's integration tests: one binary, a module per feature, against a real PostgreSQL
//! that the harness starts itself.

mod accounts;
mod apikeys;
mod auth;
mod cache;
mod connections;
mod cors;
mod embed;
mod errors;
mod geo;
mod hooks;
mod limits;
mod media_handlers;
mod observability;
mod openapi;
mod operations;
mod oracle;
mod pooler;
mod postgrest_config;
mod postgrest_js;
mod read;
mod realtime;
mod replicas;
mod rls;
mod rpc;
mod sqlite;
mod static_files;
mod storage;
mod storage_abuse;
mod storage_s3;
mod support;
mod tls;
mod together;
mod topology;
mod typed_client;
mod writes;
