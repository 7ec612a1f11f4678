//! Settings renamed to the one convention (units, then `_max` or `_min`,
//! last) and the broker group's own word: the old names are still taken,
//! on the command line and in a `--config` file, with a warning naming the
//! new one, until the next release.

use std::ffi::OsString;

/// A renamed setting: the subcommand it belongs to, its old and new ids.
struct Renamed {
    command: &'static str,
    old: &'static str,
    new: &'static str,
}

const fn renamed(command: &'static str, old: &'static str, new: &'static str) -> Renamed {
    Renamed { command, old, new }
}

const RENAMED: &[Renamed] = &[
    renamed("serve", "max_frame_bytes", "frame_bytes_max"),
    renamed("serve", "max_batch_bytes", "batch_bytes_max"),
    renamed("serve", "max_connections", "connections_max"),
    renamed("serve", "max_connections_per_ip", "connections_per_ip_max"),
    renamed("serve", "max_inflight_per_connection", "inflight_per_connection_max"),
    renamed("serve", "max_request_bytes_per_connection", "request_bytes_per_connection_max"),
    renamed("serve", "max_request_bytes_per_shard", "request_bytes_per_shard_max"),
    renamed("serve", "max_fetch_wait_ms", "fetch_wait_ms_max"),
    renamed("serve", "max_group_wait_ms", "group_wait_ms_max"),
    renamed("serve", "segment_pool", "segment_pool_max"),
    renamed("serve", "min_insync", "insync_min"),
    renamed("serve", "replica_lag_ms", "replica_lag_ms_max"),
    // "group" alone means a consumer group everywhere else.
    renamed("serve", "group", "broker_group"),
    renamed("cluster", "group", "broker_group"),
    renamed("doctor", "max_connections", "connections_max"),
    renamed("doctor", "segment_pool", "segment_pool_max"),
];

fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

fn warn(r: &Renamed, old: &str, new: &str) {
    eprintln!("warning: {old} is the old name of {new} (ringmq {}); the old name goes in the next release", r.command);
}

/// The command line with old flags of its subcommand under their new names.
pub fn flags(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let Some(command) = args.get(1).and_then(|a| a.to_str()).map(str::to_string) else { return args };
    for arg in args.iter_mut().skip(2) {
        let Some(text) = arg.to_str() else { continue };
        let (name, value) = text.split_once('=').map_or((text, None), |(n, v)| (n, Some(v)));
        let Some(r) = RENAMED.iter().find(|r| r.command == command && flag(r.old) == name) else { continue };
        warn(r, name, &flag(r.new));
        *arg = match value {
            Some(value) => format!("{}={value}", flag(r.new)),
            None => flag(r.new),
        }
        .into();
    }
    args
}

/// A `serve --config` file's keys under their new names.
pub fn file_keys(table: toml::Table) -> toml::Table {
    table
        .into_iter()
        .map(|(key, value)| match RENAMED.iter().find(|r| r.command == "serve" && r.old == key) {
            Some(r) => {
                warn(r, &format!("`{key}` in a config file"), &format!("`{}`", r.new));
                (r.new.to_string(), value)
            }
            None => (key, value),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<OsString> {
        text.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn old_flags_of_the_subcommand_take_their_new_names() {
        let given = args("ringmq serve --max-frame-bytes 9 --segment-pool=3 --group g");
        assert_eq!(flags(given), args("ringmq serve --frame-bytes-max 9 --segment-pool-max=3 --broker-group g"));
    }

    #[test]
    fn a_flag_of_another_subcommand_or_a_value_keeps_its_name() {
        let given = args("ringmq consume t --group --max-frame-bytes");
        assert_eq!(flags(given.clone()), given);
    }

    #[test]
    fn old_file_keys_take_their_new_names() {
        let table: toml::Table = toml::from_str("min_insync = 1\nlisten = \"127.0.0.1:1\"").unwrap();
        let keys: Vec<String> = file_keys(table).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["insync_min", "listen"]);
    }
}
