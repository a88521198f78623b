//! Generates the coordinator protocol's Rust code from `proto/` (needs
//! `protoc`, installed by `scripts/setup.sh`; `PROTOC` overrides its path).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/tributary.proto");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_protos(&["proto/tributary.proto"], &["proto"])?;
    Ok(())
}
