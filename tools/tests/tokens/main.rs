//! Token datasets: `pack_tokens` with the `bytes` tokenizer and a Hugging
//! Face tokenizer.json read back document by document; `index_tokens` over a
//! Megatron pair, a `.npy` and a raw file; hostile inputs named.

mod index;
mod pack;

use std::path::Path;

use tributary_common::tokens::manifest::TokenManifest;
use tributary_common::tokens::megatron::{decode_idx, Expected};
use tributary_io::{Location, StoreOptions};

pub(crate) fn location(dir: &Path) -> Location {
    Location::open(&dir.display().to_string(), &StoreOptions::default(), true).expect("open")
}

/// Every document of the dataset at `dir`, as token ids, in order, and
/// the manifest.
pub(crate) fn read_back(dir: &Path) -> (TokenManifest, Vec<Vec<u32>>) {
    let manifest =
        TokenManifest::from_json(&std::fs::read(dir.join("manifest.json")).expect("manifest"))
            .expect("valid manifest");
    let mut docs = Vec::new();
    for shard in &manifest.shards {
        let idx = std::fs::read(dir.join(&shard.index.name)).expect("idx");
        assert_eq!(crc32c::crc32c(&idx), shard.index.crc32c);
        let index = decode_idx(
            &shard.index.name,
            &idx,
            &Expected {
                dtype: manifest.dtype,
                data_offset: shard.offset,
                tokens: shard.tokens,
                documents: shard.documents,
            },
        )
        .expect("index decodes");
        let data = std::fs::read(dir.join(&shard.name)).expect("data");
        assert_eq!(data.len() as u64, shard.bytes);
        let tokens = &data[shard.offset as usize..];
        for d in 0..index.documents() {
            let range = index.doc(d);
            let w = manifest.width() as usize;
            let mut ids = Vec::new();
            manifest.dtype.decode_into(
                &tokens[range.start as usize * w..range.end as usize * w],
                &mut ids,
            );
            docs.push(ids);
        }
    }
    (manifest, docs)
}
