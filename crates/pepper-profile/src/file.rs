//! Reading and writing profile files, with format and version checks.

use crate::model::Profile;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};

/// The `format` field every pepper profile carries.
pub const FORMAT: &str = "pepper-profile";
/// The current format version. Readers refuse newer versions instead of misreading them.
/// Version 2 added PEP mode and `sampling`, version 3 `contexts`, version 4 `modules` (a
/// component's core modules in one profile); older files still read.
pub const VERSION: u32 = 4;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("not a pepper profile: {0}")]
    NotAProfile(String),
    #[error("profile format version {found} is newer than this pepper understands ({VERSION}); upgrade pepper")]
    TooNew { found: u32 },
    #[error("profile was recorded for module {expected}, but the module given has hash {found}")]
    ModuleMismatch { expected: String, found: String },
    #[error("malformed profile: {0}")]
    Malformed(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Lowercase hex SHA-256 of a module.
pub fn module_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Profile {
    /// Writes the profile as JSON and flushes `w`, so that a full disk is an error here
    /// rather than a silently short file.
    pub fn write(&self, mut w: impl Write) -> Result<(), ProfileError> {
        serde_json::to_writer(&mut w, self).map_err(std::io::Error::from)?;
        w.write_all(b"\n")?;
        w.flush()?;
        Ok(())
    }

    /// Writes the profile to `path` so that the file is always either the complete old
    /// one or the complete new one: a temporary file next to it, synced, then renamed
    /// over it. The temporary file has an unpredictable name and is created exclusively,
    /// so a link planted at a guessable name cannot redirect the write (pepper may run
    /// as root in a shared directory). A path that exists and is not a regular file (a
    /// pipe, `/dev/stdout`) is written in place, with every error reported.
    pub fn write_file(&self, path: &std::path::Path) -> Result<(), ProfileError> {
        if !is_regular_or_absent(path) {
            let f = std::fs::OpenOptions::new().write(true).open(path)?;
            return self.write(std::io::BufWriter::new(f));
        }
        let mut tmp = temp_file(path)?;
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        self.write(&mut w)?;
        drop(w);
        tmp.as_file().sync_all()?;
        // On an error the temporary file removes itself.
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    /// Refuses a profile whose parts point at parts it does not have: every reader
    /// indexes branches by a path step's branch id, call sites by a context node's site,
    /// and walks context nodes to the root, so a bad index or a parent cycle must stop
    /// here rather than as a panic or an endless walk later.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let bad = |what: String| Err(ProfileError::Malformed(what));
        for (i, b) in self.branches.iter().enumerate() {
            if b.id as usize != i {
                return bad(format!("branch {i} has id {}", b.id));
            }
            if b.counts.len() != b.outcomes.len() {
                return bad(format!(
                    "branch {i} has {} counts for {} outcomes",
                    b.counts.len(),
                    b.outcomes.len()
                ));
            }
        }
        for (k, p) in self.paths.iter().enumerate() {
            for s in &p.steps {
                let Some(b) = self.branches.get(s.branch as usize) else {
                    return bad(format!(
                        "path {k} steps through branch {}, which the profile does not have",
                        s.branch
                    ));
                };
                if s.outcome as usize >= b.outcomes.len() {
                    return bad(format!(
                        "path {k} takes outcome {} of branch {}, which has {}",
                        s.outcome,
                        s.branch,
                        b.outcomes.len()
                    ));
                }
            }
        }
        if let Some(c) = &self.contexts {
            for (i, s) in c.call_sites.iter().enumerate() {
                if s.id as usize != i {
                    return bad(format!("call site {i} has id {}", s.id));
                }
            }
            for (i, n) in c.nodes.iter().enumerate() {
                match (i, n.parent) {
                    (0, None) => {}
                    (0, Some(_)) => return bad("the context tree's root has a parent".into()),
                    (_, None) => return bad(format!("context node {i} has no parent")),
                    // Parents precede their children, so walks up the tree end.
                    (_, Some(p)) if p as usize >= i => {
                        return bad(format!(
                            "context node {i} has parent {p}, not an earlier node"
                        ))
                    }
                    _ => {}
                }
                if let Some(s) = n.site.filter(|&s| s as usize >= c.call_sites.len()) {
                    return bad(format!(
                        "context node {i} names call site {s}, which the profile does not have"
                    ));
                }
            }
        }
        // Readers add counts up; totals that do not fit a u64 would wrap.
        if !fits(self.paths.iter().map(|p| p.count))
            || !fits(self.branches.iter().flat_map(|b| b.counts.iter().copied()))
        {
            return bad("counts add up to more than a 64-bit count holds".into());
        }
        if let Some(c) = &self.contexts {
            if !fits(c.nodes.iter().map(|n| n.calls))
                || !fits(c.nodes.iter().map(|n| n.self_us))
                || !fits(c.nodes.iter().map(|n| n.edge_us))
                || !fits(c.call_sites.iter().map(|s| s.calls))
                || !fits(c.hot_functions.iter().map(|h| h.self_us))
            {
                return bad("context counts add up to more than a 64-bit count holds".into());
            }
        }
        if let (Some(ph), Some(t)) = (&self.phases, &self.timeline) {
            for s in &ph.phases {
                if s.start > s.end || s.end as usize > t.intervals.len() {
                    return bad(format!(
                        "a detected phase spans intervals {}..{} of {}",
                        s.start,
                        s.end,
                        t.intervals.len()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reads a profile, checking the format tag and version before trusting the contents.
    pub fn read(mut r: impl Read) -> Result<Profile, ProfileError> {
        let mut text = String::new();
        r.read_to_string(&mut text)?;
        // Only the header first: a newer version may not fit today's structs at all.
        #[derive(serde::Deserialize)]
        struct Header {
            format: Option<String>,
            version: Option<u32>,
        }
        let header: Header = serde_json::from_str(&text)
            .map_err(|e| ProfileError::NotAProfile(format!("invalid JSON: {e}")))?;
        if header.format.as_deref() != Some(FORMAT) {
            return Err(ProfileError::NotAProfile(format!(
                "missing \"format\": \"{FORMAT}\""
            )));
        }
        let version = header.version.unwrap_or(0);
        if version > VERSION {
            return Err(ProfileError::TooNew { found: version });
        }
        let profile: Profile =
            serde_json::from_str(&text).map_err(|e| ProfileError::NotAProfile(e.to_string()))?;
        profile.validate()?;
        Ok(profile)
    }

    /// Refuses to go on when `module` is not the module this profile was recorded from.
    pub fn check_module(&self, module: &[u8]) -> Result<(), ProfileError> {
        let found = module_hash(module);
        if found != self.module.sha256 {
            return Err(ProfileError::ModuleMismatch {
                expected: self.module.sha256.clone(),
                found,
            });
        }
        Ok(())
    }
}

fn is_regular_or_absent(path: &std::path::Path) -> bool {
    std::fs::metadata(path).map_or(true, |m| m.is_file())
}

/// A new temporary file next to `path` (same directory, so the rename is atomic), with
/// a random name, created exclusively and never through a link, and with the mode a new
/// file gets (the umask's), not the 0600 of a private temporary.
fn temp_file(path: &std::path::Path) -> std::io::Result<tempfile::NamedTempFile> {
    let name = path
        .file_name()
        .map_or("profile".into(), |n| n.to_string_lossy().into_owned());
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let prefix = format!(".{name}.");
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    b.tempfile_in(dir)
}

/// Checks, before a long run, that `path` can be written: its directory takes a new
/// file (a temporary one, removed again), or it is an existing non-regular file that
/// opens for writing and accepts an empty write (which `/dev/full` refuses).
pub fn check_writable(path: &std::path::Path) -> Result<(), ProfileError> {
    if !is_regular_or_absent(path) {
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        #[allow(clippy::unused_io_amount)] // zero bytes: only the error matters
        f.write(&[])?;
        return Ok(());
    }
    temp_file(path)?;
    Ok(())
}

/// Whether `xs` add up to a u64 without overflowing.
fn fits(xs: impl IntoIterator<Item = u64>) -> bool {
    xs.into_iter()
        .try_fold(0u64, |a, x| a.checked_add(x))
        .is_some()
}

#[cfg(test)]
mod tests {
    use crate::testing::{branch, profile};

    /// Another user's link at the name a temporary file once had (`.NAME.PID.tmp`) does
    /// not redirect the write: the file it points at keeps its contents, the profile
    /// lands at its own name, and no temporary file is left behind.
    #[cfg(unix)]
    #[test]
    fn a_planted_link_does_not_redirect_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let target = dir.path().join("p.json");
        let planted = dir
            .path()
            .join(format!(".p.json.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let p = profile(vec![branch(0, &[1, 2])], vec![]);
        p.write_file(&target).unwrap();
        super::check_writable(&target).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let back = crate::Profile::read(std::fs::File::open(&target).unwrap()).unwrap();
        assert_eq!(back.branches[0].counts, vec![1, 2]);
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let planted_name = planted.file_name().unwrap().to_str().unwrap();
        assert_eq!(names, [planted_name, "p.json", "victim"]);
    }
}
