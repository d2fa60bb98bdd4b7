//! What a script may touch, per surface. Everything is off until a host turns it on.

use globset::{Glob, GlobMatcher};

/// Where a script runs; decides the wording of refusals and the defaults a host starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    /// An inline `verify` script (`run(result)`).
    Verifier,
    /// A policy hook (`handle(event, payload)`).
    Hook,
    /// A scripted delegate playing the model (`respond(request)`).
    Delegate,
    /// A tool implementation.
    Tool,
    /// A policy test file (`*_test.star`, run by `harness test`).
    Test,
}

impl Surface {
    /// Returns the surface's name as used in messages, e.g. `"verifier"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Verifier => "verifier",
            Surface::Hook => "hook",
            Surface::Delegate => "delegate",
            Surface::Tool => "tool",
            Surface::Test => "test",
        }
    }
}

/// The capabilities one surface is granted. [`Capabilities::default`] grants nothing.
///
/// Scripts never write files through the builtins: writing is only done by delegate tools.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    /// `fs.*` may read inside the workspace root.
    pub fs_read: bool,
    /// Hosts `http.*` may reach.
    pub hosts: HostAllowList,
    /// Programs `exec.run` may start, matched exactly against `argv[0]`.
    pub programs: Vec<String>,
    /// Environment variables `env.get` may read.
    pub env: Vec<String>,
}

impl Capabilities {
    /// Returns the capabilities a checking surface (verifier or hook) starts with: reading the
    /// workspace, nothing else.
    pub fn read_only() -> Self {
        Capabilities {
            fs_read: true,
            ..Capabilities::default()
        }
    }
}

/// The hosts scripts may reach over HTTP.
///
/// Entries are host names or IP addresses, optionally with `*` wildcards (`*.example.com`).
/// Loopback, private and link-local addresses are refused unless an entry names that host
/// exactly (no wildcard), so `*` never opens the local network.
#[derive(Debug, Clone, Default)]
pub struct HostAllowList {
    entries: Vec<HostEntry>,
}

#[derive(Debug, Clone)]
struct HostEntry {
    pattern: String,
    matcher: GlobMatcher,
}

/// An allow-list entry that is not a valid host pattern.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid host pattern {pattern:?}: {reason}")]
pub struct HostPatternError {
    pattern: String,
    reason: String,
}

impl HostAllowList {
    /// Builds an allow-list from host patterns.
    ///
    /// # Errors
    /// A pattern that is empty, contains a scheme, path or port, or is not a valid glob.
    pub fn new<I, S>(patterns: I) -> Result<Self, HostPatternError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut entries = Vec::new();
        for pattern in patterns {
            let pattern = pattern.as_ref().trim().to_ascii_lowercase();
            let error = |reason: &str| HostPatternError {
                pattern: pattern.clone(),
                reason: reason.to_owned(),
            };
            if pattern.is_empty() {
                return Err(error("empty host"));
            }
            if pattern.contains("://") || pattern.contains('/') {
                return Err(error("give a host name only, without scheme or path"));
            }
            let bare = pattern.trim_start_matches('[').trim_end_matches(']');
            if bare.parse::<std::net::Ipv6Addr>().is_err() && pattern.contains(':') {
                return Err(error("give a host name only, without a port"));
            }
            let matcher = Glob::new(bare)
                .map_err(|e| error(&e.to_string()))?
                .compile_matcher();
            entries.push(HostEntry {
                pattern: bare.to_owned(),
                matcher,
            });
        }
        Ok(HostAllowList { entries })
    }

    /// Returns true when `host` matches some entry.
    pub fn allows(&self, host: &str) -> bool {
        let host = normalise_host(host);
        self.entries.iter().any(|e| e.matcher.is_match(&host))
    }

    /// Returns true when an entry names `host` exactly, which is what opens loopback, private and
    /// link-local addresses.
    pub fn names_exactly(&self, host: &str) -> bool {
        let host = normalise_host(host);
        self.entries.iter().any(|e| e.pattern == host)
    }

    /// Returns true when no host is allowed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Returns the patterns, for messages.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.pattern.as_str())
    }
}

fn normalise_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        let list = HostAllowList::new(["api.github.com", "*.example.com", "127.0.0.1", "::1"])
            .expect("valid patterns");
        let cases = [
            ("api.github.com", true, true),
            ("API.GitHub.com.", true, true),
            ("github.com", false, false),
            ("a.example.com", true, false),
            ("example.com", false, false),
            ("127.0.0.1", true, true),
            ("[::1]", true, true),
        ];
        for (host, allowed, exact) in cases {
            assert_eq!(list.allows(host), allowed, "{host}");
            assert_eq!(list.names_exactly(host), exact, "{host}");
        }
    }

    #[test]
    fn bad_patterns() {
        for bad in ["", "http://x.com", "x.com/a", "x.com:80"] {
            assert!(HostAllowList::new([bad]).is_err(), "{bad:?}");
        }
    }
}
