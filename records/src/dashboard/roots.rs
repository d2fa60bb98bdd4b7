//! The report grouped by root run (DESIGN §9): each delegation tree as one line — its root's
//! outcome, how many runs it took, how many of them failed, and what the whole tree cost.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::journal::Record;

/// One delegation tree of the records: its root and the sums over every run in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootStats {
    /// The root run's id.
    pub id: String,
    /// Its outcome.
    pub outcome: String,
    /// Its error kind, for `failed` and `error`.
    pub kind: Option<String>,
    /// Its task.
    pub task: Option<String>,
    /// Runs in the tree, the root included.
    pub runs: usize,
    /// Runs of the tree below the root that did not pass.
    pub children_failed: usize,
    /// Attempts of every run of the tree.
    pub attempts: usize,
    /// Tokens (input + output) of every run of the tree.
    pub tokens: u64,
}

impl RootStats {
    /// As JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id, "outcome": self.outcome, "kind": self.kind, "task": self.task,
            "runs": self.runs, "children_failed": self.children_failed,
            "attempts": self.attempts, "tokens": self.tokens,
        })
    }
}

/// The trees of `records`, newest root first: a run whose parent is not among the records is a
/// root (its tree is what the records hold of it).
pub fn by_root(records: &[Record]) -> Vec<RootStats> {
    let index: HashMap<&str, &Record> = records.iter().map(|r| (r.id.as_str(), r)).collect();
    let root_of = |record: &Record| -> String {
        let mut at = record;
        // Bounded: a journal holding a cycle of parents is cut, never followed forever.
        for _ in 0..64 {
            match at.parent_id().and_then(|p| index.get(p)) {
                Some(parent) => at = parent,
                None => break,
            }
        }
        at.id.clone()
    };
    let mut trees: Vec<RootStats> = Vec::new();
    let mut position: HashMap<String, usize> = HashMap::new();
    for record in records {
        let root = root_of(record);
        let at = *position.entry(root.clone()).or_insert_with(|| {
            let head = index[root.as_str()];
            trees.push(RootStats {
                id: head.id.clone(),
                outcome: head.outcome.clone(),
                kind: head.error_kind.clone(),
                task: head
                    .request
                    .as_ref()
                    .and_then(|r| r["task"].as_str())
                    .map(str::to_owned),
                runs: 0,
                children_failed: 0,
                attempts: 0,
                tokens: 0,
            });
            trees.len() - 1
        });
        let tree = &mut trees[at];
        tree.runs += 1;
        tree.attempts += record.attempts.len();
        tree.tokens += record.usage.input_tokens + record.usage.output_tokens;
        if record.id != tree.id && !matches!(record.outcome.as_str(), "passed" | "passed_with_debt")
        {
            tree.children_failed += 1;
        }
    }
    trees
}
