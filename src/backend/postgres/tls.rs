//! TLS to PostgreSQL with rustls, as libpq's `sslmode` asks (`config/db_uri.rs` reads it):
//! `prefer` and `require` encrypt without checking the certificate, `verify-ca` checks it was
//! signed by a trusted root, `verify-full` also that it names the host. [`PgTarget`] is what
//! every connection rowgate opens is made from.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::{PgUri, RootCerts, SslMode};

/// Where and how to connect: the database's address and options, and the TLS to use.
#[derive(Clone)]
pub struct PgTarget {
    /// Everything tokio-postgres reads.
    pub config: tokio_postgres::Config,
    mode: SslMode,
    tls: Arc<ClientConfig>,
    connector: MakeRustlsConnect,
}

/// A connection rowgate speaks PostgreSQL's protocol on itself, plain or in TLS.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

impl PgTarget {
    /// The target `uri` names, its certificates read (an error says which file is wrong).
    pub fn new(uri: &PgUri) -> Result<PgTarget, String> {
        let tls = client_config(uri)?;
        let connector = MakeRustlsConnect::new(tls.clone());
        Ok(PgTarget { config: uri.config.clone(), mode: uri.tls.mode, tls: Arc::new(tls), connector })
    }

    /// Parses and reads `db-uri`.
    pub fn parse(db_uri: &str) -> Result<PgTarget, String> {
        PgTarget::new(&PgUri::parse(db_uri).map_err(|e| format!("invalid db-uri: {e}"))?)
    }

    /// `host:port` of the first host, for logs and metrics.
    pub fn describe(&self) -> String {
        let host = match self.config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "localhost".into(),
        };
        format!("{host}:{}", self.config.get_ports().first().copied().unwrap_or(5432))
    }

    /// The TLS connector tokio-postgres takes.
    pub fn connector(&self) -> MakeRustlsConnect {
        self.connector.clone()
    }

    /// `stream`, a fresh TCP connection to `host`, after PostgreSQL's TLS negotiation: for the
    /// connections rowgate speaks the protocol on itself (the cache feed's replication one).
    pub async fn negotiate(
        &self,
        mut stream: tokio::net::TcpStream,
        host: &str,
    ) -> std::io::Result<Box<dyn Stream>> {
        if self.mode == SslMode::Disable {
            return Ok(Box::new(stream));
        }
        // SSLRequest: its length and code.
        stream.write_all(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]).await?;
        match stream.read_u8().await? {
            b'S' => {
                let name = ServerName::try_from(host.to_owned())
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                let tls = tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, stream).await?;
                Ok(Box::new(tls))
            }
            b'N' if self.mode == SslMode::Prefer => Ok(Box::new(stream)),
            _ => Err(std::io::Error::other("the server does not accept TLS connections (sslmode)")),
        }
    }
}

/// The rustls configuration of `uri`'s TLS options.
fn client_config(uri: &PgUri) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = match uri.tls.mode {
        SslMode::Disable | SslMode::Prefer | SslMode::Require => Arc::new(Unchecked(provider)),
        mode => {
            let roots = match &uri.tls.root_certs {
                Some(RootCerts::File(path)) => root_file(path)?,
                Some(RootCerts::System) | None => {
                    RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() }
                }
            };
            let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("sslrootcert: {e}"))?;
            match mode {
                SslMode::VerifyFull => chain,
                _ => Arc::new(AnyName(chain)),
            }
        }
    };
    let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
    match &uri.tls.client_cert {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("sslcert {}: {e}", cert.display()))?;
            let key =
                PrivateKeyDer::from_pem_file(key).map_err(|e| format!("sslkey {}: {e}", key.display()))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("sslcert: {e}"))
        }
    }
}

/// The roots of a PEM file, with libpq's advice when it is missing.
fn root_file(path: &Path) -> Result<RootCertStore, String> {
    if !path.exists() {
        return Err(format!(
            "root certificate file \"{}\" does not exist: provide the file, use the public roots \
             with sslrootcert=system, or change sslmode to disable server certificate verification",
            path.display()
        ));
    }
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("sslrootcert {}: no certificate in it", path.display()));
    }
    Ok(roots)
}

/// `prefer` and `require`: any certificate (the handshake's signatures are still checked).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: a certificate signed by a trusted root, whatever host it names.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The chain is checked before the name: a name error means the chain was good.
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
