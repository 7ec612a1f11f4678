//! `--max-outstanding`: a producer never has more messages unacknowledged
//! than its bound. (A file of its own: test binaries run one at a time, and
//! tests/run.rs checks that no embedded broker's data is left in the
//! directory while none of its own runs.)

use clap::Parser;
use ringmq_bench::run;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: run::RunArgs,
}

#[test]
fn max_outstanding_bounds_the_messages_a_producer_has_unacknowledged() {
    let dir = tempfile::tempdir().unwrap();
    for bound in ["1", "8"] {
        // As fast as possible: every producer is held at its bound, never past it.
        let cli = Cli::parse_from([
            "run",
            "--embedded",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--rate",
            "0",
            "--producers",
            "2",
            "--consumers",
            "1",
            "--max-outstanding",
            bound,
        ]);
        let outcome = run::run(cli.args).expect("the run completes");
        let s = &outcome.summary;
        assert_eq!((s.lost, s.errors), (0, 0), "{s:?}");
        assert_eq!(s.max_outstanding.to_string(), bound);
        assert_eq!(s.outstanding_seen.to_string(), bound, "a producer reached its bound and never passed it: {s:?}");
        let out = dir.path().join(format!("bound-{bound}"));
        run::write_out(&outcome, &out).unwrap();
        let json = std::fs::read_to_string(out.join("summary.json")).unwrap();
        assert!(json.contains(&format!("\"max_outstanding\":{bound},\"outstanding_seen\":{bound}")), "{json}");
    }
    let refused = Cli::try_parse_from(["run", "--embedded", "--max-outstanding", "0"]);
    assert!(refused.is_err(), "a bound of 0 would never send");
}
