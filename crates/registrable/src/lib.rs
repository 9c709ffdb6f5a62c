//! A host's registrable domain, by the public suffix list (`psl`).
//!
//! Its own crate for build time: `psl`'s lookup is generic and inlined, so its whole list (one
//! match per suffix, about 6 % of webpilot's machine code) was built inside whichever crate
//! called it, after every other dependency. Called from here, through a function that is not
//! inlined, it builds once, beside the other dependencies.

/// The registrable domain of `host` (`docs.example.co.uk` → `example.co.uk`), or `None` for a
/// public suffix itself, an IP address or a name the list does not know.
#[inline(never)]
pub fn domain(host: &str) -> Option<&str> {
    psl::domain_str(host)
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_registrable_domain() {
        assert_eq!(super::domain("docs.example.co.uk"), Some("example.co.uk"));
        assert_eq!(super::domain("www.example.com"), Some("example.com"));
        assert_eq!(super::domain("co.uk"), None);
    }
}
