//! The web console's files: plain HTML, CSS and JavaScript committed in
//! `console_files/` and built into the binary (no build step, no files to
//! install). The page polls `/api/overview` every second.

use super::http::Response;

const INDEX: &str = include_str!("console_files/index.html");
const SCRIPT: &str = include_str!("console_files/console.js");
const STYLE: &str = include_str!("console_files/console.css");

/// The console file at `path`, if there is one.
pub fn file(path: &str) -> Option<Response> {
    let (content_type, body) = match path {
        "/" | "/index.html" => ("text/html; charset=utf-8", INDEX),
        "/console.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "/console.css" => ("text/css; charset=utf-8", STYLE),
        _ => return None,
    };
    Some(Response::new(200, content_type, body))
}
