//! `webpilot::fuzzing::url_policy` under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| webpilot::fuzzing::url_policy(data));
