//! Unpacking an npm package tarball (gzip over ustar, as `npm pack` and the registries make them): streamed, every
//! entry kept inside the destination (no absolute paths, no `..`, no links), executable bits kept.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Component, Path, PathBuf};

use miniz_oxide::inflate::stream::{InflateState, inflate};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

/// A gzip member's inflated bytes (one member: what npm tarballs are).
struct Gunzip<R> {
    input: R,
    state: Box<InflateState>,
    buf: Vec<u8>,
    start: usize,
    filled: usize,
    eof: bool,
    done: bool,
}

impl<R: Read> Gunzip<R> {
    fn new(mut input: R) -> std::io::Result<Self> {
        let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_owned());
        let mut head = [0u8; 10];
        input.read_exact(&mut head)?;
        if head[0] != 0x1f || head[1] != 0x8b || head[2] != 8 {
            return Err(bad("not a gzip file"));
        }
        let flags = head[3];
        if flags & 4 != 0 {
            let mut len = [0u8; 2];
            input.read_exact(&mut len)?;
            std::io::copy(
                &mut (&mut input).take(u64::from(u16::from_le_bytes(len))),
                &mut std::io::sink(),
            )?;
        }
        for bit in [8u8, 16] {
            if flags & bit != 0 {
                let mut b = [0u8; 1];
                loop {
                    input.read_exact(&mut b)?;
                    if b[0] == 0 {
                        break;
                    }
                }
            }
        }
        if flags & 2 != 0 {
            input.read_exact(&mut [0u8; 2])?;
        }
        Ok(Gunzip {
            input,
            state: InflateState::new_boxed(DataFormat::Raw),
            buf: vec![0u8; 1 << 16],
            start: 0,
            filled: 0,
            eof: false,
            done: false,
        })
    }
}

impl<R: Read> Read for Gunzip<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        while !self.done && !out.is_empty() {
            if self.start == self.filled && !self.eof {
                self.filled = self.input.read(&mut self.buf)?;
                self.start = 0;
                self.eof = self.filled == 0;
            }
            let flush = if self.eof {
                MZFlush::Finish
            } else {
                MZFlush::None
            };
            let r = inflate(
                &mut self.state,
                &self.buf[self.start..self.filled],
                out,
                flush,
            );
            self.start += r.bytes_consumed;
            match r.status {
                Ok(MZStatus::StreamEnd) => self.done = true,
                Ok(_) => {}
                Err(MZError::Buf) if self.eof && r.bytes_written == 0 => {
                    return Err(bad("truncated gzip data".into()));
                }
                Err(MZError::Buf) => {}
                Err(e) => return Err(bad(format!("corrupt gzip data ({e:?})"))),
            }
            if r.bytes_written > 0 {
                return Ok(r.bytes_written);
            }
        }
        Ok(0)
    }
}

/// An octal field of a tar header.
fn octal(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

fn cstr(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// `name` with its first component (npm's `package/`) removed, as a relative path without `..`; `None` for a name
/// that would leave the destination.
fn inside(name: &str) -> Option<PathBuf> {
    let mut parts = Path::new(name).components();
    match parts.next() {
        Some(Component::Normal(_)) => {}
        _ => return None,
    }
    let mut rel = PathBuf::new();
    for c in parts {
        match c {
            Component::Normal(p) => rel.push(p),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(rel)
}

/// Unpacks the npm tarball `archive` into `dest` (created), dropping each entry's first path component (`package/`),
/// as npm does. Regular files and directories only: links and devices are refused (npm's own tarballs have none).
/// Returns how many files were written.
pub fn extract_tgz(archive: &Path, dest: &Path) -> Result<usize, String> {
    let name = archive.display();
    let file = File::open(archive).map_err(|e| format!("cannot open {name}: {e}"))?;
    let mut tar = Gunzip::new(BufReader::new(file)).map_err(|e| format!("{name}: {e}"))?;
    std::fs::create_dir_all(dest).map_err(|e| format!("cannot create {}: {e}", dest.display()))?;
    let mut written = 0usize;
    let mut long_name: Option<String> = None;
    let mut header = [0u8; 512];
    loop {
        match tar.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(format!("{name}: {e}")),
        }
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let size = octal(&header[124..136]).ok_or_else(|| format!("{name}: bad entry size"))?;
        let mode = octal(&header[100..108]).unwrap_or(0o644);
        let kind = header[156];
        let padded = size.div_ceil(512) * 512;
        let mut body = (&mut tar).take(padded);
        let mut entry_name = match long_name.take() {
            Some(n) => n,
            None => {
                let (prefix, base) = (cstr(&header[345..500]), cstr(&header[0..100]));
                if &header[257..262] == b"ustar" && !prefix.is_empty() {
                    format!("{prefix}/{base}")
                } else {
                    base
                }
            }
        };
        match kind {
            // A pax header (its `path` names the next entry) or a GNU long name.
            b'x' | b'L' => {
                let mut data = Vec::with_capacity(size as usize);
                (&mut body)
                    .take(size)
                    .read_to_end(&mut data)
                    .map_err(|e| format!("{name}: {e}"))?;
                std::io::copy(&mut body, &mut std::io::sink())
                    .map_err(|e| format!("{name}: {e}"))?;
                if kind == b'L' {
                    long_name = Some(cstr(&data));
                } else {
                    long_name = pax_path(&data);
                }
                continue;
            }
            b'g' => {
                std::io::copy(&mut body, &mut std::io::sink())
                    .map_err(|e| format!("{name}: {e}"))?;
                continue;
            }
            _ => {}
        }
        if kind == b'5' && !entry_name.ends_with('/') {
            entry_name.push('/');
        }
        let rel = inside(&entry_name)
            .ok_or_else(|| format!("{name}: entry {entry_name:?} would leave the destination"))?;
        let target = dest.join(&rel);
        match kind {
            b'0' | 0 | b'7' => {
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
                }
                let mut out = File::create(&target)
                    .map_err(|e| format!("cannot create {}: {e}", target.display()))?;
                let copied = std::io::copy(&mut (&mut body).take(size), &mut out)
                    .map_err(|e| format!("{name}: {e}"))?;
                if copied != size {
                    return Err(format!("{name}: {entry_name} is truncated"));
                }
                out.flush().map_err(|e| format!("{name}: {e}"))?;
                #[cfg(not(unix))]
                let _ = mode;
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
                    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(perm))
                        .map_err(|e| format!("cannot set the mode of {}: {e}", target.display()))?;
                }
                written += 1;
            }
            b'5' => std::fs::create_dir_all(&target)
                .map_err(|e| format!("cannot create {}: {e}", target.display()))?,
            other => {
                return Err(format!(
                    "{name}: entry {entry_name:?} is of a kind npm packages do not hold ({:?})",
                    other as char
                ));
            }
        }
        std::io::copy(&mut body, &mut std::io::sink()).map_err(|e| format!("{name}: {e}"))?;
    }
    if written == 0 {
        return Err(format!("{name} holds no files"));
    }
    Ok(written)
}

/// The `path` record of a pax extended header (`LEN path=VALUE\n` records).
fn pax_path(data: &[u8]) -> Option<String> {
    let mut rest = data;
    while !rest.is_empty() {
        let space = rest.iter().position(|&b| b == b' ')?;
        let len: usize = std::str::from_utf8(&rest[..space]).ok()?.parse().ok()?;
        if len == 0 || len > rest.len() {
            return None;
        }
        let record = &rest[space + 1..len];
        let record = record.strip_suffix(b"\n").unwrap_or(record);
        if let Some(value) = record.strip_prefix(b"path=") {
            return Some(String::from_utf8_lossy(value).into_owned());
        }
        rest = &rest[len..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_inside() {
        assert_eq!(inside("package/bin/node"), Some(PathBuf::from("bin/node")));
        assert_eq!(inside("package/./a"), Some(PathBuf::from("a")));
        assert_eq!(inside("package/../x"), None);
        assert_eq!(inside("/etc/passwd"), None);
        assert_eq!(inside("../x"), None);
        assert_eq!(octal(b"0000755\0"), Some(0o755));
        assert_eq!(
            pax_path(b"30 path=package/a/very/long/x\n"),
            Some("package/a/very/long/x".into())
        );
    }
}
