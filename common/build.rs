//! Generates the coordinator protocol's Rust code from `proto/` (needs
//! `protoc`, installed by `scripts/setup.sh`; `PROTOC` overrides its path):
//! the message types always, the tonic client and server with the `grpc`
//! feature.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/tributary.proto");
    let grpc = std::env::var_os("CARGO_FEATURE_GRPC").is_some();
    tonic_prost_build::configure()
        .build_server(grpc)
        .build_client(grpc)
        .compile_protos(&["proto/tributary.proto"], &["proto"])?;
    Ok(())
}
