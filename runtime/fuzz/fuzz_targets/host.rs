//! Host names and domain patterns: `canonical_host`, `parse_target` and `DomainPattern::parse`
//! for both lists. Two documented properties are asserted, and a panic is a finding:
//!
//! - `canonical_host` is idempotent through `Display` ("the output parses back to the same
//!   host"): `canonical_host(&h.to_string()) == Ok(h)`;
//! - a parsed pattern displays canonically and parses back to itself (as the
//!   `patterns_display_canonically_and_round_trip` unit test checks for fixed inputs).

#![no_main]

use libfuzzer_sys::fuzz_target;
use warden::policy::domain::{canonical_host, parse_target, DomainPattern, ListKind};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };

    let host = canonical_host(s);
    if let Ok(h) = &host {
        let shown = h.to_string();
        let again = canonical_host(&shown);
        if again.as_ref() != Ok(h) {
            panic!(
                "canonical_host is not idempotent: {s:?} -> Ok({h:?}), displayed {shown:?}, \
                 which gives {again:?}"
            );
        }
    }

    let target = parse_target(s);

    for list in [ListKind::Allow, ListKind::Deny] {
        let Ok(pattern) = DomainPattern::parse(s, list) else {
            continue;
        };
        let shown = pattern.to_string();
        match DomainPattern::parse(&shown, list) {
            Ok(again) if again == pattern => {}
            again => panic!(
                "DomainPattern does not round-trip in {list}: {s:?} -> {pattern:?}, \
                 displayed {shown:?}, which gives {again:?}"
            ),
        }
        if let Ok(h) = &host {
            let _ = pattern.matches(h, None);
            let _ = pattern.matches(h, Some(443));
        }
        if let Ok((h, port)) = &target {
            let _ = pattern.matches(h, *port);
        }
    }
});
