//! Parsing, freezing and calling Starlark scripts under limits and capabilities.

use starlark::environment::{FrozenModule, Globals, GlobalsBuilder, LibraryExtension, Module};
use starlark::eval::Evaluator;
use starlark::syntax::{AstModule, Dialect};
use starlark::values::Value;

use crate::error::{Error, ErrorKind, Location, first_line, location};
use crate::host::Host;
use crate::json_value::{alloc_json, check_json};
use crate::modules;
use crate::sandbox::Sandbox;

/// The builtin globals a family of scripts sees. Build one per process (or per surface) and share
/// it: building registers every module.
pub struct Engine {
    globals: Globals,
}

impl Engine {
    /// Builds the standard globals: the Starlark core plus `fs`, `http`, `json`, `re`, `hash`,
    /// `time`, `env`, `exec`, `log` and `print` (which also logs).
    pub fn new() -> Self {
        Self::with_extension(|_| {})
    }

    /// Builds the standard globals plus whatever `extend` registers (a surface's own functions,
    /// such as the hook decisions `allow()`, `block()` and `modify()`).
    pub fn with_extension(extend: impl FnOnce(&mut GlobalsBuilder)) -> Self {
        let mut builder = GlobalsBuilder::extended_by(&[
            LibraryExtension::StructType,
            LibraryExtension::Print,
            LibraryExtension::Map,
            LibraryExtension::Filter,
            LibraryExtension::Typing,
        ]);
        modules::register(&mut builder);
        extend(&mut builder);
        Engine {
            globals: builder.build(),
        }
    }
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

/// What a successful call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    /// The function's return value, converted to JSON.
    pub value: serde_json::Value,
    /// Lines the script passed to `log()` or `print()`, in order.
    pub logs: Vec<String>,
}

/// A parsed and evaluated script whose top-level definitions are frozen, ready to be called many
/// times (from any thread) without parsing again.
pub struct Script {
    name: String,
    module: FrozenModule,
    needs_thread: bool,
}

/// How long an inline call may run on the caller's thread before it gives up.
pub const INLINE_BUDGET: std::time::Duration = std::time::Duration::from_millis(1);

/// Returns true when the script names a builtin namespace that waits on the outside world (the
/// module registry says which: `fs`, `http`, `exec`); one that names none is pure computation,
/// which may run inline on an async worker within its budget.
fn names_a_waiting_module(ast: &AstModule) -> bool {
    use starlark::syntax::ast::{AstExpr, Expr};
    fn walk(expr: &AstExpr, found: &mut bool) {
        if let Expr::Identifier(ident) = &expr.node {
            *found |= modules::waits(&ident.node.ident);
        }
        if !*found {
            expr.node.visit_expr(|child| walk(child, found));
        }
    }
    let mut found = false;
    ast.statement().visit_expr(|expr| walk(expr, &mut found));
    found
}

/// Emits a call's log lines as events on the current span.
fn emit_logs(surface: &str, logs: &[String]) {
    for line in logs {
        tracing::info!(target: "harness::script", surface, "{line}");
    }
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Script")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn dialect() -> Dialect {
    Dialect {
        enable_top_level_stmt: true,
        enable_f_strings: true,
        ..Dialect::Extended
    }
}

impl Script {
    /// Parses `source` (named `name` in messages), binds `predeclared` values as globals (for
    /// example a verifier's `args`), runs its top level under the sandbox's limits and freezes it.
    ///
    /// # Errors
    /// [`ErrorKind::Syntax`] when it does not parse; [`ErrorKind::Runtime`], [`ErrorKind::Limit`]
    /// or [`ErrorKind::Sandbox`] when its top level fails; [`ErrorKind::Conversion`] when a
    /// predeclared value cannot become a Starlark value.
    pub fn compile(
        engine: &Engine,
        sandbox: &Sandbox,
        name: &str,
        source: &str,
        predeclared: &[(&str, &serde_json::Value)],
    ) -> Result<Script, Error> {
        let ast = AstModule::parse(name, source.to_owned(), &dialect())
            .map_err(|e| Error::new(ErrorKind::Syntax, name, first_line(&e)).at(location(&e)))?;
        let needs_thread = names_a_waiting_module(&ast);
        for (key, value) in predeclared {
            check_json(value).map_err(|m| {
                Error::new(ErrorKind::Conversion, name, format!("global `{key}`: {m}"))
            })?;
        }
        if let Some(interceptor) = sandbox.interceptor.as_ref().filter(|i| i.watches()) {
            interceptor.parsed(name, &ast);
        }
        let host = Host::new(sandbox);
        let module = contained(name, || {
            Module::with_temp_heap(|module| -> Result<FrozenModule, Error> {
                for (key, value) in predeclared {
                    module.set(key, alloc_json(module.heap(), value));
                }
                {
                    let mut eval = Evaluator::new(&module);
                    host.configure(&mut eval, name)?;
                    let evaluated = eval.eval_module(ast, &engine.globals);
                    host.evaluated(&eval);
                    if let Err(e) = evaluated {
                        return Err(host.classify(e, &eval, name));
                    }
                }
                // Freezing walks every global by recursion: bound them first.
                for global in module.names() {
                    if let Some(value) = module.get(&global) {
                        host.check_leaving(name, &format!("global `{}`", global.as_str()), value)?;
                    }
                }
                module.freeze().map_err(|e| {
                    Error::new(
                        ErrorKind::Runtime,
                        name,
                        format!("cannot freeze module: {e:?}"),
                    )
                })
            })
        })
        .map_err(|e| {
            let logs = host.logs.take();
            emit_logs(sandbox.surface.as_str(), &logs);
            e.with_logs(logs)
        })?;
        emit_logs(sandbox.surface.as_str(), &host.logs.borrow());
        Ok(Script {
            name: name.to_owned(),
            module,
            needs_thread,
        })
    }

    /// Returns the name the script was compiled with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Returns the names of the script's top-level functions (`def`s), in the order the module
    /// bound them.
    pub fn functions(&self) -> Vec<String> {
        self.module
            .names()
            .filter(|name| {
                self.module
                    .get(name.as_str())
                    .is_ok_and(|value| value.value().get_type() == "function")
            })
            .map(|name| name.as_str().to_owned())
            .collect()
    }

    /// Returns true when the script defines a top-level value called `function`.
    pub fn defines(&self, function: &str) -> bool {
        self.module.get(function).is_ok()
    }

    /// Whether the top-level `function` can be called with `n` positional arguments, and if not,
    /// how it is declared (`run()`, `handle(payload)`): `Ok(())`, or `Err(what it takes)`. A
    /// value that is no function, or one whose parameters cannot be read, is taken as it is
    /// (the call says what is wrong).
    pub fn takes(&self, function: &str, n: usize) -> std::result::Result<(), String> {
        use starlark::docs::{DocItem, DocMember};
        let Ok(value) = self.module.get(function) else {
            return Ok(());
        };
        let DocItem::Member(DocMember::Function(doc)) = value.value().documentation() else {
            return Ok(());
        };
        let params = &doc.params;
        let positional: Vec<&starlark::docs::DocParam> =
            params.pos_only.iter().chain(&params.pos_or_named).collect();
        let required = positional
            .iter()
            .filter(|p| p.default_value.is_none())
            .count()
            + params
                .named_only
                .iter()
                .filter(|p| p.default_value.is_none())
                .count();
        let most = if params.args.is_some() {
            usize::MAX
        } else {
            positional.len()
        };
        if required <= n && n <= most {
            return Ok(());
        }
        let names: Vec<&str> = positional.iter().map(|p| p.name.as_str()).collect();
        Err(format!("{function}({})", names.join(", ")))
    }

    /// Calls the top-level function `function` with `args` converted from JSON, under the
    /// sandbox's limits, and converts what it returns back to JSON.
    ///
    /// This blocks the calling thread for as long as the script runs (up to its time budget):
    /// call it from a blocking thread (`tokio::task::spawn_blocking`), never from an async task.
    ///
    /// # Errors
    /// [`ErrorKind::MissingFunction`] when there is no such function; [`ErrorKind::Runtime`],
    /// [`ErrorKind::Limit`] or [`ErrorKind::Sandbox`] when the call fails;
    /// [`ErrorKind::Conversion`] when an argument or the returned value has no JSON form.
    pub fn call(
        &self,
        sandbox: &Sandbox,
        function: &str,
        args: &[&serde_json::Value],
    ) -> Result<CallOutput, Error> {
        self.invoke(Host::new(sandbox), function, args)
    }

    /// Returns true when the script uses builtins that wait on the outside world (`fs`, `http`,
    /// `exec`), so it never runs inline.
    pub fn needs_thread(&self) -> bool {
        self.needs_thread
    }

    /// Calls `function` on the caller's thread when that is cheap: the script must not use `fs`,
    /// `http` or `exec`, and must finish within [`INLINE_BUDGET`]. Otherwise it gives up with
    /// [`ErrorKind::WouldBlock`], having had no effect, and the caller runs [`Script::call`] on
    /// a blocking thread. This lets async hosts skip a thread hand-off for the common small,
    /// pure script without ever blocking their workers for long.
    ///
    /// # Errors
    /// [`ErrorKind::WouldBlock`] as above; otherwise as [`Script::call`].
    pub fn call_inline(
        &self,
        sandbox: &Sandbox,
        function: &str,
        args: &[&serde_json::Value],
    ) -> Result<CallOutput, Error> {
        if self.needs_thread {
            return Err(Error::new(
                ErrorKind::WouldBlock,
                self.name.as_str(),
                "the script uses fs, http or exec",
            ));
        }
        self.invoke(Host::inline(sandbox, INLINE_BUDGET), function, args)
    }

    fn invoke(
        &self,
        host: Host<'_>,
        function: &str,
        args: &[&serde_json::Value],
    ) -> Result<CallOutput, Error> {
        let name = self.name.as_str();
        let value = self.evaluate(&host, function, args, |e, eval| {
            host.classify(e, eval, name)
        });
        let logs = host.logs.into_inner();
        match value {
            Ok(value) => {
                emit_logs(host.sandbox.surface.as_str(), &logs);
                Ok(CallOutput { value, logs })
            }
            // Given up inline: the blocking re-run will log again.
            Err(e) if e.kind() == ErrorKind::WouldBlock => Err(e),
            Err(e) => {
                emit_logs(host.sandbox.surface.as_str(), &logs);
                Err(e.with_logs(logs))
            }
        }
    }

    /// Runs the test function `function` (no arguments) and tells how it ended — passed, failed
    /// (`fail()` was called, or it returned `False`), or broken — with the lines it logged.
    pub fn run_test(&self, sandbox: &Sandbox, function: &str) -> (TestOutcome, Vec<String>) {
        let host = Host::new(sandbox);
        let name = self.name.as_str();
        let called = self.evaluate(&host, function, &[], |e, eval| {
            // `fail()` (and a host's assertion globals) raise `starlark::ErrorKind::Fail`.
            if let starlark::ErrorKind::Fail(message) = e.kind() {
                let message = message.to_string().trim().to_owned();
                return Raw::Failed(message, location(&e));
            }
            Raw::Broken(host.classify(e, eval, name))
        });
        let outcome = match called {
            Ok(serde_json::Value::Bool(false)) => TestOutcome::Failed {
                message: format!("{function} returned False"),
                location: None,
            },
            Ok(_) => TestOutcome::Passed,
            Err(Raw::Failed(message, location)) => TestOutcome::Failed { message, location },
            Err(Raw::Broken(e)) => TestOutcome::Broken(e),
        };
        (outcome, host.logs.into_inner())
    }

    /// Evaluates `function(*args)` in a fresh module under `host`; an error the script raised
    /// goes through `raised` (with the evaluator, to tell limits apart), any other through
    /// [`From<Error>`].
    fn evaluate<E: From<Error>>(
        &self,
        host: &Host<'_>,
        function: &str,
        args: &[&serde_json::Value],
        raised: impl FnOnce(starlark::Error, &Evaluator) -> E,
    ) -> Result<serde_json::Value, E> {
        let name = self.name.as_str();
        let func = self.module.get(function).map_err(|_| {
            Error::new(
                ErrorKind::MissingFunction,
                name,
                format!("the script does not define `{function}` (define `def {function}(...):`)"),
            )
        })?;
        for (i, value) in args.iter().enumerate() {
            check_json(value).map_err(|m| {
                Error::new(
                    ErrorKind::Conversion,
                    name,
                    format!("argument {}: {m}", i + 1),
                )
            })?;
        }
        contained(name, || {
            Module::with_temp_heap(|module| -> Result<Result<serde_json::Value, E>, Error> {
                let heap = module.heap();
                let func = heap.access_owned_frozen_value(&func);
                let args: Vec<Value> = args.iter().map(|a| alloc_json(heap, a)).collect();
                let mut eval = Evaluator::new(&module);
                host.configure(&mut eval, name)?;
                let called = eval.eval_function(func, &args, &[]);
                host.evaluated(&eval);
                Ok(match called {
                    Ok(value) => {
                        host.check_leaving(name, &format!("the result of `{function}`"), value)?;
                        Ok(value.to_json_value().map_err(|e| {
                            Error::new(
                                ErrorKind::Conversion,
                                name,
                                format!(
                                    "`{function}` returned a {} that has no JSON form: {e}",
                                    value.get_type()
                                ),
                            )
                        })?)
                    }
                    Err(e) => Err(raised(e, &eval)),
                })
            })
        })?
    }
}

/// How one test function ended ([`Script::run_test`]).
#[derive(Debug, Clone)]
pub enum TestOutcome {
    /// It returned (anything but `False`).
    Passed,
    /// An assertion did not hold, `fail(...)` was called, or it returned `False`.
    Failed {
        /// What did not hold.
        message: String,
        /// Where in the test file.
        location: Option<Location>,
    },
    /// Something broke: the test or the policy under test raised an error, hit a limit, reached
    /// an unmocked URL, or a helper could not load its file.
    Broken(Error),
}

/// How a test function's call ended, before it is told apart.
enum Raw {
    Failed(String, Option<Location>),
    Broken(Error),
}

impl From<Error> for Raw {
    fn from(e: Error) -> Self {
        Raw::Broken(e)
    }
}

thread_local! {
    /// How many [`contained`] evaluations this thread is inside.
    static CONTAINING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Installs (once) a panic hook that says nothing of a panic [`contained`] is about to turn into
/// the script's error — the user sees that error, not a Rust backtrace — and leaves every other
/// panic to the hook that was there before.
fn quiet_when_contained() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CONTAINING.with(std::cell::Cell::get) == 0 {
                previous(info);
            } else {
                #[cfg(test)]
                tests::QUIETED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }));
    });
}

/// Runs `work` (an evaluation of script `name`) so that a panic inside the interpreter — a
/// string past its 4 GiB length limit, an internal assertion — is an error of the script, never
/// a crash of the process. The evaluation's heap is dropped with it.
fn contained<T>(name: &str, work: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    quiet_when_contained();
    CONTAINING.with(|depth| depth.set(depth.get() + 1));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    CONTAINING.with(|depth| depth.set(depth.get() - 1));
    caught.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "an internal error".to_owned());
        Err(if what.contains("overflow") || what.contains("capacity") {
            Error::new(
                ErrorKind::Limit(crate::error::Limit::Heap),
                name,
                format!(
                    "limit max_heap_bytes hit: one operation built a value larger than the interpreter allows ({what})"
                ),
            )
        } else {
            Error::new(
                ErrorKind::Runtime,
                name,
                format!("the interpreter failed: {what}"),
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Panics the hook kept quiet.
    pub(super) static QUIETED: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn a_panic_inside_the_interpreter_is_an_error_of_the_script() {
        let before = QUIETED.load(std::sync::atomic::Ordering::Relaxed);
        let err = contained::<()>("s.star", || panic!("len overflow")).expect_err("contained");
        assert_eq!(
            err.kind(),
            ErrorKind::Limit(crate::error::Limit::Heap),
            "{err}"
        );
        let err =
            contained::<()>("s.star", || panic!("{}", String::from("bad state"))).expect_err("x");
        assert_eq!(err.kind(), ErrorKind::Runtime, "{err}");
        assert!(err.to_string().contains("bad state"), "{err}");
        // Neither printed a Rust panic message: the script's error says it all.
        assert!(QUIETED.load(std::sync::atomic::Ordering::Relaxed) >= before + 2);
    }
}
