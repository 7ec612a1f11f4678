#!/usr/bin/env bash
# Regenerates vendor/etcd-client/src/rpc/generated/ from the .proto files in
# vendor/etcd-client/proto/ (after updating them), as etcd-client's own build
# script did, with a throwaway generator crate in a temporary directory.
# Needs protoc (Debian: protobuf-compiler); ordinary builds never do.
set -euo pipefail
vendor="$(cd "$(dirname "$0")" && pwd)"
command -v protoc >/dev/null || { echo "protoc not found (Debian: apt-get install protobuf-compiler)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cat >"$work/Cargo.toml" <<'TOML'
[package]
name = "regen-etcd-client"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
tonic-prost-build = "0.14"
[workspace]
TOML
cat >"$work/src/main.rs" <<'RUST'
fn main() {
    let crate_dir = std::env::args().nth(1).expect("the etcd-client directory");
    std::env::set_current_dir(&crate_dir).expect("enter the etcd-client directory");
    tonic_prost_build::configure()
        .build_server(false)
        .out_dir("src/rpc/generated")
        .compile_protos(
            &[
                "proto/etcd/api/authpb/auth.proto",
                "proto/etcd/api/etcdserverpb/rpc.proto",
                "proto/etcd/api/mvccpb/kv.proto",
                "proto/etcd/server/etcdserver/api/v3election/v3electionpb/v3election.proto",
                "proto/etcd/server/etcdserver/api/v3lock/v3lockpb/v3lock.proto",
            ],
            &["proto"],
        )
        .expect("compile the proto files");
}
RUST
mkdir -p "$vendor/etcd-client/src/rpc/generated"
cargo run -q --manifest-path "$work/Cargo.toml" -- "$vendor/etcd-client"
# The HTTP-gateway annotations' own types: the client never names them.
rm -f "$vendor/etcd-client/src/rpc/generated/google.api.rs" \
  "$vendor/etcd-client/src/rpc/generated/grpc.gateway.protoc_gen_openapiv2.options.rs"
ls -l "$vendor/etcd-client/src/rpc/generated"
