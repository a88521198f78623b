//! Which kind of source `pack` reads: the value of `--format`.

use std::fmt;
use std::str::FromStr;

/// Which kind of source `pack` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceFormat {
    /// A `.csv` or `.jsonl` file is a listing; a directory whose top level
    /// holds only subdirectories with images (and no image sharing its key
    /// with another file, the mark of WebDataset files) is an ImageFolder;
    /// any other directory holds WebDataset files. A directory mixing
    /// ImageFolder-like subdirectories with files is refused as ambiguous.
    #[default]
    Auto,
    ImageFolder,
    WebDataset,
    /// A listing: JSONL where the file ends in `.jsonl` or `.ndjson`, CSV
    /// otherwise.
    Listing,
    /// Parquet files: a row a sample, its columns fields.
    Parquet,
}

impl SourceFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::ImageFolder => "imagefolder",
            Self::WebDataset => "webdataset",
            Self::Listing => "listing",
            Self::Parquet => "parquet",
        }
    }
}

impl FromStr for SourceFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(Self::Auto),
            "imagefolder" => Ok(Self::ImageFolder),
            "webdataset" => Ok(Self::WebDataset),
            "listing" => Ok(Self::Listing),
            "parquet" => Ok(Self::Parquet),
            _ => Err(format!(
                "unknown source format `{text}` (expected auto, imagefolder, webdataset, listing or parquet)"
            )),
        }
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
