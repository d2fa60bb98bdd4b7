//! Statement coverage of the policies a test run calls, in the shape `opa test --coverage`
//! reports it: per script, the lines on which a statement begins and those that ran.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use harness_builtins::starlark::eval::Evaluator;
use harness_builtins::starlark::syntax::AstModule;

/// Which statements of which scripts ran, across every evaluation of every sandbox whose
/// [`Mocked`](crate::Mocked) interceptor shares it. Lines are 1-based and counted in the script's own source.
#[derive(Debug, Default)]
pub struct Coverage {
    scripts: Mutex<HashMap<String, ScriptCoverage>>,
}

/// The statement lines of one script: those that can run and those that did. A line counts as
/// covered when a statement beginning on it ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptCoverage {
    /// Lines on which a statement begins (comments, blank lines, `pass` and docstrings are not
    /// statements that run).
    pub statements: BTreeSet<usize>,
    /// The statement lines that ran.
    pub covered: BTreeSet<usize>,
}

impl Coverage {
    /// An empty collector.
    pub fn new() -> Self {
        Coverage::default()
    }

    /// Returns what is known about each script, by script name.
    pub fn scripts(&self) -> HashMap<String, ScriptCoverage> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ScriptCoverage>> {
        self.scripts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records the statements of a script about to be evaluated.
    pub fn register(&self, name: &str, ast: &AstModule) {
        let mut lines = BTreeSet::new();
        statement_lines(ast, ast.statement(), &mut lines);
        self.lock()
            .entry(name.to_owned())
            .or_default()
            .statements
            .extend(lines);
    }

    /// Records the statements an evaluation ran (`eval` had coverage enabled).
    pub fn collect(&self, eval: &Evaluator) {
        let Ok(spans) = eval.coverage() else { return };
        let mut scripts = self.lock();
        for span in spans {
            if let Some(script) = scripts.get_mut(&span.file) {
                let line = span.span.begin.line + 1;
                if script.statements.contains(&line) {
                    script.covered.insert(line);
                }
            }
        }
    }
}

/// Collects the 1-based first lines of the statements that run: not `pass`, not a bare string
/// (a docstring), not a block of statements itself.
fn statement_lines(
    ast: &AstModule,
    stmt: &harness_builtins::starlark::syntax::ast::AstStmt,
    lines: &mut BTreeSet<usize>,
) {
    use harness_builtins::starlark::syntax::ast::{AstLiteral, Expr, Stmt};
    let skipped = match &stmt.node {
        Stmt::Statements(_) | Stmt::Pass => true,
        Stmt::Expression(expr) => matches!(&expr.node, Expr::Literal(AstLiteral::String(_))),
        _ => false,
    };
    if !skipped {
        lines.insert(ast.file_span(stmt.span).resolve_span().begin.line + 1);
    }
    stmt.visit_stmt(|child| statement_lines(ast, child, lines));
}
