//! Properties of the admin pages' building blocks: escaping loses nothing and leaves no markup,
//! user page names are plain and distinct for distinct users, intervals survive their links.

use mpistat_figures::period::Period;
use mpistat_pages::site_report::pages::user_slug;
use mpistat_pages::site_report::svg::{hbars, series, Bar};
use mpistat_site::html::escape;
use proptest::prelude::*;

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// A plain name that spells another name's encoded form, and the empty name beside a one-letter
/// one, had one slug (proptest found the second): `serve` would show one user the other's page.
#[test]
fn a_plain_name_never_takes_an_encoded_names_slug() {
    for (a, b) in [
        ("", "x"),
        ("a.b", "x612e62"),
        ("a.b", "-612e62"),
        ("-", "-2d"),
    ] {
        assert_ne!(user_slug(a), user_slug(b), "{a:?} and {b:?}");
    }
}

proptest! {
    #[test]
    fn escaping_is_lossless_and_inert(text in ".*") {
        let escaped = escape(&text);
        prop_assert!(!escaped.contains(['<', '>', '"', '\'']));
        prop_assert_eq!(unescape(&escaped), text);
    }

    #[test]
    fn chart_labels_never_become_markup(labels in proptest::collection::vec(".*", 0..8)) {
        let rows: Vec<Bar> = labels
            .iter()
            .map(|l| Bar { label: l.clone(), values: vec![1.0], note: l.clone() })
            .collect();
        let svg = hbars("t", &series(&["x"]), &rows, true);
        // Our own elements only: every '<' opens one of the tags the chart writes.
        for tag in svg.split('<').skip(1) {
            let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '/').collect();
            prop_assert!(
                ["svg", "/svg", "title", "/title", "text", "/text", "rect", "/rect", "line", "polyline"]
                    .contains(&name.as_str()),
                "unexpected <{}", name
            );
        }
    }

    #[test]
    fn user_slugs_are_plain_and_distinct(a in ".{0,12}", b in ".{0,12}") {
        let (sa, sb) = (user_slug(&a), user_slug(&b));
        prop_assert!(!sa.is_empty());
        prop_assert!(sa.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'));
        prop_assert_eq!(sa == sb, a == b);
    }

    #[test]
    fn intervals_survive_their_links(from in 0u32..40_000, len in 0u32..400) {
        let day = |d: u32| mpistat_record::units::utc(u64::from(d) * 86_400_000)[..10].to_string();
        let period = Period::days(&day(from), &day(from + len)).unwrap();
        let query = period.query();
        let parsed = Period::parse(query.strip_prefix("?period=").unwrap()).unwrap();
        prop_assert_eq!(&parsed, &period);
        if let Some(before) = period.previous() {
            prop_assert_eq!(before.to_ms, period.from_ms);
            prop_assert_eq!(before.to_ms - before.from_ms, period.to_ms - period.from_ms);
        }
    }
}
