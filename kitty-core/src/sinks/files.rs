//! Output files and where output goes. `-o -` is standard output. A file is created 0600
//! (kitty's outputs name processes, peers and flows), never through a
//! symlink at its final component, and never replaces an existing file that
//! is not kitty's own of the same kind unless `--force`. Formats written
//! at the end (export, profile) go to a temporary file renamed into place;
//! a recording is written in place, frame by frame, so a crash keeps what
//! was recorded. Every path is checked before any sampling starts.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What a file holds, to recognise kitty's own before replacing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Recording,
    ExportCsv,
    ExportJsonl,
    ExportParquet,
    Folded,
    Svg,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Recording => "a kitty recording",
            Kind::ExportCsv => "a kitty CSV export",
            Kind::ExportJsonl => "a kitty JSON Lines export",
            Kind::ExportParquet => "a Parquet file",
            Kind::Folded => "folded stacks",
            Kind::Svg => "a kitty flame graph",
        }
    }

    /// Does this content start like a file of this kind?
    fn matches(self, head: &[u8]) -> bool {
        let text = String::from_utf8_lossy(head);
        match self {
            Kind::Recording => head.starts_with(b"KITTYREC"),
            Kind::ExportCsv => text.starts_with(super::export::CSV_SIGNATURE),
            Kind::ExportJsonl => text.starts_with("{\"kind\":\""),
            Kind::ExportParquet => head.starts_with(b"PAR1"),
            Kind::Svg => text.contains("kitty on-CPU profile"),
            // `frame;frame;... count` lines.
            Kind::Folded => text.lines().next().is_some_and(|l| {
                l.rsplit_once(' ')
                    .is_some_and(|(s, n)| !s.is_empty() && n.parse::<u64>().is_ok())
            }),
        }
    }
}

/// Why an output cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{0}: is a symbolic link; refusing to write through it")]
    Symlink(PathBuf),
    #[error("{0}: exists and is not {1}; refusing to replace it (use --force)")]
    Foreign(PathBuf, &'static str),
    #[error("{0}: not a regular file")]
    NotAFile(PathBuf),
    #[error("{0}: directory {1} does not exist")]
    NoDir(PathBuf, PathBuf),
    #[error("{0}: cannot write in {1}: {2}")]
    NotWritable(PathBuf, PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// An output: standard output or a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Stdout,
    File(PathBuf),
}

impl Target {
    pub fn from_arg(p: &Path) -> Target {
        if p == Path::new("-") {
            Target::Stdout
        } else {
            Target::File(p.to_path_buf())
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Target::Stdout => "standard output".into(),
            Target::File(p) => p.display().to_string(),
        }
    }
}

/// Checks that `path` may be written as `kind`: not a symlink, not someone
/// else's file (unless `force`), in a directory that exists and is writable.
pub fn check(path: &Path, kind: Kind, force: bool) -> Result<(), OutputError> {
    let err_path = || path.to_path_buf();
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => return Err(OutputError::Symlink(err_path())),
        Ok(m) if !m.is_file() => return Err(OutputError::NotAFile(err_path())),
        Ok(m) if m.len() > 0 && !force => {
            let mut head = vec![0u8; 4096];
            let n = File::open(path)
                .and_then(|mut f| f.read(&mut head))
                .map_err(|e| OutputError::Io(err_path(), e))?;
            if !kind.matches(&head[..n]) {
                return Err(OutputError::Foreign(err_path(), kind.describe()));
            }
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(OutputError::Io(err_path(), e)),
    }
    let dir = parent(path);
    if !dir.is_dir() {
        return Err(OutputError::NoDir(err_path(), dir));
    }
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()))
        .map_err(|e| OutputError::Io(err_path(), std::io::Error::other(e)))?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(OutputError::NotWritable(
            err_path(),
            dir,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Opens a file for writing in place (a recording): 0600, replacing a
/// checked file, refusing a symlink that appeared since the check.
pub fn create_in_place(path: &Path) -> Result<File, OutputError> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| OutputError::Io(path.to_path_buf(), e))
}

/// A file written whole: bytes go to a hidden temporary file beside the
/// target (0600), renamed over it by [`AtomicFile::commit`]; dropped
/// uncommitted, the temporary file is removed and the target untouched.
pub struct AtomicFile {
    tmp: PathBuf,
    target: PathBuf,
    file: Option<File>,
}

impl AtomicFile {
    pub fn create(target: &Path) -> Result<AtomicFile, OutputError> {
        let dir = parent(target);
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "out".into());
        for i in 0..100u32 {
            let tmp = dir.join(format!(".{name}.kitty-tmp-{}-{i}", std::process::id()));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
            {
                Ok(f) => {
                    return Ok(AtomicFile {
                        tmp,
                        target: target.to_path_buf(),
                        file: Some(f),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(OutputError::Io(target.to_path_buf(), e)),
            }
        }
        Err(OutputError::Io(
            target.to_path_buf(),
            std::io::Error::other("no free temporary name"),
        ))
    }

    /// Flushes, syncs and renames over the target (never through a symlink:
    /// rename replaces the link itself).
    pub fn commit(mut self) -> Result<(), OutputError> {
        let f = self.file.take().expect("committed once");
        let io = |e| OutputError::Io(self.target.clone(), e);
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&self.tmp, &self.target).map_err(io)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.as_mut().expect("open until committed").write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.as_mut().expect("open until committed").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes a new file (a name kitty chose): 0600, never replacing anything.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn symlinks_and_foreign_files_are_refused_own_kind_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = d.path().join("link.kitty");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(matches!(
            check(&link, Kind::Recording, true),
            Err(OutputError::Symlink(_))
        ));
        assert!(matches!(
            check(&victim, Kind::Recording, false),
            Err(OutputError::Foreign(..))
        ));
        assert!(check(&victim, Kind::Recording, true).is_ok(), "--force");
        let rec = d.path().join("old.kitty");
        std::fs::write(&rec, b"KITTYREC\x01\x00").unwrap();
        assert!(check(&rec, Kind::Recording, false).is_ok());
        assert!(matches!(
            check(&d.path().join("no/such/dir/x"), Kind::Recording, false),
            Err(OutputError::NoDir(..))
        ));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    #[test]
    fn files_are_private_and_atomic() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.csv");
        let mut a = AtomicFile::create(&p).unwrap();
        a.write_all(b"hello").unwrap();
        assert!(!p.exists(), "nothing at the target before commit");
        a.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dropped = AtomicFile::create(&d.path().join("never")).unwrap();
        drop(dropped);
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temp left"
        );
        let f = create_in_place(&d.path().join("r.kitty")).unwrap();
        let mode = f.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
