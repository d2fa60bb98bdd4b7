//! Serving an axum router on 127.0.0.1 on a runtime of its own, so a fake works the same from
//! sync tests, async tests and tests that make their own runtimes.

use std::net::SocketAddr;

/// A router served on a loopback port by a one-worker runtime; stops when dropped.
pub(crate) struct Served {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Served {
    /// Binds a free port on 127.0.0.1 and serves `app` there.
    ///
    /// # Panics
    /// When no runtime can be built or no loopback port bound: the test cannot run.
    pub(crate) fn start(app: axum::Router) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the fake server");
        // Bound here, so the address is known before the first request; a std listener needs no
        // runtime to bind, so this works inside async tests too.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let addr = listener.local_addr().expect("the local address");
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
            axum::serve(listener, app)
                .await
                .expect("the fake server runs");
        });
        Served {
            addr,
            runtime: Some(runtime),
        }
    }

    /// Returns the address served.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // Do not wait for handlers that never answer.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
