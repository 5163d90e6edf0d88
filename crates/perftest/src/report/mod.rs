//! Printing a run: in words (the per-second line, the human summary, the table of
//! `--compare`) and as JSON (one line, serde).

mod json;
#[cfg(test)]
mod tests;
mod text;

// The JSON summary of a run and of `--compare`, each on one line.
pub use json::{compare_json, json, json_with_cpu};
// The lines and tables printed for a person.
pub use text::{compare_table, cpu_line, describe, progress_line, summary};
