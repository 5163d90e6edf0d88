//! Proof that zerodispatch's errors compose: every public error type of the callback, the
//! core, the broker, the wire codec, the server and the client is `Send + Sync + 'static`
//! and implements [`std::error::Error`], so `?` carries it into `anyhow::Error` and into
//! `Box<dyn Error + Send + Sync>`. The proofs are this crate's tests (`tests/compose.rs`);
//! the crate itself is empty and not published.

#![forbid(unsafe_code)]
