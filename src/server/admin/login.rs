//! Who an admin request comes from. Without `--auth-required` everyone may
//! read everything the listener serves (it changes nothing). With it, every
//! path but /healthz and /readyz needs HTTP Basic credentials of a broker
//! user, checked as SASL PLAIN is and, like PLAIN, taken only over TLS;
//! what the user then sees is what its ACLs allow.

use super::http::{Request, Response};
use crate::server::auth::authorizer::Principal;
use crate::server::auth::session::check_password;
use crate::server::core::Core;
use base64::Engine;

/// The principal of `request`, or the refusal to answer with.
pub async fn login(core: &Core, request: &Request, tls: bool) -> Result<Principal, Response> {
    if !core.config().auth.required {
        return Ok(Principal::new(None, None));
    }
    let Some(credentials) = request.authorization.as_deref().and_then(|a| a.strip_prefix("Basic ")) else {
        return Err(challenge("this broker authenticates its users: log in with a user's name and password"));
    };
    if !tls {
        let m = "HTTP Basic sends the password itself: the admin listener takes it only over TLS (serve --tls-cert)";
        return Err(Response::text(403, format!("{m}\n")));
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(credentials.trim()).unwrap_or_default();
    let text = String::from_utf8_lossy(&decoded);
    let Some((user, password)) = text.split_once(':') else {
        return Err(challenge("malformed Basic credentials: expected base64 of user:password"));
    };
    match check_password(core, user, password.to_string()).await {
        Ok(()) => Ok(Principal::new(Some(user.into()), None)),
        Err(why) => {
            tracing::warn!(user, %why, "an admin request failed to authenticate");
            Err(challenge("wrong user or password"))
        }
    }
}

/// 401 with the header that makes a browser ask for a login.
fn challenge(why: &str) -> Response {
    let mut response = Response::text(401, format!("{why}\n"));
    response.headers.push("WWW-Authenticate: Basic realm=\"ringmq\", charset=\"UTF-8\"".into());
    response
}
