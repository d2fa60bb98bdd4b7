//! End-to-end tests of the `harness` binary against loopback fakes. One binary, one module per
//! area; shared fixtures live in `util`.

mod util;

// `harness verify`: the verifier contract, exit codes, `--json`, args, the sandbox and limits.
mod verify;
// `harness run` with the scripted delegate: the Ralph loop, tools, limits, configuration errors.
mod run;
// Every example under `examples/`, run the way its README says.
mod examples;
// Policy hooks: dispatch in runs and tool calls, `verify --hooks`, `hooks list`/`check`, the example.
mod hooks;
// `harness run` with the openai and anthropic delegates against the fake server (each Ralph-loop
// test once per protocol); the openai and command examples.
mod ralph_openai;
// OTLP export through a real in-process receiver (HTTP/protobuf and gRPC): spans, events, metrics.
mod telemetry;
// `harness batch`: every entry once, isolation of failures, malformed lines, the concurrency bound.
mod batch;
// The run journal and the failure-mode report: `run --journal`, `report` (JSON, table, HTML), `runs`.
mod journal;
// Hostile delegates and scripts: the policy out of reach, links, FIFOs, commands, crashes, signals.
mod adversarial;
// `checks:`: commands judging attempts by exit code, evidence records, bad configuration.
mod checks;
// `scope:`: the baseline, changes in the Result, allow/deny, on_violation, odd files.
mod scope;
// Gate integrity: tampering with the tests, planted policy and git hooks, false claims, flaky
// checks, criteria that fail closed, and the `examples/integrity/` examples.
mod integrity;
// The human layer: `review`, `override` under `override_policy`, the hash-chained audit log.
mod authority;
// The critic: reviews after the checks, retries with its feedback, HARD_FAIL, debt, bad reviewers.
mod critic;
// Exported runs (`runs export`) and their offline integrity audit (`harness audit`).
mod audit;
// `harness test`: policy tests with mocks, coverage, text/JSON/JUnit output and bad input.
mod policy_tests;
// Agent CLI delegates (claude, codex, gemini, aider) against fake CLIs: resume, tool logs, failures.
mod agents;
// The same presets against the real CLIs (installed by .ci/run) and loopback model servers.
mod real_clis;
// The rough edges a newcomer hits: colour, refused tool calls, batch lines.
mod newcomer;
// The JSON Schemas of the delegation file and the policy against every example.
mod schemas;
// `harness worker` and `batch --queue` on the SQLite queue: workers killed, jobs dead-lettered.
mod queue;
// `harness serve` through real HTTP: submit, events, review, overrides (every 409), token, shutdown.
mod serve;
// The review page in a real headless chromium, driven over the DevTools protocol.
mod browser;
// Delegation trees: the delegate tool, the tree in the journal, `runs show` and the audit.
mod tree;
// `harness mcp` with the official Python SDK and the real Claude Code as clients.
mod mcp;
// Gates the judged code cannot game: the gaming rules, the test runners' own reports, holdouts.
mod gaming;
// Golden files of `run --json` of the quickstart and `report --json` over it.
mod golden;
// harness in the pipeline: DSSE attestations (securesystemslib), SARIF (the official schema), the
// GitHub Action run as GitHub runs it, and the pre-commit hooks (the real pre-commit).
mod pipeline;
