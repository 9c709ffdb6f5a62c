//! Parsers of outside input fed thousands of deterministic mutations of well-formed seeds
//! (bytes flipped, cut, repeated, spliced), on the stable toolchain: each answers a value or a
//! typed error, never a panic. Seeds are the shapes users import: a Playwright storageState, a
//! cookies.txt, a JSON cookie array, URL policy patterns and domain rules.

use std::panic::{AssertUnwindSafe, catch_unwind};

use webpilot::policy::UrlPolicy;
use webpilot::profiles::{CookieFormat, detect_format, parse_import};

/// Mutations per seed.
const ROUNDS: usize = 20_000;

const STORAGE_STATE: &str = r#"{"cookies":[{"name":"sid","value":"abc","domain":".shop.test","path":"/","expires":1893456000,"httpOnly":true,"secure":true,"sameSite":"Lax"}],"origins":[{"origin":"https://shop.test","localStorage":[{"name":"cart","value":"[1,2]"}]}]}"#;
const COOKIES_TXT: &str = "# Netscape HTTP Cookie File\n.shop.test\tTRUE\t/\tTRUE\t1893456000\tsid\tabc\n#HttpOnly_shop.test\tFALSE\t/account\tFALSE\t0\ttheme\tdark\n";
const JSON_ARRAY: &str = r#"[{"name":"sid","value":"abc","domain":"shop.test","path":"/","expirationDate":1893456000.5,"httpOnly":false,"secure":true,"sameSite":"no_restriction"}]"#;

/// A small deterministic generator (xorshift64*): the same mutations on every run.
struct Mutator(u64);

impl Mutator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// `seed` changed by one to four edits: a byte replaced by an interesting one, a range cut,
    /// a range repeated, or a piece of `other` spliced in.
    fn mutate(&mut self, seed: &[u8], other: &[u8]) -> Vec<u8> {
        const BYTES: &[u8] = b"\0\t\n\r \"',:;[]{}\\/#.*-0123456789eE+\xff\xc3";
        let mut out = seed.to_vec();
        for _ in 0..=self.below(4) {
            let at = self.below(out.len() + 1);
            match self.below(4) {
                0 if !out.is_empty() => {
                    let i = at.min(out.len() - 1);
                    out[i] = BYTES[self.below(BYTES.len())];
                }
                1 => {
                    let end = (at + self.below(16)).min(out.len());
                    out.drain(at..end);
                }
                2 => {
                    let end = (at + self.below(64)).min(out.len());
                    let piece = out[at..end].to_vec();
                    for _ in 0..self.below(50) {
                        out.splice(at..at, piece.iter().copied());
                    }
                }
                _ => {
                    let from = self.below(other.len());
                    let end = (from + self.below(32)).min(other.len());
                    out.splice(at..at, other[from..end].iter().copied());
                }
            }
        }
        out
    }
}

fn never_panics(what: &str, input: &str, run: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(run)).is_err() {
        panic!("{what} panicked on {input:?}");
    }
}

#[test]
fn cookie_imports_answer_a_value_or_an_error_for_any_mutation() {
    let seeds = [STORAGE_STATE, COOKIES_TXT, JSON_ARRAY];
    let mut mutator = Mutator(0x05ee_dc00_c1e5);
    for (n, seed) in seeds.iter().enumerate() {
        let other = seeds[(n + 1) % seeds.len()].as_bytes();
        for _ in 0..ROUNDS {
            let bytes = mutator.mutate(seed.as_bytes(), other);
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let formats = [
                detect_format(&text),
                CookieFormat::StorageState,
                CookieFormat::Netscape,
                CookieFormat::JsonArray,
            ];
            for format in formats {
                never_panics("parse_import", &text, || {
                    let _ = parse_import(&text, format, 1_000);
                });
            }
        }
    }
}

#[test]
fn url_policies_answer_a_policy_or_an_error_for_any_mutation() {
    let allow = "127.0.0.1/8";
    let domain = "*.shop.test";
    let mut mutator = Mutator(0x0901_1c1e);
    for _ in 0..ROUNDS {
        let pattern =
            String::from_utf8_lossy(&mutator.mutate(allow.as_bytes(), b"::1/128 10.")).into_owned();
        let rule = String::from_utf8_lossy(&mutator.mutate(domain.as_bytes(), b"xn--caf-dma."))
            .into_owned();
        never_panics("UrlPolicy", &format!("{pattern} | {rule}"), || {
            let Ok(policy) = UrlPolicy::new(std::slice::from_ref(&pattern)) else {
                return;
            };
            let Ok(policy) = policy.with_domains(std::slice::from_ref(&rule), &[]) else {
                return;
            };
            for host in ["shop.test", "a.shop.test", &rule, "127.0.0.1", "[::1]"] {
                let _ = policy.check_host(host);
                if let Ok(url) = url::Url::parse(&format!("http://{host}/")) {
                    let _ = policy.check_url(&url);
                }
            }
        });
    }
}
