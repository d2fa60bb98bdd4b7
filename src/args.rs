//! Command-line arguments, as typed. `settings` turns them into validated configuration.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Delegate work to AI sub-agents and verify what they claim against ground truth.
///
/// harness runs a delegate (a scripted agent, an OpenAI-compatible model or an agent CLI), checks
/// the claimed work with Starlark verifiers and policy hooks, and re-prompts the same delegate with
/// the reasons when the check fails.
///
/// Exit codes: 0 passed, passed with debt or skipped, 1 not verified (or rejected by the critic),
/// 2 usage or configuration error (or a refused override), 3 broken verifier, hook or check,
/// 4 delegate/tool/timeout/budget error, 5 blocked by a policy hook, 130 cancelled.
#[derive(Debug, Parser)]
#[command(
    name = "harness",
    version,
    propagate_version = true,
    after_help = "Every key of a delegation file and of the project policy, the JSON output, events, outcomes and exit codes: docs/reference.md. How harness is built: docs/architecture.md."
)]
pub struct Cli {
    /// Export traces and metrics over OTLP to this base URL (e.g. http://localhost:4318); the
    /// standard OTEL_EXPORTER_OTLP_* variables configure the rest. Off when nothing is set.
    #[arg(
        long = "otlp-endpoint",
        value_name = "URL",
        global = true,
        value_parser = harness_telemetry::check_endpoint
    )]
    pub otlp_endpoint: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a delegation file: delegate the task, verify the claimed work, retry with the
    /// reasons until it is real or the retry budget is spent.
    ///
    /// Progress (attempts, tool calls, verdicts, retries) goes to stderr; the outcome decides the
    /// exit code. Ctrl-C or SIGTERM stops the delegation, records it as cancelled and exits 130.
    Run(RunArgs),
    /// Run many delegations from a JSONL file (one delegation per line) or a YAML file
    /// (`template:` plus a list of `args:`), concurrently.
    ///
    /// Prints one outcome per delegation in completion order (JSON lines with --json), a
    /// progress bar on a terminal, and a summary. One delegation's error never stops the others;
    /// Ctrl-C or SIGTERM stops dispatching, lets running delegations finish (up to --grace
    /// seconds), then cancels and records the rest. Exit code: 0 all passed or skipped, 1 some
    /// failed or errored, 2 some entries malformed or not recorded, 130 interrupted.
    Batch(BatchArgs),
    /// Run delegations from a queue (`--queue sqlite:PATH` or `nats://HOST:PORT`) until stopped.
    ///
    /// Leases a job, assembles its delegation as the submitter would have (its overrides travel
    /// with it), runs it under the id it was queued with, renews the lease while it runs, and
    /// sends the report back to the submitter, which records it. A worker that dies loses its
    /// lease and the job runs again elsewhere (at least once; recorded once). A job that cannot be
    /// read is dead-lettered with the reason; one that fails on this machine is retried later.
    /// Ctrl-C or SIGTERM stops leasing and gives running jobs back to the queue.
    Worker(WorkerArgs),
    /// Serve the HTTP API: submit delegations, follow their events (server-sent events), list
    /// the runs awaiting review, override them, read the dashboard.
    ///
    /// Endpoints: POST /v1/delegations (a delegation file as JSON; `workdir` relative to --root
    /// and inside it, else 400), GET /v1/delegations/{id}, GET /v1/delegations?review=pending,
    /// GET /v1/delegations/{id}/events, POST /v1/delegations/{id}/override (409 with
    /// override_not_allowed, reason_required or illegal_transition), GET /v1/report, GET
    /// /healthz, GET /metrics (Prometheus).
    ///
    /// Every request but /healthz needs the token: `Authorization: Bearer TOKEN`, or for a
    /// browser the session cookie the printed `http://…/?token=…` URL (or /login) sets. The
    /// token is HARNESS_API_TOKEN, required when --listen is not loopback; without it one is
    /// generated and printed with the URL. Changes to the API need the bearer header and
    /// `Content-Type: application/json`; the review page's forms carry a CSRF token; requests
    /// from another origin, and `Host` names other than IP addresses, localhost and
    /// --allow-host, are refused (403). HARNESS_API_USER: whom the token's overrides are
    /// attributed to when the body names no `user`. SIGTERM stops accepting, cancels running
    /// delegations and records them.
    Serve(ServeArgs),
    /// Serve the Model Context Protocol over stdio, so that Claude Code, Codex, Gemini CLI or
    /// any MCP client can hand work to harness and get back a verified result.
    ///
    /// Tools: `delegate` (a `task` for a profile of the project policy's `delegates:`, held to
    /// the `checks`, `criteria` and `verify` the call gives; or `file`, a delegation file in
    /// the project), `run_status {id}` and `review_list`. Each run is recorded in the project's
    /// journal, with the client's HARNESS_PARENT_ID as its `parent_id` when set; progress is
    /// sent per attempt. stdout carries the protocol only; logs go to stderr. Set it up with
    /// `claude mcp add harness -- harness mcp` (Codex: `codex mcp add harness -- harness mcp`;
    /// Gemini CLI: `gemini mcp add harness harness mcp`).
    Mcp(McpArgs),
    /// Judge a recorded delegation result with a verifier script.
    ///
    /// The script defines `def run(result):` and returns True/False, a dict
    /// {"verified": bool, "reason": str}, or json.encode of that dict. It sees the builtins (fs,
    /// http, json, re, hash, time, env, exec, log) and `args`.
    Verify(VerifyArgs),
    /// List or check policy hooks.
    #[command(subcommand)]
    Hooks(HooksCommand),
    /// Show the failure-mode dashboard of the run journal.
    ///
    /// Per delegate kind: delegations, pass rate, pass@attempt, exhausted, broken-policy and
    /// blocked counts, attempts and durations, top failure reasons and failing hooks. A table on
    /// the terminal, `--json` for scripts, `--html FILE` for a self-contained page with charts.
    Report(ReportArgs),
    /// Read single delegations from the run journal.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// List the runs awaiting a human: failed and passed_with_debt runs not yet overridden.
    Review(ReviewArgs),
    /// Approve or reject a run awaiting review, attributed and audited.
    ///
    /// The run keeps its outcome; it gains a final state (approved or rejected), a HumanOverride
    /// event and a row in the audit log. `--type check` covers failed checks, criteria,
    /// verifiers and hooks; `verifier` a critic's rejection or debt; `direct` whatever failed.
    /// The project's `override_policy` (in the run's .harness/policy.yaml) decides what is
    /// allowed. Refusals exit 2 with kind override_not_allowed, reason_required or
    /// illegal_transition, and are audited too.
    Override(OverrideArgs),
    /// Write a working `.harness/` and a delegation file to start from.
    ///
    /// Writes `.harness/policy.yaml` (the defaults, commented), a hook, a verifier, a scripted
    /// delegate and `delegation.yaml`, which `harness hooks check` accepts and `harness run
    /// delegation.yaml` runs offline. Refuses to overwrite an existing file unless --force.
    Init(InitArgs),
    /// Run policy tests: `*_test.star` files whose `test_*` functions load real verifiers and
    /// hooks, call them on payloads with mocked files, HTTP and programs, and assert.
    ///
    /// Helpers in test files: `verifier(path)` and `hook(path)` (relative to the test file; a
    /// verifier may be a `.star` file or a delegation file with an inline `verify`) return
    /// callables — `v(result, files={...}, http={url: {status, body, headers}}, exec={program:
    /// {exit_code, stdout, stderr}}, args={...}, evidence=[...])` returns {verified, reason,
    /// evidence, logs}; `h(payload, files=..., http=..., exec=..., delegate=...)` returns
    /// {action, reason, payload}. Assertions: assert_eq, assert_ne, assert_true,
    /// assert_contains, fail. Nothing reaches the network or starts a program: an unmocked URL
    /// or program, or a mock the policy is not allowed to reach, is a test error.
    ///
    /// Prints one line per failing test with its place and reason, then `N passed, N failed, N
    /// errors`. Exit 0 when every test passed (and coverage meets --threshold), 1 otherwise, 2
    /// for bad arguments or no tests found.
    Test(TestArgs),
    /// Check the hash-chained audit log of overrides.
    #[command(name = "audit-log", subcommand)]
    AuditLog(AuditLogCommand),
    /// Re-verify a recorded run offline, fail-closed: a run id from the journal, or a file
    /// `harness runs export` wrote.
    ///
    /// Checks the schema version, the seal (sha256 of everything else in the export: any edit,
    /// even with the chain recomputed, is `seal_mismatch`), against the journal's stored seal for
    /// a run id or with --journal, --expect-seal and --pubkey; the fields, the order and hash
    /// chain of the events and that they end in DelegationCompleted (`truncated`); that every
    /// tool call has exactly one result (and no result lacks its call); and that every evidence
    /// file still has the recorded SHA-256, never read through a link (`evidence_link`). Prints
    /// every failure with its code and where; exit 0 valid, 1 invalid, 2 unreadable.
    ///
    /// A DSSE envelope (`runs export --format dsse`) is verified with --pubkey: its in-toto
    /// statement, a signature by the key over the envelope's pre-authentication encoding, and
    /// with --document the run document it attests (its SHA-256 is the subject's, its outcome
    /// the statement's result, and it is audited as above).
    Audit(AuditArgs),
    /// Keys for signed exports and attestations.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Print the JSON Schema of a delegation file, the project policy or a recorded run.
    ///
    /// Generated from the types harness reads these files with (the same as
    /// `schemas/delegation.schema.json`, `schemas/policy.schema.json` and
    /// `schemas/harness.run.v1.json` in the repository), for editors and other tools: every key,
    /// its type, range and what it does. Point an editor at it with
    /// `# yaml-language-server: $schema=PATH` at the top of the file.
    Schema(SchemaArgs),
}

/// `harness schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which file's schema.
    #[arg(value_enum)]
    pub file: SchemaFile,
    /// Write it to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The files `harness schema` describes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SchemaFile {
    /// A delegation file (`harness run FILE`).
    Delegation,
    /// The project policy, `.harness/policy.yaml`.
    Policy,
    /// A recorded run as `harness runs export` writes it and `harness audit` reads it
    /// (`harness.run/v1`).
    Run,
}

/// Flags shared by every command that runs scripts.
#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// Workspace root that file access is confined to [default: the delegation's `workdir` for
    /// run and batch, else the current directory].
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Allow scripts to reach this host over HTTP (repeatable; `*.example.com` wildcards allowed;
    /// loopback and private addresses only when named exactly).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Allow scripts to run this program with exec.run (repeatable; matched exactly).
    #[arg(long = "allow-exec", value_name = "PROGRAM")]
    pub allow_exec: Vec<String>,
    /// Allow scripts to read this environment variable with env.get (repeatable).
    #[arg(long = "allow-env", value_name = "NAME")]
    pub allow_env: Vec<String>,
}

/// `harness verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The verifier script (Starlark, defining `run(result)`); optional when --hooks is given.
    #[arg(value_name = "SCRIPT", required_unless_present = "hooks")]
    pub script: Option<PathBuf>,
    /// Also run the `delegation.post_verify` hooks in these files or directories (repeatable),
    /// after the script.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub hooks: Vec<PathBuf>,
    /// The delegate kind (and model) the result came from, matched by hooks' `delegates:` globs
    /// (repeatable, e.g. `--delegate openai --delegate gpt-4o`).
    #[arg(long = "delegate", value_name = "NAME")]
    pub delegate: Vec<String>,
    /// The delegation result to judge (JSON: the Result of docs/reference.md#the-result), or `-` for standard input.
    #[arg(long, value_name = "FILE|-")]
    pub result: String,
    /// Set `args[KEY]`; VALUE is parsed as JSON when it parses, else taken as a string
    /// (repeatable; applied after --args-file).
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    pub arg: Vec<String>,
    /// Read `args` from a JSON object file.
    #[arg(long = "args-file", value_name = "FILE.json")]
    pub args_file: Option<PathBuf>,
    /// Script sandbox.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Print exactly one JSON object {"verified", "reason", "reasons", "result", "error"} instead
    /// of text.
    #[arg(long)]
    pub json: bool,
}

/// `harness run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The delegation file (YAML).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Hook files or directories to add to the file's `hooks:` (or to `.harness/hooks`).
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub hooks: Vec<PathBuf>,
    /// Retries after a failed verification (overrides the file's `max_verify_retries`; 0 to
    /// 100).
    #[arg(long = "max-verify-retries", value_name = "N", value_parser = clap::value_parser!(u32).range(0..=i64::from(harness::MAX_VERIFY_RETRIES)))]
    pub max_verify_retries: Option<u32>,
    /// Script sandbox (`--workdir` overrides the file's `workdir`; hosts add to
    /// `network.allow`).
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Print exactly one JSON object describing the outcome; no progress on stderr.
    #[arg(long)]
    pub json: bool,
    /// Record the delegation in this run journal [default: $HARNESS_JOURNAL, else the nearest
    /// .harness/runs.db from the current directory upward, else ./.harness/runs.db].
    #[arg(long, value_name = "PATH", conflicts_with = "no_journal")]
    pub journal: Option<PathBuf>,
    /// Do not record the delegation in the run journal.
    #[arg(long = "no-journal")]
    pub no_journal: bool,
    /// Write every run event (DelegationStarted, AttemptStarted, ToolCalled, CheckCompleted,
    /// VerificationCompleted, ... with run_id, attempt, seq, at) to FILE as one JSON line each,
    /// as it happens; `-` writes them to stdout, and nothing else (not with --json).
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Leave each child's isolated workspace on disk when it ends (a delegation tree's children
    /// that can change files work in a copy of their parent's workspace, removed after them);
    /// the parent's `delegate` result names where, under `workspace.kept`.
    #[arg(long = "keep-workspaces")]
    pub keep_workspaces: bool,
}

/// `harness mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The project every delegation runs in: `file` and `workdir` are relative to it and must
    /// stay inside it [default: the current directory].
    #[arg(
        long,
        value_name = "DIR",
        default_value = ".",
        hide_default_value = true
    )]
    pub root: PathBuf,
    /// Record runs in this run journal [default: $HARNESS_JOURNAL, else the nearest
    /// .harness/runs.db from --root upward, else ROOT/.harness/runs.db].
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Relay standard input and output to the MCP server on this Unix socket instead of
    /// serving here: what `harness run` (batch, serve, worker) configures an agent CLI with when
    /// the delegation offers it `tools: [delegate]`, so that each call runs in that process as a
    /// child of the CLI's run. Not for use by hand.
    #[arg(long, value_name = "SOCKET", conflicts_with_all = ["root", "journal"])]
    pub via: Option<PathBuf>,
}

/// `harness hooks ...`.
#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// List hooks in dispatch order per event: name, event, priority, matchers, file.
    List(HooksArgs),
    /// Load and compile every hook and print every problem; exit 0 when clean, 2 otherwise.
    Check(HooksArgs),
}

/// Where `harness hooks` looks.
#[derive(Debug, Args)]
pub struct HooksArgs {
    /// Hook files or directories [default: .harness/hooks].
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Script sandbox for compiling (hooks' top-level code runs at load).
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// Which journal, and which of its records, `harness report` and `harness runs list` read.
#[derive(Debug, Args)]
pub struct JournalArgs {
    /// The run journal [default: $HARNESS_JOURNAL, else the nearest .harness/runs.db from the
    /// current directory upward]. Opened read-only.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Only delegations that started within this long before now (e.g. 30m, 24h, 7d).
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Only delegate kinds matching this glob (e.g. `scripted`, `open*`).
    #[arg(long, value_name = "GLOB")]
    pub kind: Option<String>,
}

/// `harness report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The journal and the records to include.
    #[command(flatten)]
    pub select: JournalArgs,
    /// Print exactly one JSON object instead of the table.
    #[arg(long, conflicts_with = "sarif")]
    pub json: bool,
    /// Print the final findings of every selected run as one SARIF 2.1.0 log instead of the
    /// table (for code scanning).
    #[arg(long, conflicts_with = "by_root")]
    pub sarif: bool,
    /// Also write the report as one self-contained HTML page (inline SVG charts, no network).
    #[arg(long, value_name = "FILE", conflicts_with = "by_root")]
    pub html: Option<PathBuf>,
    /// Group by root run instead: one line per delegation tree (a run and the children its
    /// `delegate` calls ran), with the root's outcome, its runs, how many children failed, and
    /// the attempts and tokens of the whole tree.
    #[arg(long = "by-root")]
    pub by_root: bool,
}

/// `harness runs ...`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List recorded delegations, newest first.
    List(RunsListArgs),
    /// Show one recorded delegation with its attempts and reasons.
    Show(RunsShowArgs),
    /// Write one recorded delegation as a `harness.run/v1` document: the run, its attempts, its
    /// hash-chained events and the SHA-256 of every file its evidence vouched for.
    Export(RunsExportArgs),
}

/// `harness runs export`.
#[derive(Debug, Args)]
pub struct RunsExportArgs {
    /// The delegation id.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The run journal [default: $HARNESS_JOURNAL, else the nearest .harness/runs.db from the
    /// current directory upward]. Opened read-only.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Sign the export's seal with this ed25519 private key (PEM, as `openssl genpkey
    /// -algorithm ed25519 -out KEY.pem` writes it); `audit --pubkey` checks it. Keep the key
    /// out of every workspace a delegate can write: a key inside the run's workdir is refused.
    #[arg(long, value_name = "KEY.pem")]
    pub sign: Option<PathBuf>,
    /// What to write: `json`, the run document (`harness.run/v1`); or `dsse`, an in-toto
    /// Statement v1 (test-result predicate) about that document in a DSSE envelope signed with
    /// `--sign` — what securesystemslib, sigstore and in-toto verifiers read. Its subject digest
    /// is the SHA-256 of the bytes `runs export ID` (json) writes.
    #[arg(long, value_enum, default_value_t = ExportFormat::Json)]
    pub format: ExportFormat,
    /// With `--format dsse`: the run's page, put in the statement as its `url` (e.g. the
    /// `harness serve` address followed by `/runs/ID`).
    #[arg(long, value_name = "URL", requires = "sign")]
    pub url: Option<String>,
}

/// What `runs export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// The run document, `harness.run/v1`.
    Json,
    /// An in-toto attestation of it in a signed DSSE envelope.
    Dsse,
}

/// `harness keys`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Print the keyid of a public key (PEM): the lowercase hex SHA-256 of its DER
    /// SubjectPublicKeyInfo, as DSSE envelopes (`runs export --format dsse`) name it.
    Id(KeysIdArgs),
}

/// `harness keys id`.
#[derive(Debug, Args)]
pub struct KeysIdArgs {
    /// An ed25519 public key (`openssl pkey -in KEY.pem -pubout -out KEY.pub.pem`) or private
    /// key (PEM).
    #[arg(value_name = "KEY.pem")]
    pub key: PathBuf,
}

/// `harness audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// A run id (read from the journal and exported first), an exported `.json` file, or a DSSE
    /// envelope (`runs export --format dsse`; needs `--pubkey`).
    #[arg(value_name = "RUN_ID|FILE")]
    pub target: String,
    /// With an envelope: the run document it attests (`runs export ID -o FILE`), which must be
    /// its subject and is audited too.
    #[arg(long, value_name = "FILE")]
    pub document: Option<PathBuf>,
    /// Where the evidence files are [default: the run's recorded workdir].
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// The run journal: where a run id is read from [default: as `harness runs` finds it];
    /// for a file, the journal whose stored seal the export must match.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// The seal the export must carry, kept somewhere the delegate could not reach (the
    /// `seal` of the export, or `runs show --json`, when the run completed).
    #[arg(long, value_name = "HEX")]
    pub expect_seal: Option<String>,
    /// The operator's ed25519 public key (PEM, `openssl pkey -in KEY.pem -pubout`): the export
    /// must carry a valid signature by it (`runs export --sign`).
    #[arg(long, value_name = "KEY.pub.pem")]
    pub pubkey: Option<PathBuf>,
    /// Print the VerificationReport as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `harness runs list`.
#[derive(Debug, Args)]
pub struct RunsListArgs {
    /// The journal and the records to list.
    #[command(flatten)]
    pub select: JournalArgs,
    /// At most this many records.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: usize,
    /// Print exactly one JSON object {"runs": [...]} instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `harness runs show`.
#[derive(Debug, Args)]
pub struct RunsShowArgs {
    /// The delegation id (as `harness run` printed it).
    #[arg(value_name = "ID")]
    pub id: String,
    /// The run journal [default: $HARNESS_JOURNAL, else the nearest .harness/runs.db from the
    /// current directory upward]. Opened read-only.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Print the record as one JSON object: the whole run (request, every attempt's result,
    /// verdict and retry prompt).
    #[arg(long, conflicts_with = "sarif")]
    pub json: bool,
    /// Print the final findings as a SARIF 2.1.0 log (for code scanning: `ruleId` per finding
    /// source and name, blocking findings as errors, files relative to the workspace).
    #[arg(long)]
    pub sarif: bool,
}

/// `harness batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// The batch file: `.jsonl` (one delegation per line) or `.yaml` (template + args).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Delegations in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// Hook files or directories added to every delegation's own.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub hooks: Vec<PathBuf>,
    /// After Ctrl-C, seconds to wait for running delegations before abandoning them.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub grace: u64,
    /// Script sandbox (`--workdir` overrides every delegation's `workdir`).
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Print one JSON object per delegation (the `harness run --json` object plus `line`).
    #[arg(long)]
    pub json: bool,
    /// Record every delegation in this run journal [default: $HARNESS_JOURNAL, else the nearest
    /// .harness/runs.db from the current directory upward, else ./.harness/runs.db].
    #[arg(long, value_name = "PATH", conflicts_with = "no_journal")]
    pub journal: Option<PathBuf>,
    /// Do not record the delegations in a run journal.
    #[arg(long = "no-journal")]
    pub no_journal: bool,
    /// Queue the delegations (`sqlite:PATH` or `nats://HOST:PORT`) for `harness worker`
    /// processes instead of running them here; follow their reports as they come back, print and
    /// record them as a local batch would. Ctrl-C stops following; what is still out stays
    /// queued.
    #[arg(long, value_name = "URL")]
    pub queue: Option<String>,
    /// Continue batch BATCH (as `--queue` printed it) of this same file, after its submitter
    /// stopped or died: record the reports that came back meanwhile, queue again the entries
    /// not yet reported (a job still queued is not queued twice) and follow them. Entries
    /// already in the journal are skipped, so it needs the journal the batch recorded to.
    #[arg(
        long,
        value_name = "BATCH",
        requires = "queue",
        conflicts_with = "no_journal"
    )]
    pub resume: Option<String>,
}

/// `harness serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "HOST:PORT")]
    pub listen: String,
    /// The directory every submitted delegation's workdir must lie under.
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
    /// The run journal [default: $HARNESS_JOURNAL, else the nearest .harness/runs.db from the
    /// current directory upward, else ./.harness/runs.db].
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Queue submitted delegations (`sqlite:PATH` or `nats://HOST:PORT`) for `harness worker`
    /// processes instead of running them in this server; their reports come back to this
    /// server's journal. Workers must see the workdirs at the same paths (a shared --root).
    #[arg(long, value_name = "URL")]
    pub queue: Option<String>,
    /// A host name the server is reached by (through a proxy or DNS), answered besides
    /// `localhost` and IP addresses; repeat for several. Requests naming any other `Host` are
    /// refused: a page on such a name may be rebinding it to this address.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
}

/// `harness worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The queue: `sqlite:PATH` (one machine) or `nats://HOST:PORT` (many).
    #[arg(long, value_name = "URL")]
    pub queue: String,
    /// Delegations run at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// Seconds a job stays leased to a worker that stopped renewing it (renewed every third of
    /// that while it runs).
    #[arg(long, default_value_t = 30, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub lease: u64,
    /// Deliveries after which a job is dead-lettered.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_deliver: u32,
}

/// `harness review`.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The run journal [default: $HARNESS_JOURNAL, else the nearest .harness/runs.db from the
    /// current directory upward]. Opened read-only.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Print one JSON object {"pending": [...]} instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `harness override`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("decision").required(true).args(["approve", "reject"]))]
pub struct OverrideArgs {
    /// The run (as `harness review` lists it).
    #[arg(value_name = "ID")]
    pub id: String,
    /// Approve the run: its final state becomes `approved`.
    #[arg(long)]
    pub approve: bool,
    /// Reject the run: its final state becomes `rejected`.
    #[arg(long)]
    pub reject: bool,
    /// What the override covers: check (failed checks, criteria, verifiers, hooks), verifier (a
    /// critic's rejection or debt) or direct (whatever failed).
    #[arg(long = "type", value_name = "TYPE", value_parser = ["check", "verifier", "direct"])]
    pub override_type: String,
    /// Why: what you checked, and why the run may stand (or not).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Who decides [default: $HARNESS_USER]; one of the two is required.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The run journal [default: $HARNESS_JOURNAL, else the nearest .harness/runs.db from the
    /// current directory upward].
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Print one JSON object ({"override": {...}}, or {"error": {kind, message}}).
    #[arg(long)]
    pub json: bool,
}

/// `harness audit-log ...`.
#[derive(Debug, Subcommand)]
pub enum AuditLogCommand {
    /// Re-walk the hash chain; exit 0 when intact, 1 naming the first broken row.
    ///
    /// Proves that no row was edited, deleted or reordered after it was written, and that the
    /// overrides table agrees with the log. It cannot prove that someone with write access did
    /// not rebuild the whole chain: keep the head hash elsewhere (--anchor prints it) and pass it
    /// back later with --check-anchor.
    Verify(AuditVerifyArgs),
}

/// `harness audit-log verify`.
#[derive(Debug, Args)]
pub struct AuditVerifyArgs {
    /// The run journal [default: $HARNESS_JOURNAL, else the nearest .harness/runs.db from the
    /// current directory upward]. Opened read-only.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Print one JSON object {"intact", "rows", "head", "broken"}.
    #[arg(long)]
    pub json: bool,
    /// Print the head (`SEQ HASH`) on stdout, to store somewhere the journal's writers cannot
    /// reach.
    #[arg(long)]
    pub anchor: bool,
    /// A head hash stored earlier: the chain must still contain it.
    #[arg(long = "check-anchor", value_name = "HASH")]
    pub check_anchor: Option<String>,
}

/// `harness test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Test files, or directories searched for `*_test.star` [default: the current directory].
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Run only the tests whose name (or `FILE::NAME`) matches this regular expression.
    #[arg(long = "run", value_name = "REGEX")]
    pub run: Option<String>,
    /// Output: `text` (failures and a summary), `json` (every test, and coverage), `junit`
    /// (JUnit XML for CI).
    #[arg(long, value_enum, default_value_t = TestFormat::Text)]
    pub format: TestFormat,
    /// Report statement coverage of the policy files the tests load: per file, covered and not
    /// covered line ranges and the percentage (`opa test --coverage` JSON shape with --format
    /// json).
    #[arg(long)]
    pub coverage: bool,
    /// Fail (exit 1) when total coverage is below PCT percent; implies --coverage.
    #[arg(long, value_name = "PCT")]
    pub threshold: Option<f64>,
    /// Print every test as it ends, with what it logged.
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// Output formats of `harness test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TestFormat {
    /// Failures, then `N passed, N failed, N errors`.
    Text,
    /// One JSON object: every test, the counts, and coverage.
    Json,
    /// JUnit XML.
    Junit,
}

/// `harness init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to write [default: the current directory].
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Overwrite files that exist.
    #[arg(long)]
    pub force: bool,
}
