//! Credentials never travel over a weaker transport than the one given: a
//! replica's redirect to a leader of another scheme is refused, and a bearer
//! token sent in clear beyond this machine is warned about.

use tonic::Code;

use crate::error::WorkerError;

/// Refuses a redirect from the replica at `from` to a `leader` address
/// that names another scheme than `scheme` (an `https://` client sent to
/// `http://`, which would carry the token and the job's config in clear).
/// A bare `host:port` leader takes the client's scheme.
pub fn check_redirect(scheme: &str, from: &str, leader: &str) -> Result<(), WorkerError> {
    match leader.split_once("://") {
        Some((theirs, _)) if theirs != scheme => Err(WorkerError::Coordinator {
            code: Code::FailedPrecondition,
            message: format!(
                "coordinator {from} redirected to the leader at {leader}, which is not {scheme}://: \
                 refusing to send credentials over another scheme (check the replicas' --advertise)"
            ),
        }),
        _ => Ok(()),
    }
}

/// Whether `host` is this machine: `localhost` or a loopback address.
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_to_another_scheme_is_refused_naming_both_addresses() {
        let error = check_redirect("https", "https://a:7070", "http://b:7070")
            .expect_err("a downgrade")
            .to_string();
        assert!(error.contains("https://a:7070"), "{error}");
        assert!(error.contains("http://b:7070"), "{error}");
        check_redirect("https", "https://a:7070", "b:7070").expect("a bare leader takes https");
        check_redirect("https", "https://a:7070", "https://b:7070").expect("same scheme");
        check_redirect("http", "http://a:7070", "https://b:7070").expect_err("any other scheme");
    }

    #[test]
    fn loopback_hosts_are_this_machine() {
        for host in ["localhost", "127.0.0.1", "::1", "127.3.2.1"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["10.0.0.7", "coord.ns.svc", "fd00::7"] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
