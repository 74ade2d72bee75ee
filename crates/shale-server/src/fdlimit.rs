//! Fitting the server into the process's open-file limit, as Redis does at start: raise the soft
//! limit toward the hard limit, and when even that is too small for `maxclients` plus the engine's
//! files, lower the engine's open-file caches and then the effective `maxclients`, and say so.

use crate::config::Config;

/// Descriptors kept for everything that is neither a client nor an engine file cache: listeners,
/// the WAL, the MANIFEST, the runtime, logging (Redis's `CONFIG_MIN_RESERVED_FDS`).
pub const RESERVED_FDS: u64 = 32;
/// The engine's fewest cached open files (its own minimum for `max_open_files`).
pub const MIN_ENGINE_OPEN_FILES: usize = 16;

/// Descriptors the engine may hold with `max_open_files`: its table cache and its blob file cache,
/// each up to `max_open_files`, plus [`RESERVED_FDS`].
pub fn engine_fds(max_open_files: usize) -> u64 {
    2 * max_open_files as u64 + RESERVED_FDS
}

/// The soft and hard `RLIMIT_NOFILE`.
fn nofile_limits() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the valid, exclusively borrowed struct.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (rc == 0).then_some((limit.rlim_cur, limit.rlim_max))
}

/// Sets the soft `RLIMIT_NOFILE` to `soft` (at most the hard limit); true when it took.
fn set_soft_nofile(soft: u64, hard: u64) -> bool {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one valid `rlimit`.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 }
}

/// How `maxclients` and the engine's open files fit a descriptor limit of `limit`: unchanged when
/// they fit; otherwise the engine's caches shrink to at most half the limit (not below
/// [`MIN_ENGINE_OPEN_FILES`]) and `maxclients` takes what is left (at least 1).
pub fn fit_to(limit: u64, maxclients: usize, max_open_files: usize) -> (usize, usize) {
    if maxclients as u64 + engine_fds(max_open_files) <= limit {
        return (maxclients, max_open_files);
    }
    let half = (limit / 2).saturating_sub(RESERVED_FDS) / 2;
    let files = (half as usize).clamp(MIN_ENGINE_OPEN_FILES, max_open_files);
    let clients = limit.saturating_sub(engine_fds(files)).max(1);
    (maxclients.min(clients as usize), files)
}

/// Raises the soft open-file limit toward the hard one and fits `config` into it. Returns the
/// message to print when `maxclients` or the engine's open files had to be lowered.
pub fn fit(config: &mut Config) -> Option<String> {
    let (soft, hard) = nofile_limits()?;
    let wanted = config.maxclients as u64 + engine_fds(config.max_open_files);
    let mut limit = soft;
    if soft < wanted {
        let target = wanted.min(hard);
        if target > soft && set_soft_nofile(target, hard) {
            limit = target;
        }
    }
    let (clients, files) = fit_to(limit, config.maxclients, config.max_open_files);
    if (clients, files) == (config.maxclients, config.max_open_files) {
        return None;
    }
    let message = format!(
        "WARNING: the open-file limit is {limit} (hard limit {hard}), too low for maxclients {} \
         and {} engine files: maxclients lowered to {clients}, engine max-open-files to {files}. \
         Raise it with `ulimit -n` to serve more clients.",
        config.maxclients, config.max_open_files
    );
    config.maxclients = clients;
    config.max_open_files = files;
    Some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_that_fits_changes_nothing() {
        assert_eq!(fit_to(1 << 20, 10_000, 1000), (10_000, 1000));
    }

    #[test]
    fn a_small_limit_lowers_the_engine_caches_then_maxclients() {
        // ulimit -n 1024 against the defaults: the engine takes at most half.
        let (clients, files) = fit_to(1024, 10_000, 1000);
        assert_eq!(files, 240);
        assert_eq!(clients as u64 + engine_fds(files), 1024);
        let (clients, files) = fit_to(64, 10_000, 1000);
        assert_eq!((clients, files), (1, MIN_ENGINE_OPEN_FILES));
    }
}
