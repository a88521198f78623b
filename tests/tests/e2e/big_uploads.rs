//! `tributary pack` of a shard larger than the single-PUT limit through a
//! real S3-compatible server: the shard goes up as a multipart upload (its
//! ETag says how many parts), no upload is left open, and the dataset reads
//! back byte for byte as the same pack into a local directory.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use object_store::ObjectStoreExt;
use tributary_io::testing::noise;
use tributary_worker::Location;

use tributary_tests::cli::{tributary_ok, Scratch};
use tributary_tests::s3::{S3Server, S3_ENV};

/// The body of an unsigned `GET path` to the server (moto checks no
/// signature).
fn get_body(endpoint: &str, path: &str) -> String {
    let host = endpoint.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
}

#[test]
fn a_shard_over_the_single_put_limit_goes_up_in_parts_and_reads_back_exactly() {
    let scratch = Scratch::new();
    let src = scratch.path("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    // Five 4 MB samples: one ~20 MB shard, four 5 MiB parts.
    for i in 0..5u64 {
        std::fs::write(
            std::path::Path::new(&src).join(format!("s{i}.bin")),
            noise(4_000_000, i),
        )
        .expect("write sample");
    }
    let server = S3Server::start();
    server.create_bucket("datasets");
    let out = tributary_ok(
        &[
            "pack",
            &src,
            "s3://datasets/big",
            "--s3-endpoint",
            &server.endpoint,
            "--single-put-limit",
            &(6u64 << 20).to_string(),
            "--part-size",
            &(5u64 << 20).to_string(),
            "--parts-in-flight",
            "2",
        ],
        &S3_ENV,
    );
    assert!(out.contains("into 1 shards"), "{out}");
    assert!(out.contains("4 multipart parts"), "{out}");
    let local = scratch.path("local");
    tributary_ok(&["pack", &src, &local], &[]);

    let out = tributary_ok(&["inspect", "s3://datasets/big"], &server.env());
    assert!(
        out.contains("checksums    ok") && out.contains("1 of 1 shards, 5 of 5 samples"),
        "{out}"
    );

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let s3 = Location::open("s3://datasets/big", &server.options(), false).expect("s3");
        let disk = Location::open(&local, &Default::default(), false).expect("local");
        // S3 names a multipart object's ETag `<md5 of the parts' md5s>-<parts>`.
        let head = s3
            .store
            .head(&s3.path("shard-000000.tar"))
            .await
            .expect("head");
        let etag = head.e_tag.unwrap_or_default();
        assert!(etag.trim_matches('"').ends_with("-4"), "{etag}");
        for name in ["shard-000000.tar", "manifest.json"] {
            let (remote, copy) = (s3.get(name).await, disk.get(name).await);
            assert_eq!(
                remote.expect("s3 object"),
                copy.expect("local object"),
                "{name}"
            );
        }
    });
    // Nothing left open: every multipart upload was completed.
    let uploads = get_body(&server.endpoint, "/datasets?uploads");
    assert!(uploads.contains("ListMultipartUploadsResult"), "{uploads}");
    assert!(!uploads.contains("<UploadId>"), "{uploads}");
}
