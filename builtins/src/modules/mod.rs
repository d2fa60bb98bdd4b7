//! The builtin modules scripts see, one file per namespace.

use starlark::environment::GlobalsBuilder;

mod env;
pub(crate) mod exec;
mod fs;
mod hash;
pub use hash::{hex, sha256_hex, unhex};
mod http;
mod json;
mod log;
mod re;
mod time;

pub use exec::{
    Capped, Isolation, KEPT_END_BYTES, Launch, ProcessGroup, ProgramRun, StopOn, bubblewrap,
    bubblewrap_works, find_program, read_capped, run_program,
};
pub use http::client_builder as http_client_builder;

/// A builtin namespace: its name, its members, and whether its builtins wait on the outside
/// world (files, the network, programs) — those run only on blocking threads, never inline.
struct Namespace {
    name: &'static str,
    members: fn(&mut GlobalsBuilder),
    waits: bool,
}

/// Every builtin namespace.
const NAMESPACES: [Namespace; 8] = [
    Namespace {
        name: "fs",
        members: fs::members,
        waits: true,
    },
    Namespace {
        name: "http",
        members: http::members,
        waits: true,
    },
    Namespace {
        name: "json",
        members: json::members,
        waits: false,
    },
    Namespace {
        name: "re",
        members: re::members,
        waits: false,
    },
    Namespace {
        name: "hash",
        members: hash::members,
        waits: false,
    },
    Namespace {
        name: "time",
        members: time::members,
        waits: false,
    },
    Namespace {
        name: "env",
        members: env::members,
        waits: false,
    },
    Namespace {
        name: "exec",
        members: exec::members,
        waits: true,
    },
];

/// Registers every builtin namespace and global function.
pub(crate) fn register(builder: &mut GlobalsBuilder) {
    for namespace in &NAMESPACES {
        builder.namespace(namespace.name, namespace.members);
    }
    log::globals(builder);
}

/// Returns true when `name` is a builtin namespace whose builtins wait on the outside world.
pub(crate) fn waits(name: &str) -> bool {
    NAMESPACES.iter().any(|n| n.waits && n.name == name)
}
