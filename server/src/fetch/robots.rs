//! robots.txt (RFC 9309): the group for our user agent (else `*`), the
//! longest matching `Allow`/`Disallow` rule wins, `Allow` on a tie; `*`
//! matches any run of characters and a trailing `$` anchors the end.

/// The user agents of a group and its rules (allow?, pattern).
type Group = (Vec<String>, Vec<(bool, String)>);

/// Whether `robots` lets `user_agent` fetch `path` (path and query).
pub fn allows(robots: &str, user_agent: &str, path: &str) -> bool {
    let agent = user_agent
        .split('/')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    // Groups: (agents, rules); consecutive user-agent lines share a group.
    let mut groups: Vec<Group> = Vec::new();
    let mut last_was_agent = false;
    for line in robots.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        match key.as_str() {
            "user-agent" => {
                if !last_was_agent || groups.is_empty() {
                    groups.push((Vec::new(), Vec::new()));
                }
                if let Some(group) = groups.last_mut() {
                    group.0.push(value.to_ascii_lowercase());
                }
                last_was_agent = true;
            }
            "allow" | "disallow" => {
                last_was_agent = false;
                if let Some(group) = groups.last_mut()
                    && !value.is_empty()
                {
                    group.1.push((key == "allow", value.to_string()));
                }
            }
            _ => {}
        }
    }
    let specific: Vec<&(bool, String)> = groups
        .iter()
        .filter(|(agents, _)| !agent.is_empty() && agents.iter().any(|a| a == &agent))
        .flat_map(|(_, rules)| rules)
        .collect();
    let rules = if specific.is_empty() {
        groups
            .iter()
            .filter(|(agents, _)| agents.iter().any(|a| a == "*"))
            .flat_map(|(_, rules)| rules)
            .collect()
    } else {
        specific
    };
    let mut best: Option<(usize, bool)> = None;
    for (allow, pattern) in rules {
        if matches(pattern, path) {
            let len = pattern.len();
            best = match best {
                Some((l, a)) if l > len || (l == len && a) => Some((l, a)),
                _ => Some((len, *allow)),
            };
        }
    }
    best.map(|(_, allow)| allow).unwrap_or(true)
}

/// Whether `pattern` (with `*` and a final `$`) matches a prefix of `path`.
fn matches(pattern: &str, path: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    fn go(parts: &[&str], rest: &str, anchored: bool, first: bool) -> bool {
        match parts.split_first() {
            None => !anchored || rest.is_empty(),
            Some((part, tail)) => {
                if first {
                    rest.strip_prefix(part)
                        .is_some_and(|r| go(tail, r, anchored, false))
                } else {
                    // After a `*`: try every position of `part`.
                    (0..=rest.len())
                        .filter(|i| rest.is_char_boundary(*i))
                        .any(|i| {
                            rest[i..]
                                .strip_prefix(part)
                                .is_some_and(|r| go(tail, r, anchored, false))
                        })
                }
            }
        }
    }
    go(&parts, path, anchored, true)
}

#[cfg(test)]
mod tests {
    use super::allows;

    const ROBOTS: &str = "\
# comment
User-agent: *
Disallow: /private/
Allow: /private/public-page
Disallow: /*.pdf$

User-agent: WorkspaceBot
User-agent: other
Disallow: /
Allow: /docs/
";

    #[test]
    fn follows_groups_and_longest_match() {
        let ua = "Mozilla/5.0";
        assert!(allows(ROBOTS, ua, "/"));
        assert!(!allows(ROBOTS, ua, "/private/x"));
        assert!(allows(ROBOTS, ua, "/private/public-page"));
        assert!(!allows(ROBOTS, ua, "/files/a.pdf"));
        assert!(allows(ROBOTS, ua, "/files/a.pdf?x=1"));
        assert!(!allows(ROBOTS, "WorkspaceBot/1.0", "/anything"));
        assert!(allows(ROBOTS, "workspacebot/1.0", "/docs/page"));
        assert!(allows("", ua, "/x"));
        assert!(allows("User-agent: *\nDisallow:\n", ua, "/x"));
    }
}
