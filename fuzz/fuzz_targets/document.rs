//! `webpilot::fuzzing::document` under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| webpilot::fuzzing::document(data));
