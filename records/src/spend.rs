//! What a run spent (issue 48, spend per verification loop): tokens and wall time per attempt,
//! with the time its checks took and the CPU time its checks and holdouts used; each child's whole subtree; the run alone and with everything
//! under it. Read from the record and the journal's tree, so every recorded run has it.

use serde_json::{Value, json};

use harness::Usage;

use crate::journal::{Record, TreeNode};

/// Tokens and time of one row of a spend table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// Input tokens.
    pub input_tokens: u64,
    /// Of the input tokens, those read from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Wall time, in milliseconds.
    pub duration_ms: u64,
    /// CPU time (user + system) of the checks and holdouts run, in milliseconds: each one's
    /// command and every process it waited for (0 where the kernel did not say, and in records
    /// made before it was measured).
    pub check_cpu_ms: u64,
}

impl Cost {
    /// The tokens of `usage`, over `duration_ms`, with `check_cpu_ms` of checks.
    fn of(usage: Usage, duration_ms: u64, check_cpu_ms: u64) -> Self {
        Cost {
            input_tokens: usage.input_tokens,
            cached_input_tokens: usage.cached_input_tokens,
            output_tokens: usage.output_tokens,
            duration_ms,
            check_cpu_ms,
        }
    }

    /// The input tokens as a table shows them, with the cached share when the provider read
    /// some from its cache: `1200 (800 cached)`.
    pub fn input(&self) -> String {
        match self.cached_input_tokens {
            0 => self.input_tokens.to_string(),
            cached => format!("{} ({cached} cached)", self.input_tokens),
        }
    }
}

/// One attempt's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptSpend {
    /// The attempt, from 1.
    pub attempt: u32,
    /// Its turns' and its critic's tokens, and its wall time.
    pub cost: Cost,
    /// Wall time of the checks it ran (`CheckCompleted` events), in milliseconds.
    pub checks_ms: u64,
    /// Checks it ran.
    pub checks: u64,
    /// How long each pipeline stage took to judge it, in microseconds, slowest first (empty
    /// when nothing judged it, or in records made before stages were timed).
    pub stages: Vec<(String, u64)>,
}

/// One child's row: its whole subtree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSpend {
    /// The child's id.
    pub id: String,
    /// Its outcome.
    pub outcome: String,
    /// Its error kind, for `failed` and `error`.
    pub kind: Option<String>,
    /// Tokens of the child and every run under it; the child's own wall time.
    pub cost: Cost,
    /// Runs under the child (0 when it delegated nothing).
    pub descendants: u64,
}

/// What a run spent: per attempt, per child, the run alone and the run with its subtree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spend {
    /// Each attempt.
    pub attempts: Vec<AttemptSpend>,
    /// Each child the run delegated to, oldest first.
    pub children: Vec<ChildSpend>,
    /// The run alone.
    pub run: Cost,
    /// The run and every run under it (the run's own wall time), and how many runs that is.
    pub tree: (Cost, u64),
}

impl Spend {
    /// What `record` spent; `tree` is the journal's tree it belongs to, when it is in one.
    pub fn of(record: &Record, tree: Option<&TreeNode>) -> Spend {
        let attempts = record
            .attempts
            .iter()
            .map(|attempt| {
                let of_attempt =
                    |e: &&Value| e["attempt"].as_u64() == Some(u64::from(attempt.attempt));
                let (checks, checks_ms) = record
                    .events
                    .iter()
                    .filter(|e| e["type"] == "CheckCompleted" && of_attempt(e))
                    .fold((0, 0), |(n, ms), e| {
                        (n + 1, ms + e["duration_ms"].as_u64().unwrap_or(0))
                    });
                let cpu = check_cpu_ms(record.events.iter().filter(of_attempt));
                AttemptSpend {
                    attempt: attempt.attempt + 1,
                    cost: Cost::of(attempt.usage, millis(attempt.duration), cpu),
                    checks_ms,
                    checks,
                    stages: attempt.verdict.as_ref().map_or_else(Vec::new, |v| {
                        let mut stages: Vec<(String, u64)> =
                            v.stage_us.iter().map(|(s, us)| (s.clone(), *us)).collect();
                        stages.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                        stages
                    }),
                }
            })
            .collect();
        let run = Cost::of(
            record.usage,
            millis(record.duration),
            check_cpu_ms(record.events.iter()),
        );
        let node = tree.and_then(|t| t.find(&record.id));
        let children: Vec<ChildSpend> = node
            .map(|n| n.children.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|child| {
                let (usage, cpu, runs) = child.subtree();
                ChildSpend {
                    id: child.id.clone(),
                    outcome: child.outcome.clone(),
                    kind: child.error_kind.clone(),
                    cost: Cost::of(usage, millis(child.duration), cpu),
                    descendants: runs - 1,
                }
            })
            .collect();
        let mut whole = run;
        let mut runs = 1;
        for child in &children {
            whole.input_tokens += child.cost.input_tokens;
            whole.cached_input_tokens += child.cost.cached_input_tokens;
            whole.output_tokens += child.cost.output_tokens;
            whole.check_cpu_ms = whole.check_cpu_ms.saturating_add(child.cost.check_cpu_ms);
            runs += 1 + child.descendants;
        }
        Spend {
            attempts,
            children,
            run,
            tree: (whole, runs),
        }
    }

    /// As JSON: `{attempts: [{attempt, input_tokens, cached_input_tokens, output_tokens,
    /// duration_ms, checks, checks_ms, stage_us: {stage: µs}}], children: [{id, outcome, kind,
    /// input_tokens, cached_input_tokens, output_tokens, duration_ms, descendants}], run: {…},
    /// tree: {input_tokens, cached_input_tokens, output_tokens, runs}}`; a child's tokens are its
    /// whole subtree's.
    pub fn to_json(&self) -> Value {
        let cost = |c: &Cost| {
            json!({
                "input_tokens": c.input_tokens,
                "cached_input_tokens": c.cached_input_tokens,
                "output_tokens": c.output_tokens,
                "duration_ms": c.duration_ms,
                "check_cpu_ms": c.check_cpu_ms,
            })
        };
        let with = |mut object: Value, more: Value| {
            if let (Some(object), Value::Object(more)) = (object.as_object_mut(), more) {
                object.extend(more);
            }
            object
        };
        json!({
            "attempts": self.attempts.iter().map(|a| with(
                json!({"attempt": a.attempt}),
                with(cost(&a.cost), json!({
                    "checks": a.checks,
                    "checks_ms": a.checks_ms,
                    "stage_us": a.stages.iter().map(|(s, us)| (s.clone(), Value::from(*us))).collect::<serde_json::Map<String, Value>>(),
                })),
            )).collect::<Vec<_>>(),
            "children": self.children.iter().map(|c| with(
                json!({"id": c.id, "outcome": c.outcome, "kind": c.kind}),
                with(cost(&c.cost), json!({"descendants": c.descendants})),
            )).collect::<Vec<_>>(),
            "run": cost(&self.run),
            "tree": {
                "input_tokens": self.tree.0.input_tokens,
                "cached_input_tokens": self.tree.0.cached_input_tokens,
                "output_tokens": self.tree.0.output_tokens,
                "check_cpu_ms": self.tree.0.check_cpu_ms,
                "runs": self.tree.1,
            },
        })
    }
}

/// The CPU milliseconds of the `CheckCompleted` and `HoldoutCompleted` events among `events`.
fn check_cpu_ms<'a>(events: impl Iterator<Item = &'a Value>) -> u64 {
    events
        .filter(|e| e["type"] == "CheckCompleted" || e["type"] == "HoldoutCompleted")
        .filter_map(|e| e["cpu_ms"].as_u64())
        .fold(0, u64::saturating_add)
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
