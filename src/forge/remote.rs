//! Reading a git remote's URL: its host and the repository's `owner/name` path.

use std::path::Path;
use std::process::Command;

/// The URL of `remote` in the repository at `root` (`git remote get-url`), if it has one.
pub fn url_of(root: &Path, remote: &str) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["remote", "get-url", "--"])
        .arg(remote)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The URL as it may be shown: without the `user:password@` a URL can carry (a token in an
/// https remote, `https://oauth2:glpat-…@host/…`). Everything shown of a remote goes
/// through here, since what is shown can end up in an event.
pub fn display_url(url: &str) -> String {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        // The scp form's `user@` is a login name, never a secret.
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://{host}{tail}"),
        None => url.to_string(),
    }
}

/// Splits a remote URL into (host, path): `https://host/a/b.git`, `ssh://git@host:22/a/b`,
/// and the scp form `git@host:a/b.git`. `None` for local paths and `file://`.
fn split(url: &str) -> Option<(String, String)> {
    let url = url.trim();
    if let Some((scheme, rest)) = url.split_once("://") {
        if scheme == "file" {
            return None;
        }
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit('@').next()?;
        let host = host.split(':').next()?;
        return Some((host.to_ascii_lowercase(), path.to_string()));
    }
    // scp-like: [user@]host:path, where the host part holds no slash.
    let (authority, path) = url.split_once(':')?;
    if authority.contains('/') || authority.is_empty() {
        return None;
    }
    let host = authority.rsplit('@').next()?;
    Some((host.to_ascii_lowercase(), path.to_string()))
}

/// The remote's host, lower-cased.
pub fn host(url: &str) -> Option<String> {
    split(url).map(|(h, _)| h).filter(|h| !h.is_empty())
}

/// The repository's path on the forge (`owner/name`, or `group/sub/name` on GitLab).
pub fn repo_path(url: &str) -> Option<String> {
    let (_, path) = split(url)?;
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    (path.contains('/') && !path.contains("//")).then(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_url_drops_credentials() {
        for (url, shown) in [
            (
                "https://oauth2:glpat-SECRET@gitlab.example/g/app.git",
                "https://gitlab.example/g/app.git",
            ),
            (
                "https://x-access-token:ghp_SECRET@github.com/a/b",
                "https://github.com/a/b",
            ),
            ("https://ghp_SECRET@github.com", "https://github.com"),
            ("ssh://git@host:22/a/b", "ssh://host:22/a/b"),
            ("git@github.com:a/b.git", "git@github.com:a/b.git"),
            (
                "https://github.com/a/b?x=a@b",
                "https://github.com/a/b?x=a@b",
            ),
        ] {
            assert_eq!(display_url(url), shown, "{url}");
        }
    }

    #[test]
    fn remote_urls_give_host_and_repository() {
        for (url, h, r) in [
            (
                "https://github.com/acme/app.git",
                Some("github.com"),
                Some("acme/app"),
            ),
            (
                "git@github.com:acme/app.git",
                Some("github.com"),
                Some("acme/app"),
            ),
            (
                "ssh://git@gitlab.com:2222/g/sub/app",
                Some("gitlab.com"),
                Some("g/sub/app"),
            ),
            (
                "https://user@Git.Example.com/a/b/",
                Some("git.example.com"),
                Some("a/b"),
            ),
            ("file:///srv/app.git", None, None),
            ("/srv/app.git", None, None),
            ("../app", None, None),
        ] {
            assert_eq!(host(url).as_deref(), h, "{url}");
            assert_eq!(repo_path(url).as_deref(), r, "{url}");
        }
    }
}
