//! Names as JavaScript identifiers: `tools.<server>.<tool>` takes the server's and the tool's names with every
//! character outside `[A-Za-z0-9_$]` turned into `_` (and `_` ahead of a leading digit).

/// `name` as an identifier.
pub fn ident(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::ident;

    #[test]
    fn names_become_identifiers() {
        assert_eq!(ident("my-server"), "my_server");
        assert_eq!(ident("read.file"), "read_file");
        assert_eq!(ident("$ok_1"), "$ok_1");
        assert_eq!(ident("2fa"), "_2fa");
        assert_eq!(ident("é"), "_");
        assert_eq!(ident(""), "_");
    }
}
