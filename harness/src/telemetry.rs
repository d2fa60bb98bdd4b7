//! Span and attribute names, in one place (DESIGN §4.8). OpenTelemetry semantic-convention names
//! are used where one exists.

/// One delegation, from request to outcome.
pub const SPAN_DELEGATION: &str = "delegation.execute";
/// One attempt of the Ralph loop.
pub const SPAN_ATTEMPT: &str = "delegation.attempt";
/// One tool call.
pub const SPAN_TOOL: &str = "gen_ai.execute_tool";
/// The inline verifier.
pub const SPAN_VERIFY: &str = "verify.inline";

/// Attribute names.
pub mod attr {
    /// The delegation id.
    pub const DELEGATION_ID: &str = "delegation.id";
    /// The delegate kind.
    pub const DELEGATION_KIND: &str = "delegation.kind";
    /// Attempts made.
    pub const VERIFY_ATTEMPTS: &str = "delegation.verify_attempts";
    /// Whether verification passed.
    pub const VERIFY_PASSED: &str = "delegation.verify_passed";
    /// `passed|failed|skipped`.
    pub const VERIFY_OUTCOME: &str = "delegation.verify_outcome";
    /// `passed|skipped|failed|error`.
    pub const OUTCOME: &str = "delegation.outcome";
    /// The retry template's version.
    pub const RETRY_TEMPLATE_VERSION: &str = "delegation.retry_template.version";
    /// The error kind on failure.
    pub const ERROR_TYPE: &str = "error.type";
}
