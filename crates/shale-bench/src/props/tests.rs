use super::*;

fn props_from(text: &str) -> Properties {
    let mut p = Properties::new();
    for (line, k, v) in parse_java_properties(text, "test.properties").unwrap() {
        p.set(
            k,
            v,
            Origin::File {
                path: "test.properties".into(),
                line,
            },
        );
    }
    p
}

#[test]
fn java_syntax_accepts_all_three_separators_and_comments() {
    let p = props_from(
        "# comment\n! also a comment\n\nrecordcount=1000\noperationcount : 2000\nworkload   core\n  fieldcount = 10  \n",
    );
    assert_eq!(p.get("recordcount"), Some("1000"));
    assert_eq!(p.get("operationcount"), Some("2000"));
    assert_eq!(p.get("workload"), Some("core"));
    assert_eq!(p.get("fieldcount"), Some("10"));
    assert_eq!(p.iter().count(), 4);
}

#[test]
fn java_syntax_joins_continued_lines_and_unescapes() {
    let p = props_from("tracefile=a\\\n   b.csv\nname=x\\=y\\u0041\nempty=\n");
    assert_eq!(p.get("tracefile"), Some("ab.csv"));
    assert_eq!(p.get("name"), Some("x=yA"));
    assert_eq!(p.get("empty"), Some(""));
}

#[test]
fn a_malformed_unicode_escape_names_file_and_line() {
    let err = parse_java_properties("a=1\nb=\\u12\n", "w.properties").unwrap_err();
    assert!(err.to_string().contains("w.properties:2"), "{err}");
}

#[test]
fn later_sources_override_earlier_ones() {
    let mut p = props_from("recordcount=1000\n");
    p.set_arg("recordcount = 5").unwrap();
    assert_eq!(p.get_u64("recordcount", 0).unwrap(), 5);
    assert_eq!(p.origin("recordcount"), Some(&Origin::CommandLine));
}

#[test]
fn dash_p_without_equals_is_a_usage_error() {
    let mut p = Properties::new();
    let err = p.set_arg("recordcount").unwrap_err();
    assert_eq!(err.kind(), crate::error::ErrorKind::Usage);
    assert!(err.to_string().contains("name=value"));
}

#[test]
fn a_bad_integer_names_property_value_and_place() {
    let p = props_from("a=1\nrecordcount=12x\n");
    let err = p.get_u64("recordcount", 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad value for property recordcount: '12x' is not an unsigned integer (set at test.properties:2)"
    );
}

#[test]
fn typed_getters_check_ranges_booleans_and_choices() {
    let p = props_from("t=5\nf=1.5\nb=TRUE\nc=zipfian\nneg=-1\n");
    assert!(p
        .get_u64_in("t", 1, 1, 4)
        .unwrap_err()
        .to_string()
        .contains("between 1 and 4"));
    assert_eq!(p.get_f64("f", 0.0).unwrap(), 1.5);
    assert!(p.get_bool("b", false).unwrap());
    assert_eq!(
        p.get_choice("c", "uniform", &["uniform", "zipfian"])
            .unwrap(),
        "zipfian"
    );
    assert!(p
        .get_choice("c", "uniform", &["uniform"])
        .unwrap_err()
        .to_string()
        .contains("one of: uniform"));
    assert!(p.get_u64("neg", 0).is_err());
    assert_eq!(p.get_u64("missing", 7).unwrap(), 7);
}

#[test]
fn an_unknown_property_is_reported_with_close_matches() {
    static TABLE: &[PropSpec] = &[
        PropSpec::new("recordcount", "", ""),
        PropSpec::new("readproportion", "0.95", ""),
        PropSpec::new("requestdistribution", "uniform", ""),
    ];
    let p = props_from("recordcont=10\n");
    let err = p.check_known(&[TABLE]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown property 'recordcont' (set at test.properties:1); did you mean recordcount?"
    );
    assert!(props_from("recordcount=1\n").check_known(&[TABLE]).is_ok());
}
