//! The web console in a real browser: headless Chromium driven over
//! WebDriver (Debian's chromedriver, spoken to here in plain HTTP) loads
//! the admin listener's page against a running broker, finds the test's
//! topic and its group's lag, looks a message up with its trace, and
//! takes a screenshot (target/console-screenshot.png).

mod common;

use base64::Engine;
use common::Broker;
use ringmq::client::{Consumer, GroupConfig, Message, Producer, ProducerConfig, StartNew};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A chromedriver process and one browser session.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

/// One HTTP exchange with chromedriver: the response's JSON `value`.
fn webdriver(port: u16, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    // chromedriver keeps the connection open: read the head, then Content-Length bytes.
    let mut response = Vec::new();
    let mut byte = [0u8; 1];
    while !response.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).map_err(|e| e.to_string())?;
        response.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&response).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .ok_or("no Content-Length")?;
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).map_err(|e| e.to_string())?;
    let json = String::from_utf8_lossy(&body);
    let v: Value = serde_json::from_str(&json).map_err(|e| format!("{e}: {json}"))?;
    match v["value"].get("error") {
        Some(error) => Err(format!("{error}: {}", v["value"]["message"])),
        None => Ok(v["value"].clone()),
    }
}

/// Debian's Chromium, which chromedriver starts.
const CHROMIUM: &str = "/usr/bin/chromium";

impl Browser {
    fn start() -> Browser {
        common::tools::require(CHROMIUM);
        let port = common::free_port_pair("127.0.0.1");
        let driver = common::tools::command("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let deadline = Instant::now() + Duration::from_secs(30);
        while webdriver(port, "GET", "/status", None).map_or(true, |s| s["ready"] != json!(true)) {
            assert!(Instant::now() < deadline, "chromedriver did not become ready");
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = tempfile::tempdir().unwrap();
        // Headless, as root, on a machine without the internet: no sandbox, no background traffic.
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1200,1400",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--user-data-dir={}", profile.path().display())])
        .collect::<Vec<_>>();
        let capabilities = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}});
        let session = webdriver(port, "POST", "/session", Some(&capabilities)).expect("a browser session");
        let session = session["sessionId"].as_str().expect("a session id").to_string();
        Browser { driver, port, session, _profile: profile }
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        webdriver(self.port, method, &format!("/session/{}{path}", self.session), body)
    }

    fn open(&self, url: &str) {
        self.call("POST", "/url", Some(&json!({"url": url}))).unwrap();
    }

    /// The text of the first element matching `css`, once it holds `wanted` (within 30 s).
    fn text_when(&self, css: &str, wanted: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(found) = self.call("POST", "/element", Some(&json!({"using": "css selector", "value": css}))) {
                let id = found.as_object().and_then(|o| o.values().next()).and_then(Value::as_str).unwrap_or("");
                if let Ok(text) = self.call("GET", &format!("/element/{id}/text"), None) {
                    last = text.as_str().unwrap_or("").to_string();
                    if last.contains(wanted) {
                        return last;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("{css} never showed {wanted:?}; last seen: {last:?}");
    }

    fn element(&self, css: &str) -> String {
        let found = self.call("POST", "/element", Some(&json!({"using": "css selector", "value": css}))).unwrap();
        found.as_object().and_then(|o| o.values().next()).and_then(Value::as_str).unwrap().to_string()
    }

    fn screenshot(&self, path: &std::path::Path) {
        let png = self.call("GET", "/screenshot", None).unwrap();
        let png = base64::engine::general_purpose::STANDARD.decode(png.as_str().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.call("DELETE", "", None);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

#[test]
fn the_console_shows_topics_lag_and_a_traced_message_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let admin = format!("127.0.0.1:{}", common::free_port_pair("127.0.0.1"));
    let broker = Broker::start(dir.path(), &["--admin-listen", &admin, "--trace-topics", "orders"]);
    let client = broker.client();
    client.create_topic("orders", 3, 0).unwrap();
    let producer = Producer::new(client.clone(), ProducerConfig::default());
    for i in 0..30 {
        producer.send("orders", &Message::new(format!("order {i}")).with_key(format!("k{i}"))).unwrap();
    }
    let config = GroupConfig { start_new: StartNew::Earliest, ..GroupConfig::new("billing", &["orders"]) };
    let mut member = Consumer::subscribe(client.clone(), config);
    assert_eq!(common::consume(&mut member, 30, Duration::from_secs(30)).len(), 30);
    member.commit().unwrap();
    let mut last = None;
    for i in 0..12 {
        last = Some(producer.send("orders", &Message::new(format!("late {i}")).with_key("late")).unwrap());
    }
    let late = last.unwrap().message_id.to_string();

    let browser = Browser::start();
    browser.open(&format!("http://{admin}/"));
    let topic = browser.text_when("#topics tr[data-topic='orders']", "orders");
    assert!(topic.contains("42"), "42 messages stored: {topic}");
    let group = browser.text_when("#groups tr[data-group='billing']", "12");
    assert!(group.starts_with("billing orders"), "{group}");
    let cluster_id = std::fs::read_to_string(dir.path().join("cluster-id")).unwrap();
    let node = browser.text_when("#node", &format!("cluster {cluster_id}"));
    assert!(node.starts_with("2 shards"), "{node}");

    let field = browser.element("#lookup-id");
    browser.call("POST", &format!("/element/{field}/value"), Some(&json!({"text": late}))).unwrap();
    let find = browser.element("#lookup button");
    browser.call("POST", &format!("/element/{find}/click"), Some(&json!({}))).unwrap();
    let found = browser.text_when("#found .message", "store");
    assert!(found.contains(&late) && found.contains("late 11") && found.contains("send"), "{found}");

    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshot.png");
    browser.screenshot(&shot);
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "a screenshot of the page");
    eprintln!("console screenshot: {}", shot.display());
}
