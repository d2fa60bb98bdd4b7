//! `harness verify`: judge a recorded Result with a verifier script.

use std::path::Path;

use harness::{DelegationResult, Error, ErrorKind, Verifier, VerifyOutcome};
use harness_builtins::{Engine, Surface};
use serde_json::json;

use crate::args::VerifyArgs;
use crate::exit;
use crate::settings;

/// Runs the command and returns its exit code.
pub async fn run(args: VerifyArgs) -> u8 {
    let json_output = args.json;
    let outcome = judge(args).await;
    match &outcome {
        Ok(outcome) if json_output => {
            println!(
                "{}",
                json!({"verified": outcome.verified, "reason": outcome.reason, "error": null})
            );
        }
        Ok(outcome) if outcome.verified => println!("verified"),
        Ok(outcome) => println!("not verified: {}", outcome.reason),
        Err(e) if json_output => println!(
            "{}",
            json!({"verified": false, "reason": "", "error": {"kind": e.kind().as_str(), "message": e.message()}})
        ),
        Err(e) => eprintln!("error[{}]: {}", e.kind().as_str(), e.message()),
    }
    match outcome {
        Ok(outcome) if outcome.verified => exit::OK,
        Ok(_) => exit::NOT_VERIFIED,
        Err(e) => exit::for_error(e.kind()),
    }
}

async fn judge(args: VerifyArgs) -> Result<VerifyOutcome, Error> {
    let source = settings::read_file("verifier script", &args.script)?;
    let (result_name, result_text) = settings::read_input("--result", &args.result)?;
    let result = DelegationResult::from_json(&result_name, &result_text)?;
    let script_args = settings::script_args(args.args_file.as_deref(), &args.arg)?;
    let sandbox = settings::sandbox(Surface::Verifier, &args.sandbox)?;
    let name = display_name(&args.script);
    let verifier = tokio::task::spawn_blocking(move || {
        Verifier::compile(&Engine::new(), sandbox, &name, &source, &script_args)
    })
    .await
    .map_err(|e| Error::new(ErrorKind::Verifier, e.to_string()))??;
    let (outcome, logs) = verifier.verify(&result).await?;
    for line in logs {
        eprintln!("log: {line}");
    }
    Ok(outcome)
}

/// The script's path as the user gave it, for messages.
fn display_name(path: &Path) -> String {
    path.display().to_string()
}
