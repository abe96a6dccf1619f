//! People on the command line: who this process acts as, and the named API tokens
//! (`baton token add|list|revoke`).

use super::{Failure, Outcome, exit};
use crate::workspace::Workspace;
use clap::Subcommand;

/// `baton token …`.
#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// Replace `.baton/token`; the old token stops working.
    Rotate,
    /// Make a token for a person: requests bearing it act as NAME. Printed once; only its
    /// SHA-256 is kept (in `.baton/tokens`).
    Add { name: String },
    /// The named tokens: names and when they were made (never the tokens).
    List {
        #[arg(long)]
        json: bool,
    },
    /// End a named token: requests bearing it are refused from now on.
    Revoke { name: String },
}

/// The person this process's changes are recorded under (BATON_USER, git's user.name, the
/// system's user name), decided once.
pub fn me(ws: &Workspace) -> Result<String, Failure> {
    crate::workspace::person::current(ws.root()).map_err(Failure::new)
}

/// The name `list` filters by: `--mine` is the person running it.
pub fn filter(ws: &Workspace, mine: bool, by: Option<String>) -> Result<Option<String>, Failure> {
    if mine { me(ws).map(Some) } else { Ok(by) }
}

/// `baton token …`.
pub fn token(ws: &Workspace, cmd: TokenCmd) -> Outcome {
    let dir = ws.dir();
    match cmd {
        TokenCmd::Rotate => super::serve::rotate(ws),
        TokenCmd::Add { name } => {
            let token = crate::api::tokens::add(&dir, &name, crate::store::now_ms())
                .map_err(Failure::new)?;
            outln!("{token}");
            eprintln!(
                "token for {name}: requests bearing it act as {name}. It is shown only this once (only its SHA-256 is kept in {}); `baton token revoke {name}` ends it",
                crate::api::tokens::path(&dir).display()
            );
            Ok(exit::OK)
        }
        TokenCmd::List { json } => {
            let tokens = crate::api::tokens::load(&dir).map_err(Failure::new)?;
            if json {
                let items: Vec<_> = tokens
                    .iter()
                    .map(|t| {
                        serde_json::json!({
                            "name": t.name,
                            "created_at": crate::store::rfc3339(t.created_at),
                        })
                    })
                    .collect();
                outln!("{}", serde_json::Value::Array(items));
                return Ok(exit::OK);
            }
            if tokens.is_empty() {
                outln!(
                    "no named tokens — `baton token add NAME` makes one; .baton/token acts as the person running `baton serve`"
                );
                return Ok(exit::OK);
            }
            outln!("{:<24} CREATED", "NAME");
            for t in tokens {
                let name = super::tasks::one_line(&t.name, 64);
                outln!("{name:<24} {}", &crate::store::rfc3339(t.created_at)[..19]);
            }
            Ok(exit::OK)
        }
        TokenCmd::Revoke { name } => {
            crate::api::tokens::revoke(&dir, &name).map_err(Failure::new)?;
            outln!("token `{name}` revoked: requests bearing it are refused from now on");
            Ok(exit::OK)
        }
    }
}
