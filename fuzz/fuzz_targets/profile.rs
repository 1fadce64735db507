//! Any bytes as a profile file: `Profile::read` refuses what is not a valid profile, and
//! every reader handles whatever it accepts without panicking.
#![no_main]

#[path = "../readers.rs"]
mod readers;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(p) = pepper_profile::Profile::read(data) {
        readers::read_everything(&p);
    }
});
