//! Identifiers as newtypes, so that an epoch is never passed where a
//! generation is expected, nor a job id where a member id is.
//!
//! All four serialize as the bare value (`serde(transparent)`), so records in
//! the store and messages on the wire read `"epoch": 3`, not `{"0": 3}`.
//! Inside hot loops the planner works on the plain `u64`s
//! ([`Epoch::get`], [`Generation::get`]).

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

macro_rules! number_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl $name {
            pub fn get(self) -> u64 {
                self.0
            }

            /// The one after this one.
            pub fn next(self) -> Self {
                Self(self.0 + 1)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }

        impl From<u64> for $name {
            fn from(n: u64) -> Self {
                Self(n)
            }
        }

        impl From<$name> for u64 {
            fn from(id: $name) -> Self {
                id.0
            }
        }
    };
}

string_id!(
    /// A training job: the prefix of every key the coordinator stores.
    JobId
);
string_id!(
    /// One member (a rank's loader, or a dynamic consumer) of a job, as it
    /// registered itself; stable across its restarts when the caller makes it so.
    MemberId
);
number_id!(
    /// A pass over the dataset; keys the seeded shard order.
    Epoch
);
number_id!(
    /// A membership generation within a job: a new one starts whenever the
    /// member list changes. Keys the shuffle buffers of its ranks.
    Generation
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_serialize_as_bare_values_and_display_plainly() {
        let json = serde_json::to_string(&(JobId::from("job-1"), Epoch(3), Generation(7)))
            .expect("serialize");
        assert_eq!(json, r#"["job-1",3,7]"#);
        let member: MemberId = serde_json::from_str(r#""host-a/0""#).expect("deserialize");
        assert_eq!(member.to_string(), "host-a/0");
        assert_eq!(u64::from(Generation(4).next()), 5);
        assert!(Epoch(2) < Epoch(10));
    }
}
