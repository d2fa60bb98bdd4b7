use harness_builtins::*;
use serde_json::json;

#[tokio::test]
async fn probe_current_thread() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let r = tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::new();
        let caps = Capabilities {
            hosts: HostAllowList::new(["127.0.0.1"]).unwrap(),
            ..Capabilities::default()
        };
        let sb = Sandbox::new(
            Surface::Verifier,
            Workspace::new(dir.path()).unwrap(),
            caps,
            Default::default(),
        );
        let s = Script::compile(
            &engine,
            &sb,
            "p.star",
            "def run(u):\n    return http.get(u, timeout = 3)\n",
            &[],
        )
        .unwrap();
        s.call(&sb, "run", &[&json!(format!("http://{addr}/"))])
    })
    .await
    .unwrap();
    eprintln!("PROBE current {:?}", r.map(|o| o.value));
}
