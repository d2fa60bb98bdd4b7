//! The engine through its public API: JSON conversion, error kinds and locations, limits,
//! compile-once-call-many, threads, and the capabilities that gate `fs`, `env`, `http` and `exec`.

use std::path::Path;
use std::time::Duration;

use harness_builtins::{
    Capabilities, Engine, Error, ErrorKind, Limit, Limits, Sandbox, Script, Surface, Workspace,
};
use serde_json::{Value, json};

fn sandbox_in(dir: &Path, capabilities: Capabilities, limits: Limits) -> Sandbox {
    Sandbox::new(
        Surface::Verifier,
        Workspace::new(dir).expect("workspace"),
        capabilities,
        limits,
    )
}

/// Compiles `source` and calls `function` once with `args`, in a sandbox rooted at `dir`.
fn call_in(
    dir: &Path,
    capabilities: Capabilities,
    limits: Limits,
    source: &str,
    function: &str,
    args: &[&Value],
) -> Result<Value, Error> {
    let engine = Engine::new();
    let sandbox = sandbox_in(dir, capabilities, limits);
    let script = Script::compile(&engine, &sandbox, "test.star", source, &[])?;
    script.call(&sandbox, function, args).map(|out| out.value)
}

/// Calls `run()` of `source` in a throw-away workspace.
fn run(capabilities: Capabilities, limits: Limits, source: &str) -> Result<Value, Error> {
    let dir = tempfile::tempdir().expect("tempdir");
    call_in(dir.path(), capabilities, limits, source, "run", &[])
}

fn expect_kind(result: Result<Value, Error>, kind: ErrorKind) -> Error {
    match result {
        Ok(value) => panic!("expected an error of kind {kind:?}, got the value {value}"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "unexpected kind for error: {e}");
            e
        }
    }
}

/// The number a Rust JSON parser makes of `text` (exact, whatever its size).
fn number(text: &str) -> Value {
    serde_json::from_str(text).expect("a JSON number")
}

const IDENTITY: &str = "def identity(x):\n    return x\n";

// ---------------------------------------------------------------------------------------------
// JSON <-> Starlark conversion

#[test]
fn json_values_round_trip_exactly_through_an_identity_function() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let script =
        Script::compile(&engine, &sandbox, "identity.star", IDENTITY, &[]).expect("compile");
    let cases = [
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(-1),
        json!(i32::MAX),
        json!(i32::MIN),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(1.5),
        json!(-0.25),
        json!(2.0),
        json!(1e300),
        json!(0.1),
        json!(""),
        json!("héllo \"quoted\" \\ \n\t ☃"),
        json!([]),
        json!([1, [2, [3, []]], "x", null]),
        json!({}),
        json!({"a": 1, "b": [null, true, {"c": "d"}], "": 2.5}),
    ];
    for value in cases {
        let out = script
            .call(&sandbox, "identity", &[&value])
            .unwrap_or_else(|e| panic!("{value}: {e}"));
        assert_eq!(out.value, value, "round trip of {value}");
        assert!(out.logs.is_empty());
    }
}

#[test]
fn starlark_values_convert_to_json() {
    let source = r#"
def run():
    return {
        "big": 1180591620717411303424,
        "negative_big": -1180591620717411303425,
        "tuple": (1, "a"),
        "float": 2.0,
        "nested": {"k": [None, True]},
    }
"#;
    let value = run(Capabilities::default(), Limits::default(), source).expect("run");
    assert_eq!(value["big"], number("1180591620717411303424"));
    assert_eq!(value["negative_big"], number("-1180591620717411303425"));
    assert_eq!(value["tuple"], json!([1, "a"]));
    assert_eq!(value["float"].as_f64(), Some(2.0));
    assert_eq!(value["nested"], json!({"k": [null, true]}));
}

#[test]
fn arguments_are_starlark_values_of_the_matching_type() {
    let source = r#"
def check(i, f, s, l, d, n):
    return [type(i), i == 18446744073709551615, type(f), type(s), type(l), type(d), n == None]
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let args = [
        json!(u64::MAX),
        json!(0.5),
        json!("s"),
        json!([1]),
        json!({"k": 1}),
        json!(null),
    ];
    let args: Vec<&Value> = args.iter().collect();
    let value = call_in(
        dir.path(),
        Capabilities::default(),
        Limits::default(),
        source,
        "check",
        &args,
    )
    .expect("call");
    assert_eq!(
        value,
        json!(["int", true, "float", "string", "list", "dict", true])
    );
}

/// Integers beyond 64 bits must stay integers on the way in, as they do on the way out
/// (`starlark_values_convert_to_json`): as arguments, as predeclared globals, nested in lists and
/// dicts, and from `json.decode`.
#[test]
fn integers_beyond_64_bits_convert_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let source = r#"
def identity(x):
    return x

def check(x):
    return [type(x), str(x)]

def decode():
    return [type(json.decode("1180591620717411303425")), str(json.decode("1180591620717411303425"))]
"#;
    let script = Script::compile(&engine, &sandbox, "big.star", source, &[]).expect("compile");
    let long = format!("9{}", "0123456789".repeat(40)); // 401 digits: many limbs
    let negative_long = format!("-{long}");
    for text in [
        "1180591620717411303424",                // 2**70
        "-1180591620717411303425",               // -(2**70 + 1)
        "18446744073709551616",                  // u64::MAX + 1
        "-9223372036854775809",                  // i64::MIN - 1
        "1000000000000000000000000000000000000", // 10**36: limbs of zeros
        "123456789012345678901234567890123456789",
        &long,
        &negative_long,
    ] {
        let value = number(text);
        let out = script
            .call(&sandbox, "identity", &[&value])
            .expect("identity");
        assert_eq!(out.value, value, "round trip of {text}");
        let out = script.call(&sandbox, "check", &[&value]).expect("check");
        assert_eq!(out.value, json!(["int", text]));
    }
    let out = script.call(&sandbox, "decode", &[]).expect("decode");
    assert_eq!(out.value, json!(["int", "1180591620717411303425"]));
}

#[test]
fn big_integers_stay_exact_in_globals_containers_and_decoded_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let big = number("1180591620717411303424");
    let source = r#"
def run(doc):
    decoded = json.decode('{"n": [1180591620717411303424, 1.5, -3]}')
    return {
        "global": [type(BIG), BIG + 1],
        "nested": [type(doc["list"][0]), doc["list"][0] * 2, doc["dict"]["k"] - 1],
        "decoded": [type(decoded["n"][0]), decoded["n"][0] + 1, type(decoded["n"][1]), decoded["n"][2]],
        "float": type(doc["float"]),
    }
"#;
    let script =
        Script::compile(&engine, &sandbox, "big.star", source, &[("BIG", &big)]).expect("compile");
    let doc = json!({"list": [big.clone()], "dict": {"k": big.clone()}, "float": 1e21});
    let out = script.call(&sandbox, "run", &[&doc]).expect("run");
    assert_eq!(
        out.value,
        json!({
            "global": ["int", number("1180591620717411303425")],
            "nested": ["int", number("2361183241434822606848"), number("1180591620717411303423")],
            "decoded": ["int", number("1180591620717411303425"), "float", -3],
            "float": "float",
        })
    );
}

#[test]
fn returns_without_a_json_form_are_conversion_errors() {
    for (what, source) in [
        ("a function", "def run():\n    return run\n"),
        ("a lambda", "def run():\n    return lambda: 1\n"),
        ("a range", "def run():\n    return range(3)\n"),
    ] {
        // (The dialect has no `set` type, so there is no set to return.)
        let result = run(Capabilities::default(), Limits::default(), source);
        let e = expect_kind(result, ErrorKind::Conversion);
        assert_eq!(e.script(), "test.star", "{what}");
        assert!(e.message().contains("no JSON form"), "{what}: {e}");
    }
}

#[test]
fn unrepresentable_arguments_are_conversion_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let huge = number("1e400");
    let nested = json!({"ok": [1, huge.clone()]});
    for arg in [huge, nested] {
        expect_kind(
            call_in(
                dir.path(),
                Capabilities::default(),
                Limits::default(),
                IDENTITY,
                "identity",
                &[&arg],
            ),
            ErrorKind::Conversion,
        );
    }
}

#[test]
fn predeclared_globals_are_visible_and_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let args = json!({"expected": 3});
    let script = Script::compile(
        &engine,
        &sandbox,
        "args.star",
        "def run(n):\n    return n == args['expected']\n",
        &[("args", &args)],
    )
    .expect("compile");
    assert_eq!(
        script
            .call(&sandbox, "run", &[&json!(3)])
            .expect("call")
            .value,
        json!(true)
    );
    assert_eq!(
        script
            .call(&sandbox, "run", &[&json!(4)])
            .expect("call")
            .value,
        json!(false)
    );

    let huge = number("1e400");
    let e = Script::compile(
        &engine,
        &sandbox,
        "args.star",
        "x = 1\n",
        &[("args", &huge)],
    )
    .expect_err("unrepresentable global");
    assert_eq!(e.kind(), ErrorKind::Conversion);
}

// ---------------------------------------------------------------------------------------------
// Error kinds and locations

#[test]
fn syntax_errors_have_a_location() {
    let engine = Engine::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let source = "def run():\n    x = 1\n    return x +\n";
    let e = Script::compile(&engine, &sandbox, "broken.star", source, &[]).expect_err("syntax");
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert_eq!(e.script(), "broken.star");
    let at = e.location().expect("a syntax error has a location");
    assert_eq!(at.line, 3, "{e}");
    assert!(at.column >= 1, "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("broken.star:3:{}: ", at.column)),
        "{e}"
    );

    let e = Script::compile(
        &engine,
        &sandbox,
        "indent.star",
        "def run():\nreturn 1\n",
        &[],
    )
    .expect_err("syntax");
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert_eq!(e.location().map(|l| l.line), Some(2), "{e}");
}

#[test]
fn runtime_errors_have_a_location() {
    let source = "def run():\n    x = 1\n    return x + \"a\"\n";
    let e = expect_kind(
        run(Capabilities::default(), Limits::default(), source),
        ErrorKind::Runtime,
    );
    let at = e.location().expect("a runtime error has a location");
    assert_eq!((at.line, at.column), (3, 12), "{e}");

    let source = "def run():\n    fail(\"boom\")\n";
    let e = expect_kind(
        run(Capabilities::default(), Limits::default(), source),
        ErrorKind::Runtime,
    );
    assert_eq!(e.location().map(|l| l.line), Some(2), "{e}");
    assert!(e.message().contains("boom"), "{e}");
}

#[test]
fn top_level_runtime_errors_fail_the_compile() {
    let engine = Engine::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let e = Script::compile(&engine, &sandbox, "top.star", "x = 1\ny = x[0]\n", &[])
        .expect_err("runtime at top level");
    assert_eq!(e.kind(), ErrorKind::Runtime);
    assert_eq!(e.location().map(|l| l.line), Some(2), "{e}");
}

#[test]
fn missing_function_is_its_own_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let script = Script::compile(
        &engine,
        &sandbox,
        "s.star",
        "def handle():\n    return 1\n",
        &[],
    )
    .expect("compile");
    assert!(script.defines("handle"));
    assert!(!script.defines("run"));
    let e = script.call(&sandbox, "run", &[]).expect_err("no run");
    assert_eq!(e.kind(), ErrorKind::MissingFunction);
    assert_eq!(e.script(), "s.star");
}

// ---------------------------------------------------------------------------------------------
// Limits

const NESTED_LOOP: &str = "
def run():
    for i in range(100000):
        for j in range(100000):
            pass
";

#[test]
fn a_long_loop_hits_the_time_limit() {
    let limits = Limits {
        timeout: Duration::from_secs(1),
        max_steps: u64::MAX / 2,
        ..Limits::default()
    };
    let e = expect_kind(
        run(Capabilities::default(), limits, NESTED_LOOP),
        ErrorKind::Limit(Limit::Time),
    );
    assert_eq!(e.kind().as_str(), "limit");
    assert!(e.message().contains(Limit::Time.as_str()), "{e}");
}

#[test]
fn a_long_loop_hits_the_step_limit() {
    let limits = Limits {
        max_steps: 100_000,
        ..Limits::default()
    };
    let e = expect_kind(
        run(Capabilities::default(), limits, NESTED_LOOP),
        ErrorKind::Limit(Limit::Steps),
    );
    assert!(e.message().contains("max_steps"), "{e}");
}

#[test]
fn the_step_limit_applies_to_the_top_level_too() {
    let engine = Engine::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits {
        max_steps: 10_000,
        ..Limits::default()
    };
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), limits);
    let source = "for i in range(1000000):\n    pass\n";
    let e = Script::compile(&engine, &sandbox, "top.star", source, &[]).expect_err("limit");
    assert_eq!(e.kind(), ErrorKind::Limit(Limit::Steps), "{e}");
}

#[test]
fn a_growing_list_hits_the_heap_limit() {
    let limits = Limits {
        max_heap_bytes: 16 * 1024 * 1024,
        ..Limits::default()
    };
    let source = "
def run():
    xs = []
    for i in range(100000):
        for j in range(100000):
            xs.append(\"item %d %d\" % (i, j))
    return len(xs)
";
    expect_kind(
        run(Capabilities::default(), limits, source),
        ErrorKind::Limit(Limit::Heap),
    );
}

/// Starlark holds the evaluation heap plus the module's frozen heap (where the script's constants
/// live) against the heap limit; the classification counts the same, so a script whose
/// constants alone pass the limit is a heap limit, not a runtime error.
#[test]
fn constants_count_towards_the_heap_limit() {
    let limits = Limits {
        max_heap_bytes: 1024 * 1024,
        ..Limits::default()
    };
    let source = format!(
        "BIG = \"{}\"\nn = 0\nfor i in range(100000):\n    n += 1\n",
        "x".repeat(2 * 1024 * 1024)
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), limits);
    let e = Script::compile(&engine, &sandbox, "big.star", &source, &[]).expect_err("heap");
    assert_eq!(e.kind(), ErrorKind::Limit(Limit::Heap), "{e}");
}

#[test]
fn unbounded_recursion_hits_the_call_stack_limit() {
    let source = "
def down(n):
    return down(n + 1)

def run():
    return down(0)
";
    expect_kind(
        run(Capabilities::default(), Limits::default(), source),
        ErrorKind::Limit(Limit::CallStack),
    );
}

#[test]
fn limits_are_per_call() {
    // Each call gets a fresh budget: many calls that each use most of it all succeed.
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let limits = Limits {
        max_steps: 50_000,
        ..Limits::default()
    };
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), limits);
    let source =
        "def run():\n    n = 0\n    for i in range(30000):\n        n += 1\n    return n\n";
    let script = Script::compile(&engine, &sandbox, "s.star", source, &[]).expect("compile");
    for _ in 0..5 {
        assert_eq!(
            script.call(&sandbox, "run", &[]).expect("call").value,
            json!(30000)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Compile once, call many; threads

const DOUBLE: &str = "
def run(x):
    return {\"double\": x * 2, \"text\": \"n=%d\" % x}
";

#[test]
fn a_script_compiles_once_and_is_called_many_times() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let script = Script::compile(&engine, &sandbox, "double.star", DOUBLE, &[]).expect("compile");
    assert_eq!(script.name(), "double.star");
    for x in 0..100 {
        let out = script.call(&sandbox, "run", &[&json!(x)]).expect("call");
        assert_eq!(
            out.value,
            json!({"double": x * 2, "text": format!("n={x}")})
        );
    }
}

#[test]
fn frozen_globals_cannot_be_mutated_between_calls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let source = "SEEN = []\n\ndef run(x):\n    SEEN.append(x)\n    return len(SEEN)\n";
    let script = Script::compile(&engine, &sandbox, "s.star", source, &[]).expect("compile");
    let e = script
        .call(&sandbox, "run", &[&json!(1)])
        .expect_err("frozen");
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
}

#[test]
fn a_script_is_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Script>();
    send_sync::<Sandbox>();
    send_sync::<Engine>();

    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let script = Script::compile(&engine, &sandbox, "double.star", DOUBLE, &[]).expect("compile");
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4i64)
            .map(|t| {
                let (script, sandbox) = (&script, &sandbox);
                scope.spawn(move || {
                    for i in 0..50i64 {
                        let x = t * 1000 + i;
                        let out = script.call(sandbox, "run", &[&json!(x)]).expect("call");
                        assert_eq!(out.value["double"], json!(x * 2));
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("thread panicked");
        }
    });
}

#[test]
fn logs_are_returned_with_the_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let source = "def run(x):\n    log(\"x is %d\" % x)\n    print(\"printed\", x)\n    return x\n";
    let script = Script::compile(&engine, &sandbox, "s.star", source, &[]).expect("compile");
    let out = script.call(&sandbox, "run", &[&json!(7)]).expect("call");
    assert_eq!(out.value, json!(7));
    assert_eq!(out.logs, vec!["x is 7".to_owned(), "printed 7".to_owned()]);
    // A second call starts with no lines.
    let out = script.call(&sandbox, "run", &[&json!(8)]).expect("call");
    assert_eq!(out.logs, vec!["x is 8".to_owned(), "printed 8".to_owned()]);
}

#[test]
fn logs_survive_a_failed_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let limits = Limits {
        max_steps: 10_000,
        ..Limits::default()
    };
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), limits);
    let source = "
def fails():
    log(\"before the failure\")
    print(\"printed\", 1)
    fail(\"boom\")

def loops():
    log(\"looping\")
    for i in range(1000000):
        pass

def returns_a_function():
    log(\"returning\")
    return returns_a_function
";
    let script = Script::compile(&engine, &sandbox, "s.star", source, &[]).expect("compile");

    let e = script.call(&sandbox, "fails", &[]).expect_err("fail()");
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    assert_eq!(e.logs(), ["before the failure", "printed 1"]);
    // The lines are not part of the message.
    assert!(!e.to_string().contains("before the failure"), "{e}");

    let e = script.call(&sandbox, "loops", &[]).expect_err("step limit");
    assert_eq!(e.kind(), ErrorKind::Limit(Limit::Steps), "{e}");
    assert_eq!(e.logs(), ["looping"]);

    let e = script
        .call(&sandbox, "returns_a_function", &[])
        .expect_err("no JSON form");
    assert_eq!(e.kind(), ErrorKind::Conversion, "{e}");
    assert_eq!(e.logs(), ["returning"]);

    // Failures before the script runs have no lines.
    let e = script.call(&sandbox, "missing", &[]).expect_err("missing");
    assert_eq!(e.kind(), ErrorKind::MissingFunction, "{e}");
    assert!(e.logs().is_empty());
}

#[test]
fn logs_survive_a_failed_top_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::new();
    let sandbox = sandbox_in(dir.path(), Capabilities::default(), Limits::default());
    let source = "log(\"loading\")\nprint(\"printed\")\nfail(\"broken at load\")\n";
    let e = Script::compile(&engine, &sandbox, "top.star", source, &[]).expect_err("fail()");
    assert_eq!(e.kind(), ErrorKind::Runtime, "{e}");
    assert_eq!(e.logs(), ["loading", "printed"]);

    let e = Script::compile(&engine, &sandbox, "top.star", "x = (\n", &[]).expect_err("syntax");
    assert_eq!(e.kind(), ErrorKind::Syntax, "{e}");
    assert!(e.logs().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Capabilities

#[test]
fn default_capabilities_grant_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), "a").expect("write");
    for call in [
        "fs.read(\"a.txt\")",
        "fs.exists(\"a.txt\")",
        "fs.stat(\"a.txt\")",
        "fs.list(\".\")",
        "fs.glob(\"*\")",
        "fs.sha256(\"a.txt\")",
        "env.get(\"PATH\")",
        "http.get(\"https://example.com/\")",
        "exec.run([\"echo\", \"hi\"])",
    ] {
        let source = format!("def run():\n    return {call}\n");
        let result = call_in(
            dir.path(),
            Capabilities::default(),
            Limits::default(),
            &source,
            "run",
            &[],
        );
        let e = expect_kind(result, ErrorKind::Sandbox);
        assert_eq!(e.location().map(|l| l.line), Some(2), "{call}: {e}");
    }
}

#[test]
fn read_only_capabilities_read_the_workspace() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), "contents").expect("write");
    let value = call_in(
        dir.path(),
        Capabilities::read_only(),
        Limits::default(),
        "def run():\n    return fs.read(\"a.txt\")\n",
        "run",
        &[],
    )
    .expect("read");
    assert_eq!(value, json!("contents"));
}

#[test]
fn a_sandbox_refusal_caught_nowhere_is_still_a_refusal() {
    // Starlark has no try/except, but a refusal must not turn into a plain runtime error when a
    // later statement fails for another reason either.
    let dir = tempfile::tempdir().expect("tempdir");
    let source = "def run():\n    fs.read(\"../x\")\n    return 1\n";
    let e = expect_kind(
        call_in(
            dir.path(),
            Capabilities::read_only(),
            Limits::default(),
            source,
            "run",
            &[],
        ),
        ErrorKind::Sandbox,
    );
    assert!(e.message().contains("escapes the workspace root"), "{e}");
}

#[test]
fn files_over_the_read_limit_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("big.txt"), "x".repeat(2000)).expect("write");
    std::fs::write(dir.path().join("small.txt"), "x".repeat(1000)).expect("write");
    let limits = Limits {
        max_read_bytes: 1000,
        ..Limits::default()
    };
    let read = |name: &str| {
        call_in(
            dir.path(),
            Capabilities::read_only(),
            limits.clone(),
            &format!("def run():\n    return len(fs.read(\"{name}\"))\n"),
            "run",
            &[],
        )
    };
    assert_eq!(read("small.txt").expect("at the limit"), json!(1000));
    expect_kind(read("big.txt"), ErrorKind::Runtime);
}

#[cfg(unix)]
#[test]
fn symlinks_leaving_the_workspace_are_refused() {
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret.txt"), "secret").expect("write");
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path();
    std::fs::create_dir(ws.join("sub")).expect("mkdir");
    std::fs::write(ws.join("sub/ok.txt"), "ok").expect("write");
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.join("leak.txt"))
        .expect("symlink");
    std::os::unix::fs::symlink(outside.path(), ws.join("outside")).expect("symlink");
    std::os::unix::fs::symlink("sub/ok.txt", ws.join("inner.txt")).expect("symlink");

    let call = |expr: &str| {
        call_in(
            ws,
            Capabilities::read_only(),
            Limits::default(),
            &format!("def run():\n    return {expr}\n"),
            "run",
            &[],
        )
    };
    for expr in [
        "fs.read(\"leak.txt\")",
        "fs.read(\"outside/secret.txt\")",
        "fs.exists(\"outside/secret.txt\")",
        "fs.sha256(\"leak.txt\")",
        "fs.list(\"outside\")",
    ] {
        expect_kind(call(expr), ErrorKind::Sandbox);
    }
    // A link that stays inside is followed.
    assert_eq!(call("fs.read(\"inner.txt\")").expect("inside"), json!("ok"));
    // Globbing does not follow links, so it never lists what is behind one.
    let found = call("fs.glob(\"**\")").expect("glob");
    let found: Vec<&str> = found
        .as_array()
        .expect("list")
        .iter()
        .map(|v| v.as_str().expect("string"))
        .collect();
    assert!(!found.iter().any(|p| p.contains("secret")), "{found:?}");
}

fn exec_caps() -> Capabilities {
    Capabilities {
        programs: vec!["echo".into(), "sh".into()],
        ..Capabilities::default()
    }
}

#[test]
fn exec_refuses_programs_that_are_not_allow_listed() {
    for argv in ["[\"ls\"]", "[\"/bin/echo\", \"hi\"]", "[\"ECHO\"]"] {
        let source = format!("def run():\n    return exec.run({argv})\n");
        expect_kind(
            run(exec_caps(), Limits::default(), &source),
            ErrorKind::Sandbox,
        );
    }
}

#[cfg(unix)]
#[test]
fn exec_runs_allow_listed_programs() {
    let value = run(
        exec_caps(),
        Limits::default(),
        "def run():\n    return exec.run([\"echo\", \"hello\", \"world\"])\n",
    )
    .expect("echo");
    assert_eq!(value["exit_code"], json!(0));
    assert_eq!(value["stdout"], json!("hello world\n"));
    assert_eq!(value["stderr"], json!(""));
    assert_eq!(value["timed_out"], json!(false));
    assert!(value["duration_ms"].is_u64(), "{value}");

    let value = run(
        exec_caps(),
        Limits::default(),
        "def run():\n    return exec.run([\"sh\", \"-c\", \"echo oops >&2; exit 3\"])\n",
    )
    .expect("sh");
    assert_eq!(value["exit_code"], json!(3));
    assert_eq!(value["stdout"], json!(""));
    assert_eq!(value["stderr"], json!("oops\n"));
}

#[cfg(unix)]
#[test]
fn exec_runs_in_the_workspace_and_in_cwd_inside_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    let root = dir.path().canonicalize().expect("canonical");
    let source = "
def run():
    return [exec.run([\"sh\", \"-c\", \"pwd -P\"])[\"stdout\"],
            exec.run([\"sh\", \"-c\", \"pwd -P\"], cwd = \"sub\")[\"stdout\"]]
";
    let value = call_in(
        dir.path(),
        exec_caps(),
        Limits::default(),
        source,
        "run",
        &[],
    )
    .expect("pwd");
    assert_eq!(
        value,
        json!([
            format!("{}\n", root.display()),
            format!("{}\n", root.join("sub").display())
        ])
    );
}

#[cfg(unix)]
#[test]
fn exec_does_not_pass_other_variables_to_programs() {
    // Programs get a minimal environment plus the variables allow-listed for `env.get`; any
    // other variable of the host (here CARGO_PKG_NAME, which `cargo test` sets) is withheld.
    let value = std::env::var("CARGO_PKG_NAME").expect("cargo test sets CARGO_PKG_NAME");
    let source =
        "def run():\n    return exec.run([\"sh\", \"-c\", \"echo \\\"[$CARGO_PKG_NAME]\\\"\"])\n";
    let out = run(exec_caps(), Limits::default(), source).expect("sh");
    assert_eq!(out["stdout"], json!("[]\n"));

    let caps = Capabilities {
        env: vec!["CARGO_PKG_NAME".into()],
        ..exec_caps()
    };
    let out = run(caps, Limits::default(), source).expect("sh");
    assert_eq!(out["stdout"], json!(format!("[{value}]\n")));
}

#[cfg(unix)]
#[test]
fn exec_kills_a_program_that_runs_past_its_timeout() {
    let source = "def run():\n    return exec.run([\"sh\", \"-c\", \"sleep 5\"], timeout = 1)\n";
    let value = run(exec_caps(), Limits::default(), source).expect("sh");
    assert_eq!(value["timed_out"], json!(true), "{value}");
    assert_eq!(value["exit_code"], json!(null), "{value}");
}

#[test]
fn exec_refuses_cwd_outside_the_workspace() {
    for cwd in ["..", "/", "sub/../.."] {
        let source = format!("def run():\n    return exec.run([\"echo\"], cwd = \"{cwd}\")\n");
        expect_kind(
            run(exec_caps(), Limits::default(), &source),
            ErrorKind::Sandbox,
        );
    }
}

#[test]
fn exec_of_a_missing_allow_listed_program_is_a_runtime_error() {
    let caps = Capabilities {
        programs: vec!["harness-no-such-program".into()],
        ..Capabilities::default()
    };
    let source = "def run():\n    return exec.run([\"harness-no-such-program\"])\n";
    expect_kind(run(caps, Limits::default(), source), ErrorKind::Runtime);
}

#[test]
fn env_reads_only_allow_listed_variables() {
    let caps = Capabilities {
        env: vec!["CARGO_PKG_NAME".into(), "HARNESS_TEST_NEVER_SET".into()],
        ..Capabilities::default()
    };
    let source = "
def run():
    return [env.get(\"CARGO_PKG_NAME\"), env.get(\"HARNESS_TEST_NEVER_SET\"),
            env.get(\"HARNESS_TEST_NEVER_SET\", default = \"d\")]
";
    let value = std::env::var("CARGO_PKG_NAME").expect("cargo test sets CARGO_PKG_NAME");
    assert_eq!(
        run(caps.clone(), Limits::default(), source).expect("env"),
        json!([value, null, "d"])
    );
    expect_kind(
        run(
            caps,
            Limits::default(),
            "def run():\n    return env.get(\"PATH\")\n",
        ),
        ErrorKind::Sandbox,
    );
}

/// Whether a script waits on the outside world comes from the builtins it names, as the module
/// registry marks them, not from its text: a word in a comment or a string is not a call.
#[test]
fn waiting_scripts_are_told_by_the_modules_they_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sandbox = sandbox_in(dir.path(), Capabilities::read_only(), Limits::default());
    let engine = Engine::new();
    let compile =
        |source: &str| Script::compile(&engine, &sandbox, "s.star", source, &[]).expect("compiles");
    for (source, waits) in [
        (
            "def run(x):\n    # no fs, http or exec here\n    return 'fs http exec'\n",
            false,
        ),
        (
            "def run(x):\n    return json.encode(re.match('a', 'a'))\n",
            false,
        ),
        ("def run(x):\n    return fs.exists('a.txt')\n", true),
        ("def run(x):\n    get = http.get\n    return 1\n", true),
        ("def run(x):\n    return [exec for _ in range(1)]\n", true),
        ("def run(x):\n    return (lambda: fs)()\n", true),
    ] {
        assert_eq!(compile(source).needs_thread(), waits, "{source}");
    }
}

#[test]
fn small_pure_scripts_run_inline_and_others_defer_without_effect() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), "a").expect("write");
    let sandbox = sandbox_in(dir.path(), Capabilities::read_only(), Limits::default());
    let engine = Engine::new();
    let compile =
        |source: &str| Script::compile(&engine, &sandbox, "s.star", source, &[]).expect("compiles");
    let arg = json!({"n": 2});

    let pure = compile("def run(x):\n    log('pure')\n    return x['n'] * 21\n");
    assert!(!pure.needs_thread());
    let out = pure
        .call_inline(&sandbox, "run", &[&arg])
        .expect("runs inline");
    assert_eq!(out.value, json!(42));
    assert_eq!(out.logs, vec!["pure".to_owned()]);

    // A script that reads files never runs inline, so it has no effect before the real call.
    let reads = compile("def run(x):\n    return fs.read('a.txt')\n");
    assert!(reads.needs_thread());
    let deferred = reads
        .call_inline(&sandbox, "run", &[&arg])
        .expect_err("defers");
    assert_eq!(deferred.kind(), ErrorKind::WouldBlock);
    assert_eq!(
        reads.call(&sandbox, "run", &[&arg]).expect("runs").value,
        json!("a")
    );

    // A pure script that runs past the inline budget gives up and succeeds on a real call.
    let long = compile(
        "def run(x):\n    t = 0\n    for i in range(3000000):\n        t += 1\n    return t\n",
    );
    assert!(!long.needs_thread());
    let deferred = long
        .call_inline(&sandbox, "run", &[&arg])
        .expect_err("defers");
    assert_eq!(deferred.kind(), ErrorKind::WouldBlock);
    assert_eq!(
        long.call(&sandbox, "run", &[&arg]).expect("runs").value,
        json!(3000000)
    );

    // Errors of the script itself are reported inline as they would be on a thread.
    let broken = compile("def run(x):\n    return x['missing']\n");
    let error = broken
        .call_inline(&sandbox, "run", &[&arg])
        .expect_err("fails");
    assert_eq!(error.kind(), ErrorKind::Runtime);
}
