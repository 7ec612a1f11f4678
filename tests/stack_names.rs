//! The watchdog's stack namer: a child process (the broker's own executable)
//! names the frames of its parent, so the parse of the debug information
//! never weighs on the broker's memory (`src/server/node/stack_symbols.rs`).

use ringmq::server::stack_symbols::Symbolizer;
use std::path::Path;

#[inline(never)]
fn a_function_the_child_names() -> usize {
    std::hint::black_box(11)
}

#[test]
fn the_naming_child_names_its_parents_frames() {
    ringmq::server::prepare_process();
    let mut namer = Symbolizer::start(Path::new(env!("CARGO_BIN_EXE_ringmq"))).expect("start the naming child");
    // A return address just past the function's first byte, then one in no file.
    let ip = a_function_the_child_names as *const () as usize + 1;
    for _ in 0..2 {
        let names = namer.name(&[ip, 1]).expect("named");
        assert!(names.iter().any(|n| n.ends_with("a_function_the_child_names")), "{names:?}");
        assert_eq!(names.last().map(String::as_str), Some("0x1"), "an address in no file stays a number: {names:?}");
    }
}
