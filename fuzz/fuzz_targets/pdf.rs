//! The PDF reader (`webpilot-pdf`) on any bytes: read as Markdown with its links, as the service
//! asks of it, then counted. Its own process contains a crash in production; here a panic the
//! reader does not catch, a hang or a runaway allocation is still a finding.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let read = webpilot_pdf::Job {
        with_links: true,
        ..Default::default()
    };
    let _ = webpilot_pdf::run(&read, data.to_vec());
});
