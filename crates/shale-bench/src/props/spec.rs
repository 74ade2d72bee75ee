//! Property descriptions and "did you mean" suggestions.

/// One known property: its name, default (as text, empty when there is none) and a one-line
/// description. Each component (the runner, each workload, each backend) owns a table of these;
/// `shale-bench -help-properties` prints them.
#[derive(Debug, Clone, Copy)]
pub struct PropSpec {
    /// The property name, exactly as written in files.
    pub name: &'static str,
    /// The default value as text; empty when the property has no default.
    pub default: &'static str,
    /// What the property does.
    pub help: &'static str,
}

impl PropSpec {
    /// A spec; `const` so tables can be `static`.
    pub const fn new(name: &'static str, default: &'static str, help: &'static str) -> PropSpec {
        PropSpec {
            name,
            default,
            help,
        }
    }
}

/// Largest edit distance (relative to the name's length) still offered as a suggestion.
const MAX_SUGGESTION_DISTANCE_RATIO: f64 = 0.4;

/// Up to `limit` names from `known` closest to `name`, closest first. A known name qualifies when
/// its edit distance is small relative to its length, or when one name contains the other (so
/// `blob_size` suggests `rocksdb.min_blob_size`).
pub fn closest_names<'a>(name: &str, known: &[&'a str], limit: usize) -> Vec<&'a str> {
    let lower = name.to_ascii_lowercase();
    let mut scored: Vec<(usize, &'a str)> = known
        .iter()
        .filter_map(|&k| {
            let kl = k.to_ascii_lowercase();
            let d = edit_distance(&lower, &kl);
            let budget = ((kl.len().max(lower.len()) as f64) * MAX_SUGGESTION_DISTANCE_RATIO).ceil()
                as usize;
            let contains = lower.len() >= 4 && (kl.contains(&lower) || lower.contains(&kl));
            (d <= budget.max(1) || contains).then_some((d, k))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(limit).map(|(_, k)| k).collect()
}

/// Levenshtein distance over bytes.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("recordcount", "recordcount"), 0);
        assert_eq!(edit_distance("recordcont", "recordcount"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn a_misspelled_name_suggests_the_right_one_first() {
        let known = [
            "recordcount",
            "operationcount",
            "readproportion",
            "fieldcount",
        ];
        assert_eq!(closest_names("recordcont", &known, 3), vec!["recordcount"]);
        assert_eq!(closest_names("readprop", &known, 3), vec!["readproportion"]);
        assert!(closest_names("zzzzzz", &known, 3).is_empty());
    }
}
