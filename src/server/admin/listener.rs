//! Accepts admin connections on shard 0 and answers one request each:
//! `/metrics` (per shard) and `/public_metrics` (per node), `/healthz`
//! (the process serves) and `/readyz` (every shard serves fully), the
//! console's page and files, and its JSON (`/api/...`).

use super::http::{self, Request, Response};
use super::{api, console, login, scrape};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::core::Core;
use crate::server::net::admission::Refused;
use crate::server::net::socket::accept;
use crate::server::net::stream::Stream;
use crate::server::net::{Listener, Net};
use glommio::net::{TcpListener, TcpStream};
use std::rc::Rc;

/// Accepts admin connections until the shard stops, admitted as the client
/// listeners' are (by client address, `Net::admit`); each is served on its
/// own task.
pub async fn accept_loop(core: Rc<Core>, net: Rc<Net>, listener: TcpListener) {
    while let Some(tcp) = accept(&core, &listener, "admin").await {
        let open = match net.admit_peer(&tcp, Listener::Admin) {
            Ok(open) => open,
            Err(why) => {
                tracing::info!(%why, "an admin connection refused");
                refuse(tcp, &why).await;
                continue;
            }
        };
        let core = core.clone();
        glommio::spawn_local(async move {
            core.tasks().unless_stopping(serve(&core, tcp)).await;
            drop(open);
        })
        .detach();
    }
}

/// A refused connection is told why (in the clear: no TLS handshake is
/// spent on it) and closed.
async fn refuse(tcp: TcpStream, why: &Refused) {
    let response = Response::text(503, format!("{why}\n"));
    if let Err(error) = http::write_response(&mut Stream::Plain(tcp), &response, false).await {
        tracing::debug!(%error, "telling a refused admin connection why failed");
    }
}

async fn serve(core: &Core, tcp: TcpStream) {
    let Some(mut stream) = Stream::accept_on(core, tcp, "admin").await else { return };
    let tls = stream.is_tls();
    let (response, head_only) = match http::read_request(&mut stream, core.config().admin_timeout).await {
        Ok(request) => (route(core, &request, tls).await, request.method == "HEAD"),
        Err(error) => match error.status() {
            Some(status) => (Response::text(status, format!("{error}\n")), false),
            None => return,
        },
    };
    if let Err(error) = http::write_response(&mut stream, &response, head_only).await {
        tracing::debug!(%error, "writing an admin response failed");
    }
}

/// The response to one request.
async fn route(core: &Core, request: &Request, tls: bool) -> Response {
    if request.method != "GET" && request.method != "HEAD" {
        let m = format!("{} is not served here: the admin listener is read-only\n", request.method);
        return Response::text(405, m);
    }
    match request.path.as_str() {
        "/healthz" => return Response::text(200, "ok\n"),
        "/readyz" => return ready(core).await,
        _ => {}
    }
    let principal = match login::login(core, request, tls).await {
        Ok(principal) => principal,
        Err(refused) => return refused,
    };
    let node_wide = matches!(request.path.as_str(), "/metrics" | "/public_metrics" | "/api/overview");
    if node_wide && !principal.allows(core, Operation::Describe, authorizer::cluster()) {
        let m = format!("{} needs Describe on the cluster (an ACL, or a super user)\n", request.path);
        return Response::text(403, m);
    }
    match request.path.as_str() {
        "/metrics" => metrics(core, false).await,
        "/public_metrics" => metrics(core, true).await,
        "/api/overview" => api::overview(core).await,
        "/api/message" => api::message(core, request, &principal).await,
        path => console::file(path).unwrap_or_else(|| {
            Response::text(404, format!("nothing at {path}: try /, /metrics, /public_metrics, /healthz, /readyz\n"))
        }),
    }
}

async fn metrics(core: &Core, per_node: bool) -> Response {
    match scrape::gather(core).await {
        Ok(families) => {
            let families = if per_node { scrape::without_shards(families) } else { families };
            Response::new(200, scrape::CONTENT_TYPE, scrape::encode(families))
        }
        Err(why) => Response::text(503, format!("{why}\n")),
    }
}

/// Ready when every shard answers and none is in trouble (failed storage,
/// a full disk, stopping, deposed); the body names the trouble.
async fn ready(core: &Core) -> Response {
    let mut troubles = Vec::new();
    for shard in 0..core.shards() {
        let trouble = if shard == core.id() {
            core.trouble()
        } else {
            let timeout = core.config().admin_timeout;
            let asked = async { core.mesh().health(shard).await.unwrap_or_else(|f| Some(f.to_string())) };
            let late = async {
                glommio::timer::sleep(timeout).await;
                Some(format!("shard {shard} did not answer within {timeout:?}"))
            };
            futures_lite::future::or(asked, late).await
        };
        troubles.extend(trouble);
    }
    if troubles.is_empty() {
        Response::text(200, format!("ready: {} shards serve\n", core.shards()))
    } else {
        Response::text(503, format!("not ready:\n{}\n", troubles.join("\n")))
    }
}
