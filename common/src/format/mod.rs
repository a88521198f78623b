//! The bytes of a shard: the tar dialects ([`tar`]), a shard's chunks
//! written and decoded ([`shard`], its writer re-exported there), zstd
//! frames decompressed within their limit ([`zstd`]), foreign tars indexed
//! as a stream ([`index`]) and a shard verified against its manifest entry
//! ([`verify`]). The manifest that describes a shard is [`crate::manifest`].

pub mod index;
pub mod shard;
pub mod tar;
pub mod verify;
mod writer;
pub mod zstd;
