//! The builtin modules scripts see, one file per namespace.

use starlark::environment::GlobalsBuilder;

mod env;
pub(crate) mod exec;
mod fs;
mod hash;
pub use hash::{hex, sha256_hex};
mod http;
mod json;
mod log;
mod re;
mod time;

pub use exec::{
    Isolation, Launch, ProcessGroup, ProgramRun, bubblewrap, find_program, read_capped, run_program,
};
pub use http::client_builder as http_client_builder;

/// Registers every builtin namespace and global function.
pub(crate) fn register(builder: &mut GlobalsBuilder) {
    builder.namespace("fs", fs::members);
    builder.namespace("http", http::members);
    builder.namespace("json", json::members);
    builder.namespace("re", re::members);
    builder.namespace("hash", hash::members);
    builder.namespace("time", time::members);
    builder.namespace("env", env::members);
    builder.namespace("exec", exec::members);
    log::globals(builder);
}
