//! Values read from files and read again on their first use after a file changes, including the
//! kubelet's `..data` symlink swap of a mounted Secret or ConfigMap: the serving certificate, the
//! client CA and the bearer tokens. A use costs one `stat` a file (about 1.4 µs here), or, for a
//! value looked at on every request, one at most every so often; a value that fails to load keeps
//! the previous one in service, warned about once until the files change again.

use anyhow::{Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Identity of a file's current content as far as `stat` (following symlinks) can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    let m = std::fs::metadata(path)?;
    Ok(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
    })
}

type Load<T> = Box<dyn Fn() -> Result<T> + Send + Sync>;

/// A value loaded from `files`, or one fixed at start.
pub struct Reloading<T> {
    /// What the value is, for the log lines of a reload (`serving certificate`).
    what: &'static str,
    files: Vec<PathBuf>,
    load: Option<Load<T>>,
    /// How long after a look at the files the next use may look again.
    every: Duration,
    current: Mutex<Current<T>>,
}

struct Current<T> {
    /// The stamps of the files last read. A load that failed leaves its stamps here too, so that
    /// it is tried (and warned about) again only once the files change.
    stamps: Vec<Stamp>,
    /// When the files were last looked at.
    looked: Instant,
    value: Arc<T>,
}

impl<T> Reloading<T> {
    /// A value that never changes.
    pub fn fixed(value: T) -> Self {
        Reloading {
            what: "",
            files: Vec::new(),
            load: None,
            every: Duration::ZERO,
            current: Mutex::new(Current {
                stamps: Vec::new(),
                looked: Instant::now(),
                value: Arc::new(value),
            }),
        }
    }

    /// Loads the value now (an error names the first file that cannot be read), and again on the
    /// first [`get`](Self::get) after any of `files` changes, looking at them on every `get`, or,
    /// with `every` above zero, on the first `get` that long after the last look.
    pub fn from_files(
        what: &'static str,
        files: Vec<PathBuf>,
        every: Duration,
        load: impl Fn() -> Result<T> + Send + Sync + 'static,
    ) -> Result<Self> {
        let stamps = files
            .iter()
            .map(|path| stamp(path).with_context(|| format!("reading {}", path.display())))
            .collect::<Result<Vec<_>>>()?;
        let value = load()?;
        Ok(Reloading {
            what,
            files,
            load: Some(Box::new(load)),
            every,
            current: Mutex::new(Current {
                stamps,
                looked: Instant::now(),
                value: Arc::new(value),
            }),
        })
    }

    /// The value in service, read again first if a file changed since the last read. A file that
    /// cannot be stat'ed at this moment (a swap in progress) changes nothing.
    pub fn get(&self) -> Arc<T> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let Some(load) = &self.load else {
            return current.value.clone();
        };
        let now = Instant::now();
        if now.duration_since(current.looked) < self.every {
            return current.value.clone();
        }
        current.looked = now;
        let stamps = self.files.iter().map(|p| stamp(p)).collect();
        if let Ok(stamps) = stamps {
            if current.stamps != stamps {
                let file = self.files[0].display();
                match load() {
                    Ok(value) => {
                        tracing::info!(%file, "{} reloaded", self.what);
                        current.value = Arc::new(value);
                    }
                    Err(e) => {
                        tracing::warn!(%file, error = %format!("{e:#}"), "{} not reloaded; keeping the previous one", self.what);
                    }
                }
                current.stamps = stamps;
            }
        }
        current.value.clone()
    }
}

/// Names the files, never the value (which may be a key or a token).
impl<T> std::fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading")
            .field("what", &self.what)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change is seen on the first look after it: at once by a value looked at on every use,
    /// not before `every` has passed by one looked at every so often.
    #[test]
    fn a_change_is_seen_on_the_first_look_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("value");
        std::fs::write(&path, "first").unwrap();
        let watch = |every| {
            let file = path.clone();
            let read = move || Ok(std::fs::read_to_string(&file)?);
            Reloading::from_files("value", vec![path.clone()], every, read).unwrap()
        };
        let (every_use, hourly) = (watch(Duration::ZERO), watch(Duration::from_secs(3600)));
        std::fs::write(&path, "second, longer").unwrap();
        assert_eq!(*every_use.get(), "second, longer");
        assert_eq!(*hourly.get(), "first");
    }
}
