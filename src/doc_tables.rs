//! Tests' check that a table the docs show is the one the code makes (the
//! API tables of PROTOCOL.md and OPERATIONS.md come from the broker's API
//! tables). `RINGMQ_WRITE_DOCS=1` rewrites the doc's table instead.

/// Asserts that `doc` (a path under the repository) holds `table`, whose
/// first line is its heading.
pub fn assert_lists(doc: &str, table: &str) {
    let path = format!("{}/{doc}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    if text.contains(table) {
        return;
    }
    let heading = table.lines().next().unwrap_or_default();
    if std::env::var_os("RINGMQ_WRITE_DOCS").is_none() {
        panic!("{doc}'s table under {heading:?} is not the code's; RINGMQ_WRITE_DOCS=1 rewrites it:\n{table}");
    }
    let start = text.find(heading).unwrap_or_else(|| panic!("{doc} has no table headed {heading:?}"));
    let end = text[start..].find("\n\n").map_or(text.len(), |n| start + n + 1);
    std::fs::write(&path, format!("{}{table}{}", &text[..start], &text[end..])).expect("the doc written");
}
