//! `harness verify`: judge a recorded Result with a verifier script and/or post-verify hooks.

use harness::{DelegationResult, Error, ErrorKind, Pipeline, Verdict, Verifier};
use harness_builtins::{Engine, Surface};
use serde_json::json;

use crate::args::VerifyArgs;
use crate::exit;
use crate::settings;

/// What `harness verify` concluded.
struct Judgement {
    verdict: Verdict,
    result: DelegationResult,
    /// True when only an inline verifier ran: its reason is shown as it is, unprefixed.
    inline_only: bool,
}

impl Judgement {
    /// The reason: the verifier's own words when only it ran, else every reason line.
    fn reason(&self) -> String {
        if self.inline_only {
            self.verdict
                .findings
                .iter()
                .find(|f| f.source == harness::Source::Verify)
                .map(|f| f.message.clone())
                .unwrap_or_default()
        } else {
            self.verdict.reasons().join("\n")
        }
    }
}

/// Runs the command and returns its exit code.
pub async fn run(args: VerifyArgs) -> u8 {
    let json_output = args.json;
    let judged = judge(args).await;
    if let Ok(j) = &judged {
        for line in &j.verdict.logs {
            eprintln!("log: {line}");
        }
    }
    match &judged {
        Ok(j) if json_output => println!(
            "{}",
            json!({
                "verified": j.verdict.passed(),
                "reason": j.reason(),
                "reasons": j.verdict.reasons(),
                "result": j.result.to_value(),
                "error": null,
            })
        ),
        Ok(j) if j.verdict.passed() => println!("verified"),
        Ok(j) if j.inline_only => println!("not verified: {}", j.reason()),
        Ok(j) => {
            println!("not verified:");
            for reason in j.verdict.reasons() {
                println!("  {reason}");
            }
        }
        Err(e) if json_output => println!(
            "{}",
            json!({"verified": false, "reason": "", "reasons": [], "result": null,
                   "error": {"kind": e.kind().as_str(), "message": e.message()}})
        ),
        Err(e) => eprintln!("error[{}]: {}", e.kind().as_str(), e.message()),
    }
    match judged {
        Ok(j) if j.verdict.passed() => exit::OK,
        Ok(_) => exit::NOT_VERIFIED,
        Err(e) => exit::for_error(e.kind()),
    }
}

async fn judge(args: VerifyArgs) -> Result<Judgement, Error> {
    let source = match &args.script {
        Some(path) => Some((
            path.display().to_string(),
            settings::read_file("verifier script", path)?,
        )),
        None => None,
    };
    let (result_name, result_text) = settings::read_input("--result", &args.result)?;
    let result = DelegationResult::from_json(&result_name, &result_text).map_err(Error::config)?;
    let script_args = settings::script_args(args.args_file.as_deref(), &args.arg)?;
    let verifier = match source {
        None => None,
        Some((name, source)) => {
            let sandbox = settings::sandbox(Surface::Verifier, &args.sandbox)?;
            let verifier = tokio::task::spawn_blocking(move || {
                Verifier::compile(&Engine::new(), sandbox, &name, &source, &script_args)?
                    .expecting(&["result"])
            })
            .await
            .map_err(|e| Error::new(ErrorKind::Verifier, e.to_string()))??;
            Some(verifier)
        }
    };
    let policy = if args.hooks.is_empty() {
        None
    } else {
        let sandbox = settings::sandbox(Surface::Hook, &args.sandbox)?;
        Some(settings::policy(sandbox, args.hooks.clone()).await?)
    };
    let inline_only = policy.is_none();
    let pipeline = Pipeline::new(verifier, policy, args.delegate.clone());
    let (result, judged) = pipeline.judge(result).await;
    let verdict = match judged? {
        Some(verdict) => verdict,
        None => {
            return Err(Error::config(
                "nothing to verify with: the hooks given contain no delegation.post_verify hook and no SCRIPT was given",
            ));
        }
    };
    Ok(Judgement {
        verdict,
        result,
        inline_only,
    })
}
