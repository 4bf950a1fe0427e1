//! Values as a person reads them on a terminal (lists in words, not Rust's debug form).

/// Numbers (or other values) as words read them: "2", "2 and 3", "2, 3 and 5"; "-" for
/// none.
pub(super) fn list<T: std::fmt::Display>(items: &[T]) -> String {
    let words: Vec<String> = items.iter().map(ToString::to_string).collect();
    match words.split_last() {
        None => "-".into(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lists_read_as_words() {
        assert_eq!(super::list::<u64>(&[]), "-");
        assert_eq!(super::list(&[2]), "2");
        assert_eq!(super::list(&[2, 3]), "2 and 3");
        assert_eq!(super::list(&[2, 3, 5]), "2, 3 and 5");
    }
}
