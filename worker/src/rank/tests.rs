/// The user guide's Rust example of a coordinated rank (docs/src/elastic.md),
/// taken as written.
fn readme_example() -> String {
    let readme = include_str!("../../../docs/src/elastic.md");
    let start = readme
        .find("```rust\nuse std::collections::HashMap;\nuse tributary_worker::coordinated")
        .expect("the guide has the rank example");
    let body = &readme[start + "```rust\n".len()..];
    body[..body.find("```").expect("the block ends")].to_owned()
}

/// The visible lines of this module's documented (compiled) example.
fn doc_example() -> String {
    let source = include_str!("mod.rs");
    let mut lines = source
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .skip_while(|l| *l != "```no_run")
        .skip(1);
    let mut example = String::new();
    for line in lines.by_ref().take_while(|l| *l != "```") {
        if !line.starts_with("# ") {
            example.push_str(line);
            example.push('\n');
        }
    }
    example
}

#[test]
fn the_readme_shows_the_rank_example_that_compiles() {
    let doc = doc_example();
    assert!(doc.contains("Rank::start(RankConfig {"), "{doc}");
    assert_eq!(readme_example(), doc);
}

#[test]
fn a_relative_dataset_path_or_its_manifest_names_one_absolute_directory() {
    use super::absolute_urls;
    use tributary_common::job::{JobSpec, Source};
    let cwd = std::path::Path::new("/work/runs");
    let mut spec = JobSpec::new("ds/manifest.json");
    absolute_urls(&mut spec, cwd);
    assert_eq!(spec.manifest_url, "/work/runs/ds");
    let mut same = JobSpec::new("./ds");
    absolute_urls(&mut same, cwd);
    assert_eq!(same.manifest_url, spec.manifest_url);
    let mut mixed = JobSpec::new("");
    mixed.sources = vec![
        "../other/manifest.json=weight:1"
            .parse::<Source>()
            .expect("a source"),
        "s3://bucket/ds=weight:1"
            .parse::<Source>()
            .expect("a source"),
    ];
    absolute_urls(&mut mixed, cwd);
    // Absolute, not canonical: `..` stays (nothing is read from the disk).
    assert_eq!(mixed.sources[0].manifest_url, "/work/runs/../other");
    assert_eq!(mixed.sources[1].manifest_url, "s3://bucket/ds");
}
