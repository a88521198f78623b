use super::*;

#[test]
fn a_relative_local_path_is_made_absolute_and_other_urls_kept() {
    let cwd = std::path::Path::new("/work/run");
    let cases = [
        ("data/ds", "/work/run/data/ds"),
        ("./ds/", "/work/run/ds/"),
        ("file:ds", "file:///work/run/ds"),
        ("file://./ds", "file:///work/run/ds"),
        ("file://ds", "file:///work/run/ds"),
        ("/abs/ds", "/abs/ds"),
        ("file:///abs/ds", "file:///abs/ds"),
        ("s3://bucket/ds", "s3://bucket/ds"),
        ("memory:///ds", "memory:///ds"),
    ];
    for (url, expected) in cases {
        assert_eq!(absolute_url(url, cwd), expected, "{url}");
    }
    // `..` resolved lexically.
    let up = absolute_url("../ds", cwd);
    assert!(up == "/work/ds" || up == "/work/run/../ds", "{up}");
}

fn get<'a>(options: &'a StoreOptions, key: &str) -> Option<&'a str> {
    options
        .options
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[test]
fn s3_settings_apply_to_s3_urls_only_and_a_plain_http_endpoint_is_allowed() {
    let s3 = S3Settings {
        endpoint: Some("http://127.0.0.1:9000".into()),
        region: Some("eu-west-1".into()),
        path_style: true,
    };
    let vars = [
        ("AWS_ACCESS_KEY_ID".to_owned(), "k".to_owned()),
        ("HOME".into(), "/root".into()),
    ];
    let options = StoreOptions::from_vars(vars).with_s3("s3://bucket/ds", &s3);
    assert_eq!(get(&options, "aws_access_key_id"), Some("k"));
    assert_eq!(get(&options, "home"), None);
    assert_eq!(get(&options, "aws_endpoint"), Some("http://127.0.0.1:9000"));
    assert_eq!(get(&options, "aws_allow_http"), Some("true"));
    assert_eq!(get(&options, "aws_region"), Some("eu-west-1"));
    assert_eq!(
        get(&options, "aws_virtual_hosted_style_request"),
        Some("false")
    );

    let local = StoreOptions::default().with_s3("gs://bucket/ds", &s3);
    assert!(local.options.is_empty(), "{local:?}");
}

/// A server answering every request with 403 and no body, as the EC2
/// instance-metadata endpoint does off EC2 (or to IMDSv1 requests).
fn forbidden_server() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(
                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn s3_without_credentials_says_no_aws_credentials_found_not_the_metadata_403() {
    // No keys: the S3 store asks the instance-metadata endpoint (here a
    // local one answering 403, as 169.254.169.254 does off EC2).
    let metadata = forbidden_server();
    let options = StoreOptions {
        options: vec![
            ("aws_metadata_endpoint".into(), metadata),
            ("aws_endpoint".into(), "http://127.0.0.1:9".into()),
            ("aws_allow_http".into(), "true".into()),
            ("aws_region".into(), "us-east-1".into()),
        ],
        retry: RetryPolicy {
            // Retried, it would wait an hour before its second attempt.
            first_backoff: std::time::Duration::from_secs(3600),
            ..RetryPolicy::default()
        },
    };
    let location = Location::open("s3://bucket/ds", &options, false).expect("open");
    let error = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        location.get("manifest.json"),
    )
    .await
    .expect("answered at once, not retried")
    .expect_err("no credentials");
    let message = error.to_string();
    assert!(matches!(error, IoError::NoCredentials { .. }), "{message}");
    assert!(
        message.contains("s3://bucket/ds/manifest.json: no AWS credentials found"),
        "{message}"
    );
    assert!(
        message.contains("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        "{message}"
    );
}

#[test]
fn an_object_path_joins_the_prefix_part_by_part() {
    let location =
        Location::open("memory:///ds/train", &StoreOptions::default(), false).expect("memory URL");
    assert_eq!(location.path("a/b.tar").as_ref(), "ds/train/a/b.tar");
    assert_eq!(location.url_of("a/b.tar"), "memory:///ds/train/a/b.tar");
}

#[tokio::test]
async fn a_fifo_is_refused_before_it_is_opened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("manifest.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let location = Location::open(
        dir.path().to_str().expect("utf-8"),
        &StoreOptions::default(),
        false,
    )
    .expect("open");
    // Without the check this read would wait for a writer forever.
    let error = location
        .get_at_most("manifest.json", 1 << 20)
        .await
        .expect_err("a FIFO")
        .to_string();
    assert!(error.contains("not a regular file"), "{error}");
    assert!(error.contains("manifest.json"), "{error}");
}
