//! The `rowgate` command.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use rowgate::config::{Config, ServeArgs};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A PostgREST-compatible REST API for PostgreSQL.
#[derive(Parser)]
#[command(name = "rowgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a PostgreSQL database as a REST API.
    Serve(Box<ServeArgs>),
    /// Start a throwaway PostgreSQL with a small demo schema and serve it (Ctrl-C stops both).
    Demo {
        /// Port to serve the API on.
        #[arg(long = "server-port", default_value_t = 3000)]
        server_port: u16,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // A wrong flag is a configuration error: one line, exit status 2.
            let text = e.to_string();
            eprintln!(
                "rowgate: {}",
                text.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ")
            );
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rowgate: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Serve(args) => {
            let config = match Config::load(&args) {
                Ok(c) => Arc::new(c),
                Err(e) => {
                    eprintln!("rowgate: {e}");
                    return ExitCode::from(2);
                }
            };
            runtime.block_on(serve(config))
        }
        Command::Demo { server_port } => runtime.block_on(demo(server_port)),
    }
}

async fn serve(config: Arc<Config>) -> ExitCode {
    rowgate::server::init_logging(&config);
    let listener = match rowgate::http::bind(&config).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rowgate: cannot listen on {}:{}: {e}", config.server_host, config.server_port);
            return ExitCode::from(2);
        }
    };
    rowgate::server::run(config, listener).await;
    ExitCode::SUCCESS
}

async fn demo(port: u16) -> ExitCode {
    eprintln!("rowgate demo: starting a throwaway PostgreSQL ...");
    let cluster = match rowgate::cluster::TempCluster::start() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rowgate demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = cluster.run_sql("postgres", rowgate::cluster::DEMO_SQL).await {
        eprintln!("rowgate demo: loading the demo schema failed: {e}");
        return ExitCode::FAILURE;
    }
    let args = ServeArgs {
        db_uri: Some(cluster.uri("authenticator", "postgres")),
        db_schemas: Some("api".into()),
        db_anon_role: Some("web_anon".into()),
        server_host: Some("127.0.0.1".into()),
        server_port: Some(port),
        log_level: Some(rowgate::config::LogLevel::Info),
        ..ServeArgs::default()
    };
    let config = match Config::load(&args) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("rowgate demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("rowgate demo: serving schema \"api\" at http://127.0.0.1:{port}/ — try:");
    eprintln!("  curl 'http://127.0.0.1:{port}/films?select=title,year&year=gte.1990&order=year.desc'");
    eprintln!("  curl 'http://127.0.0.1:{port}/directors' -H 'Accept: text/csv'");
    let code = serve(config).await;
    drop(cluster);
    code
}
