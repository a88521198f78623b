//! Test certificates: a CA, and server and client certificates it signs,
//! written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// A certificate and its key as PEM files.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A test CA that signs certificates into one directory.
pub struct TestCa {
    dir: PathBuf,
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// The CA certificate's PEM file.
    pub ca: PathBuf,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").field("ca", &self.ca).finish()
    }
}

impl TestCa {
    /// A new CA, its certificate written to `dir/ca.crt`.
    pub fn new(dir: &Path) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "tributary test ca");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("ca key"))
            .expect("self-signed ca");
        let ca = dir.join("ca.crt");
        std::fs::write(&ca, issuer.pem()).expect("write the ca certificate");
        Self {
            dir: dir.to_owned(),
            issuer,
            ca,
        }
    }

    /// A certificate with common name `name` for the DNS names and IP
    /// addresses in `sans`, written as `<file>.crt` and `<file>.key`; good
    /// for a server and a client alike.
    pub fn issue(&self, file: &str, name: &str, sans: &[&str]) -> CertFiles {
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans).expect("certificate params");
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        let files = CertFiles {
            cert: self.dir.join(format!("{file}.crt")),
            key: self.dir.join(format!("{file}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).expect("write the certificate");
        std::fs::write(&files.key, key.serialize_pem()).expect("write the key");
        files
    }
}
