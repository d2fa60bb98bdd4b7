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
    Capped, KEPT_END_BYTES, Launch, ProcessGroup, ProgramRun, StopOn, bubblewrap, bubblewrap_works,
    find_program, read_capped, run_program,
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

/// A documented example of a builtin: the code of one ```` ```python ```` block of its doc
/// comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// The builtin it documents, as a script names it: `fs.exists`, `print`.
    pub name: String,
    /// The example's code.
    pub code: String,
}

/// Every documented example of the builtins (`fs`, `http`, …, and the global functions), in
/// the order they are registered — the code of each ```` ```python ```` block of their doc
/// comments, so that a test can run each as a script (they are the reference's examples too).
pub fn examples() -> Vec<Example> {
    use starlark::docs::{DocItem, DocMember};
    let mut builder = GlobalsBuilder::new();
    register(&mut builder);
    let mut found = Vec::new();
    let mut add = |name: String, item: &DocItem| {
        // A builtin that is also a type (`str`) is documented as its constructor.
        let docs = match item {
            DocItem::Type(ty) => ty.constructor.as_ref().and_then(|c| c.docs.as_ref()),
            other => other.get_doc_string(),
        };
        let Some(docs) = docs else {
            return;
        };
        for text in [&docs.details, &docs.examples].into_iter().flatten() {
            found.extend(python_blocks(text).map(|code| Example {
                name: name.clone(),
                code,
            }));
        }
    };
    for (name, item) in &builder.build().documentation().members {
        match item {
            DocItem::Module(module) => {
                for (member, item) in &module.members {
                    add(format!("{name}.{member}"), item);
                }
            }
            DocItem::Member(DocMember::Function(_)) | DocItem::Type(_) => {
                add(name.clone(), item);
            }
            _ => {}
        }
    }
    found
}

/// The code of each ```` ```python ```` block of `text`.
fn python_blocks(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split("```python\n").skip(1).filter_map(|block| {
        block
            .split_once("```")
            .map(|(code, _)| code.trim_end().to_owned())
    })
}

/// Returns true when `name` is a builtin namespace whose builtins wait on the outside world.
pub(crate) fn waits(name: &str) -> bool {
    NAMESPACES.iter().any(|n| n.waits && n.name == name)
}
