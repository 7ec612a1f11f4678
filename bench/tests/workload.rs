//! `--workload FILE` and `--consumers-per-queue`: a workload file sets the
//! run, and every subscription receives every acknowledged message. (A file
//! of its own: test binaries run one at a time, and tests/run.rs checks that
//! no embedded broker's data is left while none of its own runs.)

use clap::Parser;
use ringmq_bench::run;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: run::RunArgs,
}

#[test]
fn a_workload_file_sets_the_run_and_each_subscription_receives_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fanout.toml");
    let workload = r#"
        name = "2 subscriptions of a small stream"
        queues = 4
        message_size = 100
        producers = 2
        rate = 2000
        consumers_per_queue = 2
        consumers = 1
        max_outstanding = 100
        warmup = "200ms"
        duration = "1s"
    "#;
    std::fs::write(&file, workload).unwrap();
    // The file's keys replace the flags' values (here the defaults and a --rate).
    let cli = Cli::parse_from(["run", "--embedded", "--rate", "1", "--workload", file.to_str().unwrap()]);
    let outcome = run::run(cli.args).expect("the run completes");
    let s = &outcome.summary;
    assert_eq!((s.lost, s.errors, s.duplicates), (0, 0, 0), "{s:?}");
    assert_eq!((s.message_size, s.max_outstanding, s.consumers_per_queue), (100, 100, 2), "{s:?}");
    assert!(s.acked > 1_500, "about 2000 msgs/s for 1.2 s: {s:?}");
    assert_eq!(s.received, 2 * s.acked, "each of the 2 subscriptions received every message: {s:?}");
    let out = dir.path().join("out");
    run::write_out(&outcome, &out).unwrap();
    let json = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert!(json.contains("\"consumers_per_queue\":2"), "{json}");

    std::fs::write(&file, "queues = 4\nprodcers = 2\n").unwrap();
    let cli = Cli::parse_from(["run", "--embedded", "--workload", file.to_str().unwrap()]);
    let err = run::run(cli.args).err().expect("a misspelt key is refused");
    assert!(err.contains("unknown field") && err.contains("prodcers"), "{err}");
    let refused = Cli::try_parse_from(["run", "--embedded", "--consumers-per-queue", "2", "--group", "g"]);
    assert!(refused.is_err(), "subscriptions and a consumer group do not go together");
}
