//! `harness schema`: the JSON Schema of a delegation file, the project policy or a recorded
//! run, generated from the types that read them.

use harness::Error;

use crate::args::{SchemaArgs, SchemaFile};
use crate::exit;

/// Prints (or writes) the schema; exit 0, or 2 when the file cannot be written.
pub fn run(args: &SchemaArgs) -> u8 {
    let schema = match args.file {
        SchemaFile::Delegation => harness::schema::delegation(),
        SchemaFile::Policy => harness::schema::policy(),
        SchemaFile::Run => harness_records::run_schema(),
    };
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema serialises");
    text.push('\n');
    let Some(path) = &args.output else {
        print!("{text}");
        return exit::OK;
    };
    match std::fs::write(path, text) {
        Ok(()) => exit::OK,
        Err(e) => exit::fail(
            &Error::config(format!("schema -o {}: {e}", path.display())),
            false,
        ),
    }
}
