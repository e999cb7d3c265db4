//! Names in the cases Rust wants: `put_in_maintenance` → `PutInMaintenance` for an
//! action's variant, `VmState` → `vm_state` for the marker module.

/// The words of a name: split at `_`, `-` and other punctuation, at a lower-case
/// letter followed by an upper-case one (`vmState`), and before the last capital
/// of an acronym followed by a lower-case letter (`HTTPServer`).
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in name.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = part.chars().collect();
        let mut word = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1);
            let boundary = c.is_uppercase()
                && prev.is_some_and(|p| {
                    p.is_lowercase()
                        || p.is_ascii_digit()
                        || (p.is_uppercase() && next.is_some_and(|n| n.is_lowercase()))
                });
            if boundary && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            word.push(c);
        }
        if !word.is_empty() {
            words.push(word);
        }
    }
    words
}

/// `put_in_maintenance`, `ADDING_DISK`, `pre-check` → `PutInMaintenance`,
/// `AddingDisk`, `PreCheck`.
pub fn upper_camel(name: &str) -> String {
    words(name)
        .iter()
        .map(|w| {
            let mut chars = w.chars();
            let first = chars.next().map(|c| c.to_uppercase().collect::<String>());
            first.unwrap_or_default() + &chars.as_str().to_lowercase()
        })
        .collect()
}

/// `VmState`, `PodOpsState` → `vm_state`, `pod_ops_state`.
pub fn snake(name: &str) -> String {
    words(name)
        .iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>()
        .join("_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_change_case_as_heck_would() {
        assert_eq!(upper_camel("put_in_maintenance"), "PutInMaintenance");
        assert_eq!(upper_camel("ADDING_DISK"), "AddingDisk");
        assert_eq!(upper_camel("pre-check"), "PreCheck");
        assert_eq!(upper_camel("TOBEDELETED"), "Tobedeleted");
        assert_eq!(upper_camel("Provisioned"), "Provisioned");
        assert_eq!(snake("VmState"), "vm_state");
        assert_eq!(snake("PodOpsState"), "pod_ops_state");
        assert_eq!(snake("HTTPServer"), "http_server");
        assert_eq!(snake("Vm2State"), "vm2_state");
    }
}
