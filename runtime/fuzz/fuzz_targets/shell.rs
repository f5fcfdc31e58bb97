//! Shell lines → `simple_commands` (tree-sitter-bash, with its C external scanner) and the
//! default command rules. Parse errors are expected; a panic or a crash in C is a finding.

#![no_main]

use libfuzzer_sys::fuzz_target;
use warden::policy::command::{CommandRequest, CommandRules};
use warden::policy::shell::{effective_argv, privileged_argv, program, simple_commands};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(commands) = simple_commands(line) {
        for cmd in &commands {
            let _ = program(cmd);
            let _ = effective_argv(cmd);
            let _ = privileged_argv(cmd);
        }
    }
    let _ = CommandRules::default().decide(&CommandRequest {
        line,
        dangerously_disable_sandbox: false,
    });
});
