//! One TLS configuration for every HTTP client of the process, with the system's root
//! certificates loaded once, and only when a TLS connection first needs them.
//!
//! reqwest's default builds a fresh verifier per client, and each one reads and parses every
//! certificate under `/etc/ssl/certs` (about 150 files, a few milliseconds and a few hundred
//! kilobytes) even when the client will only ever speak plain HTTP to a local model server or
//! collector. Here the verifier is the same (`rustls-platform-verifier`: webpki with the
//! platform's roots), built on the first handshake and shared; if the system has no usable roots,
//! that handshake fails with the verifier's error, so verification never silently passes.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// The process's crypto provider: whichever was installed first, else ring (installed now).
fn provider() -> Arc<CryptoProvider> {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// The shared client configuration (HTTP/2 and HTTP/1.1 offered by ALPN, as reqwest does).
pub(crate) fn client_config() -> Result<rustls::ClientConfig, rustls::Error> {
    static CONFIG: OnceLock<Result<rustls::ClientConfig, rustls::Error>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = provider();
            let verifier = Arc::new(LazyPlatformVerifier {
                provider: provider.clone(),
                inner: OnceLock::new(),
            });
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()?
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            Ok(config)
        })
        .clone()
}

/// The platform verifier, created on first use.
#[derive(Debug)]
struct LazyPlatformVerifier {
    provider: Arc<CryptoProvider>,
    inner: OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl LazyPlatformVerifier {
    fn get(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.inner
            .get_or_init(|| rustls_platform_verifier::Verifier::new(self.provider.clone()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyPlatformVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.get()?
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        // What the platform verifier reports too, without loading the roots to say it.
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
