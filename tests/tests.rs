//! End-to-end tests of the `harness` binary against loopback fakes. One binary, one module per
//! area; shared fixtures live in `util`.

mod util;

// `harness verify`: the verifier contract, exit codes, `--json`, args, sandbox and limits.
mod verify;
