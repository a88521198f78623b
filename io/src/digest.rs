//! Digests: the one place bytes become the hex SHA-256 that manifests,
//! tokens and member secrets are compared by, on either side.

/// SHA-256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest a job records of its data, from its manifests' SHA-256 (in
/// source order): the manifest's own, or for a mix (`mixed`), the SHA-256
/// of its sources' digests one per line. The coordinator records it at
/// CreateJob; a rank sends the one of the manifests it opened with its
/// Join, so a manifest changed in place is caught while the job runs.
pub fn dataset_sha256(sources: &[String], mixed: bool) -> String {
    match sources {
        [one] if !mixed => one.clone(),
        _ => sha256_hex(sources.join("\n").as_bytes()),
    }
}
