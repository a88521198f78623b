//! End-to-end tests live in `tests/e2e/`.
